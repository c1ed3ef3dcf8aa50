// Wire format of the decision channel: a Unix stream socket the data plane's engine serves
// natively, beside the gRPC API, so an attached control plane's notifications and decisions skip
// the data plane's JavaScript and HTTP/2 entirely. The session itself (hello, containers, takeover,
// drain) stays on gRPC Attach; the channel only carries notifications and simple decisions of a
// session that gRPC opened. Mirrored in common/decision-channel.ts; see docs/decision-channel.md.
//
// Every frame: a FrameHeader, then `length - sizeof(FrameHeader)` bytes of body. Little-endian,
// no padding beyond what the structs declare. Several frames may share one read or write.
#pragma once
#include <cstdint>

namespace decision_channel {

constexpr uint32_t kMaxFrame = 64 * 1024;

enum FrameType : uint16_t {
  kHello = 1,         // control plane -> data plane, first frame: the session token
  kReady = 2,         // data plane -> control plane: the token matched; notifications follow
  kNotification = 3,  // data plane -> control plane
  kDecision = 4,      // control plane -> data plane
  kWake = 5,          // either way, header only: the rings have frames for a side that slept (decision_ring.h)
};

struct FrameHeader {
  uint32_t length;  // whole frame, header included
  uint16_t type;    // FrameType
  uint16_t flags;   // FrameFlags (0 but for the bits below)
};

enum FrameFlags : uint16_t {
  // kNotification: a NotificationTrailer (and its container id) follows the strings. Readers that
  // predate it stop after the strings and never see it.
  kFlagTrailer = 1,
  // kHello: the control plane asks for the shared-memory rings (decision_ring.h). kReady: they
  // came with it, the memfd attached (SCM_RIGHTS). An engine that predates them ignores the flag
  // and sends a plain Ready.
  kFlagRing = 2,
};
static_assert(sizeof(FrameHeader) == 8, "header layout");

// kHello body: the 16-byte token from Welcome.decision_channel.token.
struct HelloBody {
  uint8_t token[16];
};

// kReady body.
struct ReadyBody {
  uint64_t session;
};

// kNotification body: this struct, then `name_length` bytes of syscall name, then
// `string_count` strings, each a StringHeader followed by `length` bytes (no NUL), then (with
// kFlagTrailer) a NotificationTrailer and the container id.
struct NotificationBody {
  uint64_t id;
  uint64_t instruction_pointer;
  uint64_t args[6];
  uint32_t handle;
  uint32_t pid;
  int32_t nr;
  uint32_t arch;
  uint8_t name_length;
  uint8_t string_count;
  uint16_t reserved;
  uint32_t reserved2;
};
static_assert(sizeof(NotificationBody) == 88, "notification layout");

// After the strings when kFlagTrailer is set: the same receivedAt and containerId the gRPC form
// carries, then `container_id_length` bytes of container id.
struct NotificationTrailer {
  uint64_t received_unix_ns;  // CLOCK_REALTIME when the data plane received it, in ns
  uint16_t container_id_length;
  uint16_t reserved;
  uint32_t reserved2;
};
static_assert(sizeof(NotificationTrailer) == 16, "trailer layout");
constexpr uint32_t kMaxContainerId = 1024;  // longer ids are cut (runtimes use 64 hex digits)

struct StringHeader {
  uint8_t index;      // argument position 0..5
  uint8_t truncated;  // 1 when longer than PATH_MAX or partly unreadable
  uint16_t length;
};

enum DecisionKind : uint8_t {
  kContinue = 1,
  kError = 2,  // errno_value > 0
  kValue = 3,
};

// kDecision body.
struct DecisionBody {
  uint64_t id;
  int64_t value;
  uint32_t handle;
  int32_t errno_value;
  uint8_t kind;  // DecisionKind
  uint8_t reserved[7];
};
static_assert(sizeof(DecisionBody) == 32, "decision layout");

}  // namespace decision_channel
