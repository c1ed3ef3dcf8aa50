// The read watch: a lane's thread reads path arguments from the notifying task's memory
// (process_vm_readv), and a task can make that read wait forever: a page registered with a
// userfaultfd whose faults nobody resolves, or a file mapped from a FUSE server that never answers.
// Only a fatal signal ends such a wait, and this thread's would end the data plane. So the watch
// gives the lane a new thread instead: the stuck one becomes an orphan, which touches nothing of
// the lane but its inbox once its read returns (it hands the notification back, kResume, and
// ends). The container whose memory stalled leaves the lane's epoll set until then: its other
// notifications wait in the kernel, as its task's own call would wait on that page, and it holds
// at most one thread however many of its tasks try. The reads made off a lane's loop (a restore's
// on the main thread, a predecessor's notification decided anew on lane 0) run on a thread of their
// own instead (ReadArgsBounded), waited for as long, then handed over the same way.
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "engine.hpp"
#include "engine_names.hpp"
#include "path_args.h"
#include "quiet_thread.hpp"

namespace seccomp_agent {
namespace {

// A read that takes this long is taken over. A page fault that reads from a disk under memory
// pressure can take tens of milliseconds; a false alarm costs a thread's start, nothing else.
constexpr uint64_t kReadStallNs = 50'000'000;
constexpr uint64_t kWatchPeriodNs = 20'000'000;
// Orphans alive at once, in the process. Past it a stalled read holds its lane, as before the
// watch: each orphan is a thread (and a read buffer) for as long as its container holds the page.
constexpr size_t kMaxOrphans = 64;

std::atomic<size_t> g_live_orphans{0};
thread_local bool t_orphaned = false;

}  // namespace

// A read on a thread of its own (ReadArgsBounded), shared by the reader and the one waiting for it.
struct Engine::BoundedRead {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;       // guarded by mu: the reader finished in time
  bool abandoned = false;  // guarded by mu: the waiter gave up; the reader hands the result to `lane`
  EngineLane* lane = nullptr;
  LaneHandover::Kind kind = LaneHandover::Kind::kResume;  // what it hands over (kDecide: deferred_slot's)
  uint32_t deferred_slot = UINT32_MAX;
  int fd = -1;  // a copy of the container's notify fd, the reader's to close
  Notification notification;
  Event event;
  size_t blob = 0;
  ArgsRead result = ArgsRead::kGone;
  std::unique_ptr<char[]> buffer{new char[kLaneStringsBytes]};
};

bool Engine::Orphaned() { return t_orphaned; }

size_t Engine::LiveOrphans() { return g_live_orphans.load(std::memory_order_acquire); }

// JS thread (Start, after the lanes).
bool Engine::StartReadWatch(std::string* error) {
  const int rc = StartQuietThread(&watch_thread_, &Engine::ReadWatchMain, this);
  if (rc != 0) {
    *error = "pthread_create of the read watch: " + ErrnoText(rc);
    return false;
  }
  watch_started_ = true;
  return true;
}

// JS thread (Stop, after every lane's thread ended: until then a stuck one still needs the watch).
void Engine::StopReadWatch() {
  if (!watch_started_) return;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watch_stop_ = true;
  }
  watch_cv_.notify_all();
  pthread_join(watch_thread_, nullptr);
  watch_started_ = false;
}

void* Engine::ReadWatchMain(void* self) {
  pthread_setname_np(pthread_self(), "seccomp-readwatch");
  static_cast<Engine*>(self)->WatchReads();
  return nullptr;
}

// The read watch's thread.
void Engine::WatchReads() {
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!watch_stop_) {
    watch_cv_.wait_for(lock, std::chrono::nanoseconds(kWatchPeriodNs));
    if (watch_stop_) break;
    const uint64_t now = MonotonicNs();
    for (const auto& lane : lanes_) {
      if (lane->needs_thread) {
        GiveThread(lane.get());
        continue;
      }
      const uint64_t since = lane->read_since_ns.load(std::memory_order_acquire);
      if (since == 0 || now < since + kReadStallNs) continue;
      // A stop takes over whatever the cap says: Stop waits for every lane's thread to end.
      if (LiveOrphans() >= kMaxOrphans && !stop_requested_.load(std::memory_order_relaxed)) {
        if (!orphan_cap_reported_) {
          orphan_cap_reported_ = true;
          queue_->PushError("lane " + std::to_string(lane->index) + "'s thread is stuck reading a task's memory and " +
                            std::to_string(kMaxOrphans) + " threads already wait on such reads: the lane waits for it (every " +
                            "container it serves is held until that read returns)");
        }
        continue;
      }
      TakeOver(lane.get(), since);
    }
    // What it said goes now: the lane it pushed for may be asleep, or lane 0 with no batch due.
    queue_->Flush(MonotonicNs());
  }
}

