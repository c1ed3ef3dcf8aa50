// The runtime side of the seccomp agent protocol (OCI `listenerPath`): listening sockets, the
// connections runc/crun make to them, reading each until its JSON ends (or EOF) with its SCM_RIGHTS fds, and the table
// of read connections waiting for JS to adopt or reject them. Everything but the JS-thread entry
// points runs non-blocking on the engine thread.
#pragma once
#include "json_boundary.hpp"
#include <sys/socket.h>

#include <cstdint>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "epoll_source.hpp"
#include "event_queue.hpp"

namespace seccomp_agent {

// JS thread. Creates a non-blocking Unix socket of `type` (stream unless said) at `path` (a stale socket file there is
// removed first, anything else there is an error), binds it, chmods it to `mode` and listens.
// Returns the fd, or -1 with *error set; `what` names the socket in messages.
int ListenUnixSocket(const std::string& path, unsigned mode, const char* what, std::string* error,
                     int type = SOCK_STREAM);

class Ingest {
 public:
  struct Options {
    uint64_t timeout_ns;  // a connection not at EOF by then is dropped ('timeout')
    size_t max_bytes;     // largest message accepted ('too-large')
  };
  enum class TakeResult { kOk, kUnknownConn, kBadIndex, kNotSeccomp };

  Ingest(int epoll_fd, EventQueue* queue, Options options);
  ~Ingest();  // CloseAll()

  // JS thread. Creates, binds, chmods and listens on a Unix socket at `path` (a stale socket file
  // there is removed first) and adds it to the epoll set. Returns its fd, or -1 with *error set.
  int Listen(const std::string& path, unsigned mode, std::string* error);
  // JS thread. Adopts an already listening socket (made non-blocking). False with *error set.
  bool ListenFd(int fd, std::string* error);
  // JS thread. Takes fd `index` of pending connection `conn` (closing its other fds) into *fd.
  // On kBadIndex/kNotSeccomp the connection stays pending.
  TakeResult Take(uint32_t conn, uint32_t index, int* fd);
  // JS thread. Closes every fd of pending connection `conn`. False when it is not pending.
  bool Reject(uint32_t conn);
  // Any thread. Connections still being read, and read ones JS has not adopted or rejected yet.
  size_t PendingConnections();
  // JS thread. Stops or resumes accepting on every listener (a handoff drains what was accepted
  // first); runtimes connecting meanwhile wait in the backlog, never refused.
  void SetAccepting(bool accepting);
  // JS thread. The listening sockets (still owned here), for a handoff.
  std::vector<int> ListenerFds();

  // Engine thread: readiness of a listener or a connection (source from epoll data).
  void OnReady(EpollSource* source, uint32_t events, uint64_t now_ns);
  // Engine thread: earliest time OnTimer has something to do (UINT64_MAX: nothing).
  uint64_t NextDeadline() const { return next_deadline_; }
  // Engine thread: drops connections past their timeout, pending ones JS left alone, and resumes
  // listeners paused after running out of fds.
  void OnTimer(uint64_t now_ns);

  // JS thread, after the engine thread is joined: closes listeners, connections, pending fds.
  void CloseAll();

 private:
  struct Listener : EpollSource {
    Listener() : EpollSource(Kind::kListener) {}
    int fd = -1;
    uint64_t paused_until = 0;  // accept4 hit EMFILE: out of the epoll set until then
  };
  struct Connection : EpollSource {
    Connection() : EpollSource(Kind::kConnection) {}
    uint64_t seq = 0;
    int fd = -1;
    Peer peer;
    uint64_t deadline = 0;
    std::string data;
    std::vector<int> fds;
    JsonBoundary boundary;  // the message may end before EOF (runc keeps the connection open)
  };
  struct Pending {
    std::vector<int> fds;
    uint32_t seccomp_mask = 0;
    uint64_t deadline = 0;
    Peer peer;
  };

  bool AddListener(int fd, std::string* error);
  void Accept(Listener* listener, uint64_t now_ns);
  void Read(Connection* conn, uint64_t now_ns);
  void Finish(Connection* conn, uint64_t now_ns);
  void Fail(Connection* conn, const char* code, const std::string& message);
  void Drop(Connection* conn);  // out of epoll, socket closed, forgotten (fds not touched)
  void RecomputeDeadline();

  const int epoll_fd_;
  EventQueue* const queue_;
  const Options options_;

  std::mutex mu_;
  std::vector<std::unique_ptr<Listener>> listeners_;  // guarded by mu_
  std::map<uint32_t, Pending> pending_;               // guarded by mu_; ascending conn = ascending deadline
  size_t pending_count_ = 0;                          // guarded by mu_

  // Engine thread only.
  std::map<uint64_t, std::unique_ptr<Connection>> connections_;  // ascending seq = ascending deadline
  uint64_t next_seq_ = 1;
  uint32_t next_conn_ = 1;
  size_t paused_listeners_ = 0;
  std::atomic<bool> accepting_{true};
  std::atomic<size_t> reading_{0};  // connections_.size(), for any thread
  uint64_t next_deadline_ = UINT64_MAX;
  std::vector<char> read_buf_;
};

}  // namespace seccomp_agent
