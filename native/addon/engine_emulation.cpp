// Emulated decisions (docs/emulation.md): the control plane asks the engine to do the syscall's
// work for the target (mkdir, mount: a helper process in the target's mount namespace) or to act
// on its container (kill, freeze: the action worker's thread). The notification leaves the pending
// table when the executor takes it; the executor answers it; its result comes back as an
// 'answered' event. No executor (a helper binary missing, a thread that could not start): the
// failure errno answers at once and an error event says why; never an abort.
#include <fcntl.h>
#include <string.h>

#include "decision_check.hpp"
#include "engine.hpp"
#include "engine_names.hpp"
#include "path_args.h"

namespace seccomp_agent {
namespace {

// The errno an emulation that could not run answers with (never ENOSYS: that reads as "no agent").
constexpr int kEmulationFailureErrno = EPERM;
// Containers whose target waits are kept at most (TargetWaits).
constexpr size_t kMaxTargetWaits = 65536;
// A helper binary that could not be started is tried again after this long.
constexpr uint64_t kEmulatorRetryNs = 10000000000ull;

std::string HexText(uint32_t value) {
  char text[16];
  snprintf(text, sizeof text, "0x%x", value);
  return text;
}

}  // namespace

// JS thread. Takes the notification out of the pending table and hands it to its executor.
Engine::RespondStatus Engine::RespondEmulated(uint32_t handle, uint64_t id, const EmulatedDecision& decision,
                                              uint64_t session, uint64_t* latency_ns, std::string* error) {
  *latency_ns = 0;
  if (stopped_ || handed_over_) return RespondStatus::kUnknown;
  {
    // An id no longer pending (or not this session's) starts nothing (no helper, no error about one).
    std::lock_guard<std::mutex> lock(mu_);
    const PendingEntry* entry = nullptr;
    DecisionReason reason = CheckPending(pending_, handle, id, session, &entry);
    if (reason != DecisionReason::kOk) {
      decisions_dropped_.fetch_add(1, std::memory_order_relaxed);
      return reason == DecisionReason::kLate ? RespondStatus::kLate : RespondStatus::kUnknown;
    }
  }
  const EmulationRow* row = EmulationOf(decision.kind);
  if (row == nullptr) return RespondStatus::kUnknown;  // binding_args parses only the table's kinds
  const bool running = EnsureExecutor(*row);
  bool drained = false;
  bool failed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const PendingEntry* found = nullptr;
    if (CheckPending(pending_, handle, id, session, &found) != DecisionReason::kOk) {
      return RespondStatus::kUnknown;  // answered by its deadline meanwhile (or its session closed)
    }
    const Notification& n = found->notification;
    if (CheckEmulation(decision.kind, n) != DecisionReason::kOk) {
      const char* name = SyscallNameOf(n.arch, n.nr);
      *error = std::string("an emulated ") + row->title + " answers only " + EmulatedSyscallNames(*row, " and ") +
               " notifications (of any ABI); notification " + std::to_string(id) + " of container " + std::to_string(handle) +
               " is " + AbiName(AbiOf(n.arch, n.nr)) + " syscall " + (name != nullptr ? name : std::to_string(n.nr)) +
               " (arch " + HexText(n.arch) + ", nr " + std::to_string(n.nr) + "); it stays pending";
      return RespondStatus::kWrongSyscall;
    }
    if (!running) {
      // No executor: the failure errno, now (the take/answer/release of every other answer).
      Answer answer;
      answer.kind = Answer::kError;
      answer.error = kEmulationFailureErrno;
      const PendingTable::Answered a = pending_.Settle(handle, id, answer, answer, &js_buffers_);
      *latency_ns = a.latency_ns;
      drained = a.drained;
      failed = true;
      PushAnswered(handle, id, AnsweredBy::kControlPlane, answer, a.result, a.latency_ns, true, Unseen(), -1, decision.kind);
      if (a.result == SendResult::kFailed) {
        queue_->PushError("NOTIF_SEND of EPERM for the emulated " + std::string(EmulatedTitle(decision.kind)) +
                          " of notification " + std::to_string(id) + " of container " + std::to_string(handle) +
                          " failed: " + ErrnoText(a.err));
      }
    } else {
      const PendingEntry entry = pending_.Take(handle, id, &drained);
      *latency_ns = Elapsed(entry.notification.received_ns, MonotonicNs());
      DispatchEmulationLocked(entry, decision, AnsweredBy::kControlPlane, -1, Unseen());
    }
  }
  if (failed || drained) queue_->Flush();
  return RespondStatus::kAccepted;
}

// Under mu_ (the fd is borrowed: the executors dup it).
NotificationRef Engine::EmulationRefLocked(int notify_fd, const Notification& n, const EmulationRow& row, uint32_t journal_slot) {
  NotificationRef ref;
  ref.notify_fd = notify_fd;
  ref.id = n.id;
  ref.pid = static_cast<pid_t>(n.pid);
  ref.owner = n.handle;
  ref.nr = n.nr;
  ref.arch = n.arch;
  for (int i = 0; i < 6; i++) ref.args[i] = n.args[i];
  if (row.executor == EmulationExecutor::kHelperPool && journal_ != nullptr) {
    journal_->MarkWithHelper(journal_slot, n.id);
  }
  return ref;
}

