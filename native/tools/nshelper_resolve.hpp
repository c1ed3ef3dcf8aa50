// Path resolution for the helper, confined to the target's root (docs/emulation.md, "Resolution").
#pragma once
#include <stdint.h>

#include <string>

#include "nshelper_target.hpp"
#include "unique_fd.h"

namespace nshelper {

// The path as seen from the target's root: absolute as it is, relative after its base directory
// (the target's cwd, or its fd `dirfd`; kept in `base`). A base outside the root: kStageOutsideRoot.
Status PathFromRoot(const Target& t, int dirfd, const std::string& path, std::string* out, Fd* base);
// openat2 of `path` from the target's root (RESOLVE_IN_ROOT, no magic links), O_PATH; -1 with errno.
int OpenInRoot(const Target& t, const std::string& path, uint64_t flags);
// An absolute path's parent and last component; false for "/" and the like.
bool SplitLast(const std::string& full, std::string* parent, std::string* last);
// The parent of relative path `relative`, walked down from its base directory; -1 with errno.
int OpenParentBeneath(int base, const std::string& relative);

}  // namespace nshelper
