// The engine's action thread: kill and freeze (kill_freeze.hpp) run in order, off the JS thread.
#pragma once
#include <pthread.h>
#include <stdint.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "action_result.hpp"
#include "kill_freeze.hpp"

namespace seccomp_agent {

// Runs KillContainer and FreezeContainer on a thread of its own, in order, for a caller that must
// not wait on the kernel (the engine's respond path on the JS thread): a cgroup write can sleep on
// the kernel's cgroup locks while other containers are created or removed, and the freeze file is
// found by reading /proc/self/mountinfo, which is long on a busy node. One thread is enough:
// these actions are rare (a policy's last word on a container) and each is bounded.
class ActionWorker {
 public:
  // Starts the thread (all signals blocked in it). nullptr + *error when it cannot.
  static std::unique_ptr<ActionWorker> Start(int failure_errno, std::string* error);
  ~ActionWorker();  // Stop()

  // Any thread. notify_fd is dup'ed for the queued action. `done` runs exactly once on the worker
  // thread (inline, kFailed/ECANCELED after Stop). answer_errno as for KillContainer: > 0, the
  // notification is answered by the action (refusals with EPERM), so the caller only records it.
  void Kill(const NotificationRef& ref, const KillArgs& args, int answer_errno, ActionDone done);
  void Freeze(const NotificationRef& ref, int answer_errno, ActionDone done);
  // Any thread. Lets the running action finish, fails the queued ones (ECANCELED; answered with
  // failure_errno when they were to be answered), joins. Idempotent.
  void Stop();

 private:
  struct Job {
    enum class Op { kKill, kFreeze } op = Op::kKill;
    NotificationRef ref;  // ref.notify_fd: the worker's own copy, closed when done
    KillArgs kill;
    int answer_errno = 0;
    uint64_t queued_ns = 0;
    ActionDone done;
  };
  explicit ActionWorker(int failure_errno) : failure_errno_(failure_errno) {}
  static void* ThreadMain(void* self);
  void Run();
  void Enqueue(Job job);
  void Cancel(Job* job);

  const int failure_errno_;
  pthread_t thread_{};
  bool joinable_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;  // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
};

}  // namespace seccomp_agent
