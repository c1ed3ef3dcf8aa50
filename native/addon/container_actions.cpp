#include "container_actions.hpp"
#include "unique_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "cgroup_paths.hpp"
#include "monotonic_clock.h"
#include "nshelper_pool.hpp"
#include "notify_fd.hpp"
#include "nshelper_protocol.h"
#include "seccomp_compat.h"

// Linux 6.9: translate a pid between pid namespaces through a pid namespace fd.
#ifndef NS_GET_PID_FROM_PIDNS
#define NS_GET_PID_FROM_PIDNS _IOR(NSIO, 0x6, int)
#endif

namespace seccomp_agent {
namespace {

ActionResult Result(ActionOutcome outcome, int err, const char* stage, uint64_t start, std::string detail = "") {
  ActionResult r;
  r.outcome = outcome;
  r.err = err;
  if (outcome == ActionOutcome::kStale || outcome == ActionOutcome::kFailed) r.cause = err;
  r.stage = stage;
  r.detail = std::move(detail);
  r.latency_ns = MonotonicNs() - start;
  return r;
}

bool StillPending(const NotificationRef& ref) {
  uint64_t id = ref.id;
  return ioctl(ref.notify_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

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

const char* StageName(uint16_t stage) {
  switch (stage) {
    case nshelper::kStageDone: return "done";
    case nshelper::kStageBadRequest: return "bad-request";
    case nshelper::kStageOpenProc: return "target-gone";
    case nshelper::kStageStale: return "stale";
    case nshelper::kStageCredentials: return "credentials";
    case nshelper::kStageOutsideRoot: return "outside-root";
    case nshelper::kStageResolve: return "resolve";
    case nshelper::kStagePermission: return "permission";
    case nshelper::kStageNamespace: return "namespace";
    case nshelper::kStageConfine: return "confine";
    default: return "internal";
  }
}

ActionOutcome OutcomeOfStage(uint16_t stage) {
  switch (stage) {
    case nshelper::kStageDone:
    case nshelper::kStageResolve:  // the target's own syscall would have failed the same way
      return ActionOutcome::kDone;
    case nshelper::kStageOpenProc:
    case nshelper::kStageStale:
      return ActionOutcome::kStale;
    case nshelper::kStageOutsideRoot:
    case nshelper::kStagePermission:
    case nshelper::kStageConfine:
      return ActionOutcome::kRefused;
    default:
      return ActionOutcome::kFailed;
  }
}

// Turns the pool's completion into an ActionResult for the caller's callback.
std::function<void(const nshelper::Response&, int, uint64_t)> Adapt(ActionDone done) {
  return [done](const nshelper::Response& resp, int internal_err, uint64_t latency_ns) {
    ActionResult r;
    r.latency_ns = latency_ns;
    r.err = resp.err;
    r.answered = (resp.flags & nshelper::kAnswered) != 0;
    r.send_err = resp.send_err;
    r.replayed = (resp.flags & nshelper::kReplayed) != 0;
    r.retried = (resp.flags & nshelper::kRetriedAfterHelperDeath) != 0;
    r.target_wait = (resp.flags & nshelper::kTargetWaitKillable) ? 'D' : (resp.flags & nshelper::kTargetWaitInterruptible) ? 'S' : 0;
    if (internal_err != 0) {
      r.outcome = ActionOutcome::kFailed;
      r.cause = internal_err;
      r.stage = internal_err == ETIMEDOUT ? "helper-timeout" : internal_err == ECANCELED ? "stopped" : "helper";
    } else {
      r.outcome = OutcomeOfStage(resp.stage);
      r.stage = StageName(resp.stage);
      r.helper_ns = resp.helper_ns;
      if (r.outcome == ActionOutcome::kStale || r.outcome == ActionOutcome::kFailed) r.cause = resp.err;
    }
    if (done) done(r);
  };
}

NsHelperJob MakeJob(const NotificationRef& ref, uint16_t op, bool respond, int failure_errno, ActionDone done) {
  NsHelperJob job;
  job.header.op = op;
  job.header.notif_id = ref.id;
  job.header.pid = int32_t(ref.pid);
  job.header.flags = respond ? uint32_t(nshelper::kRespond) : 0u;
  job.header.dirfd = AT_FDCWD;
  job.header.nr = ref.nr;
  job.header.arch = ref.arch;
  memcpy(job.header.args, ref.args, sizeof job.header.args);
  job.owner = ref.owner;
  job.done = Adapt(std::move(done));
  job.notify_fd = ref.notify_fd >= 0 ? fcntl(ref.notify_fd, F_DUPFD_CLOEXEC, 0) : -1;
  if (job.notify_fd < 0) {
    // No copy to hand over (EMFILE): answer now on the caller's fd, report through the pool.
    job.precomputed = true;
    job.response.stage = nshelper::kStageInternal;
    job.response.err = failure_errno;
    if (respond && ref.notify_fd >= 0 && NotifySendErrno(ref.notify_fd, ref.id, failure_errno, &job.response.send_err)) {
      job.response.flags |= nshelper::kAnswered;
    }
  }
  return job;
}

// Arguments the helper would refuse anyway are answered without one.
void Precompute(NsHelperJob* job, uint16_t stage, int err) {
  if (job->precomputed) return;
  job->precomputed = true;
  job->response.stage = stage;
  job->response.err = err;
}

// ---------------------------------------------------------------------------------------------
// Cgroups

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

const char* OutcomeName(ActionOutcome outcome) {
  switch (outcome) {
    case ActionOutcome::kDone: return "done";
    case ActionOutcome::kStale: return "stale";
    case ActionOutcome::kRefused: return "refused";
    default: return "failed";
  }
}

// ---------------------------------------------------------------------------------------------
// Emulator

std::unique_ptr<Emulator> Emulator::Create(const EmulatorOptions& options, std::string* error) {
  NsHelperPoolOptions po;
  po.helper_path = options.helper_path;
  po.spawn_per_call = options.spawn_per_call;
  po.max_helpers = options.max_helpers;
  po.request_timeout_ms = options.request_timeout_ms;
  po.idle_timeout_ms = options.idle_timeout_ms;
  po.busy_poll_us = options.busy_poll_us;
  po.failure_errno = options.failure_errno;
  po.replay_book = options.replay_book;
  std::unique_ptr<NsHelperPool> pool = NsHelperPool::Start(po, error);
  if (!pool) return nullptr;
  std::unique_ptr<Emulator> e(new Emulator);
  e->pool_ = std::move(pool);
  e->failure_errno_ = options.failure_errno;
  return e;
}

Emulator::~Emulator() { Stop(); }

void Emulator::Mkdir(const NotificationRef& ref, const MkdirArgs& args, bool respond, ActionDone done) {
  PathCall(nshelper::kOpMkdir, ref, args, respond, std::move(done));
}

void Emulator::PathCall(uint16_t op, const NotificationRef& ref, const MkdirArgs& args, bool respond, ActionDone done) {
  NsHelperJob job = MakeJob(ref, op, respond, failure_errno_, std::move(done));
  if (args.path.size() > nshelper::kMaxString) Precompute(&job, nshelper::kStageResolve, ENAMETOOLONG);
  job.header.dirfd = args.dirfd;
  job.header.mode = args.mode;
  if (!job.precomputed) job.strings[0] = args.path;
  pool_->Submit(std::move(job));
}

void Emulator::Mount(const NotificationRef& ref, const MountArgs& args, bool respond, ActionDone done) {
  NsHelperJob job = MakeJob(ref, nshelper::kOpMount, respond, failure_errno_, std::move(done));
  const std::string* s[4] = {&args.source, &args.target, &args.fstype, &args.data};
  for (int i = 0; i < 4; ++i) {
    if (s[i]->size() > nshelper::kMaxString) Precompute(&job, nshelper::kStageResolve, i == 3 ? EINVAL : ENAMETOOLONG);
  }
  if (!job.precomputed) {
    for (int i = 0; i < 4; ++i) job.strings[i] = *s[i];
  }
  job.header.mount_flags = args.flags;
  if (args.require_cap_sys_admin) job.header.flags |= nshelper::kRequireCapSysAdmin;
  pool_->Submit(std::move(job));
}

void Emulator::Forget(uint64_t owner) { pool_->Forget(owner); }

void Emulator::Stop(bool let_go) {
  if (pool_) pool_->Stop(let_go);
}

EmulatorStats Emulator::Stats() const {
  NsHelperPoolStats p = pool_->Stats();
  EmulatorStats s;
  s.helpers = p.helpers;
  s.spawned = p.spawned;
  s.died = p.died;
  s.timed_out = p.timed_out;
  s.in_flight = p.in_flight;
  s.retried = p.retried;
  return s;
}

// ---------------------------------------------------------------------------------------------
// kill-container

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
  if (ref.notify_fd < 0 || ref.pid <= 0) return Result(ActionOutcome::kFailed, EINVAL, "bad-request", start);
  if (!StillPending(ref)) return Result(ActionOutcome::kStale, ENOENT, "stale", start);
  int pidfd = args.init_pidfd;
  Fd owned;
  if (pidfd < 0) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", int(ref.pid));
    Fd pidns(open(path, O_RDONLY | O_CLOEXEC));
    if (pidns.get() < 0) return Result(ActionOutcome::kStale, ESRCH, "target-gone", start);
    pid_t init;
    if (!SameNs(ref.pid, getpid(), "pid")) {
      // pid 1 of the target's pid namespace: it cannot change while the target lives there.
      init = pid_t(ioctl(pidns.get(), NS_GET_PID_FROM_PIDNS, 1));
      if (init <= 0) return Result(ActionOutcome::kStale, ESRCH, "target-gone", start);
    } else {
      // No pid namespace of its own: the engine's init pid, which must be in the target's mount
      // namespace (a container's processes share one) and is never the host's init or ourselves.
      init = args.init_pid;
      if (init <= 1 || init == getpid() || !SameNs(init, ref.pid, "mnt") || SameNs(init, getpid(), "mnt")) {
        return Result(ActionOutcome::kRefused, EPERM, "no-container-init", start);
      }
    }
    owned.Reset(int(syscall(SYS_pidfd_open, init, 0)));
    pidfd = owned.get();
    if (pidfd < 0) return Result(ActionOutcome::kStale, ESRCH, "target-gone", start);
    // The checks above read /proc/<init>: the process they saw is the pidfd's only if it was still
    // alive after them (a pid is not reused while its process lives).
    if (syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) != 0) {
      return Result(ActionOutcome::kStale, ESRCH, "target-gone", start);
    }
  }
  if (!StillPending(ref)) return Result(ActionOutcome::kStale, ENOENT, "stale", start);
  if (syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) != 0) {
    return Result(ActionOutcome::kDone, errno, "kill", start);
  }
  return Result(ActionOutcome::kDone, 0, "done", start);
}

