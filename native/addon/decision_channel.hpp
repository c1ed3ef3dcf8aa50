// The decision channel's server (docs/decision-channel.md, frames in decision_channel.h): the
// listening socket, its connections, their framing and buffers. Runs on the engine thread, inside
// the engine's epoll set: a connection must present a session token in a Hello within 5 s; once
// bound, the engine queues Notification frames to it (one write per connection per epoll
// iteration) and receives its Decision frames in batches. Sessions, ownership and answers are
// the engine's (ChannelSessions); this file knows sockets and bytes. A connection that asked for
// shared-memory rings gets them with its Ready (decision_channel_rings.cpp): its frames then go
// through them, and the socket only wakes a side that sleeps.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "channel_ring.hpp"
#include "decision_channel.h"
#include "epoll_source.hpp"
#include "event_queue.hpp"

namespace seccomp_agent {

// A frame header, flags 0, at `at` (frames are not aligned in a stream).
inline void PutHeader(char* at, uint32_t length, uint16_t type) {
  decision_channel::FrameHeader header;
  header.length = length;
  header.type = type;
  header.flags = 0;
  memcpy(at, &header, sizeof header);
}

// Queued output of one connection: appended at the tail, written from the head.
class ChannelOutput {
 public:
  size_t size() const { return data_.size() - head_; }
  const char* data() const { return data_.data() + head_; }
  // Room for `n` more bytes at the tail (no allocation once the capacity was reached before).
  char* Append(size_t n);
  void Consume(size_t n);

 private:
  std::vector<char> data_;
  size_t head_ = 0;
};

// One accepted connection. Engine thread only, except `session`, which the engine reads under
// its own lock after Bind.
struct ChannelConn : EpollSource {
  ChannelConn() : EpollSource(Kind::kChannelConn) {}
  uint64_t seq = 0;
  int fd = -1;
  int32_t peer_pid = -1;
  uint64_t session = 0;    // 0 until a Hello bound it
  uint64_t deadline = 0;   // unbound: the Hello is due by then
  bool closed = false;     // out of epoll, fd closed; freed at the end of the iteration
  bool dirty = false;      // in the flush list
  bool want_out = false;   // EPOLLOUT armed: the socket was full
  std::unique_ptr<char[]> in;
  size_t in_len = 0;
  ChannelOutput out;
  std::unique_ptr<ChannelRing> ring;  // when the Hello asked for the shared-memory rings
  bool ring_put = false;              // notifications went into the ring this iteration
};

// The engine's side: sessions and the notifications they own. Engine thread, no lock held.
class ChannelSessions {
 public:
  virtual ~ChannelSessions() = default;
  // A Hello with this 16-byte token: the session `conn` now serves, or 0 with *why set (refused).
  virtual uint64_t BindChannel(ChannelConn* conn, const uint8_t* token, std::string* why) = 0;
  // Decision frames read from `conn` of `session` in one read, in order.
  virtual void ApplyDecisions(ChannelConn* conn, uint64_t session, const decision_channel::DecisionBody* decisions,
                              size_t count) = 0;
  // `conn` of `session` closed (for any reason): it no longer receives notifications.
  virtual void UnbindChannel(ChannelConn* conn, uint64_t session) = 0;
};

class DecisionChannel {
 public:
  DecisionChannel(int epoll_fd, EventQueue* queue, ChannelSessions* sessions);
  ~DecisionChannel();  // CloseAll()

  // JS thread. Creates the socket (like the runtime listener, mode applied before listen) and adds
  // it to the epoll set. False with *error set; only one per engine.
  bool Listen(const std::string& path, unsigned mode, std::string* error);

