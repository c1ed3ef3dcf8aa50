#include "engine.hpp"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <limits>
#include <map>

#include "path_args.h"
#include "seccomp_compat.h"
#include "unique_fd.h"

namespace seccomp_agent {
namespace {

constexpr int kMaxEpollEvents = 64;
constexpr uint32_t kMaxRecvFailures = 1000;  // consecutive unexpected RECV errors before giving up a fd
// x86_64 syscall numbers an emulation answers.
constexpr uint32_t kNrMkdir = 83;
constexpr uint32_t kNrMount = 165;
constexpr uint32_t kNrMkdirat = 258;
// The errno an emulation that could not run answers with (never ENOSYS: that reads as "no agent").
constexpr int kEmulationFailureErrno = EPERM;
// A helper binary that could not be started is tried again after this long.
constexpr uint64_t kEmulatorRetryNs = 10000000000ull;
// Ids a filter hands out are consecutive (kernel/seccomp.c: next_id++), so a notification RECV'd
// by a predecessor that died before it journaled the id is among the next few after the last id it
// noted; NOTIF_ID_VALID tells it apart from ones still queued (only RECV'd ones are valid).
constexpr uint64_t kLostIdWindow = 64;

std::string NotifyName(uint32_t handle) { return "n" + std::to_string(handle); }
std::string RecordName(uint32_t handle) { return "r" + std::to_string(handle); }

// "n123" -> 123 for prefix 'n'; 0 when it is not such a name.
uint32_t HandleOfName(const std::string& name, char prefix) {
  if (name.size() < 2 || name.size() > 11 || name[0] != prefix) return 0;
  uint64_t value = 0;
  for (size_t i = 1; i < name.size(); i++) {
    if (name[i] < '0' || name[i] > '9') return 0;
    value = value * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return value > 0 && value <= UINT32_MAX ? static_cast<uint32_t>(value) : 0;
}

uint64_t PackAnswer(const Answer& a) {
  return (static_cast<uint64_t>(a.kind) << 32) | static_cast<uint32_t>(a.error);
}

Answer UnpackAnswer(uint64_t packed) {
  Answer a;
  a.kind = static_cast<Answer::Kind>(packed >> 32);
  a.error = static_cast<int32_t>(packed & 0xffffffffu);
  return a;
}

std::string ErrnoText(int err) { return std::string(strerror(err)); }

std::string HexText(uint32_t value) {
  char text[16];
  snprintf(text, sizeof text, "0x%x", value);
  return text;
}

// Compares two session tokens in time independent of where they differ.
bool TokenEquals(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (int i = 0; i < 16; i++) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

const char* EmulatedName(EmulatedKind kind) {
  switch (kind) {
    case EmulatedKind::kMkdir: return "mkdir";
    case EmulatedKind::kMount: return "mount";
    case EmulatedKind::kKill: return "kill-container";
    case EmulatedKind::kFreeze: return "freeze-container";
    default: return "none";
  }
}

}  // namespace

Engine::Engine(const Options& options)
    : options_(options),
      default_action_(PackAnswer(options.default_action)),
      decision_timeout_ns_(options.decision_timeout_ns) {}

Engine::~Engine() { Stop(); }

bool Engine::Init(Napi::Env env, Napi::Function on_events, std::string* error) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) {
    *error = "epoll_create1: " + ErrnoText(errno);
    return false;
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    *error = "eventfd: " + ErrnoText(errno);
    return false;
  }
  if (EpollControl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake_source_, EPOLLIN) != 0) {
    *error = "epoll_ctl(ADD) of the wake eventfd: " + ErrnoText(errno);
    return false;
  }
  journal_ = InFlightJournal::Create(error);
  if (journal_ == nullptr) return false;
  std::string store_error;
  notifier_ = fd_store::Notifier::FromEnvironment(&store_error);
  if (!store_error.empty()) {
    *error = "the fd store is unusable (" + store_error + "); refusing to run without it, since a crash would lose every container";
    return false;
  }
  queue_ = std::make_unique<EventQueue>(options_.max_queued_events, options_.batch_delay_ns);
  if (!queue_->Init(env, on_events)) {
    *error = "cannot create the thread-safe function for events";
    return false;
  }
  ingest_ = std::make_unique<Ingest>(epoll_fd_, queue_.get(),
                                     Ingest::Options{options_.ingest_timeout_ns, options_.ingest_max_bytes});
  channel_ = std::make_unique<DecisionChannel>(epoll_fd_, queue_.get(), static_cast<ChannelSessions*>(this));
  return true;
}

bool Engine::Start(std::string* error) {
  if (stopped_) {
    *error = "the engine is stopped; make a new one";
    return false;
  }
  if (thread_started_) return true;
  if (!journal_stored_) {
    StoreFd("journal", journal_->fd());
    journal_stored_ = true;
  }
  // The engine thread takes no signals: they belong to Node's main thread.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&thread_, nullptr, &Engine::ThreadMain, this);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    *error = "pthread_create: " + ErrnoText(rc);
    return false;
  }
  thread_started_ = true;
  std::unique_lock<std::mutex> lock(start_mu_);
  start_cv_.wait(lock, [this] { return running_; });
  return true;
}

void* Engine::ThreadMain(void* self) {
  pthread_setname_np(pthread_self(), "seccomp-engine");
  static_cast<Engine*>(self)->Run();
  return nullptr;
}

