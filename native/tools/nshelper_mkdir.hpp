// mkdir and mkdirat for the helper, as the target would make the directory, inside its root.
#pragma once
#include <string>

#include "nshelper_outcome.hpp"
#include "nshelper_protocol.h"
#include "nshelper_target.hpp"

namespace nshelper {

// Makes `path` (relative to the request's dirfd or the target's cwd) with the target's credentials
// and umask, exactly once across restarted calls (the replay book); the status is the answer.
Status DoMkdir(const Request& req, const std::string& path, const Target& t, Outcome* out);

}  // namespace nshelper