// ---------------------------------------------------------------------------------------------
// freeze / thaw

static ActionResult FreezeContainerOnly(const NotificationRef& ref) {
  const uint64_t start = MonotonicNs();
  if (ref.notify_fd < 0 || ref.pid <= 0) return Result(ActionOutcome::kFailed, EINVAL, "bad-request", start);
  std::string cgroups = ReadProc(ref.pid, "cgroup");
  if (cgroups.empty()) return Result(ActionOutcome::kStale, ESRCH, "target-gone", start);
  if (!StillPending(ref)) return Result(ActionOutcome::kStale, ENOENT, "stale", start);
  FreezeTarget t = FreezerFor(cgroups);
  if (t.file.empty()) return Result(ActionOutcome::kRefused, EPERM, "no-cgroup", start, t.refusal);
  int err = WriteValue(t.file, t.freeze_value);
  return Result(err ? ActionOutcome::kFailed : ActionOutcome::kDone, err, err ? "write" : "done", start, t.file);
}

ActionResult ThawContainer(pid_t pid) {
  const uint64_t start = MonotonicNs();
  std::string cgroups = pid > 0 ? ReadProc(pid, "cgroup") : std::string();
  if (cgroups.empty()) return Result(ActionOutcome::kStale, ESRCH, "target-gone", start);
  FreezeTarget t = FreezerFor(cgroups);
  if (t.file.empty()) return Result(ActionOutcome::kRefused, EPERM, "no-cgroup", start, t.refusal);
  int err = WriteValue(t.file, t.thaw_value);
  return Result(err ? ActionOutcome::kFailed : ActionOutcome::kDone, err, err ? "write" : "done", start, t.file);
}