// The read watch's thread. The lane's thread is in ReadPathArgs, in a read begun at `since_ns`,
// touching nothing of the lane but its own read buffer, which it keeps.
void Engine::TakeOver(Lane* lane, uint64_t since_ns) {
  const int fd = lane->reading_fd.load(std::memory_order_relaxed);
  Event event;
  event.type = EventType::kReadStall;
  event.handle = lane->reading_handle.load(std::memory_order_relaxed);
  event.pid = lane->reading_pid.load(std::memory_order_relaxed);
  event.id = lane->index;
  uint64_t expected = since_ns;
  // The thread clears it as its read returns: whoever clears it first decides whose the lane is.
  if (!lane->read_since_ns.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return;
  g_live_orphans.fetch_add(1, std::memory_order_acq_rel);
  // Served again when the read returns (DecideReturned). Only lane 0 frees a container, and only one its
  // lane handed over, or its own: this one, whose lane's thread is stuck, stays.
  epoll_ctl(lane->epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
  (void)lane->strings.release();  // the orphan frees the buffer it reads into
  lane->strings.reset(new char[kLaneStringsBytes]);
  lane->read_takeovers.fetch_add(1, std::memory_order_relaxed);
  event.ns = MonotonicNs() - since_ns;
  queue_->Push(event, true);
  lane->needs_thread = true;
  GiveThread(lane);
}

// The read watch's thread: a thread for `lane`, which has none since TakeOver (tried again at
// each period while pthread_create fails; the lane's containers wait meanwhile).
void Engine::GiveThread(Lane* lane) {
  pthread_t thread;
  const int rc = lane == primary_ ? StartQuietThread(&thread, &Engine::ThreadMain, this)
                                  : StartQuietThread(&thread, &Engine::LaneMain, lane);
  if (rc != 0) {
    if (!lane->thread_error_reported) {
      lane->thread_error_reported = true;
      queue_->PushError("lane " + std::to_string(lane->index) + " lost its thread to a stalled read and cannot get a new one (" +
                        "pthread_create: " + ErrnoText(rc) + "); trying again every " +
                        std::to_string(kWatchPeriodNs / 1000000) + " ms, its containers wait meanwhile");
    }
    return;
  }
  pthread_detach(thread);
  if (lane == primary_) {
    thread_ = thread;
  } else {
    lane->thread = thread;
  }
  lane->needs_thread = false;
  lane->thread_error_reported = false;
}

// A thread whose read outlived the watch (a lane's former thread, a bounded read's reader), as the
// read returns. What it may touch: `lane` (its inbox and wake fd: the engine keeps lanes and their
// fds while orphans live) and its own stack. Not a container: lane 0 may have freed it meanwhile.
void Engine::HandBackOrphaned(Lane* lane, Handover::Kind kind, uint32_t journal_slot, const Notification& n,
                              const Event& event, const char* strings, size_t blob) {
  Handover handover;
  handover.kind = kind;
  handover.handle = n.handle;
  handover.journal_slot = journal_slot;
  handover.notification = n;
  handover.event = event;
  handover.strings.assign(strings, blob);
  t_orphaned = true;
  Send(lane, std::move(handover));
  g_live_orphans.fetch_sub(1, std::memory_order_acq_rel);
}

// Runs ReadPathArgs for a BoundedRead (its argument: a heap copy of the shared pointer).
void* Engine::BoundedReadMain(void* arg) {
  std::shared_ptr<BoundedRead> read(std::move(*static_cast<std::shared_ptr<BoundedRead>*>(arg)));
  delete static_cast<std::shared_ptr<BoundedRead>*>(arg);
  pthread_setname_np(pthread_self(), "seccomp-read");
  read->result = ReadPathArgs(nullptr, read->fd, &read->event, read->buffer.get(), &read->blob);
  close(read->fd);
  std::unique_lock<std::mutex> lock(read->mu);
  if (!read->abandoned) {
    read->done = true;
    read->cv.notify_all();
    return nullptr;
  }
  lock.unlock();
  // Gone meanwhile: the lane learns it from ID_VALID (DecideReturned), as after any read.
  HandBackOrphaned(read->lane, read->kind, read->deferred_slot, read->notification, read->event, read->buffer.get(), read->blob);
  return nullptr;
}

// Restore (JS thread, under mu_) or DecideDeferred (lane 0): see engine.hpp.
Engine::ArgsRead Engine::ReadArgsBounded(Container* container, const Notification& n, Event* event, char* buffer,
                                         size_t* blob, uint32_t deferred_slot) {
  // Nothing to read (a getppid held for a control plane): no thread.
  if (PathArgMask(CanonicalNr(event->arch, event->nr)) == 0) return ReadPathArgs(nullptr, container->fd, event, buffer, blob);
  auto read = std::make_shared<BoundedRead>();
  read->fd = fcntl(container->fd, F_DUPFD_CLOEXEC, 0);
  if (read->fd < 0) return ReadPathArgs(nullptr, container->fd, event, buffer, blob);  // no fd to spare: as before
  read->notification = n;
  read->event = *event;
  pthread_t thread;
  auto* arg = new std::shared_ptr<BoundedRead>(read);
  if (StartQuietThread(&thread, &Engine::BoundedReadMain, arg) != 0) {
    delete arg;
    close(read->fd);
    return ReadPathArgs(nullptr, container->fd, event, buffer, blob);
  }
  pthread_detach(thread);
  std::unique_lock<std::mutex> lock(read->mu);
  if (read->cv.wait_for(lock, std::chrono::nanoseconds(kReadStallNs), [&read] { return read->done; })) {
    *event = read->event;
    *blob = read->blob;
    memcpy(buffer, read->buffer.get(), read->blob);
    return read->result;
  }
  read->abandoned = true;
  g_live_orphans.fetch_add(1, std::memory_order_acq_rel);
  bounded_read_stalls_.fetch_add(1, std::memory_order_relaxed);
  if (deferred_slot != UINT32_MAX) {
    read->kind = Handover::Kind::kDecide;
    read->deferred_slot = deferred_slot;
    read->lane = primary_;
    return ArgsRead::kOrphaned;
  }
  read->lane = container->lane.load(std::memory_order_relaxed);
  // Served again when the read returns. No lane runs yet: its epoll set is this thread's to change.
  epoll_ctl(read->lane->epoll_fd, EPOLL_CTL_DEL, container->fd, nullptr);
  return ArgsRead::kOrphaned;
}

// Restore, under mu_: ReadArgsBounded; true when read. A read still going is in the journal as its
// lane's receipts are (a crash before it is decided leaves it to the next data plane), and said.
bool Engine::ReadAtRestore(Container* container, const Notification& n, Event* event, size_t* blob, RestoreResult* result) {
  const ArgsRead read = ReadArgsBounded(container, n, event, primary_->strings.get(), blob);
  if (read != ArgsRead::kOrphaned) return read == ArgsRead::kRead;
  if (!container->receipt_reserved) {
    container->receipt_slot = journal_->ReserveReceipt();
    container->receipt_reserved = true;
  }
  journal_->OpenReceipt(container->receipt_slot, n);
  result->problems.push_back("notification " + std::to_string(n.id) + " of container handle " + std::to_string(n.handle) +
                             ": reading its path arguments from task " + std::to_string(n.pid) + " has taken over " +
                             std::to_string(kReadStallNs / 1000000) + " ms (a page its userfaultfd or FUSE server holds?); " +
                             "its engine thread decides it when that read returns, and serves the container again then");
  return false;
}

// The lane taking `h` (TakeInbox): a notification whose read outlived the watch, decided now as if
// that read had just returned. kResume: its lane's new thread, the container served again, its
// receipt closed once decided; kDecide: lane 0, a predecessor's waiter, its journal slot released.
void Engine::DecideReturned(Lane* lane, Container* container, Handover* h) {
  PushReturned(lane, h->notification);
  Outcome outcome = Outcome::kAnswered;
  // As after any read: what was read is the task's only if the notification still waits.
  if (NotifyIdValid(container->fd, h->notification.id)) {
    memcpy(lane->strings.get(), h->strings.data(), h->strings.size());
    outcome = DecideRead(lane, container, h->notification, &h->event, h->strings.size());
  }
  if (h->kind == Handover::Kind::kDecide) {
    journal_->ReleaseInFlight(h->journal_slot);
  } else if (outcome != Outcome::kMoved) {
    journal_->CloseReceipt(container->receipt_slot);
  }
}

// The 'read-stall' event of a read that returned, on `lane`, which decides `n` now.
void Engine::PushReturned(Lane* lane, const Notification& n) {
  Event event = NotificationEvent(n);  // its handle, task and call
  event.type = EventType::kReadStall;
  event.id = lane->index;
  event.ns = Elapsed(n.received_ns, MonotonicNs());
  event.returned = true;
  queue_->Push(event, true);
}

}  // namespace seccomp_agent
