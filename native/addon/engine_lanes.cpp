// The lanes: threads that each serve some containers' notify fds, so a container that floods the
// agent queues only the containers of its own lane (issue 17: a neighbour's flood moved another
// container's p99 as one bare C responder serving both does, not as a pair of them). Lane 0 is the
// engine thread (engine_loop.cpp), which alone holds sessions, the channel, deadlines and
// removals; another lane receives, reads path arguments, and answers what needs nobody else (the
// container's rules, the default while no control plane is attached or awaited). A container that
// needs a control plane moves to lane 0 with that notification (its arguments as read: no second
// read) and goes home once it answers by itself again; a container whose fd is done is handed to
// lane 0 to remove. Lanes talk only by messages (Send, TakeInbox). Only lane 0 frees a container,
// and only once its lane handed it over, after which that lane never touches it.
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "engine.hpp"
#include "engine_names.hpp"
#include "quiet_thread.hpp"

namespace seccomp_agent {
namespace {

constexpr int kMaxEpollEvents = 64;
constexpr size_t kMaxLanes = 64;

}  // namespace

// JS thread (Init): every lane's epoll set, wake eventfd and timerfd.
bool Engine::MakeLanes(std::string* error) {
  const size_t count = std::min(std::max<size_t>(options_.lanes, 1), kMaxLanes);
  for (size_t i = 0; i < count; i++) {
    auto lane = std::make_unique<Lane>();
    lane->index = i;
    lane->engine = this;
    lanes_.push_back(std::move(lane));
    Lane* l = lanes_.back().get();
    if (i == 0) primary_ = l;  // Stop() and GetStats() find lane 0 even when a later lane failed
    const std::string which = i == 0 ? "" : " of lane " + std::to_string(i);
    l->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epoll_fd < 0) {
      *error = "epoll_create1" + which + ": " + ErrnoText(errno);
      return false;
    }
    l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->wake_fd < 0 || EpollControl(l->epoll_fd, EPOLL_CTL_ADD, l->wake_fd, &l->wake_source, EPOLLIN) != 0) {
      *error = "the wake eventfd" + which + ": " + ErrnoText(errno);
      return false;
    }
    l->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (l->timer_fd < 0 || EpollControl(l->epoll_fd, EPOLL_CTL_ADD, l->timer_fd, &l->timer_source, EPOLLIN) != 0) {
      *error = "the timerfd" + which + ": " + ErrnoText(errno);
      return false;
    }
  }
  return true;
}

// JS thread (Start, after the engine thread runs). Detached: a lane's thread may be replaced
// (engine_read_watch.cpp); Stop waits for whichever serves it to say it ended.
bool Engine::StartLanes(std::string* error) {
  int rc = 0;
  for (size_t i = 1; i < lanes_.size() && rc == 0; i++) {
    rc = StartQuietThread(&lanes_[i]->thread, &Engine::LaneMain, lanes_[i].get());
    if (rc == 0) {
      pthread_detach(lanes_[i]->thread);
      lanes_[i]->started = true;
    }
  }
  if (rc != 0) *error = "pthread_create of a lane: " + ErrnoText(rc);
  return rc == 0;
}

// JS thread (Stop, stop_requested_ set, the read watch still running: a lane stuck in a read gets
// a thread that sees the stop): waits for every lane's thread to end.
void Engine::StopLanes() {
  for (size_t i = 1; i < lanes_.size(); i++) {
    if (!lanes_[i]->started) continue;
    WakeLane(lanes_[i].get());
    WaitEnded(lanes_[i].get());
    lanes_[i]->started = false;
  }
}

// The thread serving `lane`, as it returns (never an orphan: it returned before it lost the lane).
void Engine::MarkEnded(Lane* lane) {
  std::lock_guard<std::mutex> lock(lane->end_mu);
  lane->ended = true;
  lane->end_cv.notify_all();
}

// JS thread (Stop).
void Engine::WaitEnded(Lane* lane) {
  std::unique_lock<std::mutex> lock(lane->end_mu);
  lane->end_cv.wait(lock, [lane] { return lane->ended; });
}

