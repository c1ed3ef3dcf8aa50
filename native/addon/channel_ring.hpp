// The engine's side of one decision-channel connection's shared-memory rings (decision_ring.h):
// the memfd made, sealed and mapped here, sent to the control plane with the Ready frame, and
// unmapped with the connection. Engine thread only.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "decision_ring.h"

namespace seccomp_agent {

class ChannelRing {
 public:
  // A new mapping and the memfd to send (the caller closes it once sent); null with *error set.
  static std::unique_ptr<ChannelRing> Create(int* memfd, std::string* error);
  ~ChannelRing();
  ChannelRing(const ChannelRing&) = delete;
  ChannelRing& operator=(const ChannelRing&) = delete;

  // RingPut of a notification frame: 1 put, 0 no room, -1 the control plane's index is impossible.
  int PutNotification(const char* frame, uint32_t length) { return decision_channel::RingPut(&out_, frame, length); }
  // RingTake of the decisions waiting, into `into` (kToEngineBytes): the byte count, or -1.
  int64_t TakeDecisions(char* into) { return decision_channel::RingTake(&in_, into, decision_channel::kToEngineBytes); }
  bool HasDecisions() const { return decision_channel::RingHasData(in_); }
  // After notifications were put: whether the control plane slept and must be sent a kWake.
  bool ControlPlaneToWake() { return decision_channel::RingShouldWake(&header_->control_plane_sleeps.value); }
  // Before the engine thread blocks: false when decisions came meanwhile (do not block).
  bool EngineMaySleep() { return decision_channel::RingMaySleep(&header_->engine_sleeps.value, in_); }
  void EngineAwake() { header_->engine_sleeps.value.store(0, std::memory_order_relaxed); }

 private:
  ChannelRing() = default;

  void* map_ = nullptr;
  decision_channel::RingHeader* header_ = nullptr;
  decision_channel::RingEnd out_;  // notifications: the engine puts
  decision_channel::RingEnd in_;   // decisions: the engine takes
};

}  // namespace seccomp_agent