void Engine::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (thread_started_) {
    stop_requested_.store(true);
    {
      std::lock_guard<std::mutex> lock(park_mu_);
      park_requested_ = false;
    }
    park_cv_.notify_all();
    uint64_t one = 1;
    while (write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
    pthread_join(thread_, nullptr);
    thread_started_ = false;
  }
  // Emulations in flight hold copies of notify fds and answer through them: they end (answered with
  // the failure errno, ECANCELED) and report to the queue before the fds and the queue close.
  std::unique_ptr<Emulator> emulator;
  std::unique_ptr<ActionWorker> action_worker;
  {
    std::lock_guard<std::mutex> lock(mu_);
    emulator.swap(emulator_);
    action_worker.swap(action_worker_);
  }
  if (emulator != nullptr) emulator->Stop();
  if (action_worker != nullptr) action_worker->Stop();
  emulator.reset();
  action_worker.reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = nullptr;
    active_session_.store(0);
    // Handed over: the successor answers what is pending (it has the journal); answering here too
    // would only race it.
    if (queue_ != nullptr && !handed_over_) AnswerAllPendingLocked(AnsweredBy::kDetached, &js_buffers_);
    pending_.clear();
    held_.clear();
    sessions_.clear();
    close_requests_.clear();
    for (auto& entry : containers_) {
      close(entry.second->fd);
      if (entry.second->record_fd >= 0) close(entry.second->record_fd);
    }
    containers_.clear();
  }
  if (ingest_ != nullptr) ingest_->CloseAll();
  if (channel_ != nullptr) channel_->CloseAll();
  if (handoff_fd_ >= 0) close(handoff_fd_);
  handoff_fd_ = -1;
  // Last: the successor takes EOF here as "the old one let go of its sockets".
  if (handoff_conn_ >= 0) close(handoff_conn_);
  handoff_conn_ = -1;
  // Every thread that writes to them has ended. Under a handoff the successor has its own copies.
  journal_.reset();
  notifier_.reset();
  if (wake_fd_ >= 0) close(wake_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  wake_fd_ = -1;
  epoll_fd_ = -1;
  if (queue_ != nullptr) queue_->Close();
}

// Engine thread: the loop. Every fd it touches is non-blocking except the notify fds, which it
// RECVs only after epoll said readable.
void Engine::Run() {
  {
    std::lock_guard<std::mutex> lock(start_mu_);
    running_ = true;
  }
  start_cv_.notify_all();
  struct epoll_event events[kMaxEpollEvents];
  while (!stop_requested_.load(std::memory_order_relaxed)) {
    if (park_flag_.load(std::memory_order_acquire)) {
      std::unique_lock<std::mutex> lock(park_mu_);
      parked_ = true;
      park_cv_.notify_all();
      park_cv_.wait(lock, [this] { return !park_requested_ || stop_requested_.load(); });
      parked_ = false;
      continue;
    }
    uint64_t now = MonotonicNs();
    uint64_t wake = busy_until_ns_ > now ? now : NextWakeNs();
    int n;
    if (use_pwait2_) {
      struct timespec ts;
      struct timespec* timeout = nullptr;
      if (wake != std::numeric_limits<uint64_t>::max()) {
        uint64_t wait = wake > now ? wake - now : 0;
        ts.tv_sec = static_cast<time_t>(wait / 1000000000ull);
        ts.tv_nsec = static_cast<long>(wait % 1000000000ull);
        timeout = &ts;
      }
      n = epoll_pwait2(epoll_fd_, events, kMaxEpollEvents, timeout, nullptr);
      if (n < 0 && errno == ENOSYS) {
        use_pwait2_ = false;
        continue;
      }
    } else {
      int ms = -1;
      if (wake != std::numeric_limits<uint64_t>::max()) {
        uint64_t wait = wake > now ? wake - now : 0;
        ms = static_cast<int>(std::min<uint64_t>((wait + 999999) / 1000000, 60000));
      }
      n = epoll_wait(epoll_fd_, events, kMaxEpollEvents, ms);
    }
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
          OnNotifyReady(static_cast<Container*>(source), events[i].events);
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
          while (read(wake_fd_, &value, sizeof value) < 0 && errno == EINTR) {
          }
          break;
        }
      }
    }
    // One write per channel for every frame this iteration produced.
    channel_->FlushAll();
    if (n > 0 && options_.busy_poll_ns != 0 && (busy_until_ns_ != 0 || active_session_.load(std::memory_order_relaxed) != 0)) {
      std::lock_guard<std::mutex> lock(mu_);
      busy_until_ns_ = pending_.empty() ? 0 : MonotonicNs() + options_.busy_poll_ns;
    }
    if (close_requested_.load(std::memory_order_acquire)) CloseRequestedChannels();
    now = MonotonicNs();
    if (!deadlines_.empty() && deadlines_.top().at <= now) ExpireDeadlines(now);
    if (ingest_->NextDeadline() <= now) ingest_->OnTimer(now);
    if (channel_->NextDeadline() <= now) channel_->OnTimer(now);
    queue_->Flush(now);
  }
}

uint64_t Engine::NextWakeNs() {
  uint64_t wake = queue_->DueNs();
  if (!deadlines_.empty() && deadlines_.top().at < wake) wake = deadlines_.top().at;
  if (ingest_->NextDeadline() < wake) wake = ingest_->NextDeadline();
  if (channel_->NextDeadline() < wake) wake = channel_->NextDeadline();
  return wake;
}

Answer Engine::DefaultAction() const { return UnpackAnswer(default_action_.load(std::memory_order_relaxed)); }

// The path arguments of an x86_64 notification, read from the target into `buffer` (6 path
// strings' room) as event->strings; false when the notification is no longer valid (what was read
// may then be another process's, if the target died and its pid was reused).
bool Engine::ReadPathArgs(int notify_fd, Event* event, char* buffer, size_t* blob) {
  *blob = 0;
  if (event->arch != AUDIT_ARCH_X86_64) return true;
  uint8_t mask = PathArgMask(event->nr);
  if (mask == 0) return true;
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
  return NotifyIdValid(notify_fd, event->id);
}

InFlightJournal::InFlight Engine::InFlightOf(const Event& event) {
  InFlightJournal::InFlight n;
  n.handle = event.handle;
  n.id = event.id;
  n.pid = event.pid;
  n.nr = event.nr;
  n.arch = event.arch;
  n.ip = event.ip;
  for (int i = 0; i < 6; i++) n.args[i] = event.args[i];
  return n;
}

// The other way: a journaled notification as the event a control plane is sent.
Event Engine::EventOf(const InFlightJournal::InFlight& n) {
  Event event;
  event.type = EventType::kNotification;
  event.handle = n.handle;
  event.id = n.id;
  event.pid = n.pid;
  event.nr = n.nr;
  event.arch = n.arch;
  event.ip = n.ip;
  for (int i = 0; i < 6; i++) event.args[i] = n.args[i];
  return event;
}