// Any thread (a lane's eventfd lives until Stop, after every thread that wakes it has ended).
void Engine::WakeLane(Lane* lane) {
  uint64_t one = 1;
  while (write(lane->wake_fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

void* Engine::LaneMain(void* arg) {
  Lane* lane = static_cast<Lane*>(arg);
  const std::string name = "seccomp-lane-" + std::to_string(lane->index);
  pthread_setname_np(pthread_self(), name.c_str());
  lane->engine->TakeOwnFdTable(lane);
  lane->engine->RunLane(lane);  // the engine outlives its lanes: Stop joins them
  return nullptr;
}

// JS thread, under mu_: a new container's home, the lane serving the fewest (lane 0's visitors
// counted there). Ties: lanes 1.. first when they have tables of their own (engine_fd_tables.cpp),
// so that a lone container is served without a reference taken on its fd per syscall; else the
// lowest, so one container is served by the engine thread itself, as before lanes.
Engine::Lane* Engine::PlaceContainer() {
  const auto load = [](const Lane& lane) {
    return lane.containers.load(std::memory_order_relaxed) + lane.visitors.load(std::memory_order_relaxed);
  };
  Lane* best = primary_;
  size_t fewest = load(*primary_);
  for (const auto& lane : lanes_) {
    const size_t served = load(*lane);
    if (served < fewest || (fd_tables_ && best == primary_ && served == fewest)) {
      best = lane.get();
      fewest = served;
    }
  }
  best->containers.fetch_add(1, std::memory_order_relaxed);
  return best;
}

// The container's lane, once a window: whether the container `lane` just received from was the
// only one any lane received from in the last kAloneNs (lanes_ is fixed once the engine runs).
bool Engine::AloneServed(const Lane* lane, uint64_t now_ns) const {
  const uint64_t mixed = lane->mixed_since_ns.load(std::memory_order_relaxed);
  if (mixed != 0 && Elapsed(mixed, now_ns) < WakeModeAdvisor::kAloneNs) return false;
  for (const auto& other : lanes_) {
    if (other.get() == lane) continue;
    const uint64_t last = other->last_received_ns.load(std::memory_order_relaxed);
    if (last != 0 && Elapsed(last, now_ns) < WakeModeAdvisor::kAloneNs) return false;
  }
  return true;
}

// Whoever may touch the container's advisor (its lane; the JS thread while parked). Apart from
// the hot path (engine_loop.cpp): it runs only when a window changes the mode.
bool Engine::SwitchWakeMode(Container* container, WakeModeAdvisor::Mode mode) {
  if (!NotifySetSyncWakeUp(container->fd, mode == WakeModeAdvisor::Mode::kSync)) return false;
  container->wake.Set(mode);
  if (mode == WakeModeAdvisor::Mode::kSpread) {
    spread_wake_containers_.fetch_add(1, std::memory_order_relaxed);
  } else {
    spread_wake_containers_.fetch_sub(1, std::memory_order_relaxed);
  }
  wake_mode_switches_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// A lane: the loop. Like the engine thread's without sessions, channel or deadlines.
void Engine::RunLane(Lane* lane) {
  struct epoll_event events[kMaxEpollEvents];
  uint64_t now = lane->clock.Now();
  while (!stop_requested_.load(std::memory_order_relaxed)) {
    if (park_flag_.load(std::memory_order_acquire)) {
      ParkLane(lane);
      now = lane->clock.Now();
      continue;
    }
    // Its own tally, and the batch it added events to (the engine thread may sleep through it).
    uint64_t wake = TallyDueNs(*lane);
    if (lane->queued) {
      const uint64_t due = queue_->DueNs();
      if (due == std::numeric_limits<uint64_t>::max()) lane->queued = false;
      wake = std::min(wake, due);
    }
    const bool polling = lane->poll_until_ns > now;
    const int n = epoll_wait(lane->epoll_fd, events, kMaxEpollEvents, polling ? 0 : WaitTimeoutMs(lane, wake, now));
    if (n == 0 && polling) sched_yield();
    if (n < 0) {
      if (errno == EINTR) continue;
      queue_->PushError("epoll_wait of lane " + std::to_string(lane->index) + " failed: " + ErrnoText(errno) +
                        "; retrying in 10 ms");
      usleep(10000);
      continue;
    }
    for (int i = 0; i < n; i++) {
      EpollSource* source = static_cast<EpollSource*>(events[i].data.ptr);
      uint64_t drained;
      switch (source->kind) {
        case EpollSource::Kind::kContainer:
          OnNotifyReady(lane, static_cast<Container*>(source), events[i].events);
          if (Orphaned()) return;  // a new thread serves the lane: this one touches nothing more
          break;
        case EpollSource::Kind::kWake:
          while (read(lane->wake_fd, &drained, sizeof drained) < 0 && errno == EINTR) {
          }
          break;
        case EpollSource::Kind::kTimer:
          while (read(lane->timer_fd, &drained, sizeof drained) < 0 && errno == EINTR) {
          }
          lane->timer_armed_ns.store(UINT64_MAX, std::memory_order_relaxed);
          break;
        default:
          break;  // only lane 0 serves listeners, connections and the channel
      }
    }
    if (lane->has_inbox.load(std::memory_order_acquire)) TakeInbox(lane);
    now = lane->answered_ns != 0 ? lane->answered_ns : lane->clock.Now();
    lane->answered_ns = 0;
    if (!lane->tally.empty() && (queue_->DueNs() <= now || TallyDueNs(*lane) <= now)) DrainTally(lane);
    if (lane->queued) queue_->Flush(now);
  }
  DrainTally(lane);
  MarkEnded(lane);
}

// The lane, at the park flag. Lane 0 parks last: it first takes what the others handed it (they
// are parked, so nothing more comes), so a successor is never handed a notification only this
// process's memory knows of.
void Engine::ParkLane(Lane* lane) {
  // A successor (or a restart) reads the counts from JS's counters: they go out before the pause.
  DrainTally(lane);
  std::unique_lock<std::mutex> lock(park_mu_);
  if (lane == primary_) {
    park_cv_.wait(lock, [this] { return parked_ + 1 >= lanes_.size() || !park_requested_ || stop_requested_.load(); });
    lock.unlock();
    if (lane->has_inbox.load(std::memory_order_acquire)) TakeInbox(lane);
    channel_->FlushAll();
    DrainTally(lane);
    queue_->Flush();
    lock.lock();
  }
  parked_++;
  park_cv_.notify_all();
  park_cv_.wait(lock, [this] { return !park_requested_ || stop_requested_.load(); });
  parked_--;
}

// A lane other than 0, for a notification its container's rules did not answer while a control
// plane is attached or awaited: the container moves to lane 0 (sessions and the channel are its),
// so what it asks next costs no hand-over. The lane touches the container no more after Send.
void Engine::MoveToPrimary(Lane* lane, Container* container, const Notification& n, const Event& event, size_t blob,
                           bool rules_again) {
  // A rule's emulation keeps its receipt open across the move (lane 0 opens the same slot again):
  // a crash meanwhile leaves the successor the call to apply the rule to, not a bare id that
  // would get the default.
  if (!rules_again) journal_->CloseReceipt(container->receipt_slot);
  Handover handover;
  handover.kind = Handover::Kind::kVisit;
  handover.rules_again = rules_again;
  handover.notification = n;
  handover.event = event;
  handover.strings.assign(lane->strings.get(), blob);
  LetGo(lane, container, primary_, std::move(handover));
}

// Engine thread: a visitor that answered kGoHomeAfter notifications in a row by itself.
void Engine::SendHome(Container* container) {
  container->native_streak = 0;
  Handover handover;
  handover.kind = Handover::Kind::kHome;
  LetGo(primary_, container, container->home, std::move(handover));
}

// A lane other than 0: no task is left in the container's filter (or its fd failed).
void Engine::HandRemoval(Lane* lane, Container* container) {
  // Its counts before its 'removed' (lane 0 pushes that).
  DrainTally(lane);
  Handover handover;
  handover.kind = Handover::Kind::kRemove;
  LetGo(lane, container, primary_, std::move(handover));
}

// The lane serving `container`: it leaves that lane's epoll set, served by nobody until `to` takes
// `handover` (Serve, or lane 0's removal); `from` touches it no more.
void Engine::LetGo(Lane* from, Container* container, Lane* to, Handover&& handover) {
  epoll_ctl(from->epoll_fd, EPOLL_CTL_DEL, container->fd, nullptr);
  DropMirror(from, container);
  if (from == primary_ && container->home != primary_) primary_->visitors.fetch_sub(1, std::memory_order_relaxed);
  container->lane.store(nullptr, std::memory_order_release);
  handover.handle = container->handle;
  Send(to, std::move(handover));
}

// Any thread (an orphan too: it touches nothing of the engine but `to`, which outlives it).
void Engine::Send(Lane* to, Handover&& handover) {
  {
    std::lock_guard<std::mutex> lock(to->inbox_mu);
    to->inbox.push_back(std::move(handover));
  }
  to->has_inbox.store(true, std::memory_order_release);
  WakeLane(to);
}

// The lane taking `container` (or the JS thread adding it to a lane that shares the process's file
// table); on a lane with a table of its own, its fd's copy is there (Adopt).
bool Engine::Serve(Lane* lane, Container* container) {
  if (lane == primary_ && container->home != primary_) primary_->visitors.fetch_add(1, std::memory_order_relaxed);
  container->lane.store(lane, std::memory_order_release);
  return EpollControl(lane->epoll_fd, EPOLL_CTL_ADD, container->fd, container, EPOLLIN) == 0;
}

// The lane (or the JS thread at Stop, every lane ended): everything in its inbox, in order.
std::vector<Engine::Handover> Engine::TakeAll(Lane* lane) {
  std::vector<Handover> taken;
  std::lock_guard<std::mutex> lock(lane->inbox_mu);
  taken.swap(lane->inbox);
  lane->has_inbox.store(false, std::memory_order_relaxed);
  return taken;
}

// The lane serving `container`: its fd is done. Lane 0 removes it; another lane hands it over.
void Engine::RemoveServed(Lane* lane, Container* container) {
  if (lane == primary_) {
    RemoveContainer(container);
  } else {
    HandRemoval(lane, container);
  }
}

// The lane.
void Engine::TakeInbox(Lane* lane) {
  for (Handover& h : TakeAll(lane)) {
    // Never freed on its way (nobody serves it to ask for that), nor before lane 0 took a removal.
    Container* container = FindContainer(h.handle);
    if (container == nullptr) {
      if (h.kind == Handover::Kind::kDecide) journal_->ReleaseInFlight(h.journal_slot);
      continue;
    }
    if (h.rehome) {
      // Lane 0, from a lane that could not copy its fd (Adopt): its home from now on.
      container->home->containers.fetch_sub(1, std::memory_order_relaxed);
      container->home = primary_;
      primary_->containers.fetch_add(1, std::memory_order_relaxed);
    }
    bool forwarded = false;
    switch (h.kind) {
      case Handover::Kind::kRemove:
        RemoveContainer(container);
        break;
      case Handover::Kind::kDecide:
        DecideReturned(lane, container, &h);
        break;
      case Handover::Kind::kHome:
      case Handover::Kind::kVisit:
      case Handover::Kind::kResume:
      case Handover::Kind::kAdopt:
        if (!Adopt(lane, container, &h, &forwarded)) {
          // Cannot happen with a valid fd (it was in an epoll set a moment ago).
          queue_->PushError("epoll_ctl(ADD) of container " + std::to_string(h.handle) + "'s notify fd on lane " +
                            std::to_string(lane->index) + " failed: " + ErrnoText(errno) +
                            "; closing it: its notified syscalls now fail with ENOSYS");
          RemoveServed(lane, container);
          break;
        }
        if (forwarded) break;  // to lane 0, for good
        if (h.kind == Handover::Kind::kVisit) {
          journal_->OpenReceipt(container->receipt_slot, h.notification);
          if (h.rules_again) {
            memcpy(lane->strings.get(), h.strings.data(), h.strings.size());
            (void)DecideRead(lane, container, h.notification, &h.event, h.strings.size());
          } else {
            DecideUnanswered(lane, container, h.notification, &h.event, h.strings.data(), h.strings.size());
          }
          journal_->CloseReceipt(container->receipt_slot);
        } else if (h.kind == Handover::Kind::kResume) {
          DecideReturned(lane, container, &h);
        }
        break;
    }
  }
}

// JS thread (Stop, every lane ended, under mu_): a container moved to lane 0 with a notification
// lane 0 never took: the default, as for what was pending.
void Engine::AnswerUntakenVisits() {
  for (const auto& lane : lanes_) {
    for (const Handover& h : TakeAll(lane.get())) {
      // JS never had its notification: its answer stands for it.
      const bool carries = h.kind == Handover::Kind::kVisit || h.kind == Handover::Kind::kResume || h.kind == Handover::Kind::kDecide;
      if (carries) AnswerDetachedLocked(h.notification, Unseen{h.notification.nr, h.notification.arch});
    }
  }
}

}  // namespace seccomp_agent
