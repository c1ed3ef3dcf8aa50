// How an emulated mount is confined, so it never gives a container more than the kernel would.
// The kernel gives a container without CAP_SYS_ADMIN no mount at all; the agent mounts on its
// behalf with host root's rights, so what it mounts must carry the restrictions the container's
// runtime put on the mounts the container already has:
//   - every new mount is nosuid and nodev (what the kernel forces on a user namespace's mounts);
//   - proc and sysfs are also noexec, sysfs and cgroup are read-only;
//   - a new proc or sysfs instance gets the container's own masked and read-only paths back: the
//     mounts the runtime stacked on the container's /proc (or /sys) are cloned onto the new
//     instance, the whole tree is built detached (fsopen/fsmount, open_tree, move_mount onto a
//     detached mount: Linux 6.15), and attached in one step, so no process of the container ever
//     sees an unmasked instance; when that cannot be done the mount is refused with EPERM;
//   - kernel-global control filesystems (debugfs, tracefs, bpf, securityfs, ...) are refused.
// docs/policy.md has the table an operator reads; docs/emulation.md the algorithm.
#pragma once
#include <stdint.h>

#include <string>
#include <vector>

namespace mount_confinement {

// One line of /proc/<pid>/mountinfo. Paths are relative to that process's root.
struct MountEntry {
  uint64_t id = 0;
  uint64_t parent = 0;
  std::string root;        // the part of the filesystem mounted ("/null" for a /dev/null bind)
  std::string mountpoint;  // unescaped
  uint64_t attrs = 0;      // MOUNT_ATTR_* from the per-mount options
  std::string fstype;
  std::string super_options;
};

std::vector<MountEntry> ParseMountinfo(const std::string& text);

enum class Treatment {
  kRefuse,  // never emulated: EPERM
  kPlain,   // mounted with forced attributes
  kMasked,  // mounted with forced attributes and the container's masks of `reference`
};

struct FsPolicy {
  Treatment treatment = Treatment::kPlain;
  uint64_t forced_attrs = 0;            // MOUNT_ATTR_* always set
  const char* reference = nullptr;      // kMasked: the container's own mount to copy masks from
};

FsPolicy PolicyFor(const std::string& fstype);

// The container's own mount of a masked type and what the runtime stacked on it.
struct Reference {
  bool found = false;
  MountEntry mount;
  std::vector<MountEntry> submounts;  // parents before children
};

// The topmost mount of type `fstype` at `mountpoint` in `mounts`, with every mount below it.
Reference FindReference(const std::vector<MountEntry>& mounts, const std::string& mountpoint, const std::string& fstype);

struct MountRequest {
  std::string source;
  std::string fstype;
  std::string data;   // comma-separated options as the caller gave them
  uint64_t flags = 0;  // MS_* as the caller gave them (bind, move, remount already refused)
};

// Runs in the mount child, inside the target's namespaces and root: creates the new instance
// detached, confined by `policy` and `reference`. Returns the detached mount's fd, or -errno
// (EPERM when the confinement cannot be applied; the filesystem's own errno otherwise).
int BuildDetached(const MountRequest& req, const FsPolicy& policy, const Reference& reference);

// Attaches the detached tree on the current working directory. 0 or -errno.
int AttachOnCwd(int detached);

}  // namespace mount_confinement
