// mount for the helper: a new mount, confined (mount_confinement.hpp), on a directory inside the target's root.
#pragma once
#include <string>

#include "nshelper_outcome.hpp"
#include "nshelper_protocol.h"
#include "nshelper_target.hpp"

namespace nshelper {

// Mounts str[0] (source) of type str[2] with data str[3] on str[1] (target) in the target's
// namespaces, by a forked child; bind, move, remount and propagation changes are refused. The
// status is the answer.
Status DoMount(const Request& req, const std::string* str, const Target& t, Outcome* out);

}  // namespace nshelper
