// The engine's life (init, start, stop), its containers (adopt, remove), the fd store, its knobs
// and stats. The other rooms: see engine.hpp.
#include "engine.hpp"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "engine_names.hpp"
#include "quiet_thread.hpp"

namespace seccomp_agent {
namespace {

uint64_t PackAnswer(const Answer& a) {
  return (static_cast<uint64_t>(a.kind) << 32) | static_cast<uint32_t>(a.error);
}

Answer UnpackAnswer(uint64_t packed) {
  Answer a;
  a.kind = static_cast<Answer::Kind>(packed >> 32);
  a.error = static_cast<int32_t>(packed & 0xffffffffu);
  return a;
}

}  // namespace

// JS thread.
Engine::Engine(const Options& options)
    : options_(options),
      default_action_(PackAnswer(options.default_action)),
      decision_timeout_ns_(options.decision_timeout_ns) {}

// JS thread (or the addon's cleanup hook).
Engine::~Engine() {
  Stop();
  if (LiveOrphans() > 0) {
    for (auto& lane : lanes_) (void)lane.release();  // an orphan still holds its lane (Stop)
  }
}

// JS thread.
bool Engine::Init(Napi::Env env, Napi::Function on_batch, std::string* error) {
  if (!MakeLanes(error)) return false;
  journal_ = InFlightJournal::Create(error);
  if (journal_ == nullptr) return false;
  replay_book_ = ReplayBookFile::Create(error);
  if (replay_book_ == nullptr) return false;
  records_ = RecordFile::Create(error);
  if (records_ == nullptr) return false;
  pending_.SetJournal(journal_.get());
  std::string store_error;
  notifier_ = fd_store::Notifier::FromEnvironment(&store_error);
  if (!store_error.empty()) {
    *error = "the fd store is unusable (" + store_error + "); refusing to run without it, since a crash would lose every container";
    return false;
  }
  queue_ = std::make_unique<EventQueue>(options_.max_queued_events, options_.batch_delay_ns);
  if (!queue_->Init(env, on_batch)) {
    *error = "cannot create the thread-safe function for events";
    return false;
  }
  ingest_ = std::make_unique<Ingest>(primary_->epoll_fd, queue_.get(),
                                     Ingest::Options{options_.ingest_timeout_ns, options_.ingest_max_bytes});
  channel_ = std::make_unique<DecisionChannel>(primary_->epoll_fd, queue_.get(), static_cast<ChannelSessions*>(this));
  PrepareFdTables(env);
  return true;
}

// JS thread. The engine thread is made with pthread_create (no exception, its errno reported).
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
  if (!replay_book_stored_) {
    StoreFd("replays", replay_book_->fd());
    replay_book_stored_ = true;
  }
  if (!records_stored_) {
    StoreFd(kRecordsName, records_->fd());
    records_stored_ = true;
  }
  const int rc = StartQuietThread(&thread_, &Engine::ThreadMain, this);
  if (rc != 0) {
    *error = "pthread_create: " + ErrnoText(rc);
    return false;
  }
  // Detached, as every lane's: a stalled read may give lane 0 another thread (engine_read_watch.cpp).
  pthread_detach(thread_);
  thread_started_ = true;
  {
    std::unique_lock<std::mutex> lock(start_mu_);
    start_cv_.wait(lock, [this] { return running_; });
  }
  // The other lanes: a lane that cannot start leaves the engine unusable (its containers unserved).
  return StartLanes(error) && StartReadWatch(error);
}