// Engine thread: the hot path. RECV -> (strings, ID_VALID) -> SEND, or pend and queue a channel
// frame (written at the end of the iteration) -> event.
void Engine::OnNotifyReady(Container* container, uint32_t events) {
  if ((events & EPOLLIN) != 0) {
    if (!NotifyRecv(container->fd, &engine_buffers_)) {
      int err = errno;
      // ENOENT: the task went away between readiness and RECV. EINTR: retry on next readiness.
      if (err != ENOENT && err != EINTR && ++container->recv_failures >= kMaxRecvFailures) {
        queue_->PushError("NOTIF_RECV on container " + std::to_string(container->handle) + " failed " +
                          std::to_string(kMaxRecvFailures) + " times in a row (" + ErrnoText(err) +
                          "); closing its notify fd: its notified syscalls now fail with ENOSYS");
        RemoveContainer(container);
      }
      return;
    }
    container->recv_failures = 0;
    const uint64_t received = MonotonicNs();
    const struct seccomp_notif* notif = engine_buffers_.notif();
    journal_->NoteReceived(container->journal_slot, notif->id);
    Event event;
    event.type = EventType::kNotification;
    event.handle = container->handle;
    event.id = notif->id;
    event.pid = notif->pid;
    event.nr = static_cast<uint32_t>(notif->data.nr);
    event.arch = notif->data.arch;
    event.ip = notif->data.instruction_pointer;
    for (int i = 0; i < 6; i++) event.args[i] = notif->data.args[i];
    event.ns = received;
    size_t blob = 0;
    if (!ReadPathArgs(container->fd, &event, strings_, &blob)) return;
    uint64_t owner = 0;
    bool held = false;
    ChannelConn* conn = nullptr;
    if (active_session_.load(std::memory_order_acquire) != 0 || hold_until_ns_.load(std::memory_order_relaxed) > received) {
      std::lock_guard<std::mutex> lock(mu_);
      // Re-read under mu_: setActiveSession and closeSession change it under the same lock.
      Session* session = active_;
      // Without a channel the session hears of it only through JS: no room in the queue, no asking.
      bool ask = session != nullptr && (session->channel != nullptr || !queue_->Full());
      held = session == nullptr && hold_until_ns_.load(std::memory_order_relaxed) > received && !queue_->Full();
      if (ask || held) {
        uint64_t deadline = received + decision_timeout_ns_.load(std::memory_order_relaxed);
        uint32_t slot = journal_->AddInFlight(InFlightOf(event));
        Key key{container->handle, event.id};
        pending_.emplace(key, PendingEntry{container, session, received, deadline, event.pid, event.nr, event.arch,
                                           event.args[0], slot});
        container->pending_count++;
        deadlines_.push(Deadline{deadline, container->handle, event.id});
        if (deadlines_.size() > 2 * pending_.size() + 4096) CompactDeadlinesLocked();
        if (held) {
          held_.emplace(key, Held{event, std::string(strings_, blob)});
        } else {
          session->owned++;
          owner = session->id;
          conn = session->channel;  // freed only by this thread
        }
      }
    }
    // JS hears of a held one when setActiveSession() forwards it, or from its deadline's answer.
    if (held) return;
    if (owner != 0) {
      event.forwarded = true;
      event.session = owner;
      // On the channel the control plane has it at the end of this iteration; JS only reports it,
      // so its event may wait for the batch. Otherwise JS forwards it: due at once.
      event.via_channel = conn != nullptr && channel_->QueueNotification(conn, event, strings_);
      queue_->Push(event, strings_, blob, !event.via_channel);
      return;
    }
    // Nobody to ask (or no room to ask): the default action, now, on this thread.
    Answer action = DefaultAction();
    int err = 0;
    SendResult result = NotifySend(container->fd, &engine_buffers_, event.id, action, &err);
    uint64_t latency = MonotonicNs() - received;
    if (detailed_events_.load(std::memory_order_relaxed)) {
      queue_->Push(event, strings_, blob, false);
      PushAnswered(container->handle, event.id, AnsweredBy::kNoControlPlane, action, result, latency, false);
    } else {
      // Nobody watches: one event per notification is enough (half the work for JS and the queue).
      PushAnswered(container->handle, event.id, AnsweredBy::kNoControlPlane, action, result, latency, false,
                   Unseen{event.nr, event.arch});
    }
    if (result == SendResult::kFailed) {
      queue_->PushError("NOTIF_SEND of the default action for notification " + std::to_string(event.id) +
                        " of container " + std::to_string(container->handle) + " failed: " + ErrnoText(err));
    }
  }
  if ((events & (EPOLLHUP | EPOLLERR)) != 0) RemoveContainer(container);
}

void Engine::PushAnswered(uint32_t handle, uint64_t id, AnsweredBy by, const Answer& action, SendResult result,
                          uint64_t latency_ns, bool urgent, Unseen unseen) {
  Event event;
  event.type = EventType::kAnswered;
  event.handle = handle;
  event.id = id;
  event.by = by;
  event.action = action;
  event.gone = result == SendResult::kGone;
  event.ns = latency_ns;
  event.notified = unseen.nr != Unseen::kNone;
  event.nr = unseen.nr;
  event.arch = unseen.arch;
  queue_->Push(event, urgent);
}

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

bool Engine::ReleaseOwnerLocked(Session* owner) {
  if (owner == nullptr) return false;  // held for a control plane that has not attached
  owner->owned--;
  return ReportIfDrainedLocked(owner);
}

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

bool Engine::AnsweredLateLocked(uint32_t handle, uint64_t id) const {
  for (const Key& key : late_) {
    if (key.handle == handle && key.id == id) return true;
  }
  return false;
}

// Engine thread: no task is left in the filter (or the fd failed): forget it and its pendings.
void Engine::RemoveContainer(Container* container) {
  uint32_t handle = container->handle;
  Emulator* emulator = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, container->fd, nullptr);
    close(container->fd);
    if (container->record_fd >= 0) close(container->record_fd);
    journal_->ReleaseContainer(container->journal_slot);
    if (container->pending_count > 0) {
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->first.handle == handle) {
          if (it->second.owner == nullptr) held_.erase(it->first);
          journal_->ReleaseInFlight(it->second.journal_slot);
          ReleaseOwnerLocked(it->second.owner);
          it = pending_.erase(it);
        } else {
          ++it;
        }
      }
    }
    containers_.erase(handle);  // frees container
    emulator = emulator_.get();
  }
  // Its helper exits once no other container uses it (emulations in flight still finish: stale).
  if (emulator != nullptr) emulator->Forget(handle);
  UnstoreFd(NotifyName(handle));
  UnstoreFd(RecordName(handle));
  Event event;
  event.type = EventType::kRemoved;
  event.handle = handle;
  queue_->Push(event, true);
}

