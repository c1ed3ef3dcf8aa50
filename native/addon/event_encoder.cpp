#include "event_encoder.hpp"

#include <string.h>

#include "event_layout.hpp"
#include "target_memory.hpp"

namespace seccomp_agent {

using namespace event_layout;

static_assert((kTargetPathMax >> (32 - ARG_LENGTH_SHIFT)) == 0, "a string argument's length fits its field");

namespace {

uint32_t Field(uint32_t value, uint32_t shift) { return (value & FLAG_FIELD_MASK) << shift; }

void PutPeer(const Peer& peer, uint32_t* w32) {
  w32[W32_PID] = static_cast<uint32_t>(peer.pid);
  w32[W32_NR] = peer.uid;
  w32[W32_ARCH] = peer.gid;
}

}  // namespace

void EncodeEvent(const Event& e, const std::string& arena, uint64_t* w64, uint32_t* w32,
                 std::vector<EventBytes>* texts, std::vector<EventBytes>* raws) {
  w64[W64_ID] = e.id;
  w64[W64_VALUE] = e.ip;
  for (int i = 0; i < 6; i++) w64[W64_ARGS + i] = e.args[i];
  w64[W64_NS] = e.ns;
  w64[W64_SESSION] = e.session;
  w32[W32_TYPE] = static_cast<uint32_t>(e.type);
  w32[W32_TEXT] = static_cast<uint32_t>(texts->size());
  auto text = [&](TextRef ref) { texts->emplace_back(arena.data() + ref.offset, ref.length); };
  switch (e.type) {
    case EventType::kNotification:
      w32[W32_HANDLE] = e.handle;
      w32[W32_PID] = e.pid;
      w32[W32_NR] = e.nr;
      w32[W32_ARCH] = e.arch;
      w32[W32_FLAGS] = (e.forwarded ? FLAG_FORWARDED : 0) | (e.via_channel ? FLAG_VIA_CHANNEL : 0);
      w32[W32_COUNT] = e.string_count;
      for (uint8_t k = 0; k < e.string_count; k++) {
        const StringArg& arg = e.strings[k];
        w32[W32_STRING_ARGS + k] =
            arg.index | (arg.truncated ? ARG_TRUNCATED : 0u) | (arg.text.length << ARG_LENGTH_SHIFT);
        raws->emplace_back(arena.data() + arg.text.offset, arg.text.length);
      }
      break;
    case EventType::kAnswered:
      w32[W32_HANDLE] = e.handle;
      w32[W32_NR] = e.nr;
      w32[W32_ARCH] = e.arch;
      w32[W32_FLAGS] = (e.gone ? FLAG_GONE : 0) | (e.notified ? FLAG_NOTIFIED : 0) |
                       Field(static_cast<uint32_t>(e.by), FLAG_BY_SHIFT) |
                       Field(static_cast<uint32_t>(e.action.kind), FLAG_ANSWER_KIND_SHIFT) |
                       Field(static_cast<uint32_t>(e.emulated), FLAG_EMULATED_SHIFT);
      w32[W32_ERRNO] = static_cast<uint32_t>(e.action.error);
      w32[W32_COUNT] = static_cast<uint32_t>(e.rule + 1);
      w64[W64_VALUE] = static_cast<uint64_t>(e.action.value);
      break;
    case EventType::kConnection:
      w32[W32_HANDLE] = e.conn;
      PutPeer(e.peer, w32);
      w32[W32_COUNT] = e.fd_count;
      w32[W32_SECCOMP_MASK] = e.seccomp_mask;
      text(e.text);
      break;
    case EventType::kIngestError: {
      PutPeer(e.peer, w32);
      text(e.text);
      const char* code = e.code != nullptr ? e.code : "read-error";
      texts->emplace_back(code, strlen(code));
      break;
    }
    case EventType::kRemoved:
      w32[W32_HANDLE] = e.handle;
      break;
    case EventType::kError:
      text(e.text);
      break;
    case EventType::kDecisionDropped:
      w32[W32_HANDLE] = e.handle;
      w32[W32_ERRNO] = static_cast<uint32_t>(e.drop_reason);
      break;
    case EventType::kSessionDrained:
      break;
    case EventType::kChannel:
      w32[W32_FLAGS] = e.connected ? FLAG_CONNECTED : 0;
      text(e.text);
      break;
    case EventType::kHandoff:
      w32[W32_HANDLE] = e.conn;
      PutPeer(e.peer, w32);
      break;
    case EventType::kReadStall:
      w32[W32_HANDLE] = e.handle;
      w32[W32_PID] = e.pid;
      w32[W32_NR] = e.nr;
      w32[W32_ARCH] = e.arch;
      w32[W32_FLAGS] = e.returned ? FLAG_RETURNED : 0;
      break;
    case EventType::kTally:
      w32[W32_HANDLE] = e.handle;
      w32[W32_NR] = e.nr;
      w32[W32_ARCH] = e.arch;
      w32[W32_FLAGS] = (e.gone ? FLAG_GONE : 0) | Field(static_cast<uint32_t>(e.by), FLAG_BY_SHIFT);
      w32[W32_COUNT] = e.text.length / sizeof(uint32_t);
      raws->emplace_back(arena.data() + e.text.offset, e.text.length);
      break;
  }
}

}  // namespace seccomp_agent
