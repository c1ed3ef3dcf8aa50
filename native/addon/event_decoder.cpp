#include "event_decoder.hpp"

#include <string.h>

#include <vector>

#include "target_memory.hpp"

namespace seccomp_agent {
namespace {

// Record layout shared with kDecoderSource. Per event: kW64 uint64 words and kW32 uint32 words.
constexpr size_t kW64 = 10;  // id, ip (answered: the answer's value), args[0..5], ns, session
constexpr size_t kW32 = 16;  // see Encode()

// A notification's string argument k: w32[10 + k] = index | truncated << 8 | length << 16; its
// bytes are the next `length` bytes of the batch's `raw` buffer (notifications' strings in order).
constexpr uint32_t kArgTruncated = 1u << 8;
constexpr unsigned kArgLengthShift = 16;
static_assert((kTargetPathMax >> 16) == 0, "a string argument's length fits in 16 bits");

// Flags word (w32[5]); answered events also carry by (bits 8-15: the API's AnsweredBy number), the
// answer kind (16-23) and the emulated kind (24-31).
constexpr uint32_t kForwarded = 1u << 0;
constexpr uint32_t kGone = 1u << 1;
constexpr uint32_t kViaChannel = 1u << 2;  // notification
constexpr uint32_t kConnected = 1u << 3;   // channel
constexpr uint32_t kNotified = 1u << 4;    // answered: stands for its notification too (nr, arch)

const char kDecoderSource[] = R"JS(
(function (onEvents, EMULATED) {
  'use strict';
  const DROPPED = ['unknown', 'late', 'wrong-session', 'invalid'];
  const action = (kind, errno, emulated, value) =>
    emulated !== 0 ? { kind: EMULATED[emulated], errno, value }
      : kind === 1 ? { kind: 'error', errno } : kind === 2 ? { kind: 'value', value: BigInt.asIntN(64, value) } : { kind: 'continue' };
  return function decode(buf64, buf32, strings, count, raw) {
    const w = new BigUint64Array(buf64);
    const u = new Uint32Array(buf32);
    const events = new Array(count);
    for (let i = 0, a = 0, b = 0, r = 0; i < count; i++, a += 10, b += 16) {
      const type = u[b];
      const flags = u[b + 5];
      const s = u[b + 8];
      switch (type) {
        case 2: {
          const n = u[b + 7];
          const args = [w[a + 2], w[a + 3], w[a + 4], w[a + 5], w[a + 6], w[a + 7]];
          const strs = new Array(n);
          for (let k = 0; k < n; k++) {
            const x = u[b + 10 + k];
            const length = x >>> 16;
            // Paths are bytes: `raw` is exact (a view of the batch's buffer), `value` its lossy UTF-8 reading.
            const bytes = Buffer.from(raw, r, length);
            r += length;
            strs[k] = { index: x & 0xff, value: bytes.toString(), truncated: (x & 0x100) !== 0, raw: bytes };
          }
          events[i] = {
            type: 'notification', handle: u[b + 1], id: w[a], pid: u[b + 2], nr: u[b + 3], arch: u[b + 4],
            ip: w[a + 1], args, strings: strs, forwarded: (flags & 1) !== 0, session: Number(w[a + 9]),
            viaChannel: (flags & 4) !== 0, receivedNs: w[a + 8],
          };
          break;
        }
        case 3:
          events[i] = {
            type: 'answered', handle: u[b + 1], id: w[a], by: (flags >> 8) & 0xff,
            action: action((flags >> 16) & 0xff, u[b + 6], flags >>> 24, w[a + 1]), gone: (flags & 2) !== 0,
            latencyNs: w[a + 8], notified: (flags & 16) !== 0 ? { nr: u[b + 3], arch: u[b + 4] } : null, rule: u[b + 7] - 1,
          };
          break;
        case 0: {
          const n = u[b + 7];
          const mask = u[b + 9];
          const fds = new Array(n);
          for (let k = 0; k < n; k++) fds[k] = { seccomp: ((mask >>> k) & 1) === 1 };
          events[i] = {
            type: 'connection', conn: u[b + 1], json: strings[s], fds,
            peer: { pid: u[b + 2] | 0, uid: u[b + 3], gid: u[b + 4] },
          };
          break;
        }
        case 1:
          events[i] = {
            type: 'ingest-error', code: strings[s + 1], message: strings[s],
            peer: { pid: u[b + 2] | 0, uid: u[b + 3], gid: u[b + 4] },
          };
          break;
        case 4:
          events[i] = { type: 'removed', handle: u[b + 1] };
          break;
        case 6:
          events[i] = { type: 'decision-dropped', session: Number(w[a + 9]), handle: u[b + 1], id: w[a], reason: DROPPED[u[b + 6]] };
          break;
        case 7:
          events[i] = { type: 'session-drained', session: Number(w[a + 9]) };
          break;
        case 8:
          events[i] = {
            type: 'channel', session: Number(w[a + 9]), state: (flags & 8) !== 0 ? 'connected' : 'closed', reason: strings[s],
          };
          break;
        case 9:
          events[i] = { type: 'handoff', conn: u[b + 1], peer: { pid: u[b + 2] | 0, uid: u[b + 3], gid: u[b + 4] } };
          break;
        case 10: {
          // Bucket counts: u[b + 7] little-endian u32s in `raw` (after the strings before them).
          const n = u[b + 7];
          const view = new DataView(raw, r, n * 4);
          const buckets = new Array(n);
          for (let k = 0; k < n; k++) buckets[k] = view.getUint32(k * 4, true);
          r += n * 4;
          events[i] = {
            type: 'tally', handle: u[b + 1], nr: u[b + 3], arch: u[b + 4], by: (flags >> 8) & 0xff,
            gone: (flags & 2) !== 0, count: Number(w[a]), latencySumNs: w[a + 8], latencyBuckets: buckets,
          };
          break;
        }
        default:
          events[i] = { type: 'error', message: strings[s] };
      }
    }
    onEvents(events);
  };
})
)JS";

// Fills one record; appends the event's texts to *texts, a notification's string arguments (bytes)
// to *raws.
void Encode(const Event& e, const std::string& arena, uint64_t* w64, uint32_t* w32,
            std::vector<std::pair<const char*, size_t>>* texts, std::vector<std::pair<const char*, size_t>>* raws) {
  w64[0] = e.id;
  w64[1] = e.ip;
  for (int i = 0; i < 6; i++) w64[2 + i] = e.args[i];
  w64[8] = e.ns;
  w64[9] = e.session;
  w32[0] = static_cast<uint32_t>(e.type);
  w32[8] = static_cast<uint32_t>(texts->size());
  auto text = [&](TextRef ref) { texts->emplace_back(arena.data() + ref.offset, ref.length); };
  switch (e.type) {
    case EventType::kNotification:
      w32[1] = e.handle;
      w32[2] = e.pid;
      w32[3] = e.nr;
      w32[4] = e.arch;
      w32[5] = (e.forwarded ? kForwarded : 0) | (e.via_channel ? kViaChannel : 0);
      w32[7] = e.string_count;
      for (uint8_t k = 0; k < e.string_count; k++) {
        const StringArg& arg = e.strings[k];
        w32[10 + k] = arg.index | (arg.truncated ? kArgTruncated : 0u) | (arg.text.length << kArgLengthShift);
        raws->emplace_back(arena.data() + arg.text.offset, arg.text.length);
      }
      break;
    case EventType::kAnswered:
      w32[1] = e.handle;
      w32[3] = e.nr;
      w32[4] = e.arch;
      w32[5] = (e.gone ? kGone : 0) | (e.notified ? kNotified : 0) | (static_cast<uint32_t>(e.by) << 8) |
               (static_cast<uint32_t>(e.action.kind) << 16) | (static_cast<uint32_t>(e.emulated) << 24);
      w32[6] = static_cast<uint32_t>(e.action.error);
      w32[7] = static_cast<uint32_t>(e.rule + 1);
      w64[1] = static_cast<uint64_t>(e.action.value);
      break;
    case EventType::kConnection:
      w32[1] = e.conn;
      w32[2] = static_cast<uint32_t>(e.peer.pid);
      w32[3] = e.peer.uid;
      w32[4] = e.peer.gid;
      w32[7] = e.fd_count;
      w32[9] = e.seccomp_mask;
      text(e.text);
      break;
    case EventType::kIngestError: {
      w32[2] = static_cast<uint32_t>(e.peer.pid);
      w32[3] = e.peer.uid;
      w32[4] = e.peer.gid;
      text(e.text);
      const char* code = e.code != nullptr ? e.code : "read-error";
      texts->emplace_back(code, strlen(code));
      break;
    }
    case EventType::kRemoved:
      w32[1] = e.handle;
      break;
    case EventType::kError:
      text(e.text);
      break;
    case EventType::kDecisionDropped:
      w32[1] = e.handle;
      w32[6] = static_cast<uint32_t>(e.drop_reason);
      break;
    case EventType::kSessionDrained:
      break;
    case EventType::kChannel:
      w32[5] = e.connected ? kConnected : 0;
      text(e.text);
      break;
    case EventType::kHandoff:
      w32[1] = e.conn;
      w32[2] = static_cast<uint32_t>(e.peer.pid);
      w32[3] = e.peer.uid;
      w32[4] = e.peer.gid;
      break;
    case EventType::kTally:
      w32[1] = e.handle;
      w32[3] = e.nr;
      w32[4] = e.arch;
      w32[5] = (e.gone ? kGone : 0) | (static_cast<uint32_t>(e.by) << 8);
      w32[7] = e.text.length / sizeof(uint32_t);
      raws->emplace_back(arena.data() + e.text.offset, e.text.length);
      break;
  }
}

}  // namespace

