#include "ingest.hpp"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify_fd.hpp"
#include "scm_rights.h"
#include "unix_socket.h"

namespace seccomp_agent {
namespace {

constexpr size_t kMaxFds = 16;                           // more than this: 'too-many-fds'
constexpr uint64_t kPendingTimeoutNs = 10000000000ull;   // adopt or reject within 10 s
constexpr uint64_t kAcceptPauseNs = 100000000ull;        // after EMFILE, retry accept in 100 ms
constexpr size_t kReadChunk = 64 * 1024;
constexpr int kMaxAcceptsPerWake = 256;                  // then notifications get their turn
constexpr uint64_t kDropReportNs = 5000000000ull;        // one line per 5 s about closed connections
constexpr size_t kMaxReportedPids = 4096;                // pids remembered per report window
constexpr size_t kMaxFdReserve = 1024;

std::string ErrnoText(int err) { return std::string(strerror(err)); }

void CloseFds(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

std::string PeerText(const Peer& peer) {
  return "runtime connection from pid " + std::to_string(peer.pid) + " (uid " + std::to_string(peer.uid) + ")";
}

std::string FdsText(size_t count) {
  if (count == 0) return "it sent no fd";
  return "closed the " + std::to_string(count) + (count == 1 ? " fd it sent" : " fds it sent");
}

}  // namespace

Ingest::Ingest(int epoll_fd, EventQueue* queue, Options options)
    : epoll_fd_(epoll_fd), queue_(queue), options_(options), read_buf_(kReadChunk) {}

Ingest::~Ingest() { CloseAll(); }

int Ingest::Listen(const std::string& path, unsigned mode, std::string* error) {
  int fd = ListenUnixSocket(path, mode, "listener socket", error);
  if (fd < 0) return -1;
  if (!AddListener(fd, error)) {
    close(fd);
    return -1;
  }
  return fd;
}

bool Ingest::ListenFd(int fd, std::string* error) {
  int accepting = 0;
  socklen_t len = sizeof accepting;
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting) {
    *error = "fd " + std::to_string(fd) + " is not a listening socket";
    return false;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    *error = "fcntl on listener fd " + std::to_string(fd) + ": " + ErrnoText(errno);
    return false;
  }
  return AddListener(fd, error);
}

bool Ingest::AddListener(int fd, std::string* error) {
  auto listener = std::make_unique<Listener>();
  listener->fd = fd;
  std::lock_guard<std::mutex> lock(mu_);
  // Added while not accepting (a restore until the successor has named what it took back): it
  // waits in its backlog as the others do, until SetAccepting(true).
  if (EpollControl(epoll_fd_, EPOLL_CTL_ADD, fd, listener.get(), accepting_.load() ? static_cast<uint32_t>(EPOLLIN) : 0u) != 0) {
    *error = "epoll_ctl(ADD) of listener fd " + std::to_string(fd) + ": " + ErrnoText(errno);
    return false;
  }
  listeners_.push_back(std::move(listener));
  return true;
}

void Ingest::OnReady(EpollSource* source, uint32_t events, uint64_t now_ns) {
  if (source->kind == EpollSource::Kind::kListener) {
    Accept(static_cast<Listener*>(source), now_ns);
    return;
  }
  Connection* conn = static_cast<Connection*>(source);
  // Data, EOF and errors all show up in recvmsg; EPOLLHUP/EPOLLERR alone also lead there.
  (void)events;
  Read(conn, now_ns);
}

void Ingest::Accept(Listener* listener, uint64_t now_ns) {
  const int reserve_from = FdReserveStart();
  for (int accepted = 0; accepted < kMaxAcceptsPerWake; accepted++) {
    int fd = accept4(listener->fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        // Level-triggered: staying in the set would spin. Pause; the runtime waits in the backlog.
        if (listener->paused_until == 0 && EpollControl(epoll_fd_, EPOLL_CTL_MOD, listener->fd, listener, 0) == 0) {
          listener->paused_until = now_ns + kAcceptPauseNs;
          paused_listeners_++;
          RecomputeDeadline();
        }
        queue_->PushError("accept on the listener socket failed: " + ErrnoText(err) +
                          "; new runtime connections wait in the backlog, retrying in 100 ms");
        return;
      }
      queue_->PushError("accept on the listener socket failed: " + ErrnoText(err) + "; still listening");
      return;
    }
    Peer peer;
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      peer.pid = cred.pid;
      peer.uid = cred.uid;
      peer.gid = cred.gid;
    }
    if (!Admit(fd, peer, reserve_from, now_ns)) continue;
    auto conn = std::make_unique<Connection>();
    conn->fd = fd;
    conn->seq = next_seq_++;
    conn->deadline = now_ns + options_.timeout_ns;
    conn->peer = peer;
    if (EpollControl(epoll_fd_, EPOLL_CTL_ADD, fd, conn.get(), EPOLLIN | EPOLLRDHUP) != 0) {
      int err = errno;
      close(fd);
      queue_->PushError(PeerText(conn->peer) + ": epoll_ctl(ADD) failed: " + ErrnoText(err) + "; closed it");
      continue;
    }
    Connection* raw = conn.get();
    connections_.emplace(raw->seq, std::move(conn));
    by_pid_[peer.pid].insert(raw->seq);
    by_uid_[peer.uid].insert(raw->seq);
    reading_.store(connections_.size(), std::memory_order_relaxed);
    RecomputeDeadline();
    // A runtime sends right after connect(2): read what is there now, so it is done (and its slot
    // free) before the next connection can count it among the idle ones.
    Read(raw, now_ns);
  }
}

