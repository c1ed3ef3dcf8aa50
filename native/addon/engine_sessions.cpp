// Control plane sessions as the engine knows them: open, active, closed; their decision channels
// (bound by a Hello's token, on the engine thread); and the two ways a decision arrives, respond()
// from JS and Decision frames from the channel. Both are checked by decision_check.hpp and
// answered by the pending table.
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "decision_check.hpp"
#include "engine.hpp"
#include "engine_names.hpp"

namespace seccomp_agent {
namespace {

// Compares two session tokens in time independent of where they differ.
bool TokenEquals(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (int i = 0; i < 16; i++) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

// Any thread, under mu_.
bool Engine::OwnerReleased(PendingOwner* owner) { return ReportIfDrainedLocked(static_cast<Session*>(owner)); }

// Any thread, under mu_.
bool Engine::ReportIfDrainedLocked(Session* session) {
  if (session->owned != 0 || session == active_ || session->drained_reported) return false;
  // A handover can end this session now: nothing of it is left to answer.
  session->drained_reported = true;
  Event event;
  event.type = EventType::kSessionDrained;
  event.session = session->id;
  queue_->Push(event, true);
  return true;
}

// Any thread.
void Engine::PushDropped(uint64_t session, uint32_t handle, uint64_t id, DropReason reason) {
  decisions_dropped_.fetch_add(1, std::memory_order_relaxed);
  Event event;
  event.type = EventType::kDecisionDropped;
  event.session = session;
  event.handle = handle;
  event.id = id;
  event.drop_reason = reason;
  queue_->Push(event, false);
}

// JS thread.
bool Engine::ListenChannel(const std::string& path, unsigned mode, std::string* error) {
  if (stopped_) {
    *error = "the engine is stopped";
    return false;
  }
  return channel_->Listen(path, mode, error);
}

// JS thread.
bool Engine::OpenSession(uint64_t session, const uint8_t token[16], std::string* error) {
  session_opened_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  if (sessions_.count(session) != 0) {
    *error = "session " + std::to_string(session) + " is already open";
    return false;
  }
  for (const auto& entry : sessions_) {
    if (TokenEquals(entry.second->token, token)) {
      *error = "session " + std::to_string(entry.first) + " already has this token; each session needs its own";
      return false;
    }
  }
  auto s = std::make_unique<Session>();
  s->id = session;
  memcpy(s->token, token, sizeof s->token);
  sessions_.emplace(session, std::move(s));
  return true;
}

// JS thread.
bool Engine::SetActiveSession(uint64_t session) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Session* next = nullptr;
    if (session != 0) {
      auto it = sessions_.find(session);
      if (it == sessions_.end()) return false;
      next = it->second.get();
    }
    Session* previous = active_;
    active_ = next;
    active_session_.store(session, std::memory_order_release);
    journal_->SetControlPlaneAttached(next != nullptr);
    if (next != nullptr) {
      next->drained_reported = false;
      hold_until_ns_.store(0, std::memory_order_relaxed);
      // What waited for a control plane goes to this one (through JS: its channel comes later).
      pending_.GiveHeldTo(next, [this, next](const PendingEntry& entry, const HeldStrings& held) {
        Event forwarded = NotificationEvent(entry.notification);
        forwarded.string_count = held.count;
        for (uint8_t k = 0; k < held.count; k++) forwarded.strings[k] = held.strings[k];
        forwarded.forwarded = true;
        forwarded.via_channel = false;
        forwarded.session = next->id;
        queue_->Push(forwarded, held.blob.data(), held.blob.size(), true);
      });
    }
    // One that owned nothing when it stopped being active is drained already.
    if (previous != nullptr) ReportIfDrainedLocked(previous);
  }
  queue_->Flush();
  return true;
}

// JS thread.
size_t Engine::CloseSession(uint64_t session) {
  if (stopped_) return 0;
  size_t count = 0;
  bool has_channel = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = sessions_.find(session);
    if (found == sessions_.end()) return 0;
    Session* s = found->second.get();
    if (active_ == s) {
      active_ = nullptr;
      active_session_.store(0, std::memory_order_release);
      journal_->SetControlPlaneAttached(false);
    }
    // Closed, not drained: no 'session-drained' for what this answers.
    s->drained_reported = true;
    if (s->owned > 0 && !handed_over_) {  // handed over: the successor answers them
      count = pending_.SettleOwnedBy(s, DefaultAction(), &js_buffers_, [this](const PendingTable::Answered& a) {
        PushSettled(a, AnsweredBy::kDetached, true);
      });
    }
    if (s->channel != nullptr) {
      // The connection belongs to the engine thread: it closes it ('channel' closed, 'session closed').
      close_requests_.push_back(session);
      close_requested_.store(true, std::memory_order_release);
      has_channel = true;
    }
    sessions_.erase(found);
  }
  if (has_channel) {
    WakeThread();
  }
  queue_->Flush();
  return count;
}

// Any thread.
size_t Engine::SessionPending(uint64_t session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(session);
  return it == sessions_.end() ? 0 : it->second->owned;
}

// Engine thread.
void Engine::CloseRequestedChannels() {
  std::vector<uint64_t> sessions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions.swap(close_requests_);
    close_requested_.store(false, std::memory_order_relaxed);
  }
  for (uint64_t session : sessions) channel_->CloseSession(session, "session closed");
}

