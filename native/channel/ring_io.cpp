// The control plane's side of the decision channel's shared-memory rings (decision_ring.h):
// mapped from the memfd the Ready frame brought, read and written from the busy poll. A ring is a
// JS external (type-tagged); closing it, or its collection, unmaps it.
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <new>
#include <string>

#include "channel_io.hpp"
#include "decision_channel.h"
#include "decision_ring.h"

namespace channel_io {
namespace {

using decision_channel::kRingFileBytes;
using decision_channel::kToControlPlaneBytes;
using decision_channel::kToEngineBytes;

const napi_type_tag kRingTag = {0x5345434352494e47ull, 0x72696e6731000001ull};

struct Ring {
  void* map = nullptr;
  decision_channel::RingHeader* header = nullptr;
  decision_channel::RingEnd in;   // notifications: the control plane takes
  decision_channel::RingEnd out;  // decisions: the control plane puts
  int socket_fd = -1;             // not owned: the kWake goes there
};

void Unmap(Ring* ring) {
  if (ring->map != nullptr) munmap(ring->map, kRingFileBytes);
  ring->map = nullptr;
}

void Finalize(napi_env, void* data, void*) {
  Ring* ring = static_cast<Ring*>(data);
  Unmap(ring);
  delete ring;
}

napi_value Str(napi_env env, const std::string& text) {
  napi_value value;
  napi_create_string_utf8(env, text.data(), text.size(), &value);
  return value;
}

// A ring call's own result (not a syscall's: no errno in it).
napi_value Int(napi_env env, int32_t value) {
  napi_value result;
  napi_create_int32(env, value, &result);
  return result;
}

// The ring of argv[0], or null (a TypeError thrown) when it is not one, or is closed and `open`.
Ring* RingOf(napi_env env, napi_callback_info info, size_t* argc, napi_value* argv, const char* usage, bool open = true) {
  bool tagged = false;
  void* data = nullptr;
  if (napi_get_cb_info(env, info, argc, argv, nullptr, nullptr) != napi_ok || *argc < 1 ||
      napi_check_object_type_tag(env, argv[0], &kRingTag, &tagged) != napi_ok || !tagged ||
      napi_get_value_external(env, argv[0], &data) != napi_ok || (open && static_cast<Ring*>(data)->map == nullptr)) {
    napi_throw_type_error(env, nullptr, usage);
    return nullptr;
  }
  return static_cast<Ring*>(data);
}

// ringOpen(memfd, socketFd) -> a ring, or a string saying why not. The memfd is closed either way.
napi_value RingOpen(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t memfd = -1, socket_fd = -1;
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr) != napi_ok || argc < 2 ||
      napi_get_value_int32(env, argv[0], &memfd) != napi_ok || napi_get_value_int32(env, argv[1], &socket_fd) != napi_ok) {
    napi_throw_type_error(env, nullptr, "ringOpen(memfd: number, socketFd: number)");
    return nullptr;
  }
  struct stat st;
  if (fstat(memfd, &st) != 0 || st.st_size < static_cast<off_t>(kRingFileBytes)) {
    close(memfd);
    return Str(env, "the ring memfd is smaller than the rings");
  }
  void* map = mmap(nullptr, kRingFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  const int err = errno;
  close(memfd);
  if (map == MAP_FAILED) return Str(env, std::string("mmap of the ring memfd: ") + strerror(err));
  auto* header = static_cast<decision_channel::RingHeader*>(map);
  if (header->magic != decision_channel::kRingMagic || header->to_control_plane_bytes != kToControlPlaneBytes ||
      header->to_engine_bytes != kToEngineBytes) {
    munmap(map, kRingFileBytes);
    return Str(env, "the ring memfd has another layout (magic or sizes)");
  }
  Ring* ring = new (std::nothrow) Ring();
  if (ring == nullptr) {
    munmap(map, kRingFileBytes);
    return Str(env, "out of memory");
  }
  ring->map = map;
  ring->header = header;
  ring->socket_fd = socket_fd;
  decision_channel::AttachEnds(static_cast<char*>(map), decision_channel::RingSide::kControlPlane, &ring->out, &ring->in);
  napi_value external;
  if (napi_create_external(env, ring, Finalize, nullptr, &external) != napi_ok ||
      napi_type_tag_object(env, external, &kRingTag) != napi_ok) {
    Unmap(ring);
    delete ring;
    return Str(env, "napi_create_external failed");
  }
  return external;
}

// (ring, bytes: Uint8Array) -> the ring and the bytes' memory; false (a TypeError thrown) otherwise.
bool RingAndBytes(napi_env env, napi_callback_info info, const char* usage, Ring** ring, char** data, size_t* length) {
  size_t argc = 2;
  napi_value argv[2];
  *ring = RingOf(env, info, &argc, argv, usage);
  if (*ring == nullptr) return false;
  void* bytes = nullptr;
  napi_typedarray_type type;
  if (argc < 2 || napi_get_typedarray_info(env, argv[1], &type, length, &bytes, nullptr, nullptr) != napi_ok ||
      type != napi_uint8_array) {
    napi_throw_type_error(env, nullptr, usage);
    return false;
  }
  *data = static_cast<char*>(bytes);
  return true;
}

// ringTake(ring, into: Uint8Array) -> bytes copied (0: none; a frame cut by the room goes on in the
// next take), or -1: the engine's index is impossible.
napi_value RingTake(napi_env env, napi_callback_info info) {
  Ring* ring;
  char* data;
  size_t length;
  if (!RingAndBytes(env, info, "ringTake(ring, into: Uint8Array)", &ring, &data, &length)) return nullptr;
  const uint32_t room = length > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(length);
  return Int(env, static_cast<int32_t>(decision_channel::RingTake(&ring->in, data, room)));
}

// ringPut(ring, bytes: Uint8Array) -> 1 put (and the engine woken if it slept), 0 no room, -1 the
// engine's index is impossible.
napi_value RingPut(napi_env env, napi_callback_info info) {
  Ring* ring;
  char* data;
  size_t length;
  if (!RingAndBytes(env, info, "ringPut(ring, bytes: Uint8Array of at most the ring's size)", &ring, &data, &length)) return nullptr;
  if (length > kToEngineBytes) {
    napi_throw_type_error(env, nullptr, "ringPut(ring, bytes: Uint8Array of at most the ring's size)");
    return nullptr;
  }
  const int put = decision_channel::RingPut(&ring->out, data, static_cast<uint32_t>(length));
  if (put == 1 && decision_channel::RingShouldWake(&ring->header->engine_sleeps.value)) {
    decision_channel::FrameHeader wake = {sizeof(decision_channel::FrameHeader), decision_channel::kWake, 0};
    // Full socket: it holds wake-ups (or frames) enough already for the engine to look.
    while (send(ring->socket_fd, &wake, sizeof wake, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
  }
  return Int(env, put);
}

// ringMaySleep(ring) -> false when notifications came meanwhile (poll on); true: the engine now
// sends a kWake on the socket with the next one.
napi_value RingMaySleep(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  Ring* ring = RingOf(env, info, &argc, argv, "ringMaySleep(ring)");
  if (ring == nullptr) return nullptr;
  napi_value result;
  napi_get_boolean(env, decision_channel::RingMaySleep(&ring->header->control_plane_sleeps.value, ring->in), &result);
  return result;
}

// ringAwake(ring): polling again; the engine need not send wake-ups.
napi_value RingAwake(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  Ring* ring = RingOf(env, info, &argc, argv, "ringAwake(ring)");
  if (ring == nullptr) return nullptr;
  ring->header->control_plane_sleeps.value.store(0, std::memory_order_relaxed);
  return nullptr;
}

// ringClose(ring): unmaps it (again: nothing); every other call refuses a closed ring.
napi_value RingClose(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  Ring* ring = RingOf(env, info, &argc, argv, "ringClose(ring)", false);
  if (ring != nullptr) Unmap(ring);
  return nullptr;
}

// yieldCpu(): sched_yield. A poller that found nothing lets a task runnable on its CPU go first
// (another container's workload or engine thread), instead of spinning through its slice.
napi_value YieldCpu(napi_env, napi_callback_info) {
  sched_yield();
  return nullptr;
}

}  // namespace

void RegisterRingIo(napi_env env, napi_value exports) {
  const napi_property_descriptor functions[] = {
      {"ringOpen", nullptr, RingOpen, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"ringTake", nullptr, RingTake, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"ringPut", nullptr, RingPut, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"ringMaySleep", nullptr, RingMaySleep, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"ringAwake", nullptr, RingAwake, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"ringClose", nullptr, RingClose, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"yieldCpu", nullptr, YieldCpu, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  napi_define_properties(env, exports, sizeof functions / sizeof functions[0], functions);
}

}  // namespace channel_io
