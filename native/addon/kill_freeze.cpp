// Kill and freeze of a container: the pidfd of its init, the freezer file of its cgroup.
#include "kill_freeze.hpp"
#include "unique_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "cgroup_paths.hpp"
#include "monotonic_clock.h"
#include "notify_fd.hpp"

// Linux 6.9: translate a pid between pid namespaces through a pid namespace fd.
#ifndef NS_GET_PID_FROM_PIDNS
#define NS_GET_PID_FROM_PIDNS _IOR(NSIO, 0x6, int)
#endif

namespace seccomp_agent {
namespace {

// Answers the notification with r.err (or answer_errno for a success) unless it is stale.
ActionResult AnswerWith(const NotificationRef& ref, ActionResult r, int answer_errno) {
  if (answer_errno <= 0) return r;
  if (r.outcome == ActionOutcome::kStale) {
    if (!StillPending(ref)) return r;
    // A lookup failed while the target still waits (its container's init exited first, pidfd_open
    // out of fds, a kernel without NS_GET_PID_FROM_PIDNS): a failure, and the target still gets
    // its answer, or it would wait until its container's notify fd closes.
    r.outcome = ActionOutcome::kFailed;
    r.cause = r.err;
    r.err = answer_errno;
    r.stage = "lookup";
  }
  if (r.outcome == ActionOutcome::kDone && r.err == 0) r.err = answer_errno;
  r.answered = NotifySendErrno(ref.notify_fd, ref.id, r.err, &r.send_err);
  return r;
}

std::string ReadAll(const char* path) {
  std::string out;
  Fd fd(open(path, O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd.get(), buf, sizeof(buf))) > 0) out.append(buf, size_t(n));
  return out;
}

bool Writable(const std::string& file) { return access(file.c_str(), W_OK) == 0; }

// The freezer of a target, chosen against this process's own cgroups and mounts.
FreezeTarget FreezerFor(const std::string& target_cgroups) {
  return ChooseFreezer(target_cgroups, ReadAll("/proc/self/cgroup"), ReadAll("/proc/self/mountinfo"), Writable);
}

int WriteValue(const std::string& file, const char* value) {
  Fd fd(open(file.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) return errno;
  size_t len = strlen(value);
  if (write(fd.get(), value, len) != ssize_t(len)) return errno ? errno : EIO;
  return 0;
}

std::string ReadProc(pid_t pid, const char* leaf) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/%s", int(pid), leaf);
  return ReadAll(path);
}

bool SameNs(pid_t a, pid_t b, const char* ns) {
  char pa[64], pb[64];
  snprintf(pa, sizeof(pa), "/proc/%d/ns/%s", int(a), ns);
  snprintf(pb, sizeof(pb), "/proc/%d/ns/%s", int(b), ns);
  struct stat sa, sb;
  return stat(pa, &sa) == 0 && stat(pb, &sb) == 0 && sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev;
}

}  // namespace

static ActionResult KillContainerOnly(const NotificationRef& ref, const KillArgs& args);
static ActionResult FreezeContainerOnly(const NotificationRef& ref);

ActionResult KillContainer(const NotificationRef& ref, const KillArgs& args, int answer_errno) {
  ActionResult r = KillContainerOnly(ref, args);
  if (r.outcome == ActionOutcome::kDone && r.err == 0) {
    // SIGKILL to the pid namespace's init reaches the other tasks asynchronously: answering at once
    // would let the caller run on for a moment ("killed" container printing after its syscall).
    // Wait for the kill to take the caller; answer only a caller that survives (another pid ns).
    for (int waited_ms = 0; waited_ms < 2000 && StillPending(ref); waited_ms++) usleep(1000);
    if (!StillPending(ref)) return r;
  }
  return AnswerWith(ref, r, answer_errno);
}

ActionResult FreezeContainer(const NotificationRef& ref, int answer_errno) {
  return AnswerWith(ref, FreezeContainerOnly(ref), answer_errno);
}

