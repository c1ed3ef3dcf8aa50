// The runtime side of the seccomp agent protocol (OCI `listenerPath`): listening sockets, the
// connections runc/crun make to them, reading each until its JSON ends (or EOF) with its SCM_RIGHTS fds, and the table
// of read connections waiting for JS to adopt or reject them. Everything but the JS-thread entry
// points runs non-blocking on the engine thread.
//
// Bounded: at most max_reading connections are read at once, max_reading_per_uid and
// max_reading_per_pid per peer (SO_PEERCRED), and no fd numbered in the reserve (the top of
// RLIMIT_NOFILE) is kept for a connection being read: that room is for the notify fds, records and
// pidfds of the runtimes already admitted. A new connection over a cap closes the oldest idle one
// of its group (then the oldest; for the uid and total caps, of the pid holding the most), so a
// runtime that sends at once always gets in; what is closed is counted by reason and told in one
// line per 5 s.
#pragma once
#include "json_boundary.hpp"
#include <sys/socket.h>

#include <cstdint>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "epoll_source.hpp"
#include "event_queue.hpp"

namespace seccomp_agent {

class Ingest {
 public:
  struct Options {
    uint64_t timeout_ns;  // a connection not at EOF by then is dropped ('timeout')
    size_t max_bytes;     // largest message accepted ('too-large')
    size_t max_reading = 1024;         // connections being read at once
    size_t max_reading_per_uid = 768;  // ... from one peer uid
    size_t max_reading_per_pid = 16;   // ... from one peer pid (a runtime sends one per notify fd)
    size_t min_fd_reserve = 64;        // fds kept free below RLIMIT_NOFILE: 1/16 of it, 64 to 1024
  };
  enum class TakeResult { kOk, kUnknownConn, kBadIndex, kNotSeccomp };
  // Why a connection was closed to keep within the limits (the order of DropCounts).
  enum class DropReason { kPerPid, kPerUid, kTotal, kFdReserve };
  struct DropCounts {
    uint64_t per_pid = 0, per_uid = 0, total = 0, fd_reserve = 0;
  };

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
  // Any thread. Connections closed to keep within the limits, since the start, by reason.
  DropCounts Dropped() const;
  // JS thread. Stops or resumes accepting on every listener (a handoff drains what was accepted
  // first); runtimes connecting meanwhile wait in the backlog, never refused.
  void SetAccepting(bool accepting);
  // JS thread. The listening sockets (still owned here), for a handoff.
  std::vector<int> ListenerFds();
  // JS thread. The path each listening socket is bound to (getsockname), in the order they were
  // added: what the runtimes' listenerPath may name ("" for a socket with no path).
  std::vector<std::string> ListenerPaths();

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

  // The drops of the current report window (one log line at its end).
  struct DropWindow {
    uint64_t end_ns = 0;  // 0: no window open
    uint64_t counts[4] = {0, 0, 0, 0};
    std::unordered_map<int32_t, std::pair<Peer, uint64_t>> by_pid;  // bounded: see CountDrop
  };

  bool AddListener(int fd, std::string* error);
  void Accept(Listener* listener, uint64_t now_ns);
  void Read(Connection* conn, uint64_t now_ns);
  void Finish(Connection* conn, uint64_t now_ns);
  void Fail(Connection* conn, const char* code, const std::string& message);
  void Drop(Connection* conn);  // out of epoll, socket closed, forgotten (fds not touched)
  // Engine thread. Admits connection `fd` from `peer` within the caps, closing others as needed.
  // False: not admitted (fd closed and counted).
  bool Admit(int fd, const Peer& peer, int reserve_from, uint64_t now_ns);
  // Engine thread. Closes the oldest idle connection of `group`, else its oldest, never `keep`;
  // false when there is none.
  bool EvictOldest(const std::set<uint64_t>& group, uint64_t keep, DropReason reason, uint64_t now_ns);
  // Engine thread. The same within the connections of the peer pid that holds the most of them
  // (of uid `*uid`, or of any uid when null): a flood pays before a runtime's single connection
  // (crun's stays idle while it creates the container).
  bool EvictFromHeaviest(const uint32_t* uid, uint64_t keep, DropReason reason, uint64_t now_ns);
  // Engine thread. Counts one closed connection and opens a report window if none is open.
  void CountDrop(DropReason reason, const Peer& peer, uint64_t now_ns);
  // Engine thread. The window's one line (an ingest-error event, code "dropped"), then a new window.
  void ReportDrops();
  // Engine thread. The first fd number of the reserve (INT_MAX: no limit); refreshes limit_, reserve_.
  int FdReserveStart();
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
  std::unordered_map<int32_t, std::set<uint64_t>> by_pid_;       // seqs of connections_ by peer pid
  std::unordered_map<uint32_t, std::set<uint64_t>> by_uid_;      // ... by peer uid
  DropWindow window_;
  size_t limit_ = 0;    // RLIMIT_NOFILE as last read (0: unlimited)
  size_t reserve_ = 0;  // fds kept free below it
  std::atomic<uint64_t> dropped_[4] = {};
  uint64_t next_seq_ = 1;
  uint32_t next_conn_ = 1;
  size_t paused_listeners_ = 0;
  std::atomic<bool> accepting_{true};
  std::atomic<size_t> reading_{0};  // connections_.size(), for any thread
  uint64_t next_deadline_ = UINT64_MAX;
  std::vector<char> read_buf_;
};

}  // namespace seccomp_agent