// Engine thread: forwarded notifications past their deadline get the default action.
void Engine::ExpireDeadlines(uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  Answer action = DefaultAction();
  while (!deadlines_.empty() && deadlines_.top().at <= now_ns) {
    Deadline d = deadlines_.top();
    deadlines_.pop();
    auto it = pending_.find(Key{d.handle, d.id});
    if (it == pending_.end() || it->second.deadline_ns != d.at) continue;  // answered already
    PendingEntry entry = it->second;
    pending_.erase(it);
    if (entry.owner == nullptr) held_.erase(Key{d.handle, d.id});
    entry.container->pending_count--;
    SendResult result = NotifySend(entry.container->fd, &engine_buffers_, d.id, action, nullptr);
    journal_->ReleaseInFlight(entry.journal_slot);
    const uint64_t latency = MonotonicNs() - entry.received_ns;
    if (entry.owner == nullptr) {
      // Held, and no control plane came: JS never saw it, so this answer counts it.
      PushAnswered(d.handle, d.id, AnsweredBy::kNoControlPlane, action, result, latency, true, Unseen{entry.nr, entry.arch});
    } else {
      PushAnswered(d.handle, d.id, AnsweredBy::kDeadline, action, result, latency, true);
    }
    late_[late_next_] = Key{d.handle, d.id};
    late_next_ = (late_next_ + 1) % kLateRing;
    ReleaseOwnerLocked(entry.owner);
  }
}

// Engine thread, under mu_: answered entries leave stale heap items behind (dropped lazily when
// their time comes); rebuilt when they outnumber the live ones, so memory stays bounded.
void Engine::CompactDeadlinesLocked() {
  std::vector<Deadline> live;
  live.reserve(pending_.size());
  for (const auto& entry : pending_) live.push_back(Deadline{entry.second.deadline_ns, entry.first.handle, entry.first.id});
  deadlines_ = std::priority_queue<Deadline, std::vector<Deadline>, std::greater<Deadline>>(
      std::greater<Deadline>(), std::move(live));
}

void Engine::AnswerAllPendingLocked(AnsweredBy by, NotifyBuffers* buffers) {
  Answer action = DefaultAction();
  uint64_t now = MonotonicNs();
  for (auto& entry : pending_) {
    SendResult result = NotifySend(entry.second.container->fd, buffers, entry.first.id, action, nullptr);
    journal_->ReleaseInFlight(entry.second.journal_slot);
    entry.second.container->pending_count--;
    if (entry.second.owner != nullptr) entry.second.owner->owned--;
    PushAnswered(entry.first.handle, entry.first.id, by, action, result, now - entry.second.received_ns, true);
  }
  pending_.clear();
  held_.clear();
}

uint32_t Engine::Adopt(uint32_t conn, uint32_t index, const std::string& record, std::string* error,
                       bool* range_error) {
  *range_error = false;
  if (stopped_) {
    *error = "the engine is stopped";
    return 0;
  }
  int fd = -1;
  switch (ingest_->Take(conn, index, &fd)) {
    case Ingest::TakeResult::kOk:
      break;
    case Ingest::TakeResult::kUnknownConn:
      *range_error = true;
      *error = "connection " + std::to_string(conn) + " is not pending (adopted, rejected or expired)";
      return 0;
    case Ingest::TakeResult::kBadIndex:
      *range_error = true;
      *error = "connection " + std::to_string(conn) + " has no fd " + std::to_string(index);
      return 0;
    case Ingest::TakeResult::kNotSeccomp:
      *range_error = true;
      *error = "fd " + std::to_string(index) + " of connection " + std::to_string(conn) +
               " is not a seccomp notify fd; reject the connection";
      return 0;
  }
  // Without its record a successor would still serve the fd, only without knowing whose it is.
  int record_fd = -1;
  std::string record_error;
  if (!WriteRecordMemfd(record, &record_fd, &record_error)) {
    queue_->PushError(record_error + "; a successor will serve this container without its record");
  }
  const uint32_t handle = next_handle_++;
  uint32_t added = AddContainer(fd, handle, record_fd, journal_->AddContainer(handle), error);
  if (added != 0) {
    StoreFd(NotifyName(handle), fd);
    if (record_fd >= 0) StoreFd(RecordName(handle), record_fd);
  }
  return added;
}

uint32_t Engine::AddContainer(int fd, uint32_t handle, int record_fd, uint32_t journal_slot, std::string* error) {
  bool sync = NotifySetSyncWakeUp(fd);
  if (sync || errno == EINVAL || errno == ENOTTY) sync_wake_up_.store(sync);
  auto container = std::make_unique<Container>();
  container->fd = fd;
  container->handle = handle;
  container->record_fd = record_fd;
  container->journal_slot = journal_slot;
  Container* raw = container.get();
  std::lock_guard<std::mutex> lock(mu_);
  containers_.emplace(handle, std::move(container));
  if (EpollControl(epoll_fd_, EPOLL_CTL_ADD, fd, raw, EPOLLIN) != 0) {
    *error = "epoll_ctl(ADD) of a notify fd: " + ErrnoText(errno) + "; closed it";
    journal_->ReleaseContainer(journal_slot);
    containers_.erase(handle);
    close(fd);
    if (record_fd >= 0) close(record_fd);
    return 0;
  }
  return handle;
}

void Engine::StoreFd(const std::string& name, int fd) {
  if (notifier_ == nullptr) return;
  std::string error;
  if (!notifier_->Store(name, &fd, 1, &error)) {
    queue_->PushError("cannot keep " + name + " in the fd store (" + error +
                      "): if this process dies, a successor will not have it");
  }
}

void Engine::UnstoreFd(const std::string& name) {
  if (notifier_ == nullptr) return;
  std::string error;
  if (!notifier_->Remove(name, &error)) {
    queue_->PushError("cannot remove " + name + " from the fd store (" + error + "); the store keeps a stale copy");
  }
}

bool Engine::Listen(const std::string& path, unsigned mode, std::string* error) {
  if (stopped_) {
    *error = "the engine is stopped";
    return false;
  }
  int fd = ingest_->Listen(path, mode, error);
  if (fd < 0) return false;
  StoreFd("listener", fd);
  return true;
}