// JS thread. The emulator's thread and helpers start on the first mkdir or mount; a helper binary
// that is missing (or a pool thread that cannot start: pthread_create's errno) is looked for again
// after kEmulatorRetryNs, not on every decision.
Emulator* Engine::EnsureEmulator() {
  if (emulator_ != nullptr) return emulator_.get();  // written only on this thread
  uint64_t now = MonotonicNs();
  if (emulator_failed_ns_ != 0 && now - emulator_failed_ns_ < kEmulatorRetryNs) return nullptr;
  std::string error = "no helperPath was given";
  std::unique_ptr<Emulator> emulator;
  if (!options_.helper_path.empty()) {
    EmulatorOptions o;
    o.helper_path = options_.helper_path;
    o.failure_errno = kEmulationFailureErrno;
    o.busy_poll_us = static_cast<uint32_t>(options_.busy_poll_ns / 1000);
    o.replay_book = replay_book_.get();
    emulator = Emulator::Create(o, &error);
  }
  if (emulator == nullptr) {
    emulator_failed_ns_ = now;
    queue_->PushError("cannot start the emulation helper (" + error +
                      "): emulated mkdir and mount decisions are answered " + ErrnoText(kEmulationFailureErrno) +
                      " (EPERM); trying again on the first one after " + std::to_string(kEmulatorRetryNs / 1000000000ull) +
                      " s");
    return nullptr;
  }
  emulator_failed_ns_ = 0;
  std::lock_guard<std::mutex> lock(mu_);
  emulator_ = std::move(emulator);
  return emulator_.get();
}

