// The record every native event is, from the engine, ingest and the decision channel to JS (one
// fixed-size struct; its text lives in the batch arena). No N-API here: the pure pieces and their
// tests use it without Node.
#pragma once
#include <cstdint>

#include "emulation_table.hpp"  // EmulatedKind: the emulated action an 'answered' event reports
#include "notification.hpp"
#include "notify_fd.hpp"

namespace seccomp_agent {

enum class EventType : uint8_t {
  kConnection,
  kIngestError,
  kNotification,
  kAnswered,
  kRemoved,
  kError,
  kDecisionDropped,
  kSessionDrained,
  kChannel,
  kHandoff,
  kTally,  // answer_tally.hpp: id is the count, ns the latency sum, text the bucket counts (u32 each)
  // engine_read_watch.cpp: a read of a task's memory taken over (or, `returned`, back at last): id is
  // the lane, ns how long the read has taken, nr/arch the call (returned only)
  kReadStall,
};
// Why a decision was not applied (decision-dropped; event_layout.hpp names each for the decoder).
enum class DropReason : uint8_t { kUnknown, kLate, kWrongSession, kInvalid };
// kControlPlane: an emulation the control plane asked for has finished (respond() said 'accepted').
// kRecovered: received by a predecessor (crashed or handed over) and never answered by it.
// kFastPath: a rule of the container's pushed policy (engine_rules.cpp); the event names the rule.
// The values are the API's AnsweredBy numbers (proto/seccompagent/v1/dataplane.proto): events carry
// them to JS as they are.
enum class AnsweredBy : uint8_t {
  kControlPlane = 1,
  kNoControlPlane = 2,
  kDeadline = 3,
  kDetached = 4,
  kFastPath = 5,
  kRecovered = 6,
};

// Bytes [offset, offset + length) of the blob passed to Push, later of the batch arena.
struct TextRef {
  uint32_t offset = 0;
  uint32_t length = 0;
};

struct StringArg {
  uint8_t index = 0;
  bool truncated = false;
  TextRef text;
};

struct Peer {
  int32_t pid = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
};

// One record; which fields matter depends on `type` (see NativeEvent in dataplane/native.ts).
struct Event {
  EventType type = EventType::kError;
  // notification, answered, removed
  uint32_t handle = 0;
  uint64_t id = 0;
  // notification
  uint32_t pid = 0;
  uint32_t nr = 0;
  uint32_t arch = 0;
  uint64_t ip = 0;
  uint64_t args[6] = {0, 0, 0, 0, 0, 0};
  uint8_t string_count = 0;
  bool forwarded = false;
  bool via_channel = false;  // written to the owner session's decision channel
  StringArg strings[6];
  // notification: receivedNs; answered: latencyNs
  uint64_t ns = 0;
  // answered
  AnsweredBy by = AnsweredBy::kNoControlPlane;
  int32_t rule = -1;  // answered by kFastPath: the index of the rule in the policy in force
  Answer action;  // emulated != kNone: action.error is the errno the target got (0: success)
  EmulatedKind emulated = EmulatedKind::kNone;
  bool gone = false;
  bool notified = false;  // answered: no 'notification' event was sent for it; nr and arch are set
  bool returned = false;  // read-stall: the read returned (else it was just taken over)
  // connection, ingest-error, error; handoff: the connection's fd (JS passes it to handOff)
  uint32_t conn = 0;
  TextRef text;                // connection: json; ingest-error, error: message; channel: reason
  const char* code = nullptr;  // ingest-error: static string
  uint8_t fd_count = 0;        // connection
  uint32_t seccomp_mask = 0;   // connection: bit i set when fd i is a seccomp notify fd
  Peer peer;
  // notification: the owner (0: answered natively); decision-dropped, session-drained, channel
  uint64_t session = 0;
  DropReason drop_reason = DropReason::kUnknown;  // decision-dropped
  bool connected = false;                          // channel: connected (else closed; reason in text)
};

// A notification as the event JS (and the decision channel) is given: the converter at the
// transports' boundary. Its strings are added by the caller (ReadPathArgs).
inline Event NotificationEvent(const Notification& n) {
  Event event;
  event.type = EventType::kNotification;
  event.handle = n.handle;
  event.id = n.id;
  event.pid = n.pid;
  event.nr = n.nr;
  event.arch = n.arch;
  event.ip = n.ip;
  for (int i = 0; i < 6; i++) event.args[i] = n.args[i];
  event.ns = n.received_ns;
  return event;
}

}  // namespace seccomp_agent
