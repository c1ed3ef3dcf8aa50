// The engine's event batches become NativeEvent objects (JS thread, once per batch, on the hot path
// of Watch): the records of native/addon/event_layout.hpp, read by the offsets the addon exports.
import { EMULATIONS } from '../common/emulations';
import type { AnsweredBy } from '../proto/gen/seccompagent/v1/dataplane';
import type { AnsweredEvent, DecisionDroppedEvent, NativeEvent } from './native';

/** Every constant of native/addon/event_layout.hpp, by its name there. */
export const EVENT_LAYOUT_NAMES = [
  'W64_WORDS', 'W64_ID', 'W64_VALUE', 'W64_ARGS', 'W64_NS', 'W64_SESSION',
  'W32_WORDS', 'W32_TYPE', 'W32_HANDLE', 'W32_PID', 'W32_NR', 'W32_ARCH', 'W32_FLAGS', 'W32_ERRNO', 'W32_COUNT',
  'W32_TEXT', 'W32_SECCOMP_MASK', 'W32_STRING_ARGS',
  'FLAG_FORWARDED', 'FLAG_GONE', 'FLAG_VIA_CHANNEL', 'FLAG_CONNECTED', 'FLAG_NOTIFIED', 'FLAG_RETURNED',
  'FLAG_FIELD_MASK', 'FLAG_BY_SHIFT', 'FLAG_ANSWER_KIND_SHIFT', 'FLAG_EMULATED_SHIFT',
  'ARG_INDEX_MASK', 'ARG_TRUNCATED', 'ARG_LENGTH_SHIFT',
  'TYPE_CONNECTION', 'TYPE_INGEST_ERROR', 'TYPE_NOTIFICATION', 'TYPE_ANSWERED', 'TYPE_REMOVED', 'TYPE_ERROR',
  'TYPE_DECISION_DROPPED', 'TYPE_SESSION_DRAINED', 'TYPE_CHANNEL', 'TYPE_HANDOFF', 'TYPE_TALLY', 'TYPE_READ_STALL',
  'ANSWER_CONTINUE', 'ANSWER_ERROR', 'ANSWER_VALUE',
  'DROP_UNKNOWN', 'DROP_LATE', 'DROP_WRONG_SESSION', 'DROP_INVALID',
] as const;

/** The addon's `eventLayout`: each constant of event_layout.hpp. */
export type EventLayout = Readonly<Record<(typeof EVENT_LAYOUT_NAMES)[number], number>>;

/**
 * What the engine calls with each batch (event_delivery.cpp): `count` records as uint64 and uint32
 * words, the events' texts in order, and the bytes of string arguments and tally buckets in order.
 */
export type EventBatchHandler = (words64: ArrayBuffer, words32: ArrayBuffer, texts: string[], count: number, raw: ArrayBuffer) => void;

/**
 * The engine's `onBatch`: decodes each batch against `layout` (read once, here) and hands the
 * events to `onEvents`. Throws when `layout` lacks a constant (an addon from another build).
 */
