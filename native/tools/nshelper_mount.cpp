// mount for the helper: the checks, then a child in the target's namespaces builds and attaches the mount.
#include "nshelper_mount.hpp"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "monotonic_clock.h"
#include "mount_confinement.hpp"
#include "nshelper_credentials.hpp"
#include "nshelper_recovery.hpp"
#include "nshelper_resolve.hpp"
#include "nshelper_state.hpp"
#include "unique_fd.h"

namespace nshelper {
namespace {

// ---------------------------------------------------------------------------------------------
// The check kinvolk/seccompagent makes (pkg/userns): the target's user namespace was created by
// root (owner uid 0; the host's counts) and it has CAP_SYS_ADMIN there; and that user namespace
// owns its mount namespace (capabilities in a nested one do not reach the mounts).
Status CheckCapSysAdmin(const Target& t, const Credentials& cred) {
  if (!(cred.cap_eff & (1ull << CAP_SYS_ADMIN))) return Fail(nshelper::kStagePermission, EPERM);
  Fd user(openat(t.pid_dir, "ns/user", O_RDONLY | O_CLOEXEC));
  Fd mnt(openat(t.pid_dir, "ns/mnt", O_RDONLY | O_CLOEXEC));
  if (user.get() < 0 || mnt.get() < 0) return Fail(nshelper::kStageOpenProc, ESRCH);
  uid_t owner = uid_t(-1);
  if (ioctl(user.get(), NS_GET_OWNER_UID, &owner) != 0) return Fail(nshelper::kStagePermission, errno);
  if (owner != 0) return Fail(nshelper::kStagePermission, EPERM);
  Fd mnt_owner(ioctl(mnt.get(), NS_GET_USERNS));
  if (mnt_owner.get() < 0) return Fail(nshelper::kStagePermission, errno);
  struct stat a, b;
  if (fstat(user.get(), &a) != 0 || fstat(mnt_owner.get(), &b) != 0) return Fail(nshelper::kStageInternal, errno);
  if (a.st_ino != b.st_ino) return Fail(nshelper::kStagePermission, EPERM);
  return {};
}

// Bind, move, remount and propagation changes are not new mounts: the fstype allow-list would not
// apply to them, so they are refused.
constexpr uint64_t kNotANewMount = MS_BIND | MS_MOVE | MS_REMOUNT | MS_SHARED | MS_PRIVATE | MS_SLAVE | MS_UNBINDABLE;

// Runs in the forked child: enters the target's mount, network, ipc and cgroup namespaces (sysfs
// shows the mounter's network namespace, mqueue its ipc one, cgroup2 its cgroup one; the pid
// namespace was entered for children by the parent), takes the target's root so the source
// resolves inside it, builds the new mount detached and confined (mount_confinement.hpp), and
// attaches it on the resolved target directory in one step.
// Exit status: 0 or the mount's errno; 254 the confinement refused it; 255 stale; 128+ setns.
[[noreturn]] void MountChild(const Target& t, int pidfd, int target_dir, const mount_confinement::MountRequest& req,
                             const mount_confinement::FsPolicy& policy, const mount_confinement::Reference& reference) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (setns(pidfd, CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWCGROUP) != 0) _exit(128 + (errno & 127));
  if (fchdir(t.root.get()) != 0 || chroot(".") != 0 || fchdir(target_dir) != 0) _exit(128 + (errno & 127));
  int tree = mount_confinement::BuildDetached(req, policy, reference);
  // EPERM is the confinement's word: host root's fsopen/fsmount have no other reason to say it.
  if (tree == -EPERM) _exit(254);
  if (tree < 0) _exit(-tree & 127);
  if (!t.StillPending()) _exit(255);
  int rc = mount_confinement::AttachOnCwd(tree);
  _exit(rc == 0 ? 0 : (-rc & 127));
}

// Reads a whole file of /proc/<pid> (mountinfo can be long on a busy node).
bool ReadProcFile(const Target& t, const char* name, std::string* out) {
  Fd f(openat(t.pid_dir, name, O_RDONLY | O_CLOEXEC));
  if (f.get() < 0) return false;
  char chunk[16384];
  ssize_t n;
  out->clear();
  while ((n = read(f.get(), chunk, sizeof(chunk))) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) out->append(chunk, size_t(n));
  }
  return n == 0;
}