bool Ingest::Admit(int fd, const Peer& peer, int reserve_from, uint64_t now_ns) {
  // In the reserve: make room by closing one of ours; if none is open, the fds are the admitted
  // containers' and this connection must wait for a better moment (the runtime reports it).
  if (fd >= reserve_from && !EvictFromHeaviest(nullptr, 0, DropReason::kFdReserve, now_ns)) {
    close(fd);
    CountDrop(DropReason::kFdReserve, peer, now_ns);
    return false;
  }
  // Most specific first: closing one of the peer's own also lowers its uid's and the total count.
  auto pid = by_pid_.find(peer.pid);
  if (pid != by_pid_.end() && pid->second.size() >= options_.max_reading_per_pid) {
    EvictOldest(pid->second, 0, DropReason::kPerPid, now_ns);
  }
  auto uid = by_uid_.find(peer.uid);
  if (uid != by_uid_.end() && uid->second.size() >= options_.max_reading_per_uid) {
    EvictFromHeaviest(&peer.uid, 0, DropReason::kPerUid, now_ns);
  }
  if (connections_.size() >= options_.max_reading) EvictFromHeaviest(nullptr, 0, DropReason::kTotal, now_ns);
  return true;
}

bool Ingest::EvictFromHeaviest(const uint32_t* uid, uint64_t keep, DropReason reason, uint64_t now_ns) {
  const std::set<uint64_t>* heaviest = nullptr;
  size_t most = 0;
  for (auto& entry : by_pid_) {
    const std::set<uint64_t>& seqs = entry.second;
    size_t count = seqs.size() - seqs.count(keep);
    if (count <= most) continue;
    auto first = connections_.find(*seqs.begin());
    if (uid != nullptr && (first == connections_.end() || first->second->peer.uid != *uid)) continue;
    heaviest = &seqs;
    most = count;
  }
  return heaviest != nullptr && EvictOldest(*heaviest, keep, reason, now_ns);
}

bool Ingest::EvictOldest(const std::set<uint64_t>& group, uint64_t keep, DropReason reason, uint64_t now_ns) {
  Connection* oldest = nullptr;
  Connection* oldest_idle = nullptr;
  for (uint64_t seq : group) {
    auto it = connections_.find(seq);
    if (it == connections_.end() || seq == keep) continue;
    Connection* conn = it->second.get();
    if (oldest == nullptr) oldest = conn;
    if (conn->data.empty() && conn->fds.empty()) {
      oldest_idle = conn;
      break;
    }
  }
  Connection* victim = oldest_idle != nullptr ? oldest_idle : oldest;
  if (victim == nullptr) return false;
  CountDrop(reason, victim->peer, now_ns);
  CloseFds(&victim->fds);
  Drop(victim);
  return true;
}

