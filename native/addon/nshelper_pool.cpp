#include "nshelper_pool.hpp"

#include "monotonic_clock.h"
#include "namespace_link.h"
#include "notify_fd.hpp"
#include "nshelper_requests.hpp"
#include "nshelper_spawn.hpp"
#include "seccomp_compat.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

namespace seccomp_agent {
namespace {

constexpr uint64_t kWakeId = 0;
constexpr uint64_t kTimerId = 1;  // helper ids start at 1: a helper's data is at least 2

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// The inode of /proc/<pid>/ns/mnt (namespace_link.h); 0: the task is gone.
uint64_t ReadMountNamespace(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/ns/mnt", int(pid));
  NamespaceLinkText link;
  return ReadNamespaceLink(AT_FDCWD, path, &link) ? NamespaceInode(link) : 0;
}

}  // namespace

NsHelperPool::NsHelperPool(const NsHelperPoolOptions& options) : options_(options) {}

std::unique_ptr<NsHelperPool> NsHelperPool::Start(const NsHelperPoolOptions& options, std::string* error) {
  std::unique_ptr<NsHelperPool> pool(new NsHelperPool(options));
  if (!pool->Init(error)) return nullptr;
  return pool;
}

bool NsHelperPool::Init(std::string* error) {
  if (access(options_.helper_path.c_str(), X_OK) != 0) {
    *error = "helper " + options_.helper_path + " is not executable: " + strerror(errno);
    return false;
  }
  if (options_.max_helpers == 0 || options_.request_timeout_ms == 0) {
    *error = "max_helpers and request_timeout_ms must be positive";
    return false;
  }
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  epoll_event tev = {};
  tev.events = EPOLLIN;
  tev.data.u64 = kTimerId;
  if (epoll_ < 0 || wake_ < 0 || timer_ < 0 || epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev) != 0 ||
      epoll_ctl(epoll_, EPOLL_CTL_ADD, timer_, &tev) != 0) {
    *error = std::string("epoll/eventfd/timerfd: ") + strerror(errno);
    CloseFd(&epoll_);
    CloseFd(&wake_);
    CloseFd(&timer_);
    return false;
  }
  // The thread spawns every helper: their PR_SET_PDEATHSIG follows this thread, which lives until
  // Stop(), so helpers never outlive the pool. pthread_create, not std::thread: built without C++
  // exceptions, a std::thread that cannot start aborts the process; this one fails with its errno.
  int rc = pthread_create(&thread_, nullptr, &NsHelperPool::ThreadMain, this);
  if (rc != 0) {
    *error = std::string("cannot start the helper pool's thread: pthread_create: ") + strerror(rc);
    CloseFd(&epoll_);
    CloseFd(&wake_);
    CloseFd(&timer_);
    return false;
  }
  joinable_ = true;
  return true;
}

// Pool thread.
void* NsHelperPool::ThreadMain(void* self) {
  static_cast<NsHelperPool*>(self)->Run();
  return nullptr;
}

NsHelperPool::~NsHelperPool() { Stop(); }

void NsHelperPool::Submit(NsHelperJob job) {
  Pending p;
  p.submitted_ns = MonotonicNs();
  p.job = std::move(job);
  stat_in_flight_++;
  // Its namespace, read here only when some helper could take it directly (Route reads it otherwise).
  if (!options_.spawn_per_call && !p.job.precomputed && p.job.header.pid > 0 && ready_count_.load() > 0) {
    p.key = MountNamespaceOf(p.job.owner, pid_t(p.job.header.pid));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_) {
      if (p.key != 0 && SendDirect(p)) return;
      p.tag = next_tag_++;
      submitted_.push_back(std::move(p));
      Wake();
      return;
    }
  }
  Complete(p, nshelper::Response{}, ECANCELED);  // inline: the pool thread has finished
}

// Any thread: the key of (owner, pid), kept (mount_namespace_cache.hpp) or read now.
uint64_t NsHelperPool::MountNamespaceOf(uint64_t owner, pid_t pid) {
  uint64_t key = mount_keys_.Find(owner, pid);
  if (key != 0) return key;
  key = ReadMountNamespace(pid);
  mount_keys_.Keep(owner, pid, key);
  return key;
}