export function makeEventDecoder(layout: EventLayout, onEvents: (events: NativeEvent[]) => void): EventBatchHandler {
  const missing = EVENT_LAYOUT_NAMES.filter((name) => typeof layout[name] !== 'number');
  if (missing.length > 0) throw new Error(`the addon's eventLayout lacks ${missing.join(', ')}: rebuild the addon (npx node-gyp rebuild)`);
  const {
    W64_WORDS, W64_ID, W64_VALUE, W64_ARGS, W64_NS, W64_SESSION,
    W32_WORDS, W32_TYPE, W32_HANDLE, W32_PID, W32_NR, W32_ARCH, W32_FLAGS, W32_ERRNO, W32_COUNT, W32_TEXT,
    W32_SECCOMP_MASK, W32_STRING_ARGS,
    FLAG_FORWARDED, FLAG_GONE, FLAG_VIA_CHANNEL, FLAG_CONNECTED, FLAG_NOTIFIED, FLAG_RETURNED,
    FLAG_FIELD_MASK, FLAG_BY_SHIFT, FLAG_ANSWER_KIND_SHIFT, FLAG_EMULATED_SHIFT,
    ARG_INDEX_MASK, ARG_TRUNCATED, ARG_LENGTH_SHIFT,
    TYPE_CONNECTION, TYPE_INGEST_ERROR, TYPE_NOTIFICATION, TYPE_ANSWERED, TYPE_REMOVED,
    TYPE_DECISION_DROPPED, TYPE_SESSION_DRAINED, TYPE_CHANNEL, TYPE_HANDOFF, TYPE_TALLY, TYPE_READ_STALL,
    ANSWER_ERROR, ANSWER_VALUE,
  } = layout;
  // By number: the emulation table's names ('' for none), the drop reasons.
  const emulated: string[] = new Array<string>(Math.max(...EMULATIONS.map((e) => e.kind)) + 1).fill('');
  for (const e of EMULATIONS) emulated[e.kind] = e.name;
  const dropped: DecisionDroppedEvent['reason'][] = [];
  dropped[layout.DROP_UNKNOWN] = 'unknown';
  dropped[layout.DROP_LATE] = 'late';
  dropped[layout.DROP_WRONG_SESSION] = 'wrong-session';
  dropped[layout.DROP_INVALID] = 'invalid';
  const action = (flags: number, errno: number, value: bigint): AnsweredEvent['action'] => {
    const kind = emulated[(flags >>> FLAG_EMULATED_SHIFT) & FLAG_FIELD_MASK];
    if (kind !== '') return { kind, errno, value } as AnsweredEvent['action'];
    const answer = (flags >>> FLAG_ANSWER_KIND_SHIFT) & FLAG_FIELD_MASK;
    return answer === ANSWER_ERROR ? { kind: 'error', errno }
      : answer === ANSWER_VALUE ? ({ kind: 'value', value: BigInt.asIntN(64, value) } as AnsweredEvent['action'])
      : { kind: 'continue' };
  };
  const peer = (u: Uint32Array, b: number) => ({ pid: u[b + W32_PID] | 0, uid: u[b + W32_NR], gid: u[b + W32_ARCH] });

  return function decode(words64, words32, texts, count, raw) {
    const w = new BigUint64Array(words64);
    const u = new Uint32Array(words32);
    const events = new Array<NativeEvent>(count);
    for (let i = 0, a = 0, b = 0, r = 0; i < count; i++, a += W64_WORDS, b += W32_WORDS) {
      const type = u[b + W32_TYPE];
      const flags = u[b + W32_FLAGS];
      const s = u[b + W32_TEXT];
      if (type === TYPE_NOTIFICATION) {
        const n = u[b + W32_COUNT];
        const args = [w[a + W64_ARGS], w[a + W64_ARGS + 1], w[a + W64_ARGS + 2], w[a + W64_ARGS + 3], w[a + W64_ARGS + 4], w[a + W64_ARGS + 5]];
        const strings = new Array<{ index: number; value: string; truncated: boolean; raw: Buffer }>(n);
        for (let k = 0; k < n; k++) {
          const x = u[b + W32_STRING_ARGS + k];
          const length = x >>> ARG_LENGTH_SHIFT;
          // Paths are bytes: `raw` is exact (a view of the batch's buffer), `value` its lossy UTF-8 reading.
          const bytes = Buffer.from(raw, r, length);
          r += length;
          strings[k] = { index: x & ARG_INDEX_MASK, value: bytes.toString(), truncated: (x & ARG_TRUNCATED) !== 0, raw: bytes };
        }
        events[i] = {
          type: 'notification', handle: u[b + W32_HANDLE], id: w[a + W64_ID], pid: u[b + W32_PID], nr: u[b + W32_NR],
          arch: u[b + W32_ARCH], ip: w[a + W64_VALUE], args, strings, forwarded: (flags & FLAG_FORWARDED) !== 0,
          session: Number(w[a + W64_SESSION]), viaChannel: (flags & FLAG_VIA_CHANNEL) !== 0, receivedNs: w[a + W64_NS],
        };
      } else if (type === TYPE_ANSWERED) {
        events[i] = {
          type: 'answered', handle: u[b + W32_HANDLE], id: w[a + W64_ID], by: ((flags >>> FLAG_BY_SHIFT) & FLAG_FIELD_MASK) as AnsweredBy,
          action: action(flags, u[b + W32_ERRNO], w[a + W64_VALUE]), gone: (flags & FLAG_GONE) !== 0, latencyNs: w[a + W64_NS],
          notified: (flags & FLAG_NOTIFIED) !== 0 ? { nr: u[b + W32_NR], arch: u[b + W32_ARCH] } : null, rule: u[b + W32_COUNT] - 1,
        };
      } else if (type === TYPE_TALLY) {
        // Bucket counts: W32_COUNT little-endian u32s in `raw` (after the bytes before them).
        const n = u[b + W32_COUNT];
        const view = new DataView(raw, r, n * 4);
        const buckets = new Array<number>(n);
        for (let k = 0; k < n; k++) buckets[k] = view.getUint32(k * 4, true);
        r += n * 4;
        events[i] = {
          type: 'tally', handle: u[b + W32_HANDLE], nr: u[b + W32_NR], arch: u[b + W32_ARCH],
          by: ((flags >>> FLAG_BY_SHIFT) & FLAG_FIELD_MASK) as AnsweredBy, gone: (flags & FLAG_GONE) !== 0,
          count: Number(w[a + W64_ID]), latencySumNs: w[a + W64_NS], latencyBuckets: buckets,
        };
      } else if (type === TYPE_CONNECTION) {
        const n = u[b + W32_COUNT];
        const mask = u[b + W32_SECCOMP_MASK];
        const fds = new Array<{ seccomp: boolean }>(n);
        for (let k = 0; k < n; k++) fds[k] = { seccomp: ((mask >>> k) & 1) === 1 };
        events[i] = { type: 'connection', conn: u[b + W32_HANDLE], json: texts[s], fds, peer: peer(u, b) };
      } else if (type === TYPE_INGEST_ERROR) {
        events[i] = { type: 'ingest-error', code: texts[s + 1], message: texts[s], peer: peer(u, b) };
      } else if (type === TYPE_REMOVED) {
        events[i] = { type: 'removed', handle: u[b + W32_HANDLE] };
      } else if (type === TYPE_DECISION_DROPPED) {
        events[i] = {
          type: 'decision-dropped', session: Number(w[a + W64_SESSION]), handle: u[b + W32_HANDLE], id: w[a + W64_ID],
          reason: dropped[u[b + W32_ERRNO]],
        };
      } else if (type === TYPE_SESSION_DRAINED) {
        events[i] = { type: 'session-drained', session: Number(w[a + W64_SESSION]) };
      } else if (type === TYPE_CHANNEL) {
        events[i] = {
          type: 'channel', session: Number(w[a + W64_SESSION]), state: (flags & FLAG_CONNECTED) !== 0 ? 'connected' : 'closed', reason: texts[s],
        };
      } else if (type === TYPE_HANDOFF) {
        events[i] = { type: 'handoff', conn: u[b + W32_HANDLE], peer: peer(u, b) };
      } else if (type === TYPE_READ_STALL) {
        events[i] = {
          type: 'read-stall', handle: u[b + W32_HANDLE], pid: u[b + W32_PID], lane: Number(w[a + W64_ID]), stalledNs: w[a + W64_NS],
          returned: (flags & FLAG_RETURNED) !== 0, nr: u[b + W32_NR], arch: u[b + W32_ARCH],
        };
      } else {
        events[i] = { type: 'error', message: texts[s] };
      }
    }
    onEvents(events);
  };
}