bool Engine::AnswerRecovered(Container* container, uint64_t id) {
  Answer action = DefaultAction();
  SendResult result = NotifySend(container->fd, &js_buffers_, id, action, nullptr);
  PushAnswered(container->handle, id, AnsweredBy::kRecovered, action, result, 0, false);
  return result == SendResult::kOk;
}

void Engine::Restore(const std::vector<handoff::NamedFd>& fds, bool handoff, bool hold, RestoreResult* result) {
  const bool store_again = handoff;  // the fd store (if any) has none of a handoff's fds yet
  if (stopped_ || thread_started_) {
    for (const handoff::NamedFd& f : fds) close(f.fd);
    result->problems.push_back(stopped_ ? "the engine is stopped; every fd given was closed"
                                        : "restore() comes before start(); every fd given was closed");
    return;
  }
  std::unique_ptr<InFlightJournal> journal;
  std::map<uint32_t, int> notify_fds;
  std::map<uint32_t, int> record_fds;
  std::vector<int> listener_fds;
  auto refuse = [&](const handoff::NamedFd& f, const std::string& why) {
    result->problems.push_back("fd " + std::to_string(f.fd) + " named \"" + f.name + "\": " + why + "; closed it");
    close(f.fd);
    if (!store_again) UnstoreFd(f.name);  // or it comes back on every restart
  };
  for (const handoff::NamedFd& f : fds) {
    uint32_t handle = 0;
    if (f.name == "listener") {
      std::string error;
      if (!listener_fds.empty()) {
        // systemd passes its .socket unit's listener and the stored copy: the same socket twice.
        close(f.fd);
      } else if (!ingest_->ListenFd(f.fd, &error)) {
        refuse(f, error);
      } else {
        listener_fds.push_back(f.fd);
        result->listener = true;
      }
    } else if (f.name == "journal") {
      std::string error;
      if (journal != nullptr) {
        refuse(f, "a second journal");
        continue;
      }
      journal = InFlightJournal::Open(f.fd, &error);  // takes the fd
      if (journal == nullptr) result->problems.push_back(error + "; ids the predecessor had in flight may hang");
    } else if ((handle = HandleOfName(f.name, 'n')) != 0 && notify_fds.count(handle) == 0) {
      if (!IsSeccompNotifyFd(f.fd)) {
        refuse(f, "not a seccomp notify fd");
      } else {
        notify_fds[handle] = f.fd;
      }
    } else if ((handle = HandleOfName(f.name, 'r')) != 0 && record_fds.count(handle) == 0) {
      record_fds[handle] = f.fd;
    } else {
      refuse(f, "a name this data plane does not use (or a duplicate)");
    }
  }
  if (journal != nullptr) {
    journal_ = std::move(journal);
    result->journal = true;
    result->control_plane_attached = journal_->ControlPlaneAttached();
    journal_->SetControlPlaneAttached(false);  // until one attaches here
    journal_stored_ = !store_again;
  }
  const auto marks = journal_->ContainerMarks();
  std::unordered_map<uint32_t, uint32_t> slot_of;  // handle -> its slot in the predecessor's journal
  for (const auto& mark : marks) slot_of.emplace(mark.second.handle, mark.first);
  std::vector<uint32_t> kept_slots;
  for (const auto& entry : notify_fds) {
    const uint32_t handle = entry.first;
    RestoreResult::Restored restored{handle, std::string()};
    int record_fd = -1;
    auto record = record_fds.find(handle);
    if (record != record_fds.end()) {
      record_fd = record->second;
      record_fds.erase(record);
      std::string error;
      if (!ReadRecordMemfd(record_fd, &restored.record, &error)) {
        result->problems.push_back("record of container handle " + std::to_string(handle) + ": " + error);
        restored.record.clear();
      }
    }
    auto known = slot_of.find(handle);
    uint32_t slot = known != slot_of.end() ? known->second : journal_->AddContainer(handle);
    std::string error;
    if (AddContainer(entry.second, handle, record_fd, slot, &error) == 0) {
      result->problems.push_back("container handle " + std::to_string(handle) + ": " + error);
      continue;
    }
    kept_slots.push_back(slot);
    if (handle >= next_handle_) next_handle_ = handle + 1;
    result->containers.push_back(std::move(restored));
    if (store_again) {
      StoreFd(NotifyName(handle), entry.second);
      if (record_fd >= 0) StoreFd(RecordName(handle), record_fd);
    }
  }
  for (const auto& orphan : record_fds) {
    close(orphan.second);
    if (!store_again) UnstoreFd(RecordName(orphan.first));
  }
  // What the predecessor received and did not answer: nobody else ever will. With a control plane
  // attached before, the next one is asked (as if it had just arrived); else the default answers.
  std::lock_guard<std::mutex> lock(mu_);
  const auto in_flight = journal_->InFlightEntries();
  journal_->ClearInFlight();
  const uint64_t now = MonotonicNs();
  for (const InFlightJournal::InFlight& n : in_flight) {
    auto it = containers_.find(n.handle);
    if (it == containers_.end()) continue;
    Container* container = it->second.get();
    if (!hold || !result->control_plane_attached) {
      AnswerRecovered(container, n.id);
      result->in_flight_answered++;
      continue;
    }
    Held held;
    Event& event = held.event;
    event = EventOf(n);
    event.ns = now;
    size_t blob = 0;
    if (!ReadPathArgs(container->fd, &event, strings_, &blob)) continue;  // its task is gone
    held.strings.assign(strings_, blob);
    const uint64_t deadline = now + decision_timeout_ns_.load(std::memory_order_relaxed);
    Key key{n.handle, n.id};
    pending_.emplace(key, PendingEntry{container, nullptr, now, deadline, n.pid, n.nr, n.arch, n.args[0],
                                       journal_->AddInFlight(n)});
    container->pending_count++;
    deadlines_.push(Deadline{deadline, n.handle, n.id});
    held_.emplace(key, std::move(held));
    result->in_flight_held++;
  }
  // A live predecessor parked before handing over: all it received is answered or journaled. Only
  // a dead one can have received an id it never journaled.
  for (const auto& mark : marks) {
    if (handoff) break;
    auto it = containers_.find(mark.second.handle);
    if (it == containers_.end() || !mark.second.has_last) continue;
    for (uint64_t k = 1; k <= kLostIdWindow; k++) {
      const uint64_t id = mark.second.last_id + k;
      if (NotifyIdValid(it->second->fd, id) && AnswerRecovered(it->second.get(), id)) result->lost_answered++;
    }
  }
  journal_->ReleaseContainersExcept(kept_slots);
  if (store_again) {
    if (!listener_fds.empty()) StoreFd("listener", listener_fds.front());
  }
}