void NsHelperPool::Forget(uint64_t owner) {
  mount_keys_.Forget(owner);
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  forgotten_.push_back(owner);
  Wake();
}

// Under mutex_, so the eventfd cannot be closed by Stop() under the write.
void NsHelperPool::Wake() {
  uint64_t one = 1;
  if (wake_ >= 0) (void)!write(wake_, &one, sizeof(one));
}

void NsHelperPool::Stop(bool let_go) {
  if (stopped_.exchange(true)) return;
  letting_go_ = let_go;
  stopping_ = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Wake();
  }
  if (joinable_) pthread_join(thread_, nullptr);
  joinable_ = false;
  // The thread set closed_ before it finished: nobody writes to the eventfd any more.
  std::lock_guard<std::mutex> lock(mutex_);
  CloseFd(&epoll_);
  CloseFd(&wake_);
  CloseFd(&timer_);
}

NsHelperPoolStats NsHelperPool::Stats() const {
  NsHelperPoolStats s;
  s.helpers = stat_helpers_;
  s.spawned = stat_spawned_;
  s.died = stat_died_;
  s.timed_out = stat_timed_out_;
  s.in_flight = stat_in_flight_;
  s.retried = stat_retried_;
  s.direct = stat_direct_;
  s.doorbells = stat_doorbells_;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Pool thread.

void NsHelperPool::Run() {
  epoll_event events[32];
  while (!stopping_.load()) {
    int n = epoll_wait(epoll_, events, 32, NextTimeoutMs(MonotonicNs()));
    if (n < 0 && errno != EINTR) break;  // cannot happen with a valid epoll fd; stop cleanly
    // New requests go out before the answers of earlier ones are read: a container waits on the
    // first, the bookkeeping of the second (its event, its slot) waits on nobody. A helper that
    // answered its previous request just before this one arrived would otherwise put that answer
    // on this request's path, every time. Deaths are taken first, so that a request does not go
    // to a helper that is already gone.
    bool timer_fired = false;
    for (int i = 0; i < n; ++i) {
      const uint64_t data = events[i].data.u64;
      if (data == kWakeId || data == kTimerId) {
        uint64_t count;
        (void)!read(data == kWakeId ? wake_ : timer_, &count, sizeof(count));
        timer_fired |= data == kTimerId;
        continue;
      }
      auto it = helpers_.find(data >> 1);
      if (it != helpers_.end() && (data & 1)) OnExit(it->second.get());
    }
    if (!stopping_.load()) DrainSubmissions(timer_fired);
    for (int i = 0; i < n; ++i) {
      const uint64_t data = events[i].data.u64;
      if (data == kWakeId || data == kTimerId || (data & 1)) continue;
      auto it = helpers_.find(data >> 1);
      if (it != helpers_.end()) OnReadable(it->second.get());
    }
    if (stopping_.load()) break;
    ProcessForgotten();
    CheckTimers(MonotonicNs());
  }
  // Shutdown: every request gets ECANCELED, every helper is killed and reaped.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  DrainSubmissions(true);
  for (auto& entry : helpers_) {
    Helper* h = entry.second.get();
    Reclaim(h);
    CompletePosted(h);
    FailAll(h, ECANCELED);
    for (Pending& p : h->backlog) Complete(p, nshelper::Response{}, ECANCELED);
    h->backlog.clear();
    if (!letting_go_) {
      syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, nullptr, 0);
      ReapHelperProcess(h->pidfd, true);
    }
    CloseFd(&h->sock);
    CloseFd(&h->pidfd);
  }
  helpers_.clear();
  kept_by_key_.clear();
  stat_helpers_ = 0;
  while (!waiting_.empty()) {
    Complete(waiting_.front(), nshelper::Response{}, ECANCELED);
    waiting_.pop_front();
  }
}

