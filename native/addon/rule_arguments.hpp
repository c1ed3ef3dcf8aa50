// What a rule's emulation takes from the notification, each in one place: the path a mkdir under
// a suffix (listenerMetadata MKDIR_TMPL, a policy's mkdir action) creates, and a mount's
// arguments. The engine's rules use them on the fast path (engine_rules.cpp); a control plane's
// mkdir decision that names a suffix (Welcome feature "mkdir-suffix.v1", dataplane.proto
// MkdirSuffix) is built with SuffixedPath too, through the addon's suffixedPath().
// test/testdata/rule-cases.json holds them against the control plane's reading
// (controlplane/policy/rule-matcher.ts, mkdir-path.ts). Pure, any thread.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <string>

#include "emulator.hpp"  // MountArgs
#include "rule_set.hpp"

namespace seccomp_agent {

// A suffix is a plain name part: 1 to 255 bytes, no '/', no NUL, not only dots.
bool ValidSuffix(const std::string& suffix);

// The path mkdir gets: `suffix` appended to the last component of `path`, trailing slashes
// dropped. 0, or the errno the kernel's own mkdir would give for this path (`path` null: not
// read, EFAULT; truncated or too long with the suffix: ENAMETOOLONG; empty: ENOENT).
int SuffixedPath(const PathView* path, const std::string& suffix, std::string* out);

// A mount's arguments (mount(2): source, target, fstype, flags, data, in every ABI) from the paths
// read. 0, or the errno answered at once: no target or fstype EFAULT, a truncated target
// ENAMETOOLONG, a truncated source, fstype or data EINVAL (a cut option string could widen it).
int MountFromPaths(const PathView* views, size_t count, const uint64_t* args, bool require_cap_sys_admin, MountArgs* out);

// The first path read at argument `index`, or null.
const PathView* PathAt(const PathView* views, size_t count, int index);

}  // namespace seccomp_agent
