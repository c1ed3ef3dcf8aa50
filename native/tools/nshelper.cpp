// seccomp-nshelper: does mkdir and mount on behalf of a container's process, as that process
// would, confined to its root. Started by the data plane (native/addon/nshelper_pool.cpp) with a
// SOCK_SEQPACKET socket as fd 3; protocol in native/common/nshelper_protocol.h.
//
//   seccomp-nshelper [--busy-poll-us=N]  serve requests until the socket closes (kept helper);
//                              after answering one, poll N µs for the next before sleeping
//   seccomp-nshelper --once    serve one request, then exit (the spawn-per-call variant)
//
// Why a process: the work switches fsuid/fsgid, groups, capabilities, umask and root, which must
// not leak into the data plane's threads, and a request that hangs (a FUSE or NFS mount in the
// container) must be killable: a process can be SIGKILLed, a thread cannot.
//
// The helper itself never enters the container's mount namespace: /proc/<pid>/root is a path in
// the target's mount tree, so lookups from it see the container's own mounts, and a helper that
// stayed inside would pin that namespace (and every mount in it) after the container is gone.
// A mount, which must happen inside, is done by a forked child that enters the namespaces.
// docs/emulation.md explains the resolution algorithm and the checks.
#include <errno.h>
#include "unique_fd.h"
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "command_line.h"
#include "monotonic_clock.h"
#include "mount_confinement.hpp"
#include "notify_fd.hpp"
#include "nshelper_answer.hpp"
#include "nshelper_credentials.hpp"
#include "nshelper_target.hpp"
#include "nshelper_protocol.h"
#include "nshelper_recovery.hpp"
#include "nshelper_replay.hpp"
#include "seccomp_compat.h"

