#include "decision_channel.hpp"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <array>

#include "monotonic_clock.h"
#include "path_args.h"
#include "seccomp_compat.h"
#include "unix_socket.h"

namespace seccomp_agent {
namespace {

using decision_channel::DecisionBody;
using decision_channel::FrameHeader;
using decision_channel::kMaxFrame;
using decision_channel::NotificationBody;
using decision_channel::StringHeader;

constexpr uint64_t kHelloTimeoutNs = 5000000000ull;
constexpr size_t kMaxUnbound = 16;                    // connections waiting for their Hello
constexpr size_t kInCapacity = 2 * kMaxFrame;         // always room for one whole frame after a partial one
constexpr size_t kReadBudget = 1024 * 1024;           // per readiness; level-triggered epoll brings the rest
constexpr size_t kMaxOutput = 4 * 1024 * 1024;        // a control plane this far behind is not reading
constexpr uint64_t kAcceptPauseNs = 100000000ull;     // after EMFILE, accept again in 100 ms

std::string ErrnoText(int err) { return std::string(strerror(err)); }

// The syscall's name in its own ABI (i386's "mkdir" for 39, "stat64" for 195), for the
// Notification frame (nullptr: not in the tables).
const char* SyscallName(uint32_t arch, uint32_t nr) { return SyscallNameOf(arch, nr); }

// CLOCK_REALTIME minus CLOCK_MONOTONIC, in ns: turns a receipt time into a wall-clock one.
int64_t WallOffsetNs() {
  const uint64_t real = ClockNs(CLOCK_REALTIME);
  return static_cast<int64_t>(real) - static_cast<int64_t>(MonotonicNs());
}

}  // namespace

char* ChannelOutput::Append(size_t n) {
  if (head_ == data_.size()) {
    data_.clear();
    head_ = 0;
  }
  size_t at = data_.size();
  data_.resize(at + n);
  return data_.data() + at;
}

void ChannelOutput::Consume(size_t n) {
  head_ += n;
  if (head_ == data_.size()) {
    data_.clear();
    head_ = 0;
  } else if (head_ > data_.size() / 2) {
    // Mostly written: move the rest to the front so the buffer does not creep.
    data_.erase(data_.begin(), data_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
}

DecisionChannel::DecisionChannel(int epoll_fd, EventQueue* queue, ChannelSessions* sessions)
    : epoll_fd_(epoll_fd), queue_(queue), sessions_(sessions), wall_offset_ns_(WallOffsetNs()) {}

DecisionChannel::~DecisionChannel() { CloseAll(); }

bool DecisionChannel::Listen(const std::string& path, unsigned mode, std::string* error) {
  if (listener_ != nullptr) {
    *error = "the decision channel already listens on " + path_;
    return false;
  }
  int fd = ListenUnixSocket(path, mode, "decision channel socket", error);
  if (fd < 0) return false;
  auto listener = std::make_unique<Listener>();
  listener->fd = fd;
  // Published before the fd enters the epoll set: the engine thread sees it only through an event.
  listener_ = std::move(listener);
  path_ = path;
  if (EpollControl(epoll_fd_, EPOLL_CTL_ADD, fd, listener_.get(), EPOLLIN) != 0) {
    *error = "epoll_ctl(ADD) of the decision channel socket: " + ErrnoText(errno);
    close(fd);
    listener_.reset();
    path_.clear();
    return false;
  }
  return true;
}

void DecisionChannel::OnReady(EpollSource* source, uint32_t events, uint64_t now_ns) {
  if (source->kind == EpollSource::Kind::kChannelListener) {
    Accept(static_cast<Listener*>(source), now_ns);
    return;
  }
  ChannelConn* conn = static_cast<ChannelConn*>(source);
  if (conn->closed) return;  // closed earlier in this iteration
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) != 0) Read(conn);
  if (!conn->closed && (events & EPOLLOUT) != 0 && conn->want_out) Write(conn);
}

void DecisionChannel::Accept(Listener* listener, uint64_t now_ns) {
  for (;;) {
    int fd = accept4(listener->fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      // Out of fds or memory: stop listening for a moment rather than spin on a ready socket.
      EpollControl(epoll_fd_, EPOLL_CTL_MOD, listener->fd, listener, 0);
      paused_ = listener;
      paused_until_ = now_ns + kAcceptPauseNs;
      RecomputeDeadline();
      queue_->PushError("decision channel: accept failed: " + ErrnoText(err) + "; accepting again in " +
                        std::to_string(kAcceptPauseNs / 1000000) + " ms");
      return;
    }
    struct ucred cred;
    socklen_t len = sizeof cred;
    int32_t pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : -1;
    size_t unbound = 0;
    for (const auto& c : conns_) unbound += c->session == 0 ? 1 : 0;
    if (unbound >= kMaxUnbound) {
      close(fd);
      queue_->PushError("decision channel: refused a connection from pid " + std::to_string(pid) + ": " +
                        std::to_string(kMaxUnbound) + " connections are already waiting to send their Hello");
      continue;
    }
    auto conn = std::make_unique<ChannelConn>();
    conn->seq = next_seq_++;
    conn->fd = fd;
    conn->peer_pid = pid;
    conn->deadline = now_ns + kHelloTimeoutNs;
    conn->in.reset(new char[kInCapacity]);
    if (EpollControl(epoll_fd_, EPOLL_CTL_ADD, fd, conn.get(), EPOLLIN | EPOLLRDHUP) != 0) {
      queue_->PushError("decision channel: epoll_ctl(ADD) of a connection from pid " + std::to_string(pid) + ": " +
                        ErrnoText(errno) + "; closed it");
      close(fd);
      continue;
    }
    conns_.push_back(std::move(conn));
    RecomputeDeadline();
  }
}

// Drains the socket (up to kReadBudget) and applies every complete frame, batch by batch.
void DecisionChannel::Read(ChannelConn* conn) {
  size_t budget = kReadBudget;
  while (budget > 0) {
    const size_t room = kInCapacity - conn->in_len;
    ssize_t n = read(conn->fd, conn->in.get() + conn->in_len, room);
    if (n > 0) {
      conn->in_len += static_cast<size_t>(n);
      budget = static_cast<size_t>(n) >= budget ? 0 : budget - static_cast<size_t>(n);
      if (!ParseFrames(conn)) return;
      // A short read of a stream socket took all it held: the read that would say EAGAIN is
      // skipped (one syscall per batch of decisions); level-triggered epoll reports what comes next.
      if (static_cast<size_t>(n) < room) return;
      continue;
    }
    if (n == 0) {
      Close(conn, conn->in_len == 0 ? "the control plane closed it" : "the control plane closed it in the middle of a frame");
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    Close(conn, "read: " + ErrnoText(errno));
    return;
  }
}

bool DecisionChannel::ParseFrames(ChannelConn* conn) {
  size_t at = 0;
  if (!ParseFrameBytes(conn, conn->in.get(), conn->in_len, &at)) return false;
  if (at > 0) {
    memmove(conn->in.get(), conn->in.get() + at, conn->in_len - at);
    conn->in_len -= at;
  }
  return true;
}

bool DecisionChannel::ParseFrameBytes(ChannelConn* conn, const char* in, size_t length, size_t* consumed) {
  size_t at = 0;
  std::string bad;
  while (length - at >= sizeof(FrameHeader)) {
    FrameHeader header;
    memcpy(&header, in + at, sizeof header);
    if (header.length < sizeof(FrameHeader) || header.length > kMaxFrame) {
      bad = "a frame of " + std::to_string(header.length) + " bytes (frames are 8 to " + std::to_string(kMaxFrame) + ")";
      break;
    }
    if (length - at < header.length) break;
    const char* body = in + at + sizeof(FrameHeader);
    const size_t body_length = header.length - sizeof(FrameHeader);
    if (conn->session == 0) {
      if (header.type != decision_channel::kHello) {
        bad = "frame type " + std::to_string(header.type) + " before the Hello";
        break;
      }
      at += header.length;
      *consumed = at;
      if (!OnHello(conn, header.flags, body, body_length)) return false;
      continue;
    }
    if (header.type == decision_channel::kWake) {
      at += header.length;  // the rings are read every iteration anyway
      continue;
    }
    if (header.type != decision_channel::kDecision) {
      bad = "unexpected frame type " + std::to_string(header.type);
      break;
    }
    if (body_length < sizeof(DecisionBody)) {
      bad = "a Decision frame of " + std::to_string(header.length) + " bytes";
      break;
    }
    decisions_.emplace_back();
    memcpy(&decisions_.back(), body, sizeof(DecisionBody));  // frames are not aligned in the stream
    at += header.length;
  }
  *consumed = at;
  // What came before a bad frame is still applied: those decisions are well formed.
  if (!decisions_.empty()) {
    sessions_->ApplyDecisions(conn, conn->session, decisions_.data(), decisions_.size());
    decisions_.clear();
  }
  if (!bad.empty()) {
    Close(conn, "bad frame: " + bad);
    return false;
  }
  return true;
}

bool DecisionChannel::OnHello(ChannelConn* conn, uint16_t flags, const char* body, size_t length) {
  if (length < sizeof(decision_channel::HelloBody)) {
    Close(conn, "a Hello of " + std::to_string(length) + " bytes (the token is 16)");
    return false;
  }
  std::string why;
  uint64_t session = sessions_->BindChannel(conn, reinterpret_cast<const uint8_t*>(body), &why);
  if (session == 0) {
    Close(conn, why);
    return false;
  }
  conn->session = session;
  conn->deadline = 0;
  RecomputeDeadline();
  SendReady(conn, (flags & decision_channel::kFlagRing) != 0);
  PushChannelEvent(session, true, conn->ring != nullptr ? "shared-memory rings" : "");
  return true;
}

bool DecisionChannel::QueueNotification(ChannelConn* conn, const Event& event, const char* blob,
                                        const std::string& container_id) {
  if (conn->closed) return false;
  const char* name = SyscallName(event.arch, event.nr);
  const size_t name_length = name != nullptr ? strlen(name) : 0;
  const size_t id_length = std::min<size_t>(container_id.size(), decision_channel::kMaxContainerId);
  size_t length = sizeof(FrameHeader) + sizeof(NotificationBody) + name_length;
  for (uint8_t k = 0; k < event.string_count; k++) length += sizeof(StringHeader) + event.strings[k].text.length;
  length += sizeof(decision_channel::NotificationTrailer) + id_length;
  if (conn->ring != nullptr) {
    if (frame_scratch_.size() < length) frame_scratch_.resize(length);
    EncodeNotification(frame_scratch_.data(), length, event, name, name_length, blob, container_id, id_length);
    const int put = conn->ring->PutNotification(frame_scratch_.data(), static_cast<uint32_t>(length));
    if (put < 0) {
      Close(conn, "bad ring: the control plane's index of the notifications ring is impossible");
      return false;
    }
    if (put == 1) {
      conn->ring_put = true;
      MarkDirty(conn);
      return true;
    }
    // The ring is full: the socket takes it (the control plane reads both).
  }
  if (conn->out.size() + length > kMaxOutput) {
    Close(conn, "more than " + std::to_string(kMaxOutput / (1024 * 1024)) +
                    " MiB of notifications queued: the control plane does not read them; its session's new "
                    "notifications go to the data plane's JavaScript");
    return false;
  }
  if (conn->ring != nullptr) memcpy(conn->out.Append(length), frame_scratch_.data(), length);
  else EncodeNotification(conn->out.Append(length), length, event, name, name_length, blob, container_id, id_length);
  MarkDirty(conn);
  return true;
}

void DecisionChannel::EncodeNotification(char* p, size_t length, const Event& event, const char* name, size_t name_length,
                                         const char* blob, const std::string& container_id, size_t id_length) const {
  PutHeader(p, static_cast<uint32_t>(length), decision_channel::kNotification);
  const uint16_t flags = decision_channel::kFlagTrailer;
  memcpy(p + offsetof(FrameHeader, flags), &flags, sizeof flags);
  p += sizeof(FrameHeader);
  NotificationBody body;
  memset(&body, 0, sizeof body);
  body.id = event.id;
  body.instruction_pointer = event.ip;
  for (int i = 0; i < 6; i++) body.args[i] = event.args[i];
  body.handle = event.handle;
  body.pid = event.pid;
  body.nr = static_cast<int32_t>(event.nr);
  body.arch = event.arch;
  body.name_length = static_cast<uint8_t>(name_length);
  body.string_count = event.string_count;
  memcpy(p, &body, sizeof body);
  p += sizeof body;
  if (name_length > 0) memcpy(p, name, name_length);
  p += name_length;
  for (uint8_t k = 0; k < event.string_count; k++) {
    const StringArg& arg = event.strings[k];
    StringHeader header;
    header.index = arg.index;
    header.truncated = arg.truncated ? 1 : 0;
    header.length = static_cast<uint16_t>(arg.text.length);
    memcpy(p, &header, sizeof header);
    p += sizeof header;
    memcpy(p, blob + arg.text.offset, arg.text.length);
    p += arg.text.length;
  }
  decision_channel::NotificationTrailer trailer;
  memset(&trailer, 0, sizeof trailer);
  trailer.received_unix_ns = static_cast<uint64_t>(static_cast<int64_t>(event.ns) + wall_offset_ns_);
  trailer.container_id_length = static_cast<uint16_t>(id_length);
  memcpy(p, &trailer, sizeof trailer);
  p += sizeof trailer;
  if (id_length > 0) memcpy(p, container_id.data(), id_length);
}

void DecisionChannel::MarkDirty(ChannelConn* conn) {
  if (conn->dirty) return;
  conn->dirty = true;
  dirty_.push_back(conn);
}

void DecisionChannel::FlushAll() {
  for (ChannelConn* conn : dirty_) {
    conn->dirty = false;
    if (conn->closed) continue;
    if (conn->ring_put) {
      conn->ring_put = false;
      // Their decisions are polled for (Engine::AwaitRings) while the engine stays awake: no
      // wake-up for them. Once per batch, not per notification.
      conn->ring->EngineAwake();
      if (conn->ring->ControlPlaneToWake()) PutHeader(conn->out.Append(sizeof(FrameHeader)), sizeof(FrameHeader), decision_channel::kWake);
    }
    if (!conn->want_out && conn->out.size() > 0) Write(conn);
  }
  dirty_.clear();
  closed_.clear();
}

void DecisionChannel::Write(ChannelConn* conn) {
  while (conn->out.size() > 0) {
    ssize_t n = send(conn->fd, conn->out.data(), conn->out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      conn->out.Consume(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!conn->want_out) {
        if (EpollControl(epoll_fd_, EPOLL_CTL_MOD, conn->fd, conn, EPOLLIN | EPOLLRDHUP | EPOLLOUT) != 0) {
          Close(conn, "epoll_ctl(MOD): " + ErrnoText(errno));
          return;
        }
        conn->want_out = true;
      }
      return;
    }
    Close(conn, "write: " + ErrnoText(n < 0 ? errno : EIO));
    return;
  }
  if (conn->want_out) {
    if (EpollControl(epoll_fd_, EPOLL_CTL_MOD, conn->fd, conn, EPOLLIN | EPOLLRDHUP) != 0) {
      Close(conn, "epoll_ctl(MOD): " + ErrnoText(errno));
      return;
    }
    conn->want_out = false;
  }
}

void DecisionChannel::CloseSession(uint64_t session, const char* reason) {
  for (const auto& conn : conns_) {
    if (conn->session == session) {
      Close(conn.get(), reason);
      return;
    }
  }
}

void DecisionChannel::Close(ChannelConn* conn, const std::string& reason) {
  if (conn->closed) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn->fd, nullptr);
  close(conn->fd);
  conn->fd = -1;
  conn->closed = true;
  if (conn->ring != nullptr) rings_--;
  if (conn->session != 0) {
    sessions_->UnbindChannel(conn, conn->session);
    PushChannelEvent(conn->session, false, reason);
  } else {
    queue_->PushError("decision channel: closed a connection from pid " + std::to_string(conn->peer_pid) +
                      " before it joined a session: " + reason);
  }
  // Kept alive until FlushAll: later events of this epoll iteration may still point to it.
  for (auto it = conns_.begin(); it != conns_.end(); ++it) {
    if (it->get() == conn) {
      closed_.push_back(std::move(*it));
      conns_.erase(it);
      break;
    }
  }
  RecomputeDeadline();
}

void DecisionChannel::OnTimer(uint64_t now_ns) {
  if (paused_ != nullptr && paused_until_ <= now_ns) {
    if (EpollControl(epoll_fd_, EPOLL_CTL_MOD, paused_->fd, paused_, EPOLLIN) == 0) {
      paused_ = nullptr;
      paused_until_ = 0;
    } else {
      paused_until_ = now_ns + kAcceptPauseNs;
    }
  }
  // Close() edits conns_: collect first.
  std::vector<ChannelConn*> expired;
  for (const auto& conn : conns_) {
    if (conn->session == 0 && conn->deadline <= now_ns) expired.push_back(conn.get());
  }
  for (ChannelConn* conn : expired) {
    Close(conn, "no Hello within " + std::to_string(kHelloTimeoutNs / 1000000000ull) + " s");
  }
  RecomputeDeadline();
}

void DecisionChannel::RecomputeDeadline() {
  uint64_t next = UINT64_MAX;
  if (paused_ != nullptr) next = paused_until_;
  for (const auto& conn : conns_) {
    if (conn->session == 0) next = std::min(next, conn->deadline);
  }
  next_deadline_ = next;
}

void DecisionChannel::PushChannelEvent(uint64_t session, bool connected, const std::string& reason) {
  Event event;
  event.type = EventType::kChannel;
  event.session = session;
  event.connected = connected;
  event.text.length = static_cast<uint32_t>(reason.size());
  queue_->Push(event, reason.data(), reason.size(), true);
}

void DecisionChannel::CloseAll() {
  for (auto& conn : conns_) {
    if (!conn->closed) close(conn->fd);
  }
  conns_.clear();
  closed_.clear();
  dirty_.clear();
  rings_ = 0;
  if (listener_ != nullptr) close(listener_->fd);
  listener_.reset();
  paused_ = nullptr;
  paused_until_ = 0;
  next_deadline_ = UINT64_MAX;
}

}  // namespace seccomp_agent
