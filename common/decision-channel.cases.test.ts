// The decision channel's frames as native/common/decision_channel.h lays them out: frames are
// built here byte by byte from the header's offsets, not with the codec under test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ChannelDecisionKind, encodeDecisions, encodeHello, FrameReader, MAX_FRAME } from './decision-channel';

/** A kNotification frame: NotificationBody (88 bytes), the syscall name, then StringHeader + bytes each. */
function notificationFrame(n: { id: bigint; ip: bigint; args: bigint[]; handle: number; pid: number; nr: number; arch: number; name: string; strings: Array<{ index: number; truncated: boolean; value: string }> }): Buffer {
  const strings = n.strings.map((s) => {
    const bytes = Buffer.from(s.value, 'utf8');
    const header = Buffer.alloc(4);
    header.writeUInt8(s.index, 0);
    header.writeUInt8(s.truncated ? 1 : 0, 1);
    header.writeUInt16LE(bytes.length, 2);
    return Buffer.concat([header, bytes]);
  });
  const body = Buffer.alloc(88);
  body.writeBigUInt64LE(n.id, 0);
  body.writeBigUInt64LE(n.ip, 8);
  n.args.forEach((a, i) => body.writeBigUInt64LE(a, 16 + i * 8));
  body.writeUInt32LE(n.handle, 64);
  body.writeUInt32LE(n.pid, 68);
  body.writeInt32LE(n.nr, 72);
  body.writeUInt32LE(n.arch, 76);
  body.writeUInt8(n.name.length, 80);
  body.writeUInt8(n.strings.length, 81);
  const rest = Buffer.concat([body, Buffer.from(n.name, 'latin1'), ...strings]);
  const header = Buffer.alloc(8);
  header.writeUInt32LE(8 + rest.length, 0);
  header.writeUInt16LE(3, 4);
  return Buffer.concat([header, rest]);
}

function readyFrame(session: bigint): Buffer {
  const frame = Buffer.alloc(16);
  frame.writeUInt32LE(16, 0);
  frame.writeUInt16LE(2, 4);
  frame.writeBigUInt64LE(session, 8);
  return frame;
}

const MKDIR = {
  id: 0xfedcba9876543210n, ip: 0x7f0011223344n, args: [0x1000n, 0o755n, 0n, 0n, 0n, 0xffffffffffffffffn],
  handle: 4_000_000_000, pid: 4242, nr: 83, arch: 0xc000003e, name: 'mkdir',
  strings: [{ index: 0, truncated: false, value: '/tmp/dir-ü' }, { index: 1, truncated: true, value: '' }],
};

test('decision channel codec: frames split anywhere and glued together come out whole and in order', () => {
  const stream = Buffer.concat([readyFrame(7n), notificationFrame(MKDIR), notificationFrame({ ...MKDIR, id: 2n, strings: [] })]);
  for (const step of [1, 3, 8, 50, stream.length]) {
    const reader = new FrameReader();
    const frames = [];
    // One reused read buffer, as the link's onread gives: the reader must copy what it keeps.
    const buffer = Buffer.alloc(step);
    for (let at = 0; at < stream.length; at += step) {
      const n = stream.copy(buffer, 0, at, Math.min(stream.length, at + step));
      frames.push(...reader.push(buffer.subarray(0, n)));
      buffer.fill(0xee);
    }
    assert.deepEqual(frames.map((f) => (f.type === 'ready' ? `ready ${f.session}` : `notification ${f.notification.id}`)), ['ready 7', `notification ${MKDIR.id}`, 'notification 2'], `chunks of ${step}`);
  }
});

test('decision channel codec: a frame length below the header or above 64 KiB is an error, not a wait', () => {
  for (const length of [0, 7, MAX_FRAME + 1]) {
    const frame = Buffer.alloc(8);
    frame.writeUInt32LE(length, 0);
    frame.writeUInt16LE(3, 4);
    assert.throws(() => new FrameReader().push(frame), /bad frame length/, String(length));
  }
});

test('decision channel codec: frame types the control plane does not read are passed over', () => {
  const unknown = Buffer.alloc(12);
  unknown.writeUInt32LE(12, 0);
  unknown.writeUInt16LE(99, 4);
  const frames = new FrameReader().push(Buffer.concat([unknown, readyFrame(1n)]));
  assert.deepEqual(frames, [{ type: 'ready', session: 1n, ring: false }]);
});

test('decision channel codec: hello carries the 16-byte token; decisions are 40-byte frames laid out as DecisionBody', () => {
  const token = Uint8Array.from({ length: 16 }, (_, i) => i + 1);
  const hello = encodeHello(token);
  assert.equal(hello.length, 24);
  assert.deepEqual([hello.readUInt32LE(0), hello.readUInt16LE(4), hello.readUInt16LE(6)], [24, 1, 0]);
  assert.deepEqual([...hello.subarray(8)], [...token]);
  const out = encodeDecisions([
    { handle: 4_000_000_000, id: 0xfedcba9876543210n, kind: ChannelDecisionKind.Error, errno: 13, value: 0n },
    { handle: 2, id: 3n, kind: ChannelDecisionKind.Value, errno: 0, value: -1n },
  ]);
  assert.equal(out.length, 80);
  const at = (i: number) => i * 40;
  assert.deepEqual([out.readUInt32LE(at(0)), out.readUInt16LE(at(0) + 4), out.readUInt16LE(at(0) + 6)], [40, 4, 0]);
  assert.equal(out.readBigUInt64LE(at(0) + 8), 0xfedcba9876543210n);
  assert.equal(out.readUInt32LE(at(0) + 24), 4_000_000_000);
  assert.equal(out.readInt32LE(at(0) + 28), 13);
  assert.equal(out.readUInt8(at(0) + 32), 2);
  assert.equal(out.readBigInt64LE(at(1) + 16), -1n);
  assert.equal(out.readUInt8(at(1) + 32), 3);
  assert.deepEqual([...out.subarray(at(1) + 33, at(1) + 40)], [0, 0, 0, 0, 0, 0, 0], 'reserved bytes are zero');
});
