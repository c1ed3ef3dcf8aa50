// The emulated actions the data plane performs for the control plane: mkdir/mkdirat and mount
// inside a target's mount namespace, root and cwd (through the helper processes of
// nshelper_pool.hpp), kill-container through a pidfd, freeze and thaw of the container's cgroup.
// Pure C++ (no N-API): the engine calls this directly with the notify fd it owns; the JS binding
// (test/cmd/emulator-addon, a test-only addon) is a thin shell over it for tests and the bench.
// See docs/emulation.md.
#pragma once
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace seccomp_agent {

class NsHelperPool;
class ReplayBookFile;

// The notification an action is for. notify_fd is borrowed for the duration of the call: what the
// emulator keeps, it dups. Every action re-checks NOTIF_ID_VALID after opening the target's /proc
// files and before acting, so a stale id or a reused pid gets kStale and nothing is done.
struct NotificationRef {
  int notify_fd = -1;
  uint64_t id = 0;
  pid_t pid = 0;       // the notifying task, as NOTIF_RECV reported it
  uint64_t owner = 0;  // the engine's container handle; Forget(owner) releases its helper
  // The notification's syscall and arguments: a helper tells the call a signal restarted by them
  // (nshelper_replay.hpp). nr 0 (not known) turns that off.
  uint32_t nr = 0;
  uint32_t arch = 0;
  uint64_t args[6] = {};
};

// The arguments of a path call (mkdir, and each emulation of that shape in emulation_table.hpp).
struct MkdirArgs {
  int dirfd = AT_FDCWD;  // mkdirat: the target's own fd number (args[0]); mkdir: AT_FDCWD
  std::string path;      // as the target would pass it (the control plane may have rewritten it)
  uint32_t mode = 0777;  // before the target's umask
};

struct MountArgs {
  std::string source, target, fstype, data;
  uint64_t flags = 0;  // MS_*; bind, move, remount and propagation changes are refused (EPERM)
  bool require_cap_sys_admin = false;
};

struct KillArgs {
  // The container's init. With its own pid namespace, init is found from the target itself
  // (pid 1 there) and init_pid is ignored; in the host pid namespace init_pid is required and
  // must share the target's mount namespace. init_pidfd, when the engine holds one, wins.
  pid_t init_pid = 0;
  int init_pidfd = -1;  // borrowed
  int signal = SIGKILL;
};

enum class ActionOutcome {
  kDone,     // acted: err is the result the target's syscall gets (0 or an errno)
  kStale,    // the notification is no longer pending (or the target is gone): nothing was done
  kRefused,  // a safety rule refused it (outside the root, host cgroup, capability check): err = EPERM
  kFailed,   // the emulator could not act (helper spawn, death, timeout, stop): cause says why
};

struct ActionResult {
  ActionOutcome outcome = ActionOutcome::kFailed;
  // The errno the target's syscall gets (0: success). kFailed: EmulatorOptions::failure_errno.
  int err = 0;
  // Why it was not done (kStale: ENOENT/ESRCH; kFailed: ETIMEDOUT, EIO, ECANCELED, a spawn errno).
  int cause = 0;
  // respond=true only: the notification was answered with `err` (by the helper, or by the
  // emulator when no helper could). False with kStale, or when NOTIF_SEND failed (send_err:
  // ENOENT, the target died meanwhile). The engine never needs to answer a respond=true call.
  bool answered = false;
  int send_err = 0;
  const char* stage = "";    // "done", "stale", "resolve", "outside-root", ... (static string)
  std::string detail;        // freeze/thaw: the control file written; refusals: why
  uint64_t latency_ns = 0;   // from the call to the result
  uint64_t helper_ns = 0;    // time spent inside the helper
  // The call was one a signal restarted after its first notification had been emulated: answered
  // with that outcome, nothing done again (nshelper_replay.hpp).
  bool replayed = false;
  // Its first helper died with it in hand; a fresh one served it (NsHelperPool::OnExit).
  bool retried = false;
  // How the target waited while the helper worked ('D' killable: its filter has
  // WAIT_KILLABLE_RECV; 'S' interruptible: it has not); 0 when not seen.
  char target_wait = 0;
};

using ActionDone = std::function<void(const ActionResult&)>;

struct EmulatorOptions {
  std::string helper_path;  // build/Release/seccomp-nshelper
  bool spawn_per_call = false;
  size_t max_helpers = 64;
  uint32_t request_timeout_ms = 10000;
  uint32_t idle_timeout_ms = 60000;
  uint32_t busy_poll_us = 0;  // NsHelperPoolOptions::busy_poll_us
  int failure_errno = EPERM;  // answer when no helper could act (respond=true)
  ReplayBookFile* replay_book = nullptr;  // NsHelperPoolOptions::replay_book
};

struct EmulatorStats {
  uint64_t helpers = 0, spawned = 0, died = 0, timed_out = 0, in_flight = 0, retried = 0;
};

class Emulator {
 public:
  // Starts the helper pool's thread (no helper yet: they start on first use). nullptr + *error
  // when the helper binary is missing.
  static std::unique_ptr<Emulator> Create(const EmulatorOptions& options, std::string* error);
  ~Emulator();

  // Any thread. `done` runs exactly once on the emulator's thread (inline, kFailed/ECANCELED, after
  // Stop). respond=true: the notification is answered by the emulator (the helper sends -err right
  // after acting, so the target wakes without a hop back; failure_errno when no helper could act),
  // and the engine only records the result. respond=false: the engine answers with result.err.
  void Mkdir(const NotificationRef& ref, const MkdirArgs& args, bool respond, ActionDone done);
  // Any thread. A helper operation `op` (nshelper::Op) of the path-call shape (mkdir and those
  // like it, emulation_table.hpp): a dirfd, a path and a mode. Mkdir is PathCall(kOpMkdir, ...).
  void PathCall(uint16_t op, const NotificationRef& ref, const MkdirArgs& args, bool respond, ActionDone done);
  void Mount(const NotificationRef& ref, const MountArgs& args, bool respond, ActionDone done);
  // Any thread. The container is gone (its notify fd hung up): its helper exits.
  void Forget(uint64_t owner);
  // Any thread. Kills the helpers, fails what is queued (ECANCELED), joins. Idempotent.
  // `let_go`: after a handoff, nothing killed or answered (NsHelperPool::Stop).
  void Stop(bool let_go = false);
  EmulatorStats Stats() const;

 private:
  Emulator() = default;
  std::unique_ptr<NsHelperPool> pool_;
  int failure_errno_ = EPERM;
};

// Synchronous, any thread, no fork: a few /proc reads, one ioctl, one pidfd call or one write.
// answer_errno > 0: the notification is then answered with that errno (refusals with EPERM), so
// the engine only records the result, as with respond=true; 0: the engine answers it.
ActionResult KillContainer(const NotificationRef& ref, const KillArgs& args, int answer_errno = 0);
// Freezes the target's cgroup: cgroup v2 `cgroup.freeze` when the target has a non-root v2
// cgroup, else the v1 freezer's `freezer.state`. Refuses a root cgroup and any cgroup that holds
// the data plane itself. The answer, when asked, is sent after the freeze: the target never runs
// past the call unfrozen. The v1 freezer interrupts the notified syscall at once (send_err ENOENT):
// it restarts when thawed and is notified again.
ActionResult FreezeContainer(const NotificationRef& ref, int answer_errno = 0);
// Thaws the cgroup FreezeContainer would pick for `pid` (operators and tests; no notification).
ActionResult ThawContainer(pid_t pid);

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

const char* OutcomeName(ActionOutcome outcome);

}  // namespace seccomp_agent
