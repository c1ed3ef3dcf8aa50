// The helper processes (native/tools/nshelper.cpp) that do mkdir and mount for containers, and
// the thread that talks to them. Pure C++: no N-API here.
//
// Kept mode: one helper per target mount namespace (key: inode of /proc/<pid>/ns/mnt, read once per
// container and task: mount_namespace_cache.hpp), spawned
// on first use with posix_spawn (never a fork of this multi-threaded process), reused until its
// owners are forgotten, it idles past idle_timeout, or the bound on helpers evicts it. A helper
// stuck past request_timeout (a hung FUSE or NFS mount in the container) is SIGKILLed; one that
// dies is reaped through its pidfd and respawned on the next request; what it had in hand goes once
// to a fresh helper, which finds in the replay book what the dead one did. Each container's helper is
// its own process, so one container that hangs its helper delays no other container.
// Spawn-per-call mode (the variant the issue asks to measure): one `--once` helper per request.
//
// Direct hand-off (nshelper_pool_direct.cpp): a kept helper with room in its window and no backlog
// is published as ready for its namespace; Submit sends a request for that namespace straight to
// its socket (under mutex_, so the pool thread cannot close or write it meanwhile) and leaves the
// bookkeeping to the pool thread, which adopts the requests, in the order sent, before it touches
// that helper again. The
// helper answers the target itself, so a container's emulated call waits on one wake-up (the
// helper's), not two (the pool thread's, then the helper's). A timerfd armed at the send wakes the
// pool thread for the request's timeout if nothing else does.
//
// Responses come back through each helper's reply ring (nshelper_replies.hpp), which the helper
// rings for on its socket: at once for a response someone waits for, in batches for the rest.
#pragma once
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "mount_namespace_cache.hpp"
#include "nshelper_protocol.h"
#include "nshelper_replies.hpp"
#include "replay_book_file.hpp"

namespace seccomp_agent {

struct NsHelperPoolOptions {
  std::string helper_path;           // build/Release/seccomp-nshelper
  bool spawn_per_call = false;       // true: one `--once` helper per request (for comparison)
  size_t max_helpers = 64;           // kept helpers alive at once (and spawn-per-call in flight)
  uint32_t request_timeout_ms = 10000;
  uint32_t idle_timeout_ms = 60000;  // a kept helper unused this long exits
  // A kept helper polls for its next request this long after answering one before it sleeps
  // (0: always sleeps): the data plane's --busy-poll, for the same reason (a wake-up per request).
  uint32_t busy_poll_us = 0;
  // Each helper's nice value (0 to 19; a helper never raises its priority above the data plane's).
  // A helper does a container's work: at 10, any runnable nice-0 thread (a lane answering another
  // container, that container's own threads) runs first while the CPUs are busy, and the helper
  // gets the rest; on an idle CPU nothing changes.
  // Measured: docs/benchmarks.md (issue 17's noisy neighbour, emulated mkdir rows).
  int helper_nice = 10;
  // What a notification asked to be answered (kRespond) gets when no helper answered it: spawn
  // failure, helper death or timeout, shutdown.
  int failure_errno = EPERM;
  // The replay book each helper notes its outcomes in (replay_book_file.hpp; borrowed, lives
  // longer than the pool). Null: helpers keep no notes (restarted calls are done again).
  ReplayBookFile* replay_book = nullptr;
};

struct NsHelperPoolStats {
  uint64_t helpers = 0;    // alive now
  uint64_t spawned = 0;    // since start
  uint64_t died = 0;       // exited without being asked to (crash, kill)
  uint64_t retried = 0;    // requests a dead helper had in hand, given to a fresh one
  uint64_t timed_out = 0;  // killed for exceeding request_timeout_ms
  uint64_t in_flight = 0;  // requests submitted and not completed
  uint64_t direct = 0;     // requests Submit sent straight to a ready helper
  uint64_t doorbells = 0;  // times a helper rang for the responses it posted (its ring)
};

// A request as the pool sends it: header fields except magic, version and tag, the strings, and
// the notify fd (the pool owns this copy and closes it on completion).
struct NsHelperJob {
  nshelper::Request header = {};
  std::string strings[4];
  int notify_fd = -1;
  uint64_t owner = 0;
  // Completion, run on the pool thread exactly once. `internal_err` != 0 means no helper answered
  // (spawn failed, it died, timed out, the pool stopped); the response then says whether the
  // pool answered the notification itself (kAnswered, err = failure_errno) when kRespond was set.
  std::function<void(const nshelper::Response& response, int internal_err, uint64_t latency_ns)> done;
  // Known without a helper (bad arguments): completed on the pool thread as if a helper had
  // answered `response`, including its NOTIF_SEND when kRespond is set and notify_fd is given.
  bool precomputed = false;
  nshelper::Response response = {};
};

class NsHelperPool {
 public:
  // Starts the pool thread. Returns nullptr and sets *error when it cannot (no helper binary...).
  static std::unique_ptr<NsHelperPool> Start(const NsHelperPoolOptions& options, std::string* error);
  ~NsHelperPool();

