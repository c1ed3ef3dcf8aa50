// Handoff: a successor connects to the handoff socket (only a process of our own user), JS reads
// its hello, the engine thread parks (nothing is received or answered), every fd goes to the
// successor with a summary, and once it acks this engine answers nothing more.
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine.hpp"
#include "engine_names.hpp"
#include "unique_fd.h"

namespace seccomp_agent {

// JS thread.
bool Engine::ListenHandoff(const std::string& path, unsigned mode, std::string* error) {
  if (stopped_ || handoff_fd_ >= 0) {
    *error = stopped_ ? "the engine is stopped" : "the handoff socket is served already";
    return false;
  }
  int fd = handoff::Listen(path, mode, error);
  if (fd < 0) return false;
  handoff_fd_ = fd;
  if (EpollControl(primary_->epoll_fd, EPOLL_CTL_ADD, fd, &handoff_source_, EPOLLIN) != 0) {
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

// JS thread.
void Engine::SetAccepting(bool accepting) {
  if (!stopped_) ingest_->SetAccepting(accepting);
}

// JS thread: returns once every lane waits in its loop (holding nothing), lane 0 last, having
// taken what the others handed it.
void Engine::Park() {
  if (!thread_started_) return;
  std::unique_lock<std::mutex> lock(park_mu_);
  park_requested_ = true;
  park_flag_.store(true, std::memory_order_release);
  for (const auto& lane : lanes_) WakeLane(lane.get());
  park_cv_.wait(lock, [this] { return parked_ == lanes_.size(); });
}

// JS thread.
void Engine::Unpark() {
  {
    std::lock_guard<std::mutex> lock(park_mu_);
    park_requested_ = false;
    park_flag_.store(false, std::memory_order_release);
  }
  park_cv_.notify_all();
}

// The flag is the filter's, shared with every copy of its fd: a successor that restored them (it
// sets each one sync) before it failed left them so, whatever this engine's advisors counted.
void Engine::ResetWakeModesLocked() {
  for (const auto& entry : containers_) {
    Container* container = entry.second.get();
    const bool spread = container->wake.mode() == WakeModeAdvisor::Mode::kSpread;
    // Refused: its filter has no task left; it goes, and its removal takes it off the gauge.
    if (spread && !SwitchWakeMode(container, WakeModeAdvisor::Mode::kSync)) continue;
    container->wake.Restart();
  }
}

// JS thread.
bool Engine::HandOff(int conn, int timeout_ms, std::string* summary, uint64_t* paused_ns, std::string* error) {
  Fd owned(conn);  // closed on failure; kept open on success until Stop() (the successor's sign)
  if (stopped_ || handed_over_) {
    *error = stopped_ ? "the engine is stopped" : "handed over already";
    handoff::SendRefusal(conn, *error);
    return false;
  }
  handoff::FormatVersions reads;
  if (!handoff::ReadHello(conn, timeout_ms, &reads, error)) return false;
  const bool records_file = reads.ReadsRecordsFile();
  // From here until the successor acks, nobody answers: this is the pause a workload sees.
  const uint64_t parked_at = MonotonicNs();
  Park();
  std::vector<handoff::NamedFd> fds;
  // A successor that does not read the records file (0.1.0) gets a memfd per container, made here
  // and closed once sent (its copies are the successor's).
  std::vector<Fd> record_memfds;
  size_t pending = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : ingest_->ListenerFds()) fds.push_back(handoff::NamedFd{fd, "listener"});
    fds.push_back(handoff::NamedFd{journal_->fd(), "journal"});
    fds.push_back(handoff::NamedFd{replay_book_->fd(), "replays"});
    if (records_file) fds.push_back(handoff::NamedFd{records_->fd(), kRecordsName});
    for (const auto& entry : containers_) {
      fds.push_back(handoff::NamedFd{entry.second->fd, NotifyName(entry.first)});
      std::string json, record_error;
      int memfd = -1;
      if (!records_file && records_->Read(entry.second->record, entry.first, &json, &record_error) &&
          WriteSealedMemfd(json, &memfd, &record_error)) {
        record_memfds.emplace_back(memfd);
        fds.push_back(handoff::NamedFd{memfd, RecordName(entry.first)});
      }
      if (entry.second->policy_fd >= 0) fds.push_back(handoff::NamedFd{entry.second->policy_fd, PolicyName(entry.first)});
    }
    pending = pending_.size();
    *summary = "{\"containers\":" + std::to_string(containers_.size()) + ",\"inFlight\":" + std::to_string(pending) +
               ",\"pid\":" + std::to_string(getpid()) + "}";
  }
  if (!handoff::SendEntries(conn, fds, *summary, error) || !handoff::WaitAck(conn, timeout_ms, error)) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ResetWakeModesLocked();
    }
    Unpark();
    return false;
  }
  *paused_ns = MonotonicNs() - parked_at;
  journal_->Detach();
  records_->Detach();
  handed_over_ = true;
  handoff_conn_ = owned.Release();
  for (const handoff::NamedFd& f : fds) {
    if (HandleOfName(f.name, 'r') == 0) UnstoreFd(f.name);  // a record memfd made for the handoff was never stored
  }
  return true;
}

}  // namespace seccomp_agent
