// The decision channel's frames (native/common/decision_channel.h), for the control plane's
// side: decoding notifications, encoding hello and decisions. Layouts are fixed; keep in step.
import type { Notification } from '../proto/gen/seccompagent/v1/dataplane';

/** Hello/Welcome feature: notifications and simple decisions travel on the native decision channel. */
export const CHANNEL_FEATURE = 'channel.v1';

export const FRAME_HEADER = 8;
export const MAX_FRAME = 64 * 1024;
export const enum FrameType {
  Hello = 1,
  Ready = 2,
  Notification = 3,
  Decision = 4,
  /** Header only, either way: the shared-memory rings hold frames for a side that slept. */
  Wake = 5,
}
export const enum ChannelDecisionKind {
  Continue = 1,
  Error = 2,
  Value = 3,
}
const NOTIFICATION_BODY = 88;
const NOTIFICATION_TRAILER = 16;
/** FrameHeader.flags: a Notification frame carries a trailer (receivedAt, containerId) after its strings. */
export const FRAME_FLAG_TRAILER = 1;
/** Hello: asks for the shared-memory rings; Ready: they came, their memfd attached (decision_ring.h). */
export const FRAME_FLAG_RING = 2;
/** decision_ring.h kToEngineBytes: the most one put into the decisions ring can hold. */
export const RING_TO_ENGINE_BYTES = 256 * 1024;
const DECISION_FRAME = FRAME_HEADER + 32;

export function encodeHello(token: Uint8Array, ring = false): Buffer {
  const frame = Buffer.alloc(FRAME_HEADER + 16);
  frame.writeUInt32LE(frame.length, 0);
  frame.writeUInt16LE(FrameType.Hello, 4);
  frame.writeUInt16LE(ring ? FRAME_FLAG_RING : 0, 6);
  frame.set(token.subarray(0, 16), FRAME_HEADER);
  return frame;
}

export interface ChannelDecision {
  handle: number;
  id: bigint;
  kind: ChannelDecisionKind;
  errno: number;
  value: bigint;
}

/** Encodes decisions into one buffer (one write for a whole batch). */
export function encodeDecisions(decisions: readonly ChannelDecision[]): Buffer {
  const out = Buffer.allocUnsafe(DECISION_FRAME * decisions.length);
  let at = 0;
  for (const d of decisions) {
    out.fill(0, at + 33, at + DECISION_FRAME);  // the padding: every other byte is written below
    out.writeUInt32LE(DECISION_FRAME, at);
    out.writeUInt16LE(FrameType.Decision, at + 4);
    out.writeUInt16LE(0, at + 6);
    out.writeBigUInt64LE(d.id, at + 8);
    out.writeBigInt64LE(d.value, at + 16);
    out.writeUInt32LE(d.handle, at + 24);
    out.writeInt32LE(d.errno, at + 28);
    out.writeUInt8(d.kind, at + 32);
    at += DECISION_FRAME;
  }
  return out;
}

function decodeNotification(frame: Buffer, start: number, end: number): Notification {
  const b = start + FRAME_HEADER;
  const args: bigint[] = [];
  for (let i = 0; i < 6; i++) args.push(frame.readBigUInt64LE(b + 16 + i * 8));
  const nameLength = frame.readUInt8(b + 80);
  const stringCount = frame.readUInt8(b + 81);
  let at = b + NOTIFICATION_BODY;
  const syscall = frame.toString('latin1', at, at + nameLength);
  at += nameLength;
  const stringArgs: Notification['stringArgs'] = [];
  for (let i = 0; i < stringCount && at + 4 <= end; i++) {
    const index = frame.readUInt8(at);
    const truncated = frame.readUInt8(at + 1) !== 0;
    const length = frame.readUInt16LE(at + 2);
    // The exact bytes (a copy: the caller reuses its read buffer); `value` is their lossy UTF-8 reading.
    const raw = Buffer.from(frame.subarray(at + 4, at + 4 + length));
    stringArgs.push({ index, truncated, value: raw.toString('utf8'), raw });
    at += 4 + length;
  }
  // Since the trailer (FrameFlags.Trailer): the receipt time and the container, as on gRPC.
  let containerId = '';
  let receivedAt: Date | undefined;
  if ((frame.readUInt16LE(start + 6) & FRAME_FLAG_TRAILER) !== 0 && at + NOTIFICATION_TRAILER <= end) {
    // ns as two halves: a double keeps it to 256 ns, far below the millisecond a Date holds.
    receivedAt = new Date((frame.readUInt32LE(at + 4) * 4294967296 + frame.readUInt32LE(at)) / 1e6);
    const idLength = frame.readUInt16LE(at + 8);
    at += NOTIFICATION_TRAILER;
    containerId = frame.toString('utf8', at, Math.min(end, at + idLength));
  }
  return {
    handle: BigInt(frame.readUInt32LE(b + 64)),
    id: frame.readBigUInt64LE(b),
    pid: frame.readUInt32LE(b + 68),
    syscallNr: frame.readInt32LE(b + 72),
    syscall,
    arch: frame.readUInt32LE(b + 76),
    instructionPointer: frame.readBigUInt64LE(b + 8),
    args,
    stringArgs,
    containerId,
    receivedAt,
  };
}

export type ChannelFrame = { type: 'ready'; session: bigint; ring: boolean } | { type: 'notification'; notification: Notification };

/** Splits a byte stream into frames; keeps (a copy of) a partial frame for the next chunk, so the caller may reuse its read buffer. */
const NO_BYTES = Buffer.alloc(0);

export class FrameReader {
  private pending: Buffer = NO_BYTES;

  push(chunk: Buffer): ChannelFrame[] {
    const data = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const frames: ChannelFrame[] = [];
    let at = 0;
    while (data.length - at >= FRAME_HEADER) {
      const length = data.readUInt32LE(at);
      if (length < FRAME_HEADER || length > MAX_FRAME) throw new Error(`decision channel: bad frame length ${length}`);
      if (data.length - at < length) break;
      const type = data.readUInt16LE(at + 4);
      if (type === FrameType.Notification) frames.push({ type: 'notification', notification: decodeNotification(data, at, at + length) });
      else if (type === FrameType.Ready) frames.push({ type: 'ready', session: data.readBigUInt64LE(at + FRAME_HEADER), ring: (data.readUInt16LE(at + 6) & FRAME_FLAG_RING) !== 0 });
      // Wake (and any type this reader predates): nothing to hand on.
      at += length;
    }
    this.pending = at === data.length ? NO_BYTES : Buffer.from(data.subarray(at));
    return frames;
  }
}