// ---------------------------------------------------------------------------------------------
// ActionWorker

namespace {

// An action that will not run (the worker stopped, or no copy of the fd could be made): answered
// with failure_errno when it was to be answered, so the target never waits for nothing.
ActionResult NotRun(const NotificationRef& ref, int answer_errno, int failure_errno, int cause, uint64_t start) {
  ActionResult r = Result(ActionOutcome::kFailed, failure_errno, cause == ECANCELED ? "stopped" : "worker", start);
  r.cause = cause;
  if (answer_errno > 0 && ref.notify_fd >= 0) r.answered = NotifySendErrno(ref.notify_fd, ref.id, failure_errno, &r.send_err);
  return r;
}

}  // namespace

std::unique_ptr<ActionWorker> ActionWorker::Start(int failure_errno, std::string* error) {
  std::unique_ptr<ActionWorker> worker(new ActionWorker(failure_errno));
  // Signals belong to Node's main thread.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&worker->thread_, nullptr, &ActionWorker::ThreadMain, worker.get());
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    *error = std::string("pthread_create: ") + strerror(rc);
    return nullptr;
  }
  worker->joinable_ = true;
  return worker;
}

ActionWorker::~ActionWorker() { Stop(); }

void* ActionWorker::ThreadMain(void* self) {
  pthread_setname_np(pthread_self(), "seccomp-actions");
  static_cast<ActionWorker*>(self)->Run();
  return nullptr;
}