static ActionResult KillContainerOnly(const NotificationRef& ref, const KillArgs& args) {
  const uint64_t start = MonotonicNs();
  const int sig = args.signal > 0 ? args.signal : SIGKILL;
  if (ref.notify_fd < 0 || ref.pid <= 0) return MakeActionResult(ActionOutcome::kFailed, EINVAL, "bad-request", start);
  if (!StillPending(ref)) return MakeActionResult(ActionOutcome::kStale, ENOENT, "stale", start);
  int pidfd = args.init_pidfd;
  Fd owned;
  if (pidfd < 0) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", int(ref.pid));
    Fd pidns(open(path, O_RDONLY | O_CLOEXEC));
    if (pidns.get() < 0) return MakeActionResult(ActionOutcome::kStale, ESRCH, "target-gone", start);
    pid_t init;
    if (!SameNs(ref.pid, getpid(), "pid")) {
      // pid 1 of the target's pid namespace: it cannot change while the target lives there.
      init = pid_t(ioctl(pidns.get(), NS_GET_PID_FROM_PIDNS, 1));
      if (init <= 0) return MakeActionResult(ActionOutcome::kStale, ESRCH, "target-gone", start);
    } else {
      // No pid namespace of its own: the engine's init pid, which must be in the target's mount
      // namespace (a container's processes share one) and is never the host's init or ourselves.
      init = args.init_pid;
      if (init <= 1 || init == getpid() || !SameNs(init, ref.pid, "mnt") || SameNs(init, getpid(), "mnt")) {
        return MakeActionResult(ActionOutcome::kRefused, EPERM, "no-container-init", start);
      }
    }
    owned.Reset(int(syscall(SYS_pidfd_open, init, 0)));
    pidfd = owned.get();
    if (pidfd < 0) return MakeActionResult(ActionOutcome::kStale, ESRCH, "target-gone", start);
    // The checks above read /proc/<init>: the process they saw is the pidfd's only if it was still
    // alive after them (a pid is not reused while its process lives).
    if (syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) != 0) {
      return MakeActionResult(ActionOutcome::kStale, ESRCH, "target-gone", start);
    }
  }
  if (!StillPending(ref)) return MakeActionResult(ActionOutcome::kStale, ENOENT, "stale", start);
  if (syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) != 0) {
    return MakeActionResult(ActionOutcome::kDone, errno, "kill", start);
  }
  return MakeActionResult(ActionOutcome::kDone, 0, "done", start);
}

// ---------------------------------------------------------------------------------------------
// freeze / thaw

static ActionResult FreezeContainerOnly(const NotificationRef& ref) {
  const uint64_t start = MonotonicNs();
  if (ref.notify_fd < 0 || ref.pid <= 0) return MakeActionResult(ActionOutcome::kFailed, EINVAL, "bad-request", start);
  std::string cgroups = ReadProc(ref.pid, "cgroup");
  if (cgroups.empty()) return MakeActionResult(ActionOutcome::kStale, ESRCH, "target-gone", start);
  if (!StillPending(ref)) return MakeActionResult(ActionOutcome::kStale, ENOENT, "stale", start);
  FreezeTarget t = FreezerFor(cgroups);
  if (t.file.empty()) return MakeActionResult(ActionOutcome::kRefused, EPERM, "no-cgroup", start, t.refusal);
  int err = WriteValue(t.file, t.freeze_value);
  return MakeActionResult(err ? ActionOutcome::kFailed : ActionOutcome::kDone, err, err ? "write" : "done", start,
                          t.file);
}

ActionResult ThawContainer(pid_t pid) {
  const uint64_t start = MonotonicNs();
  std::string cgroups = pid > 0 ? ReadProc(pid, "cgroup") : std::string();
  if (cgroups.empty()) return MakeActionResult(ActionOutcome::kStale, ESRCH, "target-gone", start);
  FreezeTarget t = FreezerFor(cgroups);
  if (t.file.empty()) return MakeActionResult(ActionOutcome::kRefused, EPERM, "no-cgroup", start, t.refusal);
  int err = WriteValue(t.file, t.thaw_value);
  return MakeActionResult(err ? ActionOutcome::kFailed : ActionOutcome::kDone, err, err ? "write" : "done", start,
                          t.file);
}

}  // namespace seccomp_agent