  // Any thread. Takes ownership of job.notify_fd. The done callback runs on the pool thread.
  void Submit(NsHelperJob job);
  // Any thread. The container `owner` is gone: helpers no other owner uses exit.
  void Forget(uint64_t owner);
  // Any thread. Kills every helper, fails queued requests with ECANCELED (answered with the
  // failure errno), joins. Idempotent. `let_go` (this data plane handed over to a successor, which
  // has the journal): nothing is killed or answered; a helper carrying a request finishes it
  // (answers its target) and exits, the rest die with this thread (their death signal), and the
  // successor decides what none of them did (predecessor_emulations.hpp).
  void Stop(bool let_go = false);
  NsHelperPoolStats Stats() const;

 private:
  static constexpr size_t kWindow = 8;  // requests sent ahead to one kept helper (it works serially)
  static_assert(nshelper::kReplySlots >= 2 * kWindow, "a helper's reply ring holds every response it can owe");

  struct Pending {
    NsHelperJob job;
    uint64_t tag = 0;
    uint64_t submitted_ns = 0;
    uint64_t sent_ns = 0;
    uint64_t key = 0;
    bool retried = false;  // its first helper died with it: a second death fails it
  };
  struct Helper {
    uint64_t id = 0;
    uint64_t key = 0;
    pid_t pid = -1;
    int pidfd = -1;
    int sock = -1;
    bool retiring = false;  // asked to exit (socket closed or killed): not given new work
    int partition = -1;     // its replay book partition (-1: none)
    uint64_t last_used_ns = 0;
    std::deque<Pending> in_flight;  // sent, answered in order
    NsHelperReplies replies;        // where it posts its responses (it rings the socket)
    std::deque<Pending> backlog;    // waiting for the window
    std::set<uint64_t> owners;
  };

  explicit NsHelperPool(const NsHelperPoolOptions& options);
  bool Init(std::string* error);
  static void* ThreadMain(void* self);
  void Run();
  void Wake();
  bool SendDirect(Pending& p);
  void Publish(Helper* helper);
  void Reclaim(Helper* helper);
  void AdoptDirectSent(Helper* helper);
  void Adopt(Helper* helper, Pending pending);
  void DrainSubmissions(bool timer_fired);
  uint64_t MountNamespaceOf(uint64_t owner, pid_t pid);
  void Route(Pending pending);
  Helper* Spawn(uint64_t key, int* err);
  void Pump(Helper* helper);
  void OnReadable(Helper* helper);
  using Answered = std::vector<std::pair<Pending, nshelper::Response>>;
  void TakeReplies(Helper* helper, bool broken);
  bool MatchPosted(Helper* helper, Answered* answered);
  void CompletePosted(Helper* helper);
  void OnExit(Helper* helper);
  void Retire(Helper* helper, bool kill);
  void FailAll(Helper* helper, int err);
  void Complete(Pending& pending, const nshelper::Response& response, int internal_err);
  void CheckTimers(uint64_t now);
  void ProcessForgotten();
  void RetryWaiting();
  int NextTimeoutMs(uint64_t now) const;

  const NsHelperPoolOptions options_;
  int epoll_ = -1;
  int wake_ = -1;   // eventfd: submissions, forgets and stop
  int timer_ = -1;  // timerfd: the earliest timeout of a request sent directly, not yet adopted
  pthread_t thread_{};
  bool joinable_ = false;  // the pool thread was started (JS thread writes it in Init, Stop reads it)
  std::atomic<bool> stopping_{false};
  std::atomic<bool> letting_go_{false};
  std::atomic<bool> stopped_{false};

  // A published helper: its id, its socket (open while published: the pool thread unpublishes
  // under mutex_ before it closes the socket or sends on it) and the room left in its window.
  struct Ready {
    uint64_t helper_id = 0;
    int sock = -1;
    size_t room = 0;
  };
  struct DirectSent {
    uint64_t helper_id = 0;
    Pending pending;
  };

  mutable std::mutex mutex_;  // guards the seven below
  bool closed_ = false;       // the pool thread has finished: Submit completes inline
  std::vector<Pending> submitted_;
  std::vector<uint64_t> forgotten_;
  uint64_t next_tag_ = 1;
  std::map<uint64_t, Ready> ready_;       // by mount namespace inode: idle kept helpers
  std::vector<DirectSent> direct_sent_;   // sent by Submit, not yet in their helper's in_flight
  uint64_t timer_armed_ns_ = 0;           // when timer_ fires (0: not armed, or it fired)
  std::atomic<size_t> ready_count_{0};    // ready_.size(), read without the lock

  MountNamespaceCache mount_keys_;  // its own lock: Submit reads it before taking mutex_

  // Pool thread only.
  std::map<uint64_t, std::unique_ptr<Helper>> helpers_;  // by helper id
  std::map<uint64_t, Helper*> kept_by_key_;              // kept mode: by mount namespace inode
  std::deque<Pending> waiting_;                          // no helper slot free
  std::vector<uint64_t> forgotten_taken_;               // taken from forgotten_ by DrainSubmissions
  uint64_t next_helper_id_ = 1;

  std::atomic<uint64_t> stat_helpers_{0}, stat_spawned_{0}, stat_died_{0}, stat_timed_out_{0}, stat_in_flight_{0},
      stat_retried_{0}, stat_direct_{0}, stat_doorbells_{0};
};

}  // namespace seccomp_agent