void Ingest::CountDrop(DropReason reason, const Peer& peer, uint64_t now_ns) {
  size_t index = static_cast<size_t>(reason);
  dropped_[index].fetch_add(1, std::memory_order_relaxed);
  if (window_.end_ns == 0) {
    window_.end_ns = now_ns + kDropReportNs;
    if (window_.end_ns < next_deadline_) next_deadline_ = window_.end_ns;
  }
  window_.counts[index]++;
  auto it = window_.by_pid.find(peer.pid);
  if (it != window_.by_pid.end()) {
    it->second.second++;
  } else if (window_.by_pid.size() < kMaxReportedPids) {
    window_.by_pid.emplace(peer.pid, std::make_pair(peer, uint64_t(1)));
  }
}

// Engine thread, at the end of a window: one line for everything it closed.
void Ingest::ReportDrops() {
  const uint64_t* n = window_.counts;
  uint64_t total = n[0] + n[1] + n[2] + n[3];
  Peer top;
  uint64_t top_count = 0;
  for (auto& entry : window_.by_pid) {
    if (entry.second.second > top_count) {
      top = entry.second.first;
      top_count = entry.second.second;
    }
  }
  std::string text = "closed " + std::to_string(total) + " runtime connection(s) in the last " +
                     std::to_string(kDropReportNs / 1000000000ull) +
                     " s to stay within the listener's limits, the oldest idle ones first: ";
  std::vector<std::string> parts;
  if (n[0] > 0) parts.push_back(std::to_string(n[0]) + " over " + std::to_string(options_.max_reading_per_pid) + " per peer pid");
  if (n[1] > 0) parts.push_back(std::to_string(n[1]) + " over " + std::to_string(options_.max_reading_per_uid) + " per peer uid");
  if (n[2] > 0) parts.push_back(std::to_string(n[2]) + " over " + std::to_string(options_.max_reading) + " being read at once");
  if (n[3] > 0) {
    parts.push_back(std::to_string(n[3]) + " to keep " + std::to_string(reserve_) + " of the " + std::to_string(limit_) +
                    " open files (RLIMIT_NOFILE) free for admitted containers");
  }
  for (size_t i = 0; i < parts.size(); i++) text += (i ? ", " : "") + parts[i];
  text += "; most from pid " + std::to_string(top.pid) + " (uid " + std::to_string(top.uid) + "): " +
          std::to_string(top_count) + "; a runtime that sends its message at once is still admitted";
  Event event;
  event.type = EventType::kIngestError;
  event.code = "dropped";
  event.peer = top;
  event.text.length = static_cast<uint32_t>(text.size());
  queue_->Push(event, text.data(), text.size(), true);
  window_ = DropWindow();
}

int Ingest::FdReserveStart() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > INT_MAX) {
    limit_ = 0;
    reserve_ = 0;
    return INT_MAX;
  }
  limit_ = static_cast<size_t>(limit.rlim_cur);
  size_t reserve = limit_ / 16;
  if (reserve < options_.min_fd_reserve) reserve = options_.min_fd_reserve;
  if (reserve > kMaxFdReserve) reserve = kMaxFdReserve;
  reserve_ = reserve;
  return limit_ > reserve ? static_cast<int>(limit_ - reserve) : 0;
}

Ingest::DropCounts Ingest::Dropped() const {
  DropCounts counts;
  counts.per_pid = dropped_[0].load(std::memory_order_relaxed);
  counts.per_uid = dropped_[1].load(std::memory_order_relaxed);
  counts.total = dropped_[2].load(std::memory_order_relaxed);
  counts.fd_reserve = dropped_[3].load(std::memory_order_relaxed);
  return counts;
}