// JS thread.
void Engine::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // The predecessor's emulations still waited for stay in the journal for whoever comes next.
  if (predecessor_ != nullptr) predecessor_->Stop();
  if (thread_started_) {
    stop_requested_.store(true);
    {
      std::lock_guard<std::mutex> lock(park_mu_);
      park_requested_ = false;
    }
    park_cv_.notify_all();
    WakeThread();
    WaitEnded(primary_);
    thread_started_ = false;
  }
  StopLanes();
  StopReadWatch();
  // Emulations in flight hold copies of notify fds and answer through them: they end (answered with
  // the failure errno, ECANCELED) and report to the queue before the fds and the queue close.
  std::unique_ptr<Emulator> emulator;
  std::unique_ptr<ActionWorker> action_worker;
  {
    std::lock_guard<std::mutex> lock(mu_);
    emulator.swap(emulator_);
    action_worker.swap(action_worker_);
  }
  // Handed over: the successor has the journal and waits for our helpers; they are not killed,
  // and what none of them carries is not answered here (the successor decides it).
  if (emulator != nullptr) emulator->Stop(/*let_go=*/handed_over_);
  if (action_worker != nullptr) action_worker->Stop();
  emulator.reset();
  action_worker.reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = nullptr;
    active_session_.store(0);
    // Handed over: the successor answers what is pending (it has the journal); answering here too
    // would only race it.
    if (queue_ != nullptr && !handed_over_) {
      pending_.SettleAll(DefaultAction(), &js_buffers_,
                         [this](const PendingTable::Answered& a) { PushSettled(a, AnsweredBy::kDetached, true); });
      // The predecessor's notifications no helper did, not decided yet: the default, like the rest.
      std::lock_guard<std::mutex> deferred_lock(deferred_mu_);
      for (const PredecessorEmulations::Item& item : deferred_) AnswerDetachedLocked(item.notification, Unseen());
      deferred_.clear();
      // Notifications a lane handed the engine thread, which it never took: the default too.
      AnswerUntakenVisits();
    }
    pending_.Clear();
    sessions_.clear();
    close_requests_.clear();
    for (auto& entry : containers_) {
      close(entry.second->fd);
      if (entry.second->policy_fd >= 0) close(entry.second->policy_fd);
    }
    containers_.clear();
    rules_.Clear();
  }
  if (ingest_ != nullptr) ingest_->CloseAll();
  if (channel_ != nullptr) channel_->CloseAll();
  if (handoff_fd_ >= 0) close(handoff_fd_);
  handoff_fd_ = -1;
  // Last: the successor takes EOF here as "the old one let go of its sockets".
  if (handoff_conn_ >= 0) close(handoff_conn_);
  handoff_conn_ = -1;
  // Every thread that writes to them has ended. Under a handoff the successor has its own copies.
  pending_.SetJournal(nullptr);
  journal_.reset();
  replay_book_.reset();  // after the emulator: its helpers were given copies, its pool a pointer
  records_.reset();
  notifier_.reset();
  // A thread whose read was taken over may still return and write to its lane's wake fd: while one
  // lives the lanes' fds stay open (and the lanes, ~Engine), for the process's life.
  const bool orphans = LiveOrphans() > 0;
  for (const auto& lane : lanes_) {
    if (orphans) break;
    for (int* fd : {&lane->wake_fd, &lane->timer_fd, &lane->epoll_fd}) {
      if (*fd >= 0) close(*fd);
      *fd = -1;
    }
  }
  // Only a lane's live thread copies fds with it (Adopt), and every one has ended.
  if (self_pidfd_ >= 0) close(self_pidfd_);
  self_pidfd_ = -1;
  if (queue_ != nullptr) queue_->Close();
}

// JS thread (Stop), under mu_: `n`, which no session owns, gets the default as 'detached'.
void Engine::AnswerDetachedLocked(const Notification& n, Unseen unseen) {
  auto it = containers_.find(n.handle);
  if (it == containers_.end()) return;
  const Answer action = DefaultAction();
  const SendResult result = NotifySend(it->second->fd, &js_buffers_, n.id, action, nullptr);
  PushAnswered(n.handle, n.id, AnsweredBy::kDetached, action, result, 0, true, unseen);
}

// A lane (or the JS thread): the container of `handle`, or null. Only lane 0 frees containers, and
// only one its lane handed it: for lane 0, or for the lane serving it, the pointer stays good.
Engine::Container* Engine::FindContainer(uint32_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = containers_.find(handle);
  return it != containers_.end() ? it->second.get() : nullptr;
}

// Any thread.
Answer Engine::DefaultAction() const { return UnpackAnswer(default_action_.load(std::memory_order_relaxed)); }