bool Engine::ListenHandoff(const std::string& path, unsigned mode, std::string* error) {
  if (stopped_ || handoff_fd_ >= 0) {
    *error = stopped_ ? "the engine is stopped" : "the handoff socket is served already";
    return false;
  }
  int fd = handoff::Listen(path, mode, error);
  if (fd < 0) return false;
  handoff_fd_ = fd;
  if (EpollControl(epoll_fd_, EPOLL_CTL_ADD, fd, &handoff_source_, EPOLLIN) != 0) {
    *error = "epoll_ctl(ADD) of the handoff socket: " + ErrnoText(errno);
    close(fd);
    handoff_fd_ = -1;
    return false;
  }
  return true;
}

// Engine thread. Only a process of our own user may take everything over.
void Engine::AcceptHandoff() {
  for (;;) {
    int conn = accept4(handoff_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        queue_->PushError("accept on the handoff socket failed: " + ErrnoText(errno));
      }
      return;
    }
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != geteuid()) {
      queue_->PushError("refused a handoff connection from uid " + std::to_string(len == sizeof cred ? cred.uid : -1) +
                        ": only the data plane's own user may take over");
      close(conn);
      continue;
    }
    Event event;
    event.type = EventType::kHandoff;
    event.conn = static_cast<uint32_t>(conn);
    event.peer.pid = cred.pid;
    event.peer.uid = cred.uid;
    event.peer.gid = cred.gid;
    if (!queue_->Push(event, true)) close(conn);
  }
}

void Engine::SetAccepting(bool accepting) {
  if (!stopped_) ingest_->SetAccepting(accepting);
}

void Engine::Park() {
  if (!thread_started_) return;
  std::unique_lock<std::mutex> lock(park_mu_);
  park_requested_ = true;
  park_flag_.store(true, std::memory_order_release);
  uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
  park_cv_.wait(lock, [this] { return parked_; });
}

void Engine::Unpark() {
  {
    std::lock_guard<std::mutex> lock(park_mu_);
    park_requested_ = false;
    park_flag_.store(false, std::memory_order_release);
  }
  park_cv_.notify_all();
}

bool Engine::HandOff(int conn, int timeout_ms, std::string* summary, uint64_t* paused_ns, std::string* error) {
  Fd owned(conn);  // closed on failure; kept open on success until Stop() (the successor's sign)
  if (stopped_ || handed_over_) {
    *error = stopped_ ? "the engine is stopped" : "handed over already";
    handoff::SendRefusal(conn, *error);
    return false;
  }
  if (!handoff::ReadHello(conn, timeout_ms, error)) return false;
  // From here until the successor acks, nobody answers: this is the pause a workload sees.
  const uint64_t parked_at = MonotonicNs();
  Park();
  std::vector<handoff::NamedFd> fds;
  size_t pending = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : ingest_->ListenerFds()) fds.push_back(handoff::NamedFd{fd, "listener"});
    fds.push_back(handoff::NamedFd{journal_->fd(), "journal"});
    for (const auto& entry : containers_) {
      fds.push_back(handoff::NamedFd{entry.second->fd, NotifyName(entry.first)});
      if (entry.second->record_fd >= 0) fds.push_back(handoff::NamedFd{entry.second->record_fd, RecordName(entry.first)});
    }
    pending = pending_.size();
    *summary = "{\"containers\":" + std::to_string(containers_.size()) + ",\"inFlight\":" + std::to_string(pending) +
               ",\"pid\":" + std::to_string(getpid()) + "}";
  }
  if (!handoff::SendEntries(conn, fds, *summary, error) || !handoff::WaitAck(conn, timeout_ms, error)) {
    Unpark();
    return false;
  }
  *paused_ns = MonotonicNs() - parked_at;
  journal_->Detach();
  handed_over_ = true;
  handoff_conn_ = owned.Release();
  for (const handoff::NamedFd& f : fds) UnstoreFd(f.name);
  return true;
}

bool Engine::ListenChannel(const std::string& path, unsigned mode, std::string* error) {
  if (stopped_) {
    *error = "the engine is stopped";
    return false;
  }
  return channel_->Listen(path, mode, error);
}

bool Engine::OpenSession(uint64_t session, const uint8_t token[16], std::string* error) {
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
      for (auto& entry : held_) {
        auto it = pending_.find(entry.first);
        if (it == pending_.end() || it->second.owner != nullptr) continue;
        it->second.owner = next;
        next->owned++;
        Event forwarded = entry.second.event;
        forwarded.forwarded = true;
        forwarded.via_channel = false;
        forwarded.session = next->id;
        queue_->Push(forwarded, entry.second.strings.data(), entry.second.strings.size(), true);
      }
      held_.clear();
    }
    // One that owned nothing when it stopped being active is drained already.
    if (previous != nullptr) ReportIfDrainedLocked(previous);
  }
  queue_->Flush();
  return true;
}

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
    if (s->owned > 0 && !handed_over_) {  // handed over: the successor answers them
      Answer action = DefaultAction();
      uint64_t now = MonotonicNs();
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->second.owner != s) {
          ++it;
          continue;
        }
        SendResult result = NotifySend(it->second.container->fd, &js_buffers_, it->first.id, action, nullptr);
        journal_->ReleaseInFlight(it->second.journal_slot);
        it->second.container->pending_count--;
        PushAnswered(it->first.handle, it->first.id, AnsweredBy::kDetached, action, result, now - it->second.received_ns,
                     true);
        it = pending_.erase(it);
        count++;
      }
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
    uint64_t one = 1;
    while (write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }
  queue_->Flush();
  return count;
}

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

