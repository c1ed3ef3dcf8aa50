// The action thread: a queue of kill and freeze jobs with their own fd copies, run one at a time.
#include "action_worker.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "monotonic_clock.h"
#include "notify_fd.hpp"
#include "quiet_thread.hpp"

namespace seccomp_agent {
namespace {

// An action that will not run (the worker stopped, or no copy of the fd could be made): answered
// with failure_errno when it was to be answered, so the target never waits for nothing.
ActionResult NotRun(const NotificationRef& ref, int answer_errno, int failure_errno, int cause, uint64_t start) {
  ActionResult r =
      MakeActionResult(ActionOutcome::kFailed, failure_errno, cause == ECANCELED ? "stopped" : "worker", start);
  r.cause = cause;
  if (answer_errno > 0 && ref.notify_fd >= 0) r.answered = NotifySendErrno(ref.notify_fd, ref.id, failure_errno, &r.send_err);
  return r;
}

}  // namespace

std::unique_ptr<ActionWorker> ActionWorker::Start(int failure_errno, std::string* error) {
  std::unique_ptr<ActionWorker> worker(new ActionWorker(failure_errno));
  const int rc = StartQuietThread(&worker->thread_, &ActionWorker::ThreadMain, worker.get());
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