void Ingest::Read(Connection* conn, uint64_t now_ns) {
  int reserve_from = -1;  // read once, when fds arrive
  for (;;) {
    struct iovec iov = {read_buf_.data(), read_buf_.size()};
    bool truncated = false;
    // The fds land in conn->fds first: even a message we refuse must not leak what it carried.
    const size_t had = conn->fds.size();
    ssize_t n = scm_rights::Receive(conn->fd, &iov, 1, MSG_DONTWAIT, &conn->fds, &truncated);
    if (n < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      Fail(conn, "read-error", "reading it failed: " + ErrnoText(err));
      return;
    }
    // Each received fd in the reserve costs another connection its place; with none other open,
    // this one goes.
    for (size_t i = had; i < conn->fds.size(); i++) {
      if (reserve_from < 0) reserve_from = FdReserveStart();
      if (conn->fds[i] >= reserve_from && !EvictFromHeaviest(nullptr, conn->seq, DropReason::kFdReserve, now_ns)) {
        CountDrop(DropReason::kFdReserve, conn->peer, now_ns);
        CloseFds(&conn->fds);
        Drop(conn);
        return;
      }
    }
    // A stream never truncates data; MSG_CTRUNC means fds were cut.
    if (truncated || conn->fds.size() > kMaxFds) {
      Fail(conn, "too-many-fds", "it sent more than " + std::to_string(kMaxFds) + " fds");
      return;
    }
    if (n == 0) {
      Finish(conn, now_ns);
      return;
    }
    if (conn->data.size() + static_cast<size_t>(n) > options_.max_bytes) {
      Fail(conn, "too-large", "its message is larger than " + std::to_string(options_.max_bytes) + " bytes");
      return;
    }
    conn->data.append(read_buf_.data(), static_cast<size_t>(n));
    if (conn->boundary.Feed(read_buf_.data(), static_cast<size_t>(n))) {
      Finish(conn, now_ns);
      return;
    }
  }
}

void Ingest::Finish(Connection* conn, uint64_t now_ns) {
  Event event;
  event.type = EventType::kConnection;
  event.peer = conn->peer;
  event.fd_count = static_cast<uint8_t>(conn->fds.size());
  for (size_t i = 0; i < conn->fds.size(); i++) {
    if (IsSeccompNotifyFd(conn->fds[i])) event.seccomp_mask |= 1u << i;
  }
  event.text.length = static_cast<uint32_t>(conn->data.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    event.conn = next_conn_++;
    if (next_conn_ == 0) next_conn_ = 1;
    Pending& pending = pending_[event.conn];
    pending.fds.swap(conn->fds);
    pending.seccomp_mask = event.seccomp_mask;
    pending.deadline = now_ns + kPendingTimeoutNs;
    pending.peer = conn->peer;
    pending_count_ = pending_.size();
  }
  // Dropped when the queue is full: the pending entry then expires in 10 s with an error event.
  queue_->Push(event, conn->data.data(), conn->data.size(), true);
  Drop(conn);
}

void Ingest::Fail(Connection* conn, const char* code, const std::string& message) {
  size_t count = conn->fds.size();
  CloseFds(&conn->fds);
  std::string text = PeerText(conn->peer) + ": " + message + "; closed the connection, " + FdsText(count);
  Event event;
  event.type = EventType::kIngestError;
  event.code = code;
  event.peer = conn->peer;
  event.text.length = static_cast<uint32_t>(text.size());
  queue_->Push(event, text.data(), text.size(), true);
  Drop(conn);
}

void Ingest::Drop(Connection* conn) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn->fd, nullptr);
  close(conn->fd);
  auto pid = by_pid_.find(conn->peer.pid);
  if (pid != by_pid_.end() && pid->second.erase(conn->seq) > 0 && pid->second.empty()) by_pid_.erase(pid);
  auto uid = by_uid_.find(conn->peer.uid);
  if (uid != by_uid_.end() && uid->second.erase(conn->seq) > 0 && uid->second.empty()) by_uid_.erase(uid);
  connections_.erase(conn->seq);  // frees conn
  reading_.store(connections_.size(), std::memory_order_relaxed);
  RecomputeDeadline();
}

