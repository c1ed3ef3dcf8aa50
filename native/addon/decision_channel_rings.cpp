// The decision channel's shared-memory rings (decision_ring.h), as the engine thread uses them on
// its connections: offered with the Ready, looked at every turn for decisions, and told when the
// engine thread sleeps. The rings themselves: channel_ring.{hpp,cpp}.
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>

#include "decision_channel.hpp"
#include "scm_rights.h"

namespace seccomp_agent {

using decision_channel::FrameHeader;

void DecisionChannel::SendReady(ChannelConn* conn, bool want_ring) {
  constexpr uint32_t kReadyLength = sizeof(FrameHeader) + sizeof(decision_channel::ReadyBody);
  char frame[kReadyLength];
  PutHeader(frame, kReadyLength, decision_channel::kReady);
  decision_channel::ReadyBody ready;
  ready.session = conn->session;
  memcpy(frame + sizeof(FrameHeader), &ready, sizeof ready);
  if (want_ring && conn->out.size() == 0) {
    std::string why;
    int memfd = -1;
    std::unique_ptr<ChannelRing> ring = ChannelRing::Create(&memfd, &why);
    if (ring != nullptr) {
      const uint16_t flags = decision_channel::kFlagRing;
      memcpy(frame + offsetof(FrameHeader, flags), &flags, sizeof flags);
      struct iovec iov = {frame, kReadyLength};
      // The first bytes on a fresh socket: they fit, whole, or the peer is gone.
      const ssize_t sent = scm_rights::Send(conn->fd, &iov, 1, &memfd, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      close(memfd);
      if (sent == static_cast<ssize_t>(kReadyLength)) {
        conn->ring = std::move(ring);
        rings_++;
        return;
      }
      if (sent > 0) {
        Close(conn, "the Ready frame went out in part");
        return;
      }
      why = std::string("sendmsg: ") + strerror(errno);
    }
    queue_->PushError("decision channel: no shared-memory rings for session " + std::to_string(conn->session) + " (" +
                      why + "); its frames travel on the socket");
    const uint16_t none = 0;
    memcpy(frame + offsetof(FrameHeader, flags), &none, sizeof none);
  }
  memcpy(conn->out.Append(kReadyLength), frame, kReadyLength);
  MarkDirty(conn);
}

bool DecisionChannel::PollRings() {
  bool took = false;
  for (size_t i = 0; i < conns_.size(); i++) {
    ChannelConn* conn = conns_[i].get();
    if (conn->ring == nullptr || conn->closed) continue;
    if (ring_in_ == nullptr) ring_in_.reset(new char[decision_channel::kToEngineBytes]);
    const int64_t n = conn->ring->TakeDecisions(ring_in_.get());
    if (n < 0) {
      Close(conn, "bad ring: the control plane's index of the decisions ring is impossible");
      continue;
    }
    if (n == 0) continue;
    size_t consumed = 0;
    if (!ParseFrameBytes(conn, ring_in_.get(), static_cast<size_t>(n), &consumed)) continue;
    // The control plane puts whole frames: a part of one is not a frame that comes later.
    if (consumed != static_cast<size_t>(n)) Close(conn, "bad ring: a partial frame in the decisions ring");
    took = true;
  }
  return took;
}

bool DecisionChannel::MaySleep() {
  bool may = true;
  for (const auto& conn : conns_) {
    if (conn->ring != nullptr && !conn->closed && !conn->ring->EngineMaySleep()) may = false;
  }
  if (!may) Awake();
  return may;
}

bool DecisionChannel::RingsHaveData() const {
  for (const auto& conn : conns_) {
    if (conn->ring != nullptr && !conn->closed && conn->ring->HasDecisions()) return true;
  }
  return false;
}

void DecisionChannel::Awake() {
  for (const auto& conn : conns_) {
    if (conn->ring != nullptr && !conn->closed) conn->ring->EngineAwake();
  }
}

}  // namespace seccomp_agent