void ActionWorker::Kill(const NotificationRef& ref, const KillArgs& args, int answer_errno, ActionDone done) {
  Job job;
  job.op = Job::Op::kKill;
  job.ref = ref;
  job.kill = args;
  job.answer_errno = answer_errno;
  job.done = std::move(done);
  Enqueue(std::move(job));
}

void ActionWorker::Freeze(const NotificationRef& ref, int answer_errno, ActionDone done) {
  Job job;
  job.op = Job::Op::kFreeze;
  job.ref = ref;
  job.answer_errno = answer_errno;
  job.done = std::move(done);
  Enqueue(std::move(job));
}

void ActionWorker::Enqueue(Job job) {
  job.queued_ns = MonotonicNs();
  // The worker's own copies: the caller may close its fds as soon as this returns.
  int notify_fd = job.ref.notify_fd >= 0 ? fcntl(job.ref.notify_fd, F_DUPFD_CLOEXEC, 0) : -1;
  int pidfd = job.kill.init_pidfd >= 0 ? fcntl(job.kill.init_pidfd, F_DUPFD_CLOEXEC, 0) : -1;
  if ((job.ref.notify_fd >= 0 && notify_fd < 0) || (job.kill.init_pidfd >= 0 && pidfd < 0)) {
    int err = errno;
    if (notify_fd >= 0) close(notify_fd);
    if (pidfd >= 0) close(pidfd);
    ActionResult r = NotRun(job.ref, job.answer_errno, failure_errno_, err, job.queued_ns);  // on the caller's fd
    if (job.done) job.done(r);
    return;
  }
  job.ref.notify_fd = notify_fd;
  job.kill.init_pidfd = pidfd;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      jobs_.push_back(std::move(job));
      cv_.notify_one();
      return;
    }
  }
  Cancel(&job);
}

// Completes a job that will not run, and closes its copies.
void ActionWorker::Cancel(Job* job) {
  ActionResult r = NotRun(job->ref, job->answer_errno, failure_errno_, ECANCELED, job->queued_ns);
  if (job->ref.notify_fd >= 0) close(job->ref.notify_fd);
  if (job->kill.init_pidfd >= 0) close(job->kill.init_pidfd);
  if (job->done) job->done(r);
}

// Worker thread.
void ActionWorker::Run() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    ActionResult r = job.op == Job::Op::kKill ? KillContainer(job.ref, job.kill, job.answer_errno)
                                              : FreezeContainer(job.ref, job.answer_errno);
    r.latency_ns = MonotonicNs() - job.queued_ns;  // with the wait in the queue
    if (job.ref.notify_fd >= 0) close(job.ref.notify_fd);
    if (job.kill.init_pidfd >= 0) close(job.kill.init_pidfd);
    if (job.done) job.done(r);
  }
}

void ActionWorker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (joinable_) {
    pthread_join(thread_, nullptr);
    joinable_ = false;
  }
  std::deque<Job> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(jobs_);
  }
  for (Job& job : left) Cancel(&job);
}

}  // namespace seccomp_agent