// Engine thread: no task is left in the filter (or the fd failed): forget it and its pendings.
// A container of another lane comes here from its lane (HandRemoval), out of its epoll set.
void Engine::RemoveContainer(Container* container) {
  // Its counts before its 'removed': JS forgets the container then (its lane drained its own).
  DrainTally(primary_);
  uint32_t handle = container->handle;
  Emulator* emulator = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (container->lane.load(std::memory_order_relaxed) == primary_) {
      epoll_ctl(primary_->epoll_fd, EPOLL_CTL_DEL, container->fd, nullptr);
      if (container->home != primary_) primary_->visitors.fetch_sub(1, std::memory_order_relaxed);
    }
    container->home->containers.fetch_sub(1, std::memory_order_relaxed);
    close(container->fd);
    records_->Release(container->record);
    if (container->policy_fd >= 0) close(container->policy_fd);
    journal_->ReleaseContainer(container->journal_slot);
    journal_->ReleaseInFlight(container->receipt_slot);
    pending_.DropTarget(container);
    if (container->wake.mode() == WakeModeAdvisor::Mode::kSpread) {
      spread_wake_containers_.fetch_sub(1, std::memory_order_relaxed);
    }
    containers_.erase(handle);  // frees container
    emulator = emulator_.get();
  }
  rules_.Forget(handle);
  {
    std::lock_guard<std::mutex> lock(waits_mu_);
    target_waits_.erase(handle);
  }
  // Its helper exits once no other container uses it (emulations in flight still finish: stale).
  if (emulator != nullptr) emulator->Forget(handle);
  UnstoreFd(NotifyName(handle));
  UnstoreFd(PolicyName(handle));
  Event event;
  event.type = EventType::kRemoved;
  event.handle = handle;
  queue_->Push(event, true);
}

// JS thread.
uint32_t Engine::Adopt(uint32_t conn, uint32_t index, const std::string& record, const std::string& container_id,
                       std::string* error, bool* range_error) {
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
  // Ingest checked it is a notify fd: a refusal of the flag is a kernel without it (before 6.6).
  const bool sync = NotifySetSyncWakeUp(fd);
  if (sync || errno == EINVAL || errno == ENOTTY) sync_wake_up_.store(sync);
  // Without its record a successor would still serve the fd, only without knowing whose it is.
  // Written before the notify fd is stored: a successor that finds the fd finds its record too.
  const uint32_t handle = next_handle_++;
  RecordFile::Place place;
  std::string record_error;
  if (!records_->Append(handle, record, &place, &record_error)) {
    queue_->PushError(record_error + "; a successor will serve this container without its record");
  }
  uint32_t added = AddContainer(fd, handle, place, journal_->AddContainer(handle), container_id, error);
  if (added != 0) StoreFd(NotifyName(handle), fd);
  return added;
}

// JS thread, before any session (engine.hpp says why that is enough).
Engine::Naming Engine::NameContainer(uint32_t handle, const std::string& container_id) {
  if (session_opened_ || stopped_) return Naming::kRefused;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = containers_.find(handle);
  if (it == containers_.end()) return Naming::kGone;
  it->second->container_id = container_id;
  return Naming::kNamed;
}

// JS thread.
uint32_t Engine::AddContainer(int fd, uint32_t handle, const RecordFile::Place& record, uint32_t journal_slot,
                              const std::string& container_id, std::string* error) {
  auto container = std::make_unique<Container>();
  container->fd = fd;
  container->handle = handle;
  container->record = record;
  container->journal_slot = journal_slot;
  container->container_id = container_id;
  Container* raw = container.get();
  std::unique_lock<std::mutex> lock(mu_);
  containers_.emplace(handle, std::move(container));
  // Another fd of the same container (an exec) answers as its first one does, from its first
  // notification on: the policy is the container's, not the fd's.
  std::shared_ptr<const PolicyInForce> inherited;
  // Without an id (a restore: JS names each container afterwards) there is no sibling to look for,
  // and no walk over every container per container added.
  if (!container_id.empty()) {
    for (const auto& other : containers_) {
      const Container* sibling = other.second.get();
      if (sibling == raw || sibling->container_id != container_id || !sibling->has_policy.load()) continue;
      inherited = rules_.Share(handle, sibling->handle);
      if (inherited == nullptr) continue;
      raw->init_pid.store(sibling->init_pid.load());
      raw->has_policy.store(true, std::memory_order_release);
      break;
    }
  }
  raw->home = PlaceContainer();
  if (raw->home->table_token.load(std::memory_order_relaxed) != 0) {
    // Its lane copies the fd into its own table before it serves it (engine_fd_tables.cpp).
    Handover adopt;
    adopt.kind = Handover::Kind::kAdopt;
    adopt.handle = handle;
    Send(raw->home, std::move(adopt));
  } else if (!Serve(raw->home, raw)) {
    *error = "epoll_ctl(ADD) of a notify fd: " + ErrnoText(errno) + "; closed it";
    raw->home->containers.fetch_sub(1, std::memory_order_relaxed);
    journal_->ReleaseContainer(journal_slot);
    containers_.erase(handle);
    close(fd);
    records_->Release(record);
    if (inherited) rules_.Forget(handle);
    return 0;
  }
  lock.unlock();
  if (inherited) KeepPolicy(handle, inherited->wire);
  return handle;
}