void NsHelperPool::DrainSubmissions(bool timer_fired) {
  std::vector<Pending> batch;
  std::vector<DirectSent> direct;
  {
    // Forgets are taken with the submissions they followed: a request submitted just before its
    // owner was forgotten is routed (its helper gets the owner) before the owner is dropped, so
    // that helper does not outlive the container until its idle timeout.
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(submitted_);
    direct.swap(direct_sent_);
    // What the timer was armed for is adopted now and timed by NextTimeoutMs. It stays armed
    // until it fires: a request sent after this one has a later deadline, so one wake-up at the
    // earliest is enough for all, and the next direct send does not arm it again (a syscall on
    // every emulated call's path, since the pool drains after every answer).
    if (timer_fired) timer_armed_ns_ = 0;
    forgotten_taken_.insert(forgotten_taken_.end(), forgotten_.begin(), forgotten_.end());
    forgotten_.clear();
  }
  for (DirectSent& d : direct) {
    auto it = helpers_.find(d.helper_id);
    if (it == helpers_.end()) {
      // Unreachable: a helper's exit reclaims what was sent to it before it is forgotten.
      Complete(d.pending, nshelper::Response{}, EIO);
      continue;
    }
    Adopt(it->second.get(), std::move(d.pending));
  }
  for (Pending& p : batch) {
    if (stopping_.load()) {
      Complete(p, nshelper::Response{}, ECANCELED);
    } else {
      Route(std::move(p));
    }
  }
}

void NsHelperPool::Route(Pending p) {
  if (p.job.precomputed) {
    nshelper::Response r = p.job.response;
    r.tag = p.tag;
    if ((p.job.header.flags & nshelper::kRespond) && p.job.notify_fd >= 0 &&
        NotifySendErrno(p.job.notify_fd, p.job.header.notif_id, r.err, &r.send_err)) {
      r.flags |= nshelper::kAnswered;
    }
    Complete(p, r, 0);
    return;
  }
  if (!options_.spawn_per_call && p.key == 0) {
    p.key = p.job.header.pid > 0 ? MountNamespaceOf(p.job.owner, pid_t(p.job.header.pid)) : 0;
    if (p.key == 0) {
      // The target is gone: answer as the helper would have, without spawning one.
      nshelper::Response r = {};
      r.magic = nshelper::kMagic;
      r.version = nshelper::kVersion;
      r.tag = p.tag;
      r.stage = nshelper::kStageOpenProc;
      r.err = ESRCH;
      Complete(p, r, 0);
      return;
    }
  }
  Helper* helper = nullptr;
  if (!options_.spawn_per_call) {
    auto it = kept_by_key_.find(p.key);
    if (it != kept_by_key_.end()) helper = it->second;
  }
  if (!helper) {
    size_t live = 0;
    Helper* idlest = nullptr;
    for (auto& entry : helpers_) {
      Helper* h = entry.second.get();
      if (options_.spawn_per_call || !h->retiring) ++live;
      if (!h->retiring && h->in_flight.empty() && h->backlog.empty() &&
          (!idlest || h->last_used_ns < idlest->last_used_ns)) {
        idlest = h;
      }
    }
    if (live >= options_.max_helpers) {
      if (options_.spawn_per_call || !idlest) {
        waiting_.push_back(std::move(p));
        return;
      }
      Retire(idlest, false);  // the least recently used idle helper makes room
    }
    int err = 0;
    helper = Spawn(options_.spawn_per_call ? 0 : p.key, &err);
    if (!helper) {
      Complete(p, nshelper::Response{}, err);
      return;
    }
  }
  if (p.job.owner) {
    helper->owners.insert(p.job.owner);
  }
  helper->backlog.push_back(std::move(p));
  Pump(helper);
}