// Engine thread: a Hello. At most one connection per session; a closed one may be replaced.
uint64_t Engine::BindChannel(ChannelConn* conn, const uint8_t* token, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& entry : sessions_) {
    Session* s = entry.second.get();
    if (!TokenEquals(s->token, token)) continue;
    if (s->channel != nullptr) {
      *why = "its Hello carried the token of session " + std::to_string(s->id) +
             ", which already has a decision channel; refused it";
      return 0;
    }
    s->channel = conn;
    return s->id;
  }
  *why = "its Hello carried a token of no open session";
  return 0;
}

// Engine thread: the session's notifications go to JS events from now on; what it owns stays pending.
void Engine::UnbindChannel(ChannelConn* conn, uint64_t session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(session);
  if (it != sessions_.end() && it->second->channel == conn) it->second->channel = nullptr;
}

// Engine thread: one read's decisions, under one hold of mu_. A decision the check refuses for
// its answer (bad errno, bad kind) is never left hanging: the default answers it at once.
void Engine::ApplyDecisions(ChannelConn* conn, uint64_t session, const decision_channel::DecisionBody* decisions,
                            size_t count) {
  (void)conn;
  channel_decisions_.fetch_add(count, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  const Answer fallback = DefaultAction();
  AnsweredBy by = AnsweredBy::kControlPlane;
  // Made once per read (it captures no more than std::function holds without allocating).
  const PendingTable::Report report = [this, &by](const PendingTable::Answered& a) {
    const Notification& n = a.entry.notification;
    if (a.result == SendResult::kFailed) {
      queue_->PushError("NOTIF_SEND of a channel decision for notification " + std::to_string(n.id) + " of container " +
                        std::to_string(n.handle) + " failed: " + ErrnoText(a.err) + "; answered it with the default action");
    }
    PushAnswered(n.handle, n.id, by, a.sent, a.result, a.latency_ns, false);
  };
  for (size_t i = 0; i < count; i++) {
    const decision_channel::DecisionBody& d = decisions[i];
    const PendingEntry* entry = nullptr;
    DecisionReason reason = CheckPending(pending_, d.handle, d.id, session, &entry);
    if (reason != DecisionReason::kOk) {
      PushDropped(session, d.handle, d.id, DropReasonOf(reason));
      continue;
    }
    Answer answer = fallback;
    reason = ChannelAnswer(d, &answer);
    if (reason != DecisionReason::kOk) PushDropped(session, d.handle, d.id, DropReasonOf(reason));
    by = reason == DecisionReason::kOk ? AnsweredBy::kControlPlane : AnsweredBy::kNoControlPlane;
    pending_.Settle(d.handle, d.id, answer, fallback, &primary_->buffers, &report);
  }
}

// JS thread.
Engine::RespondStatus Engine::ExtendDeadline(uint32_t handle, uint64_t id, uint64_t hold_ns, uint64_t session) {
  if (handed_over_) return RespondStatus::kUnknown;
  std::lock_guard<std::mutex> lock(mu_);
  const PendingEntry* entry = nullptr;
  const DecisionReason reason = CheckPending(pending_, handle, id, session, &entry);
  if (reason != DecisionReason::kOk) return reason == DecisionReason::kLate ? RespondStatus::kLate : RespondStatus::kUnknown;
  pending_.Extend(handle, id, MonotonicNs() + hold_ns + decision_timeout_ns_.load(std::memory_order_relaxed));
  return RespondStatus::kOk;
}

Engine::RespondStatus Engine::Respond(uint32_t handle, uint64_t id, const Answer& answer, uint64_t session,
                                      uint64_t* latency_ns) {
  *latency_ns = 0;
  if (handed_over_) return RespondStatus::kUnknown;  // the successor answers everything now
  PendingTable::Answered a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const PendingEntry* entry = nullptr;
    DecisionReason reason = CheckPending(pending_, handle, id, session, &entry);
    if (reason == DecisionReason::kOk) reason = CheckAnswer(answer);
    if (reason != DecisionReason::kOk && reason != DecisionReason::kBadErrno && reason != DecisionReason::kBadKind) {
      decisions_dropped_.fetch_add(1, std::memory_order_relaxed);
      return reason == DecisionReason::kLate ? RespondStatus::kLate : RespondStatus::kUnknown;
    }
    // A bad answer (the binding's parsing refuses them first) is never left hanging: the default.
    a = pending_.Settle(handle, id, reason == DecisionReason::kOk ? answer : DefaultAction(), DefaultAction(),
                        &js_buffers_);
    *latency_ns = a.latency_ns;
  }
  if (a.drained) queue_->Flush();
  if (a.result == SendResult::kOk) return RespondStatus::kOk;
  if (a.result == SendResult::kGone) return RespondStatus::kGone;
  queue_->PushError("NOTIF_SEND of a decision for notification " + std::to_string(id) + " of container " +
                    std::to_string(handle) + " failed: " + ErrnoText(a.err) + "; answered it with the default action");
  queue_->Flush();
  return RespondStatus::kUnknown;
}

}  // namespace seccomp_agent

