// The decision channel's shared-memory rings (docs/decision-channel.md, "Shared-memory rings"):
// one memfd the engine makes and sends with the Ready frame, mapped by both planes, holding two
// single-producer single-consumer byte rings of channel frames: notifications to the control
// plane, decisions to the engine. While both sides busy-poll, a frame crosses with no syscall; a
// side that goes to sleep says so in the header, and the other side then sends one kWake frame on
// the socket to wake it (the socket still carries the handshake, wake-ups, and frames a full ring
// did not take).
//
// The engine treats the whole mapping as hostile input: it keeps its own copy of every index it
// owns, bounds what it reads of the peer's (tail - head never over the capacity), copies frames out
// before parsing them, and seals the memfd's size, so a control plane cannot make it read out of
// bounds or fault.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstring>

namespace decision_channel {

constexpr uint32_t kRingMagic = 0x31524353;  // "SCR1"
constexpr uint32_t kRingHeaderBytes = 4096;
constexpr uint32_t kToControlPlaneBytes = 256u << 10;  // notifications (~150 bytes each): ~1,700
constexpr uint32_t kToEngineBytes = 256u << 10;      // decisions (40 bytes each): ~6,500
constexpr uint32_t kRingFileBytes = kRingHeaderBytes + kToControlPlaneBytes + kToEngineBytes;

// One index on a cache line of its own: producer and consumer write different lines.
struct alignas(64) RingWord {
  std::atomic<uint32_t> value;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "an index shared across processes must be lock free");

// At offset 0 of the memfd. Indices count bytes since the start, modulo 2^32 (capacities are
// powers of two, so an index modulo the capacity is the offset).
struct RingHeader {
  uint32_t magic;
  uint32_t to_control_plane_bytes;
  uint32_t to_engine_bytes;
  uint32_t reserved[13];
  RingWord to_control_plane_head;  // the control plane: bytes taken
  RingWord to_control_plane_tail;  // the engine: bytes put
  RingWord to_engine_head;         // the engine: bytes taken
  RingWord to_engine_tail;         // the control plane: bytes put
  // 1: this side sleeps (the control plane in libuv, the engine thread in epoll_wait); whoever
  // puts a frame and swaps it to 0 sends one kWake frame on the socket.
  RingWord control_plane_sleeps;
  RingWord engine_sleeps;
};
static_assert(sizeof(RingHeader) <= kRingHeaderBytes, "ring header fits its page");

// One direction of the memfd, as one side sees it: `mine` is the index this side owns (a private
// copy: what the shared word says is only published, never read back), `theirs` the peer's.
struct RingEnd {
  char* data = nullptr;
  uint32_t capacity = 0;  // a power of two
  uint32_t mine = 0;
  std::atomic<uint32_t>* my_word = nullptr;
  std::atomic<uint32_t>* their_word = nullptr;
};

enum class RingSide { kEngine, kControlPlane };

// The two ends `side` uses of the rings mapped at `base` (kRingFileBytes, header first): what it
// puts (`out`: notifications for the engine, decisions for the control plane) and what it takes
// (`in`), each from where its own index stands now.
inline void AttachEnds(char* base, RingSide side, RingEnd* out, RingEnd* in) {
  auto* header = reinterpret_cast<RingHeader*>(base);
  RingEnd to_control_plane;
  to_control_plane.data = base + kRingHeaderBytes;
  to_control_plane.capacity = kToControlPlaneBytes;
  RingEnd to_engine;
  to_engine.data = base + kRingHeaderBytes + kToControlPlaneBytes;
  to_engine.capacity = kToEngineBytes;
  const bool engine = side == RingSide::kEngine;
  *out = engine ? to_control_plane : to_engine;
  out->my_word = engine ? &header->to_control_plane_tail.value : &header->to_engine_tail.value;
  out->their_word = engine ? &header->to_control_plane_head.value : &header->to_engine_head.value;
  *in = engine ? to_engine : to_control_plane;
  in->my_word = engine ? &header->to_engine_head.value : &header->to_control_plane_head.value;
  in->their_word = engine ? &header->to_engine_tail.value : &header->to_control_plane_tail.value;
  out->mine = out->my_word->load(std::memory_order_acquire);
  in->mine = in->my_word->load(std::memory_order_acquire);
}

// Producer: appends all of `bytes` or nothing. 1: put; 0: no room; -1: the peer's index is
// impossible (more in use than the capacity).
inline int RingPut(RingEnd* end, const char* bytes, uint32_t n) {
  const uint32_t head = end->their_word->load(std::memory_order_acquire);
  const uint32_t used = end->mine - head;
  if (used > end->capacity) return -1;
  if (end->capacity - used < n) return 0;
  const uint32_t at = end->mine & (end->capacity - 1);
  const uint32_t first = end->capacity - at < n ? end->capacity - at : n;
  memcpy(end->data + at, bytes, first);
  memcpy(end->data, bytes + first, n - first);
  end->mine += n;
  end->my_word->store(end->mine, std::memory_order_release);
  return 1;
}

// Consumer: copies up to `room` bytes into `out` and frees them. The count, or -1 when the peer's
// index is impossible.
inline int64_t RingTake(RingEnd* end, char* out, uint32_t room) {
  const uint32_t tail = end->their_word->load(std::memory_order_acquire);
  const uint32_t available = tail - end->mine;
  if (available > end->capacity) return -1;
  const uint32_t n = available < room ? available : room;
  if (n == 0) return 0;
  const uint32_t at = end->mine & (end->capacity - 1);
  const uint32_t first = end->capacity - at < n ? end->capacity - at : n;
  memcpy(out, end->data + at, first);
  memcpy(out + first, end->data, n - first);
  end->mine += n;
  end->my_word->store(end->mine, std::memory_order_release);
  return n;
}

// Consumer: whether anything waits (an impossible index counts: taking it reports the error).
inline bool RingHasData(const RingEnd& end) { return end.their_word->load(std::memory_order_acquire) != end.mine; }

// The sleeper's side of a wake-up: announce sleep, then look once more. False (and the flag
// cleared again) when something came meanwhile: do not sleep. The full fence pairs with the
// producer's in ShouldWake: one of the two sees the other's store. A flag still set from an
// earlier sleep needs neither store nor fence: the producer clears it only as it sends a wake-up;
// so a sleeper that expects nothing leaves it set while awake and pays a load per sleep instead of
// a locked store and a fence (the engine: Engine::Run, DecisionChannel::FlushAll).
inline bool RingMaySleep(std::atomic<uint32_t>* sleeps, const RingEnd& incoming) {
  if (sleeps->load(std::memory_order_relaxed) != 1) {
    sleeps->store(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  if (!RingHasData(incoming)) return true;
  sleeps->store(0, std::memory_order_relaxed);
  return false;
}

// The producer's side, after RingPut: true exactly once per sleep, for the caller to send kWake.
inline bool RingShouldWake(std::atomic<uint32_t>* sleeps) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeps->load(std::memory_order_relaxed) == 0) return false;
  uint32_t expected = 1;
  return sleeps->compare_exchange_strong(expected, 0, std::memory_order_seq_cst);
}

}  // namespace decision_channel
