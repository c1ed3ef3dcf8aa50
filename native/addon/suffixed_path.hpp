// The one place a mkdir suffix (listenerMetadata MKDIR_TMPL, a policy's mkdir action) becomes a
// path: the engine's rules use it on the fast path, and a control plane's decision that names a
// suffix (Welcome feature "mkdir-suffix.v1", dataplane.proto MkdirSuffix) is applied with it too,
// through the addon's suffixedPath(). test/testdata/rule-cases.json holds it against the control
// plane's fallback for older data planes (controlplane/mkdir-path.ts). Pure, any thread.
#pragma once
#include <string>

#include "rule_set.hpp"

namespace seccomp_agent {

// A suffix is a plain name part: 1 to 255 bytes, no '/', no NUL, not only dots.
bool ValidSuffix(const std::string& suffix);

// The path mkdir gets: `suffix` appended to the last component of `path`, trailing slashes
// dropped. 0, or the errno the kernel's own mkdir would give for this path (`path` null: not
// read, EFAULT; truncated or too long with the suffix: ENAMETOOLONG; empty: ENOENT).
int SuffixedPath(const PathView* path, const std::string& suffix, std::string* out);

}  // namespace seccomp_agent