NsHelperPool::Helper* NsHelperPool::Spawn(uint64_t key, int* err) {
  std::unique_ptr<Helper> h(new Helper);
  HelperCommand command;
  if (!h->replies.Create(&command.replies_fd, err)) return nullptr;
  command.helper_path = options_.helper_path;
  command.once = options_.spawn_per_call;
  command.busy_poll_us = options_.busy_poll_us;
  command.request_timeout_ms = options_.request_timeout_ms;
  command.nice = options_.helper_nice;
  // Its namespace's partition of the replay book (the one an earlier helper for it wrote, also
  // one of a predecessor data plane), at fd 5; the copy given is above every fd the child sets.
  if (options_.replay_book != nullptr) {
    std::set<int> busy;
    for (const auto& entry : helpers_) busy.insert(entry.second->partition);
    const int partition = options_.replay_book->Assign(key, busy, MonotonicNs());
    if (partition >= 0) command.book_fd = fcntl(options_.replay_book->fd(), F_DUPFD_CLOEXEC, replay_book::kBookFd + 1);
    if (command.book_fd >= 0) command.book_partition = partition;
  }
  HelperProcess process;
  const bool started = StartHelperProcess(command, &process, err);
  if (command.book_fd >= 0) close(command.book_fd);
  close(command.replies_fd);
  if (!started) return nullptr;
  h->id = next_helper_id_++;
  h->key = key;
  h->partition = command.book_partition;
  h->pid = process.pid;
  h->pidfd = process.pidfd;
  h->sock = process.sock;
  h->last_used_ns = MonotonicNs();
  epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = h->id << 1;
  epoll_event pev = {};
  pev.events = EPOLLIN;
  pev.data.u64 = (h->id << 1) | 1;
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, h->sock, &ev) != 0 || epoll_ctl(epoll_, EPOLL_CTL_ADD, h->pidfd, &pev) != 0) {
    *err = errno;
    syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, nullptr, 0);
    ReapHelperProcess(h->pidfd, true);
    CloseFd(&h->pidfd);
    CloseFd(&h->sock);
    return nullptr;
  }
  stat_spawned_++;
  stat_helpers_++;
  Helper* raw = h.get();
  if (!options_.spawn_per_call) kept_by_key_[key] = raw;
  helpers_[raw->id] = std::move(h);
  return raw;
}

void NsHelperPool::Pump(Helper* h) {
  if (h->backlog.empty()) {
    // Nothing for this thread to send: `h` stays ready, its room brought up to date.
    AdoptDirectSent(h);
    Publish(h);
    return;
  }
  Reclaim(h);
  size_t window = options_.spawn_per_call ? 1 : kWindow;
  while (!h->backlog.empty() && h->in_flight.size() < window && h->sock >= 0) {
    Pending& p = h->backlog.front();
    // EAGAIN: the next answer pumps again; EPIPE: the pidfd reports the exit.
    if (!SendNsHelperRequest(h->sock, p.job, p.tag)) return;
    p.sent_ns = MonotonicNs();
    h->last_used_ns = p.sent_ns;
    h->in_flight.push_back(std::move(p));
    h->backlog.pop_front();
  }
  Publish(h);
}

// Pool thread: the helper rang. The socket carries doorbells only (nshelper_protocol.h); the
// responses are in the ring.
void NsHelperPool::OnReadable(Helper* h) {
  if (h->sock < 0) return;
  bool broken = false;
  for (;;) {
    nshelper::Doorbell bell;
    ssize_t n = recv(h->sock, &bell, sizeof(bell), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) {
      // EOF or error: the helper is exiting; its pidfd completes the story.
      epoll_ctl(epoll_, EPOLL_CTL_DEL, h->sock, nullptr);
      break;
    }
    if (n != ssize_t(sizeof(bell)) || bell.magic != nshelper::kDoorbellMagic) {
      broken = true;
      break;
    }
    stat_doorbells_++;
  }
  TakeReplies(h, broken);
}

// Pool thread: every response `h` has posted, matched in order to what it has in hand; `broken`
// (a bad doorbell, or a response out of step) fails the rest and kills it.
void NsHelperPool::TakeReplies(Helper* h, bool broken) {
  AdoptDirectSent(h);
  Answered answered;
  broken = !MatchPosted(h, &answered) || broken;
  if (broken) {
    FailAll(h, EPROTO);
    Retire(h, true);
  } else {
    Pump(h);  // publishes `h` again when its window has room
    // A retired helper that has given its last answer gets EOF and exits.
    if (h->retiring && h->in_flight.empty() && h->backlog.empty()) CloseFd(&h->sock);
  }
  // Their callers hear of these answers only now: a caller that makes its next request on hearing
  // finds `h` ready for it (a serial workload's every request goes direct, never racing this thread).
  for (auto& a : answered) Complete(a.first, a.second, 0);
}

