// The emulator facade: each emulated call as a job for the helper pool, its answer as an ActionResult.
#include "emulator.hpp"

#include <string.h>

#include "notify_fd.hpp"
#include "nshelper_pool.hpp"
#include "nshelper_protocol.h"

namespace seccomp_agent {
namespace {

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
  job.header.flags = respond ? uint32_t(nshelper::kRespond) | (ref.reply_may_wait ? uint32_t(nshelper::kReplyMayWait) : 0u) : 0u;
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

}  // namespace

std::unique_ptr<Emulator> Emulator::Create(const EmulatorOptions& options, std::string* error) {
  std::unique_ptr<NsHelperPool> pool = NsHelperPool::Start(options, error);
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
  return pool_->Stats();
}

}  // namespace seccomp_agent