std::string Engine::RecordOf(uint32_t handle, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = containers_.find(handle);
  if (it == containers_.end() || it->second->record.offset < 0 || records_ == nullptr) return std::string();
  std::string json;
  if (!records_->Read(it->second->record, handle, &json, error)) return std::string();
  return json;
}

// JS thread or engine thread.
void Engine::StoreFd(const std::string& name, int fd) {
  if (notifier_ == nullptr) return;
  std::string error;
  if (!notifier_->Store(name, &fd, 1, &error)) {
    queue_->PushError("cannot keep " + name + " in the fd store (" + error +
                      "): if this process dies, a successor will not have it");
  }
}

// JS thread or engine thread.
void Engine::UnstoreFd(const std::string& name) {
  if (notifier_ == nullptr) return;
  std::string error;
  if (!notifier_->Remove(name, &error)) {
    queue_->PushError("cannot remove " + name + " from the fd store (" + error + "); a store that still runs keeps its copy, which the next data plane finds gone and drops");
  }
}

// JS thread.
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

// JS thread.
void Engine::SetDefaultAction(const Answer& action) { default_action_.store(PackAnswer(action)); }

// JS thread.
void Engine::HoldForControlPlane(uint64_t ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_ == nullptr) hold_until_ns_.store(MonotonicNs() + ms * 1000000ull, std::memory_order_relaxed);
}

// JS thread.
void Engine::SetDecisionTimeoutNs(uint64_t ns) { decision_timeout_ns_.store(ns); }

// Any thread.
Engine::Stats Engine::GetStats() {
  Stats stats;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats.containers = containers_.size();
    stats.pending = pending_.size();
    if (emulator_ != nullptr) {
      const EmulatorStats emulator = emulator_->Stats();
      stats.emulation_helpers = emulator.helpers;
      stats.emulation_helpers_died = emulator.died;
      stats.emulations_retried = emulator.retried;
    }
  }
  stats.pending_connections = ingest_ != nullptr ? ingest_->PendingConnections() : 0;
  stats.events_dropped = queue_ != nullptr ? queue_->dropped() : 0;
  stats.sync_wake_up = sync_wake_up_.load();
  stats.channel_decisions = channel_decisions_.load(std::memory_order_relaxed);
  stats.decisions_dropped = decisions_dropped_.load(std::memory_order_relaxed);
  stats.emulations_replayed = emulations_replayed_.load(std::memory_order_relaxed);
  stats.spread_wake_containers = spread_wake_containers_.load(std::memory_order_relaxed);
  stats.wake_mode_switches = wake_mode_switches_.load(std::memory_order_relaxed);
  stats.predecessor_waiting = predecessor_ != nullptr ? predecessor_->waiting() : 0;
  stats.predecessor_answered = predecessor_answered_.load(std::memory_order_relaxed);
  stats.predecessor_redecided = predecessor_redecided_.load(std::memory_order_relaxed);
  stats.predecessor_timed_out = predecessor_timed_out_.load(std::memory_order_relaxed);
  stats.read_stalls = bounded_read_stalls_.load(std::memory_order_relaxed);
  for (const auto& lane : lanes_) {
    stats.read_stalls += lane->read_takeovers.load(std::memory_order_relaxed);
    stats.lanes.push_back(Stats::Lane{lane->containers.load(std::memory_order_relaxed), lane->received.load(std::memory_order_relaxed),
                                      lane->table_token.load(std::memory_order_relaxed) != 0});
  }
  return stats;
}

}  // namespace seccomp_agent