void NsHelperPool::OnExit(Helper* h) {
  Reclaim(h);
  ReapHelperProcess(h->pidfd, false);
  bool expected = h->retiring || (options_.spawn_per_call && h->in_flight.empty() && h->backlog.empty());
  if (!expected) stat_died_++;
  CompletePosted(h);
  // What it still had in hand: once more to a fresh helper for the same namespace, which takes
  // the partition's lock the death released and finds there what this one did (an intent, an
  // act, a note: nshelper_replay.hpp), or finds the notification answered (stale: nothing done).
  // A request whose second helper dies too, or any while the pool stops, fails as before.
  std::deque<Pending> again;
  while (!h->in_flight.empty()) {
    Pending& p = h->in_flight.front();
    if (!expected && !p.retried && !stopping_.load()) {
      p.retried = true;
      stat_retried_++;
      again.push_back(std::move(p));
    } else {
      Complete(p, nshelper::Response{}, EIO);
    }
    h->in_flight.pop_front();
  }
  for (auto it = h->backlog.rbegin(); it != h->backlog.rend(); ++it) waiting_.push_front(std::move(*it));
  h->backlog.clear();
  for (auto it = again.rbegin(); it != again.rend(); ++it) waiting_.push_front(std::move(*it));
  auto kept = kept_by_key_.find(h->key);
  if (kept != kept_by_key_.end() && kept->second == h) kept_by_key_.erase(kept);
  CloseFd(&h->sock);
  CloseFd(&h->pidfd);
  stat_helpers_--;
  helpers_.erase(h->id);
  RetryWaiting();
}

// Pool thread: each response `h` posted, with its request (the front of its in_flight), moved to
// `answered` in order. False at one out of step (not for the request it should answer), or a ring
// written past its size: `h` is broken, and what it still has in hand is the caller's.
bool NsHelperPool::MatchPosted(Helper* h, Answered* answered) {
  if (h->replies.Overrun()) return false;
  nshelper::Response r;
  while (h->replies.Take(&r)) {
    // `h` stays ready while its answers are read: an answer to what Submit sent it since is
    // adopted here, in order, before it is matched.
    if (h->in_flight.empty() || r.tag != h->in_flight.front().tag) AdoptDirectSent(h);
    if (r.magic != nshelper::kMagic || h->in_flight.empty() || r.tag != h->in_flight.front().tag) return false;
    answered->emplace_back(std::move(h->in_flight.front()), r);
    h->in_flight.pop_front();
    h->last_used_ns = MonotonicNs();
  }
  return true;
}

// Pool thread, when `h` died or the pool stops: the responses it posted, rung for or not, still
// count; whatever it had in hand after them is the caller's to retry or fail.
void NsHelperPool::CompletePosted(Helper* h) {
  Answered answered;
  MatchPosted(h, &answered);
  for (auto& a : answered) Complete(a.first, a.second, 0);
}

void NsHelperPool::Retire(Helper* h, bool kill) {
  Reclaim(h);
  if (!h->retiring) {
    h->retiring = true;
    auto kept = kept_by_key_.find(h->key);
    if (kept != kept_by_key_.end() && kept->second == h) kept_by_key_.erase(kept);
  }
  if (kill) {
    syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, nullptr, 0);
  } else if (h->in_flight.empty() && h->sock >= 0) {
    CloseFd(&h->sock);  // EOF: the helper exits by itself
  }
  for (auto it = h->backlog.rbegin(); it != h->backlog.rend(); ++it) waiting_.push_front(std::move(*it));
  h->backlog.clear();
}

void NsHelperPool::FailAll(Helper* h, int err) {
  while (!h->in_flight.empty()) {
    Complete(h->in_flight.front(), nshelper::Response{}, err);
    h->in_flight.pop_front();
  }
}