// JS thread. Its thread is made with pthread_create: a failure is an error event and an EPERM
// answer, never an abort.
ActionWorker* Engine::EnsureActionWorker() {
  if (action_worker_ != nullptr) return action_worker_.get();  // written only on this thread
  std::string error;
  std::unique_ptr<ActionWorker> worker = ActionWorker::Start(kEmulationFailureErrno, &error);
  if (worker == nullptr) {
    queue_->PushError("cannot start the thread for kill-container and freeze-container (" + error +
                      "): this decision is answered EPERM; trying again on the next one");
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  action_worker_ = std::move(worker);
  return action_worker_.get();
}

// JS thread: the executor of `row` (started on first use); false when it is not running.
bool Engine::EnsureExecutor(const EmulationRow& row) {
  return row.executor == EmulationExecutor::kHelperPool ? EnsureEmulator() != nullptr : EnsureActionWorker() != nullptr;
}

// Under mu_.
bool Engine::ExecutorRunningLocked(const EmulationRow& row) const {
  return row.executor == EmulationExecutor::kHelperPool ? emulator_ != nullptr : action_worker_ != nullptr;
}

// Under mu_: the one dispatch. `entry` is out of the pending table (or, for a rule, never was in
// it); its notification goes to its row's executor, which answers it; OnEmulated reports and
// releases entry.journal_slot. The caller checked that the executor runs.
void Engine::DispatchEmulationLocked(const PendingEntry& entry, const EmulatedDecision& decision, AnsweredBy by,
                                     int32_t rule, Unseen unseen) {
  const EmulationRow* row = EmulationOf(decision.kind);
  const Notification& n = entry.notification;
  const uint32_t handle = entry.target->handle;
  // Borrowed under mu_: the executors dup it. A helper's row marks the journal slot first.
  NotificationRef ref = EmulationRefLocked(entry.target->fd, n, *row, entry.journal_slot);
  // A rule's result is only recorded (its event rides the batch); JS waits for its own decision's.
  ref.reply_may_wait = by == AnsweredBy::kFastPath;
  const EmulatedKind kind = decision.kind;
  const uint64_t id = n.id;
  const uint64_t received = n.received_ns;
  const uint32_t slot = entry.journal_slot;
  // Runs on the executor's thread; takes only the queue's and the journal's locks, never mu_.
  ActionDone done = [this, handle, id, kind, received, slot, by, rule, unseen](const ActionResult& r) {
    OnEmulated(handle, id, kind, received, slot, r, by, rule, unseen);
  };
  switch (row->shape) {
    case EmulationShape::kPathCall: {
      // The dirfd is always the notification's own (its row says which argument), never the decision's.
      MkdirArgs args = decision.mkdir;
      const EmulatedCall* call = EmulatedCallOf(*row, CanonicalNr(n.arch, n.nr));
      args.dirfd = call != nullptr && call->dirfd >= 0 ? static_cast<int>(static_cast<int32_t>(n.args[call->dirfd])) : AT_FDCWD;
      emulator_->PathCall(row->helper_op, ref, args, /*respond=*/true, std::move(done));
      break;
    }
    case EmulationShape::kMount:
      emulator_->Mount(ref, decision.mount, /*respond=*/true, std::move(done));
      break;
    case EmulationShape::kKill: {
      KillArgs args = decision.kill;
      args.init_pidfd = -1;
      action_worker_->Kill(ref, args, decision.error, std::move(done));
      break;
    }
    case EmulationShape::kFreeze:
      action_worker_->Freeze(ref, decision.error, std::move(done));
      break;
  }
}

// Emulator or action-worker thread: reports the result (at once when JS waits for it: its own
// decision). The executor answered the notification; this releases its journal slot (the release
// of its take/answer/release).
void Engine::OnEmulated(uint32_t handle, uint64_t id, EmulatedKind kind, uint64_t received_ns, uint32_t journal_slot,
                        const ActionResult& r, AnsweredBy by, int32_t rule, Unseen unseen) {
  pending_.ReleaseSlot(journal_slot);
  if (r.replayed) emulations_replayed_.fetch_add(1, std::memory_order_relaxed);
  if (r.target_wait != 0) {
    std::lock_guard<std::mutex> lock(waits_mu_);
    // An answer can come after its container's removal: bounded all the same (TargetWaits prunes).
    if (target_waits_.size() >= kMaxTargetWaits) target_waits_.clear();
    // Killable, once seen, stays: with WAIT_KILLABLE_RECV the kernel wakes the task at RECV to
    // sleep again killably, so a helper quick enough reads it still interruptible ('S') in between;
    // a task of a filter without the flag never waits killably ('D') for its notification.
    char& seen = target_waits_[handle];
    if (seen != 'D') seen = r.target_wait;
  }
  const bool gone = r.outcome == ActionOutcome::kStale || (!r.answered && r.send_err == ENOENT);
  // mkdir, mount: what the syscall returned. kill, freeze: 0 when the container was killed or
  // frozen (its syscall got the decision's errno), else why not.
  bool acted = r.outcome == ActionOutcome::kDone && strcmp(r.stage, "done") == 0;
  const EmulationRow* row = EmulationOf(kind);
  const bool on_container = row != nullptr && row->executor == EmulationExecutor::kActionWorker;
  Answer action;
  action.kind = Answer::kError;
  action.error = on_container && acted ? 0 : r.err;
  // JS waits for the result of its own decision: that one goes at once. A rule's emulation was
  // decided natively, and its event rides the batch like the rule's other answers: a wake-up of
  // the JS thread per mkdir would sit on the next request's path (two vCPUs: the very next one).
  const bool urgent = by == AnsweredBy::kControlPlane;
  queue_->Push(AnsweredEvent(handle, id, by, action, gone, Elapsed(received_ns, MonotonicNs()), unseen, rule, kind), urgent);
  // The texts of an error only when there is one: most emulations report none.
  const auto what = [&] {
    return std::string("emulated ") + EmulatedTitle(kind) + " of notification " + std::to_string(id) + " of container " +
           std::to_string(handle);
  };
  const auto got = [&] { return r.answered ? "; its syscall got " + ErrnoText(r.err) : std::string(); };
  if (r.retried) {
    queue_->PushError(what() + ": its emulation helper died with it in hand; a fresh helper served it" +
                      (r.outcome == ActionOutcome::kStale ? " and found it answered already (or its caller gone)"
                       : r.replayed                       ? " with what the dead one had done"
                                                          : "") +
                      got());
  }
  if (r.outcome == ActionOutcome::kFailed) {
    queue_->PushError(what() + " failed at stage " + r.stage + " (" + ErrnoText(r.cause) + ")" + got());
  } else if (r.outcome == ActionOutcome::kRefused && on_container) {
    queue_->PushError(what() + " refused: " + (r.detail.empty() ? r.stage : r.detail) + got());
  }
  // A kill that took its caller leaves nothing to answer and sends nothing (send_err 0): its success.
  const bool caller_killed = row != nullptr && row->shape == EmulationShape::kKill && acted && r.send_err == 0;
  if (!r.answered && !gone && !caller_killed) {
    queue_->PushError(what() + " could not be answered (NOTIF_SEND: " + ErrnoText(r.send_err) + ")");
  }
  if (urgent) {
    queue_->Flush();
  } else if (queue_->DueNs() < primary_->timer_armed_ns.load(std::memory_order_relaxed)) {
    // The engine thread flushes due batches; it may be asleep with no timer for this one.
    WakeThread();
  }
}

// Any thread but an executor's (it takes mu_): the waits of containers served now.
std::vector<std::pair<uint32_t, char>> Engine::TargetWaits() {
  std::lock_guard<std::mutex> lock(mu_);
  std::lock_guard<std::mutex> waits_lock(waits_mu_);
  std::vector<std::pair<uint32_t, char>> waits;
  for (auto it = target_waits_.begin(); it != target_waits_.end();) {
    if (containers_.count(it->first) == 0) {
      it = target_waits_.erase(it);
    } else {
      waits.push_back(*it++);
    }
  }
  return waits;
}

}  // namespace seccomp_agent