Napi::Function MakeEventDecoder(Napi::Env env, Napi::Function on_events) {
  napi_value source, factory, decoder;
  if (napi_create_string_utf8(env, kDecoderSource, sizeof kDecoderSource - 1, &source) != napi_ok ||
      napi_run_script(env, source, &factory) != napi_ok) {
    return Napi::Function();
  }
  // EMULATED: the emulation table's names by kind ('' for kNone), so the decoder never keeps its own.
  Napi::Array emulated = Napi::Array::New(env, kEmulationCount + 1);
  emulated.Set(uint32_t{0}, Napi::String::New(env, ""));
  for (size_t i = 0; i < kEmulationCount; ++i) {
    emulated.Set(static_cast<uint32_t>(kEmulations[i].kind), Napi::String::New(env, kEmulations[i].name));
  }
  napi_value argv[2] = {on_events, emulated};
  if (napi_call_function(env, factory, factory, 2, argv, &decoder) != napi_ok) return Napi::Function();
  return Napi::Function(env, decoder);
}

void DeliverBatch(napi_env env, napi_value decoder, const Batch& batch) {
  const size_t count = batch.events.size();
  void* raw64 = nullptr;
  void* raw32 = nullptr;
  napi_value buf64, buf32, strings, js_count, raw_buf, result;
  if (napi_create_arraybuffer(env, count * kW64 * sizeof(uint64_t), &raw64, &buf64) != napi_ok ||
      napi_create_arraybuffer(env, count * kW32 * sizeof(uint32_t), &raw32, &buf32) != napi_ok) {
    return;
  }
  uint64_t* w64 = static_cast<uint64_t*>(raw64);
  uint32_t* w32 = static_cast<uint32_t*>(raw32);
  memset(w32, 0, count * kW32 * sizeof(uint32_t));
  std::vector<std::pair<const char*, size_t>> texts, raws;
  texts.reserve(count);
  for (size_t i = 0; i < count; i++) Encode(batch.events[i], batch.arena, w64 + i * kW64, w32 + i * kW32, &texts, &raws);
  size_t raw_size = 0;
  for (const auto& r : raws) raw_size += r.second;
  void* raw_data = nullptr;
  if (napi_create_arraybuffer(env, raw_size, &raw_data, &raw_buf) != napi_ok) return;
  char* raw_at = static_cast<char*>(raw_data);
  for (const auto& r : raws) {
    if (r.second > 0) memcpy(raw_at, r.first, r.second);
    raw_at += r.second;
  }
  if (napi_create_array_with_length(env, texts.size(), &strings) != napi_ok) return;
  for (size_t i = 0; i < texts.size(); i++) {
    napi_value s;
    if (napi_create_string_utf8(env, texts[i].first, texts[i].second, &s) != napi_ok ||
        napi_set_element(env, strings, static_cast<uint32_t>(i), s) != napi_ok) {
      return;
    }
  }
  if (napi_create_uint32(env, static_cast<uint32_t>(count), &js_count) != napi_ok) return;
  napi_value argv[5] = {buf64, buf32, strings, js_count, raw_buf};
  napi_value global;
  if (napi_get_global(env, &global) != napi_ok) return;
  // A throw from onEvents stays pending and Node reports it as uncaught, like any callback's.
  napi_call_function(env, global, decoder, 5, argv, &result);
}

}  // namespace seccomp_agent
