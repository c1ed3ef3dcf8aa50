// Which cgroup control file freezes a container: parsed from the text of /proc/self/mountinfo,
// /proc/<pid>/cgroup and the data plane's own /proc/self/cgroup. Pure (no file is read here), so
// the host layouts it must handle (cgroup v2 only, hybrid, v1 freezer, a cgroup namespace whose
// mount root is not "/", escaped mount points) are tested one by one in seccomp-native-tests.
#pragma once

#include <string>

#include "mountinfo_text.h"

namespace seccomp_agent {

// A cgroup hierarchy as mounted here: the mount's root inside the hierarchy and where it is.
struct CgroupMount {
  std::string root, mountpoint;
};

// The first cgroup2 mount and the first v1 mount that carries the freezer controller.
void FindCgroupMounts(const std::string& mountinfo, CgroupMount* v2, CgroupMount* freezer);

// From /proc/<pid>/cgroup text: the v2 path ("0::/path") and the v1 freezer path.
void ParseCgroups(const std::string& text, std::string* v2, std::string* freezer);

// Whether `path` is `ancestor` or below it, by whole components.
bool CgroupContains(const std::string& ancestor, const std::string& path);

// The control file for a cgroup path (relative to this cgroup namespace) through the mount's
// root; false when the mount does not show that path.
bool MapToControlFile(const CgroupMount& m, const std::string& path, const char* leaf, std::string* file);

struct FreezeTarget {
  std::string file;
  const char* freeze_value = nullptr;
  const char* thaw_value = nullptr;
  const char* refusal = nullptr;  // why none could be chosen
};

// Picks the control file that freezes the target's cgroup. `writable(file)` says whether the data
// plane can write a candidate (access(2) in production). Refused: a root cgroup, or a cgroup that
// holds the data plane itself (freezing it would stop every container's answers).
FreezeTarget ChooseFreezer(const std::string& target_cgroups, const std::string& own_cgroups,
                           const std::string& mountinfo, bool (*writable)(const std::string& file));

}  // namespace seccomp_agent
