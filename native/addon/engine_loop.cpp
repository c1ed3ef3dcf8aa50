// The engine thread: its loop (epoll, one timerfd for its timers, batches) and the hot path,
// RECV -> strings -> ID_VALID -> the container's rules or the default answer on the spot (an event,
// or while nobody watches a count in the tally), or pend (owned by the active session, or held for
// one that has not attached) and queue a channel frame and an event.
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "engine.hpp"
#include "engine_names.hpp"
#include "path_args.h"
#include "seccomp_compat.h"

namespace seccomp_agent {
namespace {

constexpr int kMaxEpollEvents = 64;
constexpr uint32_t kMaxRecvFailures = 1000;  // consecutive unexpected RECV errors before giving up a fd
// A visitor of lane 0 answered this many times in a row without asking goes home: a move costs an
// epoll_ctl on each side and a wake-up, so a container that asks now and then is not bounced.
constexpr uint32_t kGoHomeAfter = 32;
// How long lane 0 looks at the rings, between two polls, for a decision (docs/benchmarks.md,
// stop 31). It yields after every look: a poller that looks for a while before it yields keeps
// another container's woken thread waiting that long (stop 43: beside a bare C pair, a thread
// looking 3 µs between yields took the other container's p99 to 2.1×, one yielding after every
// look to 1.3–1.4×).
constexpr uint64_t kRingLookNs = 3000;

}  // namespace

// Engine thread.
void* Engine::ThreadMain(void* self) {
  pthread_setname_np(pthread_self(), "seccomp-engine");
  static_cast<Engine*>(self)->Run();
  return nullptr;
}

// Engine thread: the loop. Every fd it touches is non-blocking except the notify fds, which it
// RECVs only after epoll said readable. Flattened as OnNotifyReady is, and for the same reason:
// lane 0's hot path then has no frame but the loop's own under the SEND.
__attribute__((flatten)) void Engine::Run() {
  {
    std::lock_guard<std::mutex> lock(start_mu_);
    running_ = true;
  }
  start_cv_.notify_all();
  struct epoll_event events[kMaxEpollEvents];
  // The clock as the previous iteration ended: the wait's timeout is computed from it, a few
  // instructions later, rather than from one more read.
  uint64_t now = primary_->clock.Now();
  while (!stop_requested_.load(std::memory_order_relaxed)) {
    if (park_flag_.load(std::memory_order_acquire)) {
      ParkLane(primary_);
      now = primary_->clock.Now();
      continue;
    }
    const bool polling = busy_until_ns_ > now || primary_->poll_until_ns > now;
    const uint64_t wake = polling ? now : NextWakeNs();
    int timeout = WaitTimeoutMs(primary_, wake, now);
    // A control plane on shared-memory rings wakes a blocked engine thread only if told it blocks.
    const bool told_sleep = timeout != 0 && channel_->HasRings() && channel_->MaySleep();
    if (timeout != 0 && channel_->HasRings() && !told_sleep) timeout = 0;
    const int n = epoll_wait(primary_->epoll_fd, events, kMaxEpollEvents, timeout);
    // Awake again with decisions outstanding: they are polled for, not woken up for. Otherwise a
    // ring's sleep flag stays set (no store per wake-up): the control plane sends a wake-up only
    // with a decision, and notifications put in a ring clear the flag as they are flushed (FlushAll).
    if (told_sleep && busy_until_ns_ != 0) channel_->Awake();
    // Busy polling is for an idle CPU: a task runnable here (another container's lane, a workload)
    // runs first rather than waiting out the spin.
    // A decision put in a ring wakes no epoll: look at the rings for a moment first (a load each,
    // the CPU yielded between two).
    if (n == 0 && polling && !(channel_->HasRings() && AwaitRings())) sched_yield();
    if (n < 0) {
      if (errno == EINTR) continue;
      queue_->PushError("epoll_wait failed: " + ErrnoText(errno) + "; retrying in 10 ms");
      usleep(10000);
      continue;
    }
    for (int i = 0; i < n; i++) {
      EpollSource* source = static_cast<EpollSource*>(events[i].data.ptr);
      switch (source->kind) {
        case EpollSource::Kind::kContainer:
          OnNotifyReady(primary_, static_cast<Container*>(source), events[i].events);
          if (Orphaned()) return;  // a new thread serves lane 0: this one touches nothing more
          break;
        case EpollSource::Kind::kListener:
        case EpollSource::Kind::kConnection:
          ingest_->OnReady(source, events[i].events, MonotonicNs());
          break;
        case EpollSource::Kind::kChannelListener:
        case EpollSource::Kind::kChannelConn:
          channel_->OnReady(source, events[i].events, MonotonicNs());
          break;
        case EpollSource::Kind::kHandoffListener:
          AcceptHandoff();
          break;
        case EpollSource::Kind::kWake: {
          uint64_t value;
          while (read(primary_->wake_fd, &value, sizeof value) < 0 && errno == EINTR) {
          }
          break;
        }
        case EpollSource::Kind::kTimer: {
          uint64_t expirations;
          while (read(primary_->timer_fd, &expirations, sizeof expirations) < 0 && errno == EINTR) {
          }
          primary_->timer_armed_ns.store(UINT64_MAX, std::memory_order_relaxed);
          break;
        }
      }
    }
    if (primary_->has_inbox.load(std::memory_order_acquire)) TakeInbox(primary_);
    if (has_deferred_.load(std::memory_order_acquire)) DecideDeferred();
    // Decisions a control plane put in its ring (no epoll event says so: they are looked for).
    const bool ring_decisions = channel_->HasRings() && channel_->PollRings();
    // One write per channel for every frame this iteration produced.
    channel_->FlushAll();
    // Only while decisions are in flight: an iteration that forwarded none (the fast path, the
    // default) with none outstanding takes no lock here.
    if ((n > 0 || ring_decisions) && options_.busy_poll_ns != 0 && (busy_until_ns_ != 0 || forwarded_)) {
      forwarded_ = false;
      std::lock_guard<std::mutex> lock(mu_);
      busy_until_ns_ = pending_.empty() ? 0 : MonotonicNs() + options_.busy_poll_ns;
    }
    if (close_requested_.load(std::memory_order_acquire)) CloseRequestedChannels();
    now = primary_->answered_ns != 0 ? primary_->answered_ns : primary_->clock.Now();
    primary_->answered_ns = 0;
    if (pending_.NextDeadline() <= now) {
      // Forwarded notifications past their deadline get the default action.
      std::lock_guard<std::mutex> lock(mu_);
      pending_.ExpireDue(now, DefaultAction(), &primary_->buffers,
                         [this](const PendingTable::Answered& a) { PushSettled(a, AnsweredBy::kDeadline, true); });
    }
    if (ingest_->NextDeadline() <= now) ingest_->OnTimer(now);
    if (channel_->NextDeadline() <= now) channel_->OnTimer(now);
    // The counts go with the next batch, or on their own at the batch delay.
    if (!primary_->tally.empty() && (queue_->DueNs() <= now || TallyDueNs(*primary_) <= now)) DrainTally(primary_);
    queue_->Flush(now);
  }
  DrainTally(primary_);
  MarkEnded(primary_);
}

// Engine thread, busy polling: true as soon as a ring holds decisions, false after kRingLookNs.
bool Engine::AwaitRings() {
  const uint64_t until = MonotonicNs() + kRingLookNs;
  for (;;) {
    if (channel_->RingsHaveData()) return true;
    if (MonotonicNs() >= until) return false;
    sched_yield();
  }
}

// Engine thread. pending_.NextDeadline() is read without mu_: only this thread adds deadlines
// while it runs (Restore adds them before it starts), and the heap's top is only ever popped here.
uint64_t Engine::NextWakeNs() {
  uint64_t wake = std::min(queue_->DueNs(), TallyDueNs(*primary_));
  if (pending_.NextDeadline() < wake) wake = pending_.NextDeadline();
  if (ingest_->NextDeadline() < wake) wake = ingest_->NextDeadline();
  if (channel_->NextDeadline() < wake) wake = channel_->NextDeadline();
  return wake;
}

// The lane. 0 when `wake_ns` is due (or busy polling); else -1, with its timer_fd armed for it
// unless it is armed for an earlier time already (a wake-up that comes early only loops once).
int Engine::WaitTimeoutMs(Lane* lane, uint64_t wake_ns, uint64_t now_ns) {
  if (wake_ns <= now_ns) return 0;
  const uint64_t armed = lane->timer_armed_ns.load(std::memory_order_relaxed);
  if (wake_ns == std::numeric_limits<uint64_t>::max() || (armed > now_ns && armed <= wake_ns)) return -1;
  struct itimerspec spec;
  memset(&spec, 0, sizeof spec);
  spec.it_value.tv_sec = static_cast<time_t>(wake_ns / 1000000000ull);
  spec.it_value.tv_nsec = static_cast<long>(wake_ns % 1000000000ull);
  if (timerfd_settime(lane->timer_fd, TFD_TIMER_ABSTIME, &spec, nullptr) != 0) {
    // Cannot happen with a valid fd and time; the old way then: wake up in a millisecond and look.
    return 1;
  }
  lane->timer_armed_ns.store(wake_ns, std::memory_order_relaxed);
  return -1;
}

// A lane's thread (or the JS thread in Restore, before the engine thread runs, `lane` null). The
// path arguments of a notification of any ABI (i386's pointers are the low 32 bits:
// NotificationFromKernel masked them), read from the target into `buffer` (kLaneStringsBytes) as
// event->strings; kGone when the notification is no longer valid (what was read may then be
// another process's, if the target died and its pid was reused).
Engine::ArgsRead Engine::ReadPathArgs(Lane* lane, int notify_fd, Event* event, char* buffer, size_t* blob) {
  *blob = 0;
  uint8_t mask = PathArgMask(CanonicalNr(event->arch, event->nr));
  if (mask == 0) return ArgsRead::kRead;
  // The target's memory can hold this read forever (a userfaultfd or FUSE page it never lets
  // complete): the read watch sees how long it has taken, and past kReadStallNs takes the lane over.
  uint64_t since = 0;
  if (lane != nullptr) {
    since = MonotonicNs();
    lane->reading_fd.store(notify_fd, std::memory_order_relaxed);
    lane->reading_handle.store(event->handle, std::memory_order_relaxed);
    lane->reading_pid.store(static_cast<uint32_t>(event->pid), std::memory_order_relaxed);
    lane->read_since_ns.store(since, std::memory_order_release);
  }
  for (uint8_t i = 0; i < 6; i++) {
    if (((mask >> i) & 1u) == 0) continue;
    TargetString read;
    if (!ReadTargetString(static_cast<pid_t>(event->pid), event->args[i], buffer + *blob, &read)) continue;
    StringArg& arg = event->strings[event->string_count++];
    arg.index = i;
    arg.truncated = read.truncated;
    arg.text.offset = static_cast<uint32_t>(*blob);
    arg.text.length = static_cast<uint32_t>(read.length);
    *blob += read.length;
  }
  if (since != 0 && !lane->read_since_ns.compare_exchange_strong(since, 0, std::memory_order_acq_rel)) {
    return ArgsRead::kOrphaned;  // the watch cleared it first: the lane has a new thread
  }
  return NotifyIdValid(notify_fd, event->id) ? ArgsRead::kRead : ArgsRead::kGone;
}

// The container's lane: the hot path. RECV -> (strings, ID_VALID) -> SEND, or pend and queue a
// channel frame (written at the end of the iteration) -> event; or, on a lane other than 0, hand
// lane 0 what only it decides.
// Flattened: everything it calls that is defined in this file or a header is inlined into it, the
// answers it gives at once (AnswerNow) with it. With SYNC_WAKE_UP the NOTIF_SEND switches to the
// target, and the kernel refills the return stack buffer on a switch: every return through a frame
// live across the SEND mispredicts, about 8 ns each here (docs/benchmarks.md, stop 36).
__attribute__((flatten)) void Engine::OnNotifyReady(Lane* lane, Container* container, uint32_t events) {
  if ((events & EPOLLIN) != 0) {
    if (!NotifyRecv(container->fd, &lane->buffers)) {
      int err = errno;
      // ENOENT: the task went away between readiness and RECV. EINTR: retry on next readiness.
      if (err != ENOENT && err != EINTR && ++container->recv_failures >= kMaxRecvFailures) {
        queue_->PushError("NOTIF_RECV on container " + std::to_string(container->handle) + " failed " +
                          std::to_string(kMaxRecvFailures) + " times in a row (" + ErrnoText(err) +
                          "); closing its notify fd: its notified syscalls now fail with ENOSYS");
        RemoveServed(lane, container);
      }
      return;
    }
    container->recv_failures = 0;
    lane->received.store(lane->received.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    const Notification n = NotificationFromKernel(*lane->buffers.notif(), container->handle, lane->clock.Now());
    journal_->NoteReceived(container->journal_slot, n.id);
    if (!container->receipt_reserved) {
      container->receipt_slot = journal_->ReserveReceipt();
      container->receipt_reserved = true;
    }
    // In the journal until decided: a crash before the answer leaves the successor its syscall
    // and arguments (journal.hpp, receipts), not a bare id.
    journal_->OpenReceipt(container->receipt_slot, n);
    const Outcome outcome = OnReceived(lane, container, n);
    // Moved to lane 0 (which sees its hang-up too, if any), or this thread lost the lane while
    // reading: no longer this thread's to touch.
    if (outcome == Outcome::kMoved || outcome == Outcome::kOrphaned) return;
    journal_->CloseReceipt(container->receipt_slot);
    if (wake_spread_at_ != 0 && sync_wake_up_.load(std::memory_order_relaxed)) AdviseWakeMode(lane, container, n);
    if (lane == primary_ && container->home != primary_) {
      // A visitor: it goes home once it no longer needs the control plane (a policy now answers
      // it, or no control plane is attached), so the containers of lane 0 are not its neighbours.
      container->native_streak = outcome == Outcome::kAsked || outcome == Outcome::kExecuted ? 0 : container->native_streak + 1;
      if (container->native_streak >= kGoHomeAfter && (events & (EPOLLHUP | EPOLLERR)) == 0) {
        SendHome(container);
        return;
      }
    }
  }
  if ((events & (EPOLLHUP | EPOLLERR)) != 0) RemoveServed(lane, container);
}

// The container's lane. Here, not in a file of its own, so that OnNotifyReady's flattening takes
// the advisor's per-notification step in.
void Engine::AdviseWakeMode(Lane* lane, Container* container, const Notification& n) {
  lane->last_received_ns.store(n.received_ns, std::memory_order_relaxed);
  if (lane->last_handle != container->handle) {
    if (lane->last_handle != 0) lane->mixed_since_ns.store(n.received_ns, std::memory_order_relaxed);
    lane->last_handle = container->handle;
  }
  if (!container->wake.Add(n.pid, n.received_ns)) return;
  WakeModeAdvisor::Mode mode;
  if (!container->wake.Decide(wake_spread_at_, AloneServed(lane, n.received_ns), &mode)) return;
  // Refused (its filter gone with its last task): the mode it had, looked at again next window.
  SwitchWakeMode(container, mode);
}

// The container's lane.
Engine::Outcome Engine::OnReceived(Lane* lane, Container* container, const Notification& n) {
  Event event = NotificationEvent(n);
  size_t blob = 0;
  char* strings = lane->strings.get();
  switch (ReadPathArgs(lane, container->fd, &event, strings, &blob)) {
    case ArgsRead::kGone:
      return Outcome::kAnswered;  // its task is gone
    case ArgsRead::kOrphaned:
      // `container` may be gone by now: not touched. `strings` is this thread's now (TakeOver).
      HandBackOrphaned(lane, Handover::Kind::kResume, UINT32_MAX, n, event, strings, blob);
      delete[] strings;
      return Outcome::kOrphaned;
    case ArgsRead::kRead:
      break;
  }
  return DecideRead(lane, container, n, &event, blob);
}

// The container's lane.
Engine::Outcome Engine::DecideRead(Lane* lane, Container* container, const Notification& n, Event* event, size_t blob) {
  // The container's own rules first: they answer whether a control plane is attached or not.
  switch (AnswerFromRules(lane, container, n, *event, lane->strings.get(), blob)) {
    case RuleVerdict::kImmediate:
      return Outcome::kAnswered;
    case RuleVerdict::kTaken:
      return Outcome::kExecuted;
    case RuleVerdict::kElsewhere:
      MoveToPrimary(lane, container, n, *event, blob, /*rules_again=*/true);
      return Outcome::kMoved;
    case RuleVerdict::kNone:
      break;
  }
  if (lane != primary_ && (active_session_.load(std::memory_order_acquire) != 0 ||
                           hold_until_ns_.load(std::memory_order_relaxed) > n.received_ns)) {
    MoveToPrimary(lane, container, n, *event, blob);
    return Outcome::kMoved;
  }
  return DecideUnanswered(lane, container, n, event, lane->strings.get(), blob);
}

// Lane 0; another lane only when no control plane was attached or awaited as it received `n` (a
// control plane that attaches meanwhile gets the next one: only lane 0 pends, under mu_).
Engine::Outcome Engine::DecideUnanswered(Lane* lane, Container* container, const Notification& n, Event* event_in,
                                         const char* strings, size_t blob) {
  Event& event = *event_in;
  uint64_t owner = 0;
  bool held = false;
  ChannelConn* conn = nullptr;
  if (lane == primary_ && (active_session_.load(std::memory_order_acquire) != 0 ||
                           hold_until_ns_.load(std::memory_order_relaxed) > n.received_ns)) {
    std::lock_guard<std::mutex> lock(mu_);
    // Re-read under mu_: setActiveSession and closeSession change it under the same lock.
    Session* session = active_;
    // Without a channel the session hears of it only through JS: no room in the queue, no asking.
    bool ask = session != nullptr && (session->channel != nullptr || !queue_->Full());
    held = session == nullptr && hold_until_ns_.load(std::memory_order_relaxed) > n.received_ns && !queue_->Full();
    if (ask || held) {
      const uint64_t deadline = n.received_ns + decision_timeout_ns_.load(std::memory_order_relaxed);
      if (held) {
        pending_.Add(container, nullptr, n, deadline, HoldStrings(event, strings, blob));
      } else {
        pending_.Add(container, session, n, deadline);
        owner = session->id;
        conn = session->channel;  // freed only by this thread
      }
    }
  }
  // JS hears of a held one when setActiveSession() forwards it, or from its deadline's answer.
  if (held) return Outcome::kAsked;
  if (owner != 0) {
    forwarded_ = true;
    event.forwarded = true;
    event.session = owner;
    // On the channel the control plane has it at the end of this iteration; JS only reports it,
    // so its event may wait for the batch. Otherwise JS forwards it: due at once.
    event.via_channel = conn != nullptr && channel_->QueueNotification(conn, event, strings, container->container_id);
    queue_->Push(event, strings, blob, !event.via_channel);
    return Outcome::kAsked;
  }
  // Nobody to ask (or no room to ask): the default action, now, on this thread.
  NativeAnswer answer;
  answer.action = DefaultAction();
  AnswerNow(lane, container, n, event, strings, blob, answer);
  return Outcome::kAnswered;
}

// A lane, or the JS thread in Restore (`lane` null, mu_ held). Here, not in engine_rules.cpp, so
// that OnNotifyReady's flattening takes the send in.
Engine::RuleVerdict Engine::AnswerFromRules(Lane* lane, Container* container, const Notification& n, const Event& event,
                                            const char* strings, size_t blob) {
  NativeAnswer immediate;
  const RuleVerdict verdict = ApplyRules(lane, container, n, event, blob, &immediate);
  if (verdict == RuleVerdict::kImmediate) AnswerNow(lane, container, n, event, strings, blob, immediate);
  return verdict;
}

// A lane, or the JS thread in Restore (`lane` null).
void Engine::AnswerNow(Lane* lane, Container* container, const Notification& n, const Event& event, const char* strings,
                       size_t blob, const NativeAnswer& answer) {
  int err = 0;
  const SendResult result = NotifySend(container->fd, BuffersOf(lane), n.id, answer.action, &err);
  ReportAnswer(lane, container, n, event, strings, blob, answer.by, answer.action, result, NowOf(lane), answer.rule);
  if (result == SendResult::kFailed) queue_->PushError(SendFailedText(answer.rule, n.id, container->handle, err));
}

// A lane, or the JS thread in Restore (`lane` null).
void Engine::ReportAnswer(Lane* lane, Container* container, const Notification& n, const Event& event, const char* strings,
                          size_t blob, AnsweredBy by, const Answer& action, SendResult result, uint64_t answered_ns,
                          int32_t rule) {
  const uint64_t latency = Elapsed(n.received_ns, answered_ns);
  if (detailed_events_.load(std::memory_order_relaxed)) {
    queue_->Push(event, strings, blob, false);
    PushAnswered(container->handle, n.id, by, action, result, latency, false, Unseen(), rule);
    if (lane != nullptr) lane->queued = true;
  } else if (lane != nullptr) {
    // Nobody watches: counted, not an event each (JS would convert 150k records a second).
    lane->answered_ns = answered_ns;
    TallyAnswer(lane, container->handle, n.nr, n.arch, by, result, latency, answered_ns);
  } else {
    PushAnswered(container->handle, n.id, by, action, result, latency, false, Unseen{n.nr, n.arch}, rule);
  }
}

// The lane.
void Engine::TallyAnswer(Lane* lane, uint32_t handle, uint32_t nr, uint32_t arch, AnsweredBy by, SendResult result,
                         uint64_t latency_ns, uint64_t now_ns) {
  AnswerTally::Key key;
  key.handle = handle;
  key.nr = nr;
  key.arch = arch;
  key.by = by;
  key.gone = result == SendResult::kGone;
  if (lane->tally.Add(key, latency_ns, now_ns)) return;
  // A 257th key before the batch delay: the counts so far go now.
  if (!DrainTally(lane) || !lane->tally.Add(key, latency_ns, now_ns)) queue_->CountDropped(1);
}

// The lane. When its tally must go on its own (UINT64_MAX: it is empty).
uint64_t Engine::TallyDueNs(const Lane& lane) const {
  return lane.tally.empty() ? std::numeric_limits<uint64_t>::max() : lane.tally.first_ns() + queue_->batch_delay_ns();
}

// The lane. All of its tally or none of it: false (kept, tried again a batch delay later) while
// the event queue has no room for it, as JS is that far behind.
bool Engine::DrainTally(Lane* lane) {
  AnswerTally& tally = lane->tally;
  if (tally.empty()) return true;
  if (!queue_->HasRoom(tally.entries().size())) {
    tally.Postpone(MonotonicNs());
    return false;
  }
  lane->queued = true;
  for (const AnswerTally::Entry& entry : tally.entries()) {
    Event event;
    event.type = EventType::kTally;
    event.handle = entry.key.handle;
    event.nr = entry.key.nr;
    event.arch = entry.key.arch;
    event.by = entry.key.by;
    event.gone = entry.key.gone;
    event.id = entry.count;
    event.ns = entry.latency_sum_ns;
    event.text.length = sizeof entry.buckets;
    queue_->Push(event, reinterpret_cast<const char*>(entry.buckets), sizeof entry.buckets, false);
  }
  tally.Clear();
  return true;
}

// Any thread.
void Engine::PushAnswered(uint32_t handle, uint64_t id, AnsweredBy by, const Answer& action, SendResult result,
                          uint64_t latency_ns, bool urgent, Unseen unseen, int32_t rule, EmulatedKind emulated) {
  queue_->Push(AnsweredEvent(handle, id, by, action, result == SendResult::kGone, latency_ns, unseen, rule, emulated), urgent);
}

// Any thread.
Event Engine::AnsweredEvent(uint32_t handle, uint64_t id, AnsweredBy by, const Answer& action, bool gone,
                            uint64_t latency_ns, Unseen unseen, int32_t rule, EmulatedKind emulated) {
  Event event;
  event.type = EventType::kAnswered;
  event.handle = handle;
  event.id = id;
  event.by = by;
  event.rule = rule;
  event.action = action;
  event.emulated = emulated;
  event.gone = gone;
  event.ns = latency_ns;
  event.notified = unseen.nr != Unseen::kNone;
  event.nr = unseen.nr;
  event.arch = unseen.arch;
  return event;
}

// Any thread, under mu_.
void Engine::PushSettled(const PendingTable::Answered& a, AnsweredBy by, bool urgent) {
  const Notification& n = a.entry.notification;
  if (a.entry.owner == nullptr) {
    // Held, and no control plane came: JS never saw it, so this answer counts it.
    PushAnswered(n.handle, n.id, AnsweredBy::kNoControlPlane, a.sent, a.result, a.latency_ns, urgent, Unseen{n.nr, n.arch});
  } else {
    PushAnswered(n.handle, n.id, by, a.sent, a.result, a.latency_ns, urgent);
  }
}

}  // namespace seccomp_agent
