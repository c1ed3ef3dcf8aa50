#include "mount_confinement.hpp"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>


#include <algorithm>
#include <map>

#include "mountinfo_text.h"
#include "unique_fd.h"

namespace mount_confinement {
namespace {

using seccomp_agent::SplitText;
using seccomp_agent::UnescapeMountinfo;

constexpr uint64_t kNoSuidNoDev = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
constexpr uint64_t kPseudo = kNoSuidNoDev | MOUNT_ATTR_NOEXEC;
// Atime is one field with three values, not flags: it is never OR-ed from two sources.
constexpr uint64_t kFlagAttrs = ~uint64_t(MOUNT_ATTR__ATIME);

struct Row {
  const char* fstype;
  Treatment treatment;
  uint64_t forced;
  const char* reference;
};

// Why each row is what it is: docs/policy.md ("What each MOUNT_* key hands the container").
constexpr Row kTable[] = {
    {"proc", Treatment::kMasked, kPseudo, "/proc"},
    {"sysfs", Treatment::kMasked, kPseudo | MOUNT_ATTR_RDONLY, "/sys"},
    // A writable cgroup mount would let the container raise its own limits (memory.max...).
    {"cgroup", Treatment::kPlain, kPseudo | MOUNT_ATTR_RDONLY, nullptr},
    {"cgroup2", Treatment::kPlain, kPseudo | MOUNT_ATTR_RDONLY, nullptr},
    {"mqueue", Treatment::kPlain, kPseudo, nullptr},
    // Pseudo-terminals are device nodes: nodev would make the instance useless.
    {"devpts", Treatment::kPlain, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, nullptr},
    // Kernel-global control filesystems and the host's own device nodes: one instance for the
    // whole host, never namespaced, so no confinement can make them the container's.
    {"devtmpfs", Treatment::kRefuse, 0, nullptr},
    {"debugfs", Treatment::kRefuse, 0, nullptr},
    {"tracefs", Treatment::kRefuse, 0, nullptr},
    {"securityfs", Treatment::kRefuse, 0, nullptr},
    {"bpf", Treatment::kRefuse, 0, nullptr},
    {"efivarfs", Treatment::kRefuse, 0, nullptr},
    {"configfs", Treatment::kRefuse, 0, nullptr},
    {"pstore", Treatment::kRefuse, 0, nullptr},
    {"binfmt_misc", Treatment::kRefuse, 0, nullptr},
    {"fusectl", Treatment::kRefuse, 0, nullptr},
    {"selinuxfs", Treatment::kRefuse, 0, nullptr},
    {"smackfs", Treatment::kRefuse, 0, nullptr},
    {"nsfs", Treatment::kRefuse, 0, nullptr},
    {"autofs", Treatment::kRefuse, 0, nullptr},
    {"rpc_pipefs", Treatment::kRefuse, 0, nullptr},
    {"nfsd", Treatment::kRefuse, 0, nullptr},
};

uint64_t AttrsFromOptions(const std::string& options) {
  uint64_t attrs = 0;
  for (const std::string& o : SplitText(options, ',')) {
    if (o == "ro") attrs |= MOUNT_ATTR_RDONLY;
    else if (o == "nosuid") attrs |= MOUNT_ATTR_NOSUID;
    else if (o == "nodev") attrs |= MOUNT_ATTR_NODEV;
    else if (o == "noexec") attrs |= MOUNT_ATTR_NOEXEC;
    else if (o == "nodiratime") attrs |= MOUNT_ATTR_NODIRATIME;
    else if (o == "nosymfollow") attrs |= MOUNT_ATTR_NOSYMFOLLOW;
  }
  return attrs;
}

// The per-mount MS_* flags of mount(2) as fsmount attributes (superblock ones go to fsconfig).
uint64_t AttrsFromFlags(uint64_t flags) {
  uint64_t attrs = 0;
  if (flags & MS_RDONLY) attrs |= MOUNT_ATTR_RDONLY;
  if (flags & MS_NOSUID) attrs |= MOUNT_ATTR_NOSUID;
  if (flags & MS_NODEV) attrs |= MOUNT_ATTR_NODEV;
  if (flags & MS_NOEXEC) attrs |= MOUNT_ATTR_NOEXEC;
  if (flags & MS_NODIRATIME) attrs |= MOUNT_ATTR_NODIRATIME;
  if (flags & MS_NOSYMFOLLOW) attrs |= MOUNT_ATTR_NOSYMFOLLOW;
  if (flags & MS_NOATIME) attrs |= MOUNT_ATTR_NOATIME;
  else if (flags & MS_STRICTATIME) attrs |= MOUNT_ATTR_STRICTATIME;
  return attrs;
}

int SetFlag(int fs, const char* key) { return fsconfig(fs, FSCONFIG_SET_FLAG, key, nullptr, 0); }

// The caller's data string, one fsconfig per comma-separated option, as mount(2) would parse it.
int ConfigureOptions(int fs, const std::string& options) {
  for (const std::string& o : SplitText(options, ',')) {
    if (o.empty()) continue;
    size_t eq = o.find('=');
    int rc = eq == std::string::npos
                 ? SetFlag(fs, o.c_str())
                 : fsconfig(fs, FSCONFIG_SET_STRING, o.substr(0, eq).c_str(), o.c_str() + eq + 1, 0);
    if (rc != 0) return -errno;
  }
  return 0;
}

// proc's own visibility options of the container's /proc (hidepid, subset, gid) win over the
// caller's: a new instance must not show more processes than the container's own does.
int InheritProcOptions(int fs, const std::string& super_options) {
  for (const std::string& o : SplitText(super_options, ',')) {
    if (o.rfind("hidepid=", 0) == 0 || o.rfind("subset=", 0) == 0 || o.rfind("gid=", 0) == 0) {
      if (int rc = ConfigureOptions(fs, o)) return rc;
    }
  }
  return 0;
}

// How many parent steps lead from `m` up to mount `top`; 0 when `top` is not an ancestor (a
// mount hidden under the reference at the same path, or elsewhere in the tree).
size_t DepthBelow(const MountEntry& m, uint64_t top, const std::map<uint64_t, const MountEntry*>& by_id) {
  size_t depth = 0;
  for (const MountEntry* cur = &m; depth <= by_id.size(); ++depth) {
    if (cur->id == top) return depth;
    auto it = by_id.find(cur->parent);
    if (it == by_id.end() || it->second == cur) return 0;
    cur = it->second;
  }
  return 0;
}

// One mount the runtime stacked on the container's reference mount, re-created at the same place
// in the new detached tree `tree`. Returns 0, or -errno (ENOENT: the place does not exist there).
int CopySubmount(int tree, const Reference& ref, const MountEntry& sub, uint64_t forced) {
  std::string at = sub.mountpoint.substr(ref.mount.mountpoint.size() + 1);
  Fd clone;
  uint64_t attrs = sub.attrs;
  if (sub.fstype == ref.mount.fstype) {
    attrs |= forced;
    // A part of the same filesystem restricted in place (readonlyPaths: /proc/sys ro): the same
    // part of the new instance, restricted the same way.
    std::string from = sub.root == "/" ? std::string() : sub.root.substr(1);
    clone.Reset(open_tree(tree, from.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW |
                                                  (from.empty() ? AT_EMPTY_PATH : 0)));
  } else {
    // A mask (maskedPaths: /dev/null on a file, an empty read-only tmpfs on a directory): the
    // container's own mask, cloned with its own flags (a nodev /dev/null would fail every open
    // instead of reading empty, which is not what the container's own mask does).
    clone.Reset(open_tree(AT_FDCWD, sub.mountpoint.c_str(),
                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT));
  }
  if (clone.get() < 0) return -errno;
  mount_attr attr = {};
  attr.attr_set = attrs & kFlagAttrs;
  if (mount_setattr(clone.get(), "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0) return -errno;
  if (move_mount(clone.get(), "", tree, at.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) return -errno;
  return 0;
}

}  // namespace

std::vector<MountEntry> ParseMountinfo(const std::string& text) {
  std::vector<MountEntry> out;
  for (const std::string& line : SplitText(text, '\n')) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::vector<std::string> left = SplitText(line.substr(0, dash), ' ');
    std::vector<std::string> right = SplitText(line.substr(dash + 3), ' ');
    if (left.size() < 6 || right.size() < 3) continue;
    MountEntry m;
    m.id = strtoull(left[0].c_str(), nullptr, 10);
    m.parent = strtoull(left[1].c_str(), nullptr, 10);
    m.root = UnescapeMountinfo(left[3]);
    m.mountpoint = UnescapeMountinfo(left[4]);
    m.attrs = AttrsFromOptions(left[5]);
    m.fstype = right[0];
    m.super_options = right[2];
    out.push_back(std::move(m));
  }
  return out;
}

FsPolicy PolicyFor(const std::string& fstype) {
  for (const Row& row : kTable) {
    if (fstype == row.fstype) return FsPolicy{row.treatment, row.forced, row.reference};
  }
  // Block and network filesystems, tmpfs, overlay, fuse...: their content is the container's
  // own; what the kernel forces on a user namespace's mounts is forced here too.
  return FsPolicy{Treatment::kPlain, kNoSuidNoDev, nullptr};
}

Reference FindReference(const std::vector<MountEntry>& mounts, const std::string& mountpoint, const std::string& fstype) {
  Reference ref;
  std::map<uint64_t, const MountEntry*> by_id;
  for (const MountEntry& m : mounts) by_id[m.id] = &m;
  // The topmost mount at `mountpoint` is the one no other mount at the same place sits on.
  const MountEntry* top = nullptr;
  for (const MountEntry& m : mounts) {
    if (m.mountpoint != mountpoint) continue;
    bool covered = std::any_of(mounts.begin(), mounts.end(),
                               [&](const MountEntry& o) { return o.parent == m.id && o.mountpoint == mountpoint; });
    if (!covered) top = &m;
  }
  if (!top || top->fstype != fstype) return ref;
  ref.found = true;
  ref.mount = *top;
  std::vector<std::pair<size_t, const MountEntry*>> below;
  for (const MountEntry& m : mounts) {
    if (m.id == top->id || m.mountpoint.compare(0, mountpoint.size() + 1, mountpoint + "/") != 0) continue;
    size_t depth = DepthBelow(m, top->id, by_id);
    if (depth > 0) below.push_back({depth, &m});
  }
  std::stable_sort(below.begin(), below.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& entry : below) ref.submounts.push_back(*entry.second);
  return ref;
}

int BuildDetached(const MountRequest& req, const FsPolicy& policy, const Reference& reference) {
  if (policy.treatment == Treatment::kRefuse) return -EPERM;
  if (policy.treatment == Treatment::kMasked && !reference.found) return -EPERM;
  Fd fs(fsopen(req.fstype.c_str(), FSOPEN_CLOEXEC));
  if (fs.get() < 0) return errno == EINVAL ? -ENODEV : -errno;  // unknown type: mount(2) says ENODEV
  if (!req.source.empty() && fsconfig(fs.get(), FSCONFIG_SET_STRING, "source", req.source.c_str(), 0) != 0) return -errno;
  if (int rc = ConfigureOptions(fs.get(), req.data)) return rc;
  if (policy.treatment == Treatment::kMasked && req.fstype == "proc") {
    if (InheritProcOptions(fs.get(), reference.mount.super_options) != 0) return -EPERM;
  }
  if ((req.flags & MS_RDONLY) && SetFlag(fs.get(), "ro") != 0) return -errno;
  if ((req.flags & MS_SYNCHRONOUS) && SetFlag(fs.get(), "sync") != 0) return -errno;
  if ((req.flags & MS_DIRSYNC) && SetFlag(fs.get(), "dirsync") != 0) return -errno;
  if ((req.flags & MS_LAZYTIME) && SetFlag(fs.get(), "lazytime") != 0) return -errno;
  if (fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) return -errno;

  uint64_t attrs = AttrsFromFlags(req.flags) | policy.forced_attrs;
  if (policy.treatment == Treatment::kMasked) attrs |= reference.mount.attrs & kFlagAttrs;
  int tree = fsmount(fs.get(), FSMOUNT_CLOEXEC, static_cast<unsigned int>(attrs));
  if (tree < 0) return -errno;
  if (policy.treatment == Treatment::kMasked) {
    for (const MountEntry& sub : reference.submounts) {
      int rc = CopySubmount(tree, reference, sub, policy.forced_attrs);
      if (rc == -ENOENT) continue;  // that path does not exist in the new instance: nothing to hide
      if (rc != 0) {
        close(tree);  // a detached tree goes away with its last fd
        return -EPERM;
      }
    }
  }
  return tree;
}

int AttachOnCwd(int detached) {
  return move_mount(detached, "", AT_FDCWD, ".", MOVE_MOUNT_F_EMPTY_PATH) == 0 ? 0 : -errno;
}

}  // namespace mount_confinement