void NsHelperPool::Complete(Pending& p, const nshelper::Response& response, int internal_err) {
  nshelper::Response r = response;
  if (internal_err != 0) {
    r = nshelper::Response{};
    r.tag = p.tag;
    // No helper answered: a notification that was to be answered still gets one, or its syscall
    // would wait until the engine's own fd closes; unless a successor has it (Stop's let_go).
    if ((p.job.header.flags & nshelper::kRespond) && p.job.notify_fd >= 0 && !letting_go_.load()) {
      r.err = options_.failure_errno;
      if (NotifySendErrno(p.job.notify_fd, p.job.header.notif_id, options_.failure_errno, &r.send_err)) {
        r.flags |= nshelper::kAnswered;
      }
    }
  }
  if (p.retried) r.flags |= nshelper::kRetriedAfterHelperDeath;
  CloseFd(&p.job.notify_fd);
  stat_in_flight_--;
  if (p.job.done) p.job.done(r, internal_err, MonotonicNs() - p.submitted_ns);
  p.job.done = nullptr;
}

void NsHelperPool::CheckTimers(uint64_t now) {
  const uint64_t timeout = uint64_t(options_.request_timeout_ms) * 1000000ull;
  const uint64_t idle = uint64_t(options_.idle_timeout_ms) * 1000000ull;
  std::vector<Helper*> stuck, idle_helpers;
  const auto late = [&](const Helper* h) { return !h->in_flight.empty() && now - h->in_flight.front().sent_ns > timeout; };
  // TakeReplies may complete calls (whose callers may submit, adding helpers) inside this loop:
  // safe, as helpers_ is a std::map and only OnExit erases from it.
  for (auto& entry : helpers_) {
    Helper* h = entry.second.get();
    // A helper rings for a batch of responses, or when it goes idle: what it posted is taken before
    // its oldest request is called late (one that hangs after answering others strands none).
    if (late(h)) TakeReplies(h, false);
    if (late(h)) {
      stuck.push_back(h);
    } else if (!h->retiring && h->in_flight.empty() && h->backlog.empty() && now - h->last_used_ns > idle) {
      idle_helpers.push_back(h);
    }
  }
  for (Helper* h : stuck) {
    if (!h->retiring) stat_timed_out_++;
    FailAll(h, ETIMEDOUT);
    Retire(h, true);
  }
  for (Helper* h : idle_helpers) Retire(h, false);
  while (!waiting_.empty() && now - waiting_.front().submitted_ns > timeout) {
    Complete(waiting_.front(), nshelper::Response{}, ETIMEDOUT);
    waiting_.pop_front();
  }
  if (!stuck.empty() || !idle_helpers.empty()) RetryWaiting();
}

void NsHelperPool::ProcessForgotten() {
  std::vector<uint64_t> owners;
  owners.swap(forgotten_taken_);
  if (owners.empty()) return;
  std::vector<Helper*> done;
  for (auto& entry : helpers_) {
    Helper* h = entry.second.get();
    bool had = false;
    for (uint64_t o : owners) had |= h->owners.erase(o) > 0;
    if (had && h->owners.empty() && !h->retiring) done.push_back(h);
  }
  // A helper still answering is retired too: its socket closes once its last answer is in.
  for (Helper* h : done) Retire(h, false);
  RetryWaiting();
}

void NsHelperPool::RetryWaiting() {
  std::deque<Pending> again;
  again.swap(waiting_);
  while (!again.empty()) {
    Pending p = std::move(again.front());
    again.pop_front();
    Route(std::move(p));
  }
}

int NsHelperPool::NextTimeoutMs(uint64_t now) const {
  if (helpers_.empty() && waiting_.empty()) return -1;
  uint64_t next = UINT64_MAX;
  const uint64_t timeout = uint64_t(options_.request_timeout_ms) * 1000000ull;
  const uint64_t idle = uint64_t(options_.idle_timeout_ms) * 1000000ull;
  for (auto& entry : helpers_) {
    const Helper* h = entry.second.get();
    if (!h->in_flight.empty()) {
      next = std::min(next, h->in_flight.front().sent_ns + timeout);
    } else if (!h->retiring) {
      next = std::min(next, h->last_used_ns + idle);
    }
  }
  if (!waiting_.empty()) next = std::min(next, waiting_.front().submitted_ns + timeout);
  if (next == UINT64_MAX) return 1000;
  if (next <= now) return 0;
  uint64_t ms = (next - now) / 1000000ull + 1;
  return int(std::min<uint64_t>(ms, 60000));
}

}  // namespace seccomp_agent