// Engine thread: one read's decisions, under one hold of mu_.
void Engine::ApplyDecisions(ChannelConn* conn, uint64_t session, const decision_channel::DecisionBody* decisions,
                            size_t count) {
  (void)conn;
  channel_decisions_.fetch_add(count, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  auto found = sessions_.find(session);
  Session* s = found == sessions_.end() ? nullptr : found->second.get();  // null: JS closed it meanwhile
  const Answer fallback = DefaultAction();
  for (size_t i = 0; i < count; i++) {
    const decision_channel::DecisionBody& d = decisions[i];
    auto it = pending_.find(Key{d.handle, d.id});
    if (it == pending_.end()) {
      PushDropped(session, d.handle, d.id, AnsweredLateLocked(d.handle, d.id) ? DropReason::kLate : DropReason::kUnknown);
      continue;
    }
    if (it->second.owner != s) {
      PushDropped(session, d.handle, d.id, DropReason::kWrongSession);
      continue;
    }
    Answer answer;
    bool valid = true;
    switch (d.kind) {
      case decision_channel::kContinue:
        answer.kind = Answer::kContinue;
        break;
      case decision_channel::kError:
        valid = d.errno_value >= 1 && d.errno_value <= 4095;
        answer.kind = Answer::kError;
        answer.error = d.errno_value;
        break;
      case decision_channel::kValue:
        answer.kind = Answer::kValue;
        answer.value = d.value;
        break;
      default:
        valid = false;
        break;
    }
    if (!valid) {
      // Never left hanging: the default action, now.
      PushDropped(session, d.handle, d.id, DropReason::kInvalid);
      answer = fallback;
    }
    PendingEntry entry = it->second;
    pending_.erase(it);
    entry.container->pending_count--;
    int err = 0;
    SendResult result = NotifySend(entry.container->fd, &engine_buffers_, d.id, answer, &err);
    if (result == SendResult::kFailed) {
      NotifySend(entry.container->fd, &engine_buffers_, d.id, fallback, nullptr);
      queue_->PushError("NOTIF_SEND of a channel decision for notification " + std::to_string(d.id) + " of container " +
                        std::to_string(d.handle) + " failed: " + ErrnoText(err) + "; answered it with the default action");
      answer = fallback;
    }
    journal_->ReleaseInFlight(entry.journal_slot);
    PushAnswered(d.handle, d.id, valid ? AnsweredBy::kControlPlane : AnsweredBy::kNoControlPlane, answer, result,
                 MonotonicNs() - entry.received_ns, false);
    ReleaseOwnerLocked(entry.owner);
  }
}

void Engine::SetDefaultAction(const Answer& action) { default_action_.store(PackAnswer(action)); }

void Engine::HoldForControlPlane(uint64_t ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_ == nullptr) hold_until_ns_.store(MonotonicNs() + ms * 1000000ull, std::memory_order_relaxed);
}

void Engine::SetDecisionTimeoutNs(uint64_t ns) { decision_timeout_ns_.store(ns); }

Engine::RespondStatus Engine::Respond(uint32_t handle, uint64_t id, const Answer& answer, uint64_t session,
                                      uint64_t* latency_ns) {
  *latency_ns = 0;
  if (handed_over_) return RespondStatus::kUnknown;  // the successor answers everything now
  SendResult result;
  int err = 0;
  bool drained = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(Key{handle, id});
    if (it == pending_.end() || (session != 0 && (it->second.owner == nullptr || it->second.owner->id != session))) {
      decisions_dropped_.fetch_add(1, std::memory_order_relaxed);
      return it == pending_.end() && AnsweredLateLocked(handle, id) ? RespondStatus::kLate : RespondStatus::kUnknown;
    }
    PendingEntry entry = it->second;
    pending_.erase(it);
    entry.container->pending_count--;
    drained = ReleaseOwnerLocked(entry.owner);
    result = NotifySend(entry.container->fd, &js_buffers_, id, answer, &err);
    if (result == SendResult::kFailed) {
      // The kernel refused this answer; the target must not hang: give it the default action.
      NotifySend(entry.container->fd, &js_buffers_, id, DefaultAction(), nullptr);
    }
    journal_->ReleaseInFlight(entry.journal_slot);
    *latency_ns = MonotonicNs() - entry.received_ns;
  }
  if (drained) queue_->Flush();
  if (result == SendResult::kOk) return RespondStatus::kOk;
  if (result == SendResult::kGone) return RespondStatus::kGone;
  queue_->PushError("NOTIF_SEND of a decision for notification " + std::to_string(id) + " of container " +
                    std::to_string(handle) + " failed: " + ErrnoText(err) + "; answered it with the default action");
  queue_->Flush();
  return RespondStatus::kUnknown;
}