// A mount on the container's own root would hide its whole filesystem (every later exec fails):
// the kernel would let only a privileged container do that, so it is never emulated.
bool IsContainerRoot(const Target& t, int dir) {
  struct stat a, b;
  if (fstat(dir, &a) != 0 || fstat(t.root.get(), &b) != 0) return true;  // unsure: refuse
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace

Status DoMount(const Request& req, const std::string* str, const Target& t, Outcome* out) {
  const mount_confinement::MountRequest mount{str[0], str[2], str[3], req.mount_flags};
  const std::string& target = str[1];
  if (req.mount_flags & kNotANewMount) return Fail(nshelper::kStagePermission, EPERM);
  if (mount.fstype.empty()) return Fail(nshelper::kStageBadRequest, EINVAL);
  const mount_confinement::FsPolicy policy = mount_confinement::PolicyFor(mount.fstype);
  if (policy.treatment == mount_confinement::Treatment::kRefuse) return Fail(nshelper::kStageConfine, EPERM);
  Credentials cred;
  Status s = g_targets.ReadCredentials(t, &cred);
  if (!s.ok()) return s;
  out->wait_state = cred.state;
  if (req.flags & nshelper::kRequireCapSysAdmin) {
    s = CheckCapSysAdmin(t, cred);
    if (!s.ok()) return s;
  }
  std::string full;
  Fd base;
  s = PathFromRoot(t, AT_FDCWD, target, &full, &base);
  if (!s.ok()) return s;
  Fd dir;
  {
    // Resolve with the target's own rights (search permission on the way), mount with ours.
    nshelper::ActAs as;
    s = as.Enter(cred);
    if (!s.ok()) return s;
    dir.Reset(OpenInRoot(t, full, 0));
    if (dir.get() < 0) return Fail(nshelper::kStageResolve, errno);
  }
  if (IsContainerRoot(t, dir.get())) return Fail(nshelper::kStageConfine, EPERM);
  // The masks to copy, from the container's view of its own mounts (paths from its root).
  mount_confinement::Reference reference;
  if (policy.treatment == mount_confinement::Treatment::kMasked) {
    std::string mountinfo;
    if (!ReadProcFile(t, "mountinfo", &mountinfo)) return Fail(nshelper::kStageOpenProc, ESRCH);
    reference = mount_confinement::FindReference(mount_confinement::ParseMountinfo(mountinfo), policy.reference, mount.fstype);
    if (!reference.found) return Fail(nshelper::kStageConfine, EPERM);
  }
  Fd pidfd(int(syscall(SYS_pidfd_open, pid_t(req.pid), 0)));
  if (pidfd.get() < 0) return Fail(nshelper::kStageOpenProc, ESRCH);
  // The pidfd was opened after the notification was known to be pending; check again so it is
  // known to name the notifying task, then enter its pid namespace for the child.
  if (!t.StillPending()) return Fail(nshelper::kStageStale, ENOENT);
  if (setns(pidfd.get(), CLONE_NEWPID) != 0) return Fail(nshelper::kStageNamespace, errno);
  // What recovery compares with, should this helper die before its answer: the mount the target
  // is on now. A dead helper's intent that finds another one there now has mounted.
  const uint64_t mnt_id = nshelper::MountIdOf(dir.get());
  if (TakeIntent(out)) {
    if (mnt_id != 0 && mnt_id != out->candidate.entry.intent.mnt_id) {
      g_replays.Acted(out->entry, 0, 0);
      out->replay = true;
      return {};
    }
  } else {
    out->entry = g_replays.Intend(req, out->strings_hash, out->task_ino, 0, mnt_id, MonotonicNs());
  }
  pid_t child = fork();
  if (child < 0) return Fail(nshelper::kStageInternal, errno);
  if (child == 0) MountChild(t, pidfd.get(), dir.get(), mount, policy, reference);
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return Fail(nshelper::kStageInternal, errno);
  }
  if (!WIFEXITED(status)) return Fail(nshelper::kStageInternal, EIO);
  int code = WEXITSTATUS(status);
  if (code == 255) return Fail(nshelper::kStageStale, ENOENT);
  if (code == 254) return Fail(nshelper::kStageConfine, EPERM);
  if (code >= 128) return Fail(nshelper::kStageNamespace, code - 128);
  if (code == 0) g_replays.Acted(out->entry, 0, 0);
  return Fail(nshelper::kStageDone, code);
}

}  // namespace nshelper
