// Emulations a predecessor handed to its helpers and may still be carrying when this data plane
// takes over (after a crash, a keeper restart or a handoff): waited for, never done a second time.
//
// A helper carries the request in its hands to the target's answer even when the data plane that
// sent it dies (native/tools/nshelper.cpp: its death signal is off during a request); requests
// still queued in its socket die with it (the signal is back on between requests). The journal
// marks a notification before it goes to a helper (InFlightJournal::MarkWithHelper). So for a
// marked notification a successor finds still pending:
//   - while a helper of the predecessor lives, it may be doing it: wait;
//   - once none lives and the notification is still pending, no helper did it: decide it anew,
//     as if just received (its own rules, a control plane, or the default);
//   - it is answered meanwhile: the helper answered it, with the one outcome it had;
//   - past the timeout (the predecessor's own request timeout: a helper stuck on a hung FUSE or
//     NFS path), the predecessor's helpers are SIGKILLed through pidfds and the notification gets
//     the failure errno, as the predecessor's pool would have done.
// "A helper of the predecessor": a root process named seccomp-nshelper that is not a child of
// this process. Looked for in /proc every few milliseconds, only while marked notifications wait.
#pragma once
#include <pthread.h>
#include <stdint.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "notification.hpp"

namespace seccomp_agent {

class PredecessorEmulations {
 public:
  struct Item {
    int notify_fd = -1;  // owned: a copy of the container's notify fd
    Notification notification;
    uint32_t journal_slot = UINT32_MAX;  // its slot in this process's journal, marked again
  };
  enum class Fate {
    kAnsweredByHelper,  // no longer pending: a predecessor's helper answered it
    kNotDone,           // still pending and no helper of the predecessor lives: decide it anew
    kTimedOut,          // still pending after the timeout: the helpers were killed; answer the failure errno
  };
  // Runs on the waiting thread, once per item; the item's fd is closed after it returns.
  using Done = std::function<void(const Item& item, Fate fate)>;

  // Starts the thread. nullptr with *error when it cannot (the items' fds are then closed).
  static std::unique_ptr<PredecessorEmulations> Start(std::vector<Item> items, uint64_t timeout_ns, Done done,
                                                      std::string* error);
  ~PredecessorEmulations();  // Stop()
  // Any thread but the waiting one. Ends the wait and joins; what still waits is not reported
  // (it stays in the journal for whoever comes next). Idempotent.
  void Stop();
  size_t waiting() const { return waiting_.load(std::memory_order_relaxed); }

  // The pids of live root processes named seccomp-nshelper whose parent is not `self`.
  static std::vector<pid_t> ForeignHelpers(pid_t self);

 private:
  PredecessorEmulations(std::vector<Item> items, uint64_t timeout_ns, Done done);
  static void* ThreadMain(void* self);
  void Run();
  void Report(size_t index, Fate fate);

  std::vector<Item> items_;
  const uint64_t timeout_ns_;
  Done done_;
  pthread_t thread_{};
  bool joinable_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::atomic<size_t> waiting_{0};
};

}  // namespace seccomp_agent