Engine::RespondStatus Engine::RespondEmulated(uint32_t handle, uint64_t id, const EmulatedDecision& decision,
                                              uint64_t session, uint64_t* latency_ns, std::string* error) {
  *latency_ns = 0;
  if (stopped_ || handed_over_) return RespondStatus::kUnknown;
  {
    // An id no longer pending (or not this session's) starts nothing (no helper, no error about one).
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(Key{handle, id});
    if (it == pending_.end() || (session != 0 && (it->second.owner == nullptr || it->second.owner->id != session))) {
      decisions_dropped_.fetch_add(1, std::memory_order_relaxed);
      return it == pending_.end() && AnsweredLateLocked(handle, id) ? RespondStatus::kLate : RespondStatus::kUnknown;
    }
  }
  const bool needs_helper = decision.kind == EmulatedKind::kMkdir || decision.kind == EmulatedKind::kMount;
  Emulator* emulator = needs_helper ? EnsureEmulator() : nullptr;
  ActionWorker* worker = needs_helper ? nullptr : EnsureActionWorker();
  bool failed = false;
  bool drained = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(Key{handle, id});
    if (it == pending_.end() || (session != 0 && (it->second.owner == nullptr || it->second.owner->id != session))) {
      return RespondStatus::kUnknown;  // answered by its deadline meanwhile (or its session closed)
    }
    const PendingEntry entry = it->second;
    if (needs_helper) {
      bool mkdir = decision.kind == EmulatedKind::kMkdir;
      bool fits = entry.arch == AUDIT_ARCH_X86_64 &&
                  (mkdir ? (entry.nr == kNrMkdir || entry.nr == kNrMkdirat) : entry.nr == kNrMount);
      if (!fits) {
        *error = std::string("an emulated ") + EmulatedName(decision.kind) + " answers only x86_64 " +
                 (mkdir ? "mkdir and mkdirat" : "mount") + " notifications; notification " + std::to_string(id) +
                 " of container " + std::to_string(handle) + " is syscall " + std::to_string(entry.nr) +
                 " (arch " + HexText(entry.arch) + "); it stays pending";
        return RespondStatus::kWrongSyscall;
      }
    }
    pending_.erase(it);
    entry.container->pending_count--;
    drained = ReleaseOwnerLocked(entry.owner);
    *latency_ns = MonotonicNs() - entry.received_ns;
    NotificationRef ref;
    ref.notify_fd = entry.container->fd;  // borrowed under mu_: the executors dup it
    ref.id = id;
    ref.pid = static_cast<pid_t>(entry.pid);
    ref.owner = handle;
    const EmulatedKind kind = decision.kind;
    const uint64_t received = entry.received_ns;
    const uint32_t slot = entry.journal_slot;
    // Runs on the executor's thread; takes only the queue's and the journal's locks, never mu_.
    ActionDone done = [this, handle, id, kind, received, slot](const ActionResult& r) {
      OnEmulated(handle, id, kind, received, slot, r);
    };
    if (needs_helper ? emulator == nullptr : worker == nullptr) {
      FailEmulationLocked(handle, id, kind, entry);
      failed = true;
    } else {
      switch (kind) {
        case EmulatedKind::kMkdir: {
          MkdirArgs args = decision.mkdir;
          args.dirfd = entry.nr == kNrMkdirat ? static_cast<int>(static_cast<int32_t>(entry.arg0)) : AT_FDCWD;
          emulator->Mkdir(ref, args, /*respond=*/true, std::move(done));
          break;
        }
        case EmulatedKind::kMount:
          emulator->Mount(ref, decision.mount, /*respond=*/true, std::move(done));
          break;
        case EmulatedKind::kKill: {
          KillArgs args = decision.kill;
          args.init_pidfd = -1;
          worker->Kill(ref, args, decision.error, std::move(done));
          break;
        }
        default:
          worker->Freeze(ref, decision.error, std::move(done));
          break;
      }
    }
  }
  if (failed || drained) queue_->Flush();
  return RespondStatus::kAccepted;
}

// JS thread. The emulator's thread and helpers start on the first mkdir or mount; a helper binary
// that is missing is looked for again after kEmulatorRetryNs, not on every decision.
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

// JS thread.
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

// JS thread, under mu_: the notification was taken from the pending table, no executor exists.
void Engine::FailEmulationLocked(uint32_t handle, uint64_t id, EmulatedKind kind, const PendingEntry& entry) {
  Answer answer;
  answer.kind = Answer::kError;
  answer.error = kEmulationFailureErrno;
  int err = 0;
  SendResult result = NotifySend(entry.container->fd, &js_buffers_, id, answer, &err);
  journal_->ReleaseInFlight(entry.journal_slot);
  Event event;
  event.type = EventType::kAnswered;
  event.handle = handle;
  event.id = id;
  event.by = AnsweredBy::kControlPlane;
  event.emulated = kind;
  event.action = answer;
  event.gone = result == SendResult::kGone;
  event.ns = MonotonicNs() - entry.received_ns;
  queue_->Push(event, true);
  if (result == SendResult::kFailed) {
    queue_->PushError("NOTIF_SEND of EPERM for the emulated " + std::string(EmulatedName(kind)) + " of notification " +
                      std::to_string(id) + " of container " + std::to_string(handle) + " failed: " + ErrnoText(err));
  }
}

// Emulator or action-worker thread: reports the result at once (JS is waiting for it).
void Engine::OnEmulated(uint32_t handle, uint64_t id, EmulatedKind kind, uint64_t received_ns, uint32_t journal_slot,
                        const ActionResult& r) {
  journal_->ReleaseInFlight(journal_slot);
  const bool gone = r.outcome == ActionOutcome::kStale || (!r.answered && r.send_err == ENOENT);
  Event event;
  event.type = EventType::kAnswered;
  event.handle = handle;
  event.id = id;
  event.by = AnsweredBy::kControlPlane;
  event.emulated = kind;
  event.action.kind = Answer::kError;
  // mkdir, mount: what the syscall returned. kill, freeze: 0 when the container was killed or
  // frozen (its syscall got the decision's errno), else why not.
  bool acted = r.outcome == ActionOutcome::kDone && strcmp(r.stage, "done") == 0;
  event.action.error = (kind == EmulatedKind::kKill || kind == EmulatedKind::kFreeze) && acted ? 0 : r.err;
  event.gone = gone;
  event.ns = MonotonicNs() - received_ns;
  queue_->Push(event, true);
  const std::string what = std::string("emulated ") + EmulatedName(kind) + " of notification " + std::to_string(id) +
                           " of container " + std::to_string(handle);
  const std::string got = r.answered ? "; its syscall got " + ErrnoText(r.err) : std::string();
  if (r.outcome == ActionOutcome::kFailed) {
    queue_->PushError(what + " failed at stage " + r.stage + " (" + ErrnoText(r.cause) + ")" + got);
  } else if (r.outcome == ActionOutcome::kRefused && (kind == EmulatedKind::kKill || kind == EmulatedKind::kFreeze)) {
    queue_->PushError(what + " refused: " + (r.detail.empty() ? r.stage : r.detail) + got);
  }
  // A kill that took its caller leaves nothing to answer and sends nothing (send_err 0): its success.
  const bool caller_killed = kind == EmulatedKind::kKill && acted && r.send_err == 0;
  if (!r.answered && !gone && !caller_killed) {
    queue_->PushError(what + " could not be answered (NOTIF_SEND: " + ErrnoText(r.send_err) + ")");
  }
  queue_->Flush();
}

Engine::Stats Engine::GetStats() {
  Stats stats;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats.containers = containers_.size();
    stats.pending = pending_.size();
    if (emulator_ != nullptr) stats.emulation_helpers = emulator_->Stats().helpers;
  }
  stats.pending_connections = ingest_ != nullptr ? ingest_->PendingConnections() : 0;
  stats.events_dropped = queue_ != nullptr ? queue_->dropped() : 0;
  stats.sync_wake_up = sync_wake_up_.load();
  stats.channel_decisions = channel_decisions_.load(std::memory_order_relaxed);
  stats.decisions_dropped = decisions_dropped_.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace seccomp_agent