  // Engine thread: readiness of the listener or a connection.
  void OnReady(EpollSource* source, uint32_t events, uint64_t now_ns);
  // Engine thread: earliest time OnTimer has something to do (UINT64_MAX: nothing).
  uint64_t NextDeadline() const { return next_deadline_; }
  // Engine thread: closes connections that sent no Hello in time; resumes a paused listener.
  void OnTimer(uint64_t now_ns);
  // Engine thread: queues a Notification frame for `event` (its strings in `blob`; received at
  // event.ns) of container `container_id` to `conn`. False when it cannot take it (closed, or its
  // output went over the bound: then it is closed).
  bool QueueNotification(ChannelConn* conn, const Event& event, const char* blob, const std::string& container_id);
  // Engine thread, each iteration: applies the decisions waiting in every connection's ring;
  // true when it took any.
  bool PollRings();
  // Engine thread, before it blocks in epoll_wait: tells every ring's control plane it sleeps
  // (a decision put then comes with a kWake on the socket). False when decisions came meanwhile:
  // do not block. Awake() after the wait.
  bool MaySleep();
  void Awake();
  // Engine thread: whether a ring holds decisions (a load per ring, no syscall).
  bool RingsHaveData() const;
  bool HasRings() const { return rings_ > 0; }

  // Engine thread: closes the connection bound to `session`, if any ('channel' closed, `reason`).
  void CloseSession(uint64_t session, const char* reason);
  // Engine thread, at the end of each epoll iteration: one write per connection with output
  // queued, then frees the connections closed during the iteration.
  void FlushAll();

  // JS thread, after the engine thread is joined: closes the listener and every connection.
  void CloseAll();

 private:
  struct Listener : EpollSource {
    Listener() : EpollSource(Kind::kChannelListener) {}
    int fd = -1;
  };

  void Accept(Listener* listener, uint64_t now_ns);
  void Read(ChannelConn* conn);
  // Parses the complete frames in conn->in; false when the connection was closed.
  bool ParseFrames(ChannelConn* conn);
  // Applies the whole frames of in[0, length) and sets *consumed to their bytes; false when the
  // connection was closed (a bad frame).
  bool ParseFrameBytes(ChannelConn* conn, const char* in, size_t length, size_t* consumed);
  bool OnHello(ChannelConn* conn, uint16_t flags, const char* body, size_t length);
  // The Ready frame, with the rings' memfd when the Hello asked for them and they could be made.
  void SendReady(ChannelConn* conn, bool want_ring);
  void EncodeNotification(char* p, size_t length, const Event& event, const char* name, size_t name_length,
                          const char* blob, const std::string& container_id, size_t id_length) const;
  void Write(ChannelConn* conn);
  void MarkDirty(ChannelConn* conn);
  void Close(ChannelConn* conn, const std::string& reason);
  void RecomputeDeadline();
  void PushChannelEvent(uint64_t session, bool connected, const std::string& reason);

  const int epoll_fd_;
  EventQueue* const queue_;
  ChannelSessions* const sessions_;

  // JS thread (Listen, CloseAll); the engine thread sees the listener only through its events.
  std::unique_ptr<Listener> listener_;
  std::string path_;

  // Engine thread only.
  Listener* paused_ = nullptr;  // accept4 ran out of fds: out of the epoll set until paused_until_
  uint64_t paused_until_ = 0;
  std::vector<std::unique_ptr<ChannelConn>> conns_;
  std::vector<std::unique_ptr<ChannelConn>> closed_;  // freed by FlushAll
  std::vector<ChannelConn*> dirty_;
  std::vector<decision_channel::DecisionBody> decisions_;
  std::vector<char> frame_scratch_;          // a notification frame on its way into a ring
  std::unique_ptr<char[]> ring_in_;           // decisions taken from a ring (kToEngineBytes)
  size_t rings_ = 0;                          // open connections with rings
  uint64_t next_seq_ = 1;
  uint64_t next_deadline_ = UINT64_MAX;
  const int64_t wall_offset_ns_;  // CLOCK_REALTIME - CLOCK_MONOTONIC when made: a frame's receivedAt
};

}  // namespace seccomp_agent
