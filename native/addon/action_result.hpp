// The request and the result every container action shares (the emulator's helper calls, kill and
// freeze): which notification it is for, what came of it, and the two steps each action takes
// (re-check the notification, time the result). Pure C++ (no N-API); see docs/emulation.md.
#pragma once
#include <stdint.h>
#include <sys/types.h>

#include <functional>
#include <string>

namespace seccomp_agent {

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
  // The helper answers the target and nobody waits for its response (a rule's emulation): the
  // helper may ring for it with later ones (nshelper_protocol.h, kReplyMayWait).
  bool reply_may_wait = false;
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

const char* OutcomeName(ActionOutcome outcome);

// Any thread. A result of `outcome` with `err` (also its cause when stale or failed), its stage and
// detail, and its latency since `start` (MonotonicNs).
ActionResult MakeActionResult(ActionOutcome outcome, int err, const char* stage, uint64_t start, std::string detail = "");

// Any thread. Whether the notification still waits for its answer (NOTIF_ID_VALID).
bool StillPending(const NotificationRef& ref);

}  // namespace seccomp_agent