void Ingest::OnTimer(uint64_t now_ns) {
  if (window_.end_ns != 0 && window_.end_ns <= now_ns) ReportDrops();
  while (!connections_.empty() && connections_.begin()->second->deadline <= now_ns) {
    Connection* conn = connections_.begin()->second.get();
    Fail(conn, "timeout",
         "it did not finish its message within " + std::to_string(options_.timeout_ns / 1000000) + " ms");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!pending_.empty() && pending_.begin()->second.deadline <= now_ns) {
      auto it = pending_.begin();
      size_t count = it->second.fds.size();
      CloseFds(&it->second.fds);
      queue_->PushError("runtime connection " + std::to_string(it->first) + " from pid " +
                        std::to_string(it->second.peer.pid) + " was neither adopted nor rejected within 10 s; " +
                        FdsText(count));
      pending_.erase(it);
    }
    pending_count_ = pending_.size();
    if (paused_listeners_ > 0) {
      for (auto& listener : listeners_) {
        if (listener->paused_until == 0 || listener->paused_until > now_ns) continue;
        EpollControl(epoll_fd_, EPOLL_CTL_MOD, listener->fd, listener.get(), accepting_.load() ? static_cast<uint32_t>(EPOLLIN) : 0u);
        listener->paused_until = 0;
        paused_listeners_--;
      }
    }
  }
  RecomputeDeadline();
}

// Engine thread. Entries taken by JS since only make the true deadline later: a stale, earlier
// value costs one spurious wake-up, never a missed one.
void Ingest::RecomputeDeadline() {
  uint64_t next = window_.end_ns != 0 ? window_.end_ns : UINT64_MAX;
  if (!connections_.empty() && connections_.begin()->second->deadline < next) next = connections_.begin()->second->deadline;
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_.empty() && pending_.begin()->second.deadline < next) next = pending_.begin()->second.deadline;
  if (paused_listeners_ > 0) {
    for (auto& listener : listeners_) {
      if (listener->paused_until != 0 && listener->paused_until < next) next = listener->paused_until;
    }
  }
  next_deadline_ = next;
}

Ingest::TakeResult Ingest::Take(uint32_t conn, uint32_t index, int* fd) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(conn);
  if (it == pending_.end()) return TakeResult::kUnknownConn;
  Pending& pending = it->second;
  if (index >= pending.fds.size()) return TakeResult::kBadIndex;
  if (((pending.seccomp_mask >> index) & 1u) == 0) return TakeResult::kNotSeccomp;
  *fd = pending.fds[index];
  for (size_t i = 0; i < pending.fds.size(); i++) {
    if (i != index) close(pending.fds[i]);
  }
  pending_.erase(it);
  pending_count_ = pending_.size();
  return TakeResult::kOk;
}

bool Ingest::Reject(uint32_t conn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(conn);
  if (it == pending_.end()) return false;
  CloseFds(&it->second.fds);
  pending_.erase(it);
  pending_count_ = pending_.size();
  return true;
}

size_t Ingest::PendingConnections() {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_count_ + reading_.load(std::memory_order_relaxed);
}

void Ingest::SetAccepting(bool accepting) {
  std::lock_guard<std::mutex> lock(mu_);
  accepting_.store(accepting);
  for (auto& listener : listeners_) {
    EpollControl(epoll_fd_, EPOLL_CTL_MOD, listener->fd, listener.get(), accepting ? static_cast<uint32_t>(EPOLLIN) : 0u);
  }
}

std::vector<int> Ingest::ListenerFds() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> fds;
  for (auto& listener : listeners_) fds.push_back(listener->fd);
  return fds;
}

std::vector<std::string> Ingest::ListenerPaths() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> paths;
  for (auto& listener : listeners_) paths.push_back(SocketPath(listener->fd));
  return paths;
}

void Ingest::CloseAll() {
  for (auto& entry : connections_) {
    CloseFds(&entry.second->fds);
    close(entry.second->fd);
  }
  connections_.clear();
  by_pid_.clear();
  by_uid_.clear();
  window_ = DropWindow();
  reading_.store(0, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& listener : listeners_) close(listener->fd);
  listeners_.clear();
  for (auto& entry : pending_) CloseFds(&entry.second.fds);
  pending_.clear();
  pending_count_ = 0;
  next_deadline_ = UINT64_MAX;
}

}  // namespace seccomp_agent