namespace {

using nshelper::Request;
using nshelper::Response;

using nshelper::Credentials;
using nshelper::Delivery;
using nshelper::Fail;
using nshelper::Status;
using nshelper::Target;

nshelper::TargetCache g_targets;  // the host's /proc and the tasks seen lately
nshelper::ReplayBook g_replays;   // outcomes kept for calls a signal restarts (nshelper_replay.hpp)
pid_t g_parent = 0;               // the data plane that started us (getppid at start)
int g_host_root = -1;             // the helper's own root, taken back after each chroot
// Kept helper: poll this long after an answer for the next request (a burst of mkdirs then costs
// no wake-up of this process each, which on a VM is most of a request's time: docs/benchmarks.md).
uint64_t g_busy_poll_ns = 0;
uint64_t g_answered_ns = 0;  // when the last request was answered
// Between requests that follow one another within the busy poll (a burst), the helper stays as a
// request leaves it: its death signal off and its replay book partition locked. Both are set back
// once, when it goes idle (ServeOne, before its blocking receive), not around each request: four
// syscalls fewer per request.
bool g_in_burst = false;

// ---------------------------------------------------------------------------------------------
// Resolution, confined to the target's root. See docs/emulation.md ("Resolution").

// The directory a relative path starts from, as a path from the target's root: its cwd, or the
// directory its fd `dirfd` refers to (mkdirat). Computed with getcwd() after chroot to the
// target's root, which the kernel marks "(unreachable)" when the directory lies outside it.
// `base` keeps the directory itself (O_PATH), the one seen inside the root.
Status BaseFromRoot(const Target& t, int dirfd, std::string* out, Fd* base_out) {
  Fd& base = *base_out;
  if (dirfd == AT_FDCWD) {
    base.Reset(openat(t.pid_dir, "cwd", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (base.get() < 0) return Fail(nshelper::kStageOpenProc, ESRCH);
  } else {
    if (dirfd < 0) return Fail(nshelper::kStageResolve, EBADF);
    char name[32];
    snprintf(name, sizeof(name), "fd/%d", dirfd);
    base.Reset(openat(t.pid_dir, name, O_PATH | O_CLOEXEC));
    if (base.get() < 0) return Fail(nshelper::kStageResolve, errno == ENOENT ? EBADF : errno);
    struct stat st;
    if (fstat(base.get(), &st) != 0) return Fail(nshelper::kStageResolve, errno);
    if (!S_ISDIR(st.st_mode)) return Fail(nshelper::kStageResolve, ENOTDIR);
  }
  char buf[PATH_MAX + 1];
  long n = -1;
  int err = 0;
  bool entered = fchdir(t.root.get()) == 0 && chroot(".") == 0 && fchdir(base.get()) == 0;
  if (entered) n = syscall(SYS_getcwd, buf, sizeof(buf));
  err = errno;
  // Back to the host root at once: a root or cwd left inside the container would keep its
  // mounts busy after it is gone.
  if (fchdir(g_host_root) != 0 || chroot(".") != 0) _exit(70);
  if (!entered) return Fail(nshelper::kStageInternal, err);
  if (n < 0) return Fail(nshelper::kStageResolve, err);  // ENOENT: the directory was removed
  if (buf[0] != '/') return Fail(nshelper::kStageOutsideRoot, EPERM);
  out->assign(buf);
  return {};
}

// The path as seen from the target's root: absolute paths as they are, relative ones appended to
// the base directory (kept in `base`, for OpenParentBeneath). A ".." that climbs above the root is
// clamped there by RESOLVE_IN_ROOT.
Status PathFromRoot(const Target& t, int dirfd, const std::string& path, std::string* out, Fd* base) {
  if (path.empty()) return Fail(nshelper::kStageResolve, ENOENT);
  if (path[0] == '/') {
    *out = path;
    return {};
  }
  Status s = BaseFromRoot(t, dirfd, out, base);
  if (!s.ok()) return s;
  out->push_back('/');
  out->append(path);
  if (out->size() > PATH_MAX) return Fail(nshelper::kStageResolve, ENAMETOOLONG);
  return {};
}

// openat2 relative to the target's root: symlinks (absolute ones too) and ".." stay inside it,
// /proc magic links (/proc/1/root, /proc/self/cwd...) are refused with ELOOP.
int OpenInRoot(const Target& t, const std::string& path, uint64_t flags) {
  open_how how = {};
  how.flags = flags | O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    long fd = syscall(SYS_openat2, t.root.get(), path.c_str(), &how, sizeof(how));
    if (fd >= 0) return int(fd);
    // EAGAIN: a rename raced with a ".." step; the kernel asks to retry.
    if (errno != EAGAIN || attempt == 16) return -1;
  }
}

// Splits an absolute path into its parent directory and last component (trailing slashes
// dropped). Returns false for "/" and the like (mkdir says EEXIST there).
bool SplitLast(const std::string& full, std::string* parent, std::string* last) {
  size_t end = full.find_last_not_of('/');
  if (end == std::string::npos) return false;
  size_t slash = full.rfind('/', end);
  *last = full.substr(slash + 1, end - slash);
  *parent = slash == 0 ? "/" : full.substr(0, slash);
  return true;
}

// The parent of a relative path, walked from its base directory (the thread's cwd, or its dirfd) as
// the kernel walks it: the folders above the base are never searched. Walked from the root instead,
// a thread whose cwd lies below a folder it may not search (a 0700 parent; its fsuid not the owner)
// got EACCES where the kernel lets it make the directory. RESOLVE_BENEATH keeps the walk below the
// base (which BaseFromRoot saw inside the root); a walk that meets a symlink or climbs above the
// base with ".." fails (ELOOP, EXDEV) and is left to OpenInRoot from the root, as before.
int OpenParentBeneath(int base, const std::string& relative) {
  std::string parent, last;
  if (!SplitLast("/" + relative, &parent, &last)) {
    errno = EEXIST;
    return -1;
  }
  open_how how = {};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const std::string from_base = parent == "/" ? "." : parent.substr(1);
  for (int attempt = 0;; ++attempt) {
    long fd = syscall(SYS_openat2, base, from_base.c_str(), &how, sizeof(how));
    if (fd >= 0) return int(fd);
    if (errno != EAGAIN || attempt == 16) return -1;
  }
}

// ---------------------------------------------------------------------------------------------
// mkdir / mkdirat

// What one request did, beyond its status: for the replay book and the response's flags.
struct Outcome {
  nshelper::Candidate candidate;  // the book's entry this request may restart (Handle found it)
  int entry = -1;                 // its own entry: intent, then acted, settled after the answer
  bool replay = false;            // `entry` is an earlier request's outcome, given again: nothing done
  uint64_t strings_hash = 0;
  uint64_t task_ino = 0;          // the target's pidfs inode (0: not known, no replay)
  char wait_state = 0;            // Credentials::state
  int stdin_info = -1;            // the target's fdinfo/0 and pidfd (the cache's): AnswerZero's
  int pidfd = -1;
};

// The candidate is a dead helper's intent: its act may or may not have happened (the pool gave
// its request to this helper, or the call came back), and this request goes on from that entry.
bool TakeIntent(Outcome* out) {
  if (out->candidate.index < 0 || out->candidate.entry.state != replay_book::kIntent) return false;
  out->entry = out->candidate.index;
  return true;
}

Status DoMkdir(const Request& req, const std::string& path, const Target& t, Outcome* out) {
  Credentials cred;
  Status s = g_targets.ReadCredentials(t, &cred);
  if (!s.ok()) return s;
  out->wait_state = cred.state;
  std::string full, parent, last;
  Fd base;  // a relative path's cwd or dirfd
  s = PathFromRoot(t, req.dirfd, path, &full, &base);
  if (!s.ok()) return s;
  if (!SplitLast(full, &parent, &last)) return Fail(nshelper::kStageDone, EEXIST);

  nshelper::ActAs as;
  s = as.Enter(cred);
  if (!s.ok()) return s;
  Fd dir;
  if (base.get() >= 0) {
    dir.Reset(OpenParentBeneath(base.get(), path));
    if (dir.get() < 0 && errno != ELOOP && errno != EXDEV) return Fail(nshelper::kStageResolve, errno);
  }
  if (dir.get() < 0) dir.Reset(OpenInRoot(t, parent, O_DIRECTORY));
  if (dir.get() < 0) return Fail(nshelper::kStageResolve, errno);
  // Last check before acting: the target may have been interrupted while we resolved.
  if (!t.StillPending()) return Fail(nshelper::kStageStale, ENOENT);
  // "." and ".." name a directory that exists (its parent just resolved): the kernel says EEXIST
  // and creates nothing, whatever path a control plane sent.
  if (last == "." || last == "..") return Fail(nshelper::kStageDone, EEXIST);
  // A call a signal restarted (or a request whose helper died after its mkdir), whose directory
  // an earlier request made and is still there: that outcome again, nothing done.
  const bool recovering = TakeIntent(out);
  if (out->candidate.index >= 0 && !recovering) {
    const replay_book::Entry& e = out->candidate.entry;
    struct stat st;
    if (fstatat(dir.get(), last.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
        uint64_t(st.st_dev) == e.made.dev && uint64_t(st.st_ino) == e.made.ino) {
      out->entry = out->candidate.index;
      out->replay = true;
      return {};
    }
    g_replays.Erase(out->candidate.index);  // removed or replaced since: this call is new
  }
  if (!recovering) {
    out->entry = g_replays.Intend(req, out->strings_hash, out->task_ino, nshelper::CoarseRealtimeNs(), 0, MonotonicNs());
  }
  uint64_t dev = 0, ino = 0;
  if (mkdirat(dir.get(), last.c_str(), mode_t(req.mode)) != 0) {
    const int err = errno;
    // A dead helper's intent alone: it died after its mkdirat, before marking it. A directory at
    // that name born since its intent is the one it made (docs/emulation.md, "Exactly once").
    if (!(err == EEXIST && recovering &&
          nshelper::MadeSince(dir.get(), last.c_str(), out->candidate.entry.intent.realtime_ns, &dev, &ino))) {
      return Fail(nshelper::kStageDone, err);
    }
    out->replay = true;
  } else if (out->entry >= 0) {
    struct stat st;
    if (fstatat(dir.get(), last.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      dev = uint64_t(st.st_dev);
      ino = uint64_t(st.st_ino);
    }
  }
  if (ino != 0) g_replays.Acted(out->entry, dev, ino);
  return {};
}

// ---------------------------------------------------------------------------------------------
// mount

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

// ---------------------------------------------------------------------------------------------
// The request loop.

bool ParseRequest(const char* buf, ssize_t n, Request* req, std::string* str) {
  if (n < ssize_t(sizeof(Request))) return false;
  memcpy(req, buf, sizeof(Request));
  if (req->magic != nshelper::kMagic || req->version != nshelper::kVersion) return false;
  size_t off = sizeof(Request);
  for (int i = 0; i < 4; ++i) {
    if (req->len[i] > nshelper::kMaxString || off + req->len[i] > size_t(n)) return false;
    str[i].assign(buf + off, req->len[i]);
    if (str[i].find('\0') != std::string::npos) return false;
    off += req->len[i];
  }
  return off == size_t(n);
}

Status Handle(const Request& req, const std::string* str, int notify_fd, Outcome* out) {
  if (req.op == nshelper::kOpPing) return {};
  Target t;
  Status s = g_targets.Open(req, notify_fd, &t);
  if (!s.ok()) return s;
  // A call a signal may have restarted after a request for it acted (Open has just checked this
  // notification is pending, from this very task): a mount's outcome is given again here, a
  // mkdir's where it would act, once its directory is seen still in place.
  if (req.nr != 0 && g_replays.enabled() && (req.op == nshelper::kOpMkdir || req.op == nshelper::kOpMount)) {
    out->strings_hash = nshelper::ReplayBook::Hash(str);
    out->task_ino = g_targets.TaskIno(t);
    out->candidate = g_replays.Find(req, out->strings_hash, out->task_ino, MonotonicNs());
    out->stdin_info = g_targets.StdinInfo(t);
    out->pidfd = g_targets.ThreadPidfd(t);
    if (req.op == nshelper::kOpMount && out->candidate.index >= 0 &&
        out->candidate.entry.state != replay_book::kIntent) {
      out->entry = out->candidate.index;
      out->replay = true;
      return {};
    }
  }
  switch (req.op) {
    case nshelper::kOpMkdir:
      return DoMkdir(req, str[0], t, out);
    case nshelper::kOpMount:
      return DoMount(req, str, t, out);
    default:
      return Fail(nshelper::kStageBadRequest, EINVAL);
  }
}

// Receives one request; returns false on EOF or a broken socket (the data plane is gone).
bool ServeOne(char* buf) {
  msghdr msg = {};
  iovec iov = {buf, nshelper::kMaxRequestBytes};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = -1;
  bool polled = false;  // the poll got a request, or an error that ends us
  const uint64_t poll_until = g_answered_ns + g_busy_poll_ns;
  while (!polled && g_busy_poll_ns != 0 && MonotonicNs() < poll_until) {
    n = recvmsg(nshelper::kSocketFd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    polled = n >= 0 || (errno != EAGAIN && errno != EINTR);
  }
  if (!polled) {
    // Idle: the partition is another helper's to take, and the data plane's death is ours again.
    if (g_in_burst) {
      g_in_burst = false;
      g_replays.Unlock();
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != g_parent) return false;
    }
    do {
      n = recvmsg(nshelper::kSocketFd, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
  }
  if (n <= 0) return false;
  if (!g_in_burst) {
    // A request in hand is carried to its end, the target answered, even if the data plane dies
    // meanwhile: killed between its mkdir and the answer, the successor would replay the still
    // pending notification and do it again (EEXIST for a mkdir that was made). The data plane's
    // death is looked at once this one is answered.
    prctl(PR_SET_PDEATHSIG, 0);
    // The partition's lock for the whole burst: a helper of a dead data plane still finishing one
    // for this namespace has noted what it did before we look (replay_book.h).
    g_replays.Lock();
    g_in_burst = true;
  }
  uint64_t start = MonotonicNs();

  int fds[4];
  int nfds = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count && nfds < 4; ++i) memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }

  Request req;
  std::string str[4];
  Response resp = {};
  resp.magic = nshelper::kMagic;
  resp.version = nshelper::kVersion;
  Status s;
  Outcome outcome;
  bool parsed = !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && ParseRequest(buf, n, &req, str);
  if (!parsed) {
    memset(&req, 0, sizeof(req));
    if (n >= ssize_t(sizeof(Request))) memcpy(&req.tag, buf + offsetof(Request, tag), sizeof(req.tag));
    s = Fail(nshelper::kStageBadRequest, EINVAL);
  } else {
    s = Handle(req, str, nfds > 0 ? fds[0] : -1, &outcome);
  }
  resp.tag = req.tag;
  resp.err = s.err;
  resp.stage = s.stage;
  if (outcome.replay) resp.flags |= nshelper::kReplayed;
  if (outcome.wait_state == 'D') resp.flags |= nshelper::kTargetWaitKillable;
  if (outcome.wait_state == 'S') resp.flags |= nshelper::kTargetWaitInterruptible;
  // Answer the target ourselves when asked, unless the notification is gone or was never
  // checked: a stale id must get no answer from us, and a bad request is the data plane's to answer.
  bool kept = false;  // the request's entry stays in the book
  bool answered_here = false;
  if (parsed && (req.flags & nshelper::kRespond) && nfds > 0 && s.stage != nshelper::kStageStale &&
      s.stage != nshelper::kStageBadRequest && s.stage != nshelper::kStageOpenProc) {
    answered_here = true;
    // An effect's answer (an entry of its own or replayed) is one whose delivery is known
    // (nshelper_answer.hpp); the kept outcome then serves the call a signal restarts, and only it.
    const bool effect = s.ok() && outcome.entry >= 0;
    Delivery delivery = Delivery::kFailed;
    int send_err = 0;
    if (effect) {
      delivery = nshelper::AnswerZero(fds[0], req.notif_id, outcome.stdin_info, outcome.pidfd, &send_err);
    } else {
      delivery = seccomp_agent::NotifySendErrno(fds[0], req.notif_id, s.err, &send_err) ? Delivery::kSent : Delivery::kFailed;
    }
    if (delivery == Delivery::kTaken || delivery == Delivery::kSent) {
      resp.flags |= nshelper::kAnswered;
    } else {
      resp.send_err = send_err;
    }
    // Kept: an outcome the target left its wait without (a signal took it out; a fatal one too, but
    // then no call comes back), and one whose delivery is unknown (briefly: kDeliveredKeepNs).
    // Taken: the program has its result, and the same call made again is its own (EEXIST).
    kept = effect && (delivery == Delivery::kDropped || delivery == Delivery::kSent);
    if (kept) g_replays.Settle(outcome.entry, delivery == Delivery::kSent, MonotonicNs());
  }
  // Nothing done, or an outcome its target has: no intent, mark or note of it is left behind. An
  // earlier request's entry given again without an answer from here stays as it was.
  if (!kept && (answered_here || !(outcome.replay && outcome.entry == outcome.candidate.index))) {
    g_replays.Erase(outcome.entry);
  }
  for (int i = 0; i < nfds; ++i) close(fds[i]);
  resp.helper_ns = MonotonicNs() - start;
  ssize_t w;
  do {
    w = send(nshelper::kSocketFd, &resp, sizeof(resp), MSG_NOSIGNAL);
  } while (w < 0 && errno == EINTR);
  g_answered_ns = MonotonicNs();
  if (getppid() != g_parent) return false;  // it died while this request ran: nothing more to serve
  return w == ssize_t(sizeof(resp));
}

// `--once`, `--busy-poll-us=N` (N decimal, at most 1 s), `--book-partition=N` (the replay book at
// fd 4), `--request-timeout-ms=N` (the pool's: how long a dead helper's intent can matter).
// False: a usage error.
bool ParseArgs(int argc, char** argv, bool* once, int* book_partition, uint64_t* request_timeout_ns) {
  command_line::Args args(argc, argv);
  while (args.Next()) {
    long long value = 0;
    if (args.Is("--once")) {
      *once = true;
    } else if (command_line::ParseDecimal(args.Inline("--busy-poll-us"), 0, 1000000, &value)) {
      g_busy_poll_ns = uint64_t(value) * 1000;
    } else if (command_line::ParseDecimal(args.Inline("--book-partition"), 0, replay_book::kPartitions - 1, &value)) {
      *book_partition = int(value);
    } else if (command_line::ParseDecimal(args.Inline("--request-timeout-ms"), 0, 3600000, &value)) {
      *request_timeout_ns = uint64_t(value) * 1000000ull;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool once = false;
  int book_partition = -1;
  uint64_t request_timeout_ns = 10000ull * 1000000ull;  // the pool's default
  if (!ParseArgs(argc, argv, &once, &book_partition, &request_timeout_ns)) {
    fprintf(stderr, "usage: seccomp-nshelper [--once] [--busy-poll-us=N] [--book-partition=N] [--request-timeout-ms=N]  (started by the seccomp data plane, socket on fd 3, replay book on fd 4)\n");
    return 2;
  }
  int type = 0;
  socklen_t len = sizeof(type);
  if (getsockopt(nshelper::kSocketFd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET) {
    fprintf(stderr, "seccomp-nshelper: fd 3 is not a SOCK_SEQPACKET socket; it is started by the data plane only\n");
    return 2;
  }
  // Die with the data plane's thread that started us (between requests: see ServeOne); the
  // socket's EOF covers the rest.
  g_parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  prctl(PR_SET_DUMPABLE, 0);
  // The replay book first (it is fd 4, and kept as a descriptor of our own), then every other fd.
  if (book_partition >= 0 && !g_replays.Open(uint32_t(book_partition), request_timeout_ns)) {
    perror("seccomp-nshelper: the replay book on fd 4 (serving without it: restarted calls are done again)");
  }
  syscall(SYS_close_range, nshelper::kSocketFd + 1, ~0u, 0);
  signal(SIGPIPE, SIG_IGN);
  if (!g_targets.Init()) {
    perror("seccomp-nshelper: /proc");
    return 1;
  }
  g_host_root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (g_host_root < 0 || fchdir(g_host_root) != 0) {
    perror("seccomp-nshelper: /");
    return 1;
  }
  if (!nshelper::TakeOwnCredentials()) {
    perror("seccomp-nshelper: its own credentials (fsuid 0, no groups, capabilities)");
    return 1;
  }
  static char buf[nshelper::kMaxRequestBytes];
  do {
    if (!ServeOne(buf)) break;
  } while (!once);
  return 0;
}
