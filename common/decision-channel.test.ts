import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FRAME_HEADER, FrameReader, FrameType } from './decision-channel';

/** A Notification frame as native/common/decision_channel.h lays it out. */
function notificationFrame(name: string, strings: Array<{ index: number; truncated: boolean; bytes: Buffer }>): Buffer {
  const body = Buffer.alloc(88);
  body.writeBigUInt64LE(42n, 0);
  body.writeUInt32LE(3, 64);
  body.writeUInt32LE(1234, 68);
  body.writeInt32LE(83, 72);
  body.writeUInt32LE(0xc000003e, 76);
  body.writeUInt8(name.length, 80);
  body.writeUInt8(strings.length, 81);
  const parts: Buffer[] = [body, Buffer.from(name, 'latin1')];
  for (const s of strings) {
    const header = Buffer.alloc(4);
    header.writeUInt8(s.index, 0);
    header.writeUInt8(s.truncated ? 1 : 0, 1);
    header.writeUInt16LE(s.bytes.length, 2);
    parts.push(header, s.bytes);
  }
  const payload = Buffer.concat(parts);
  const head = Buffer.alloc(FRAME_HEADER);
  head.writeUInt32LE(FRAME_HEADER + payload.length, 0);
  head.writeUInt16LE(FrameType.Notification, 4);
  return Buffer.concat([head, payload]);
}

test('decision channel frames: string arguments keep their exact bytes, beside their lossy text', () => {
  const bad = Buffer.from('bad\xff\xfe', 'latin1');
  const frame = notificationFrame('mkdir', [{ index: 0, truncated: false, bytes: bad }, { index: 1, truncated: true, bytes: Buffer.from('/ok') }]);
  const reader = new FrameReader();
  // Split in two reads, and the caller reuses its buffer afterwards: the bytes must be a copy.
  const chunk = Buffer.from(frame);
  assert.deepEqual(reader.push(chunk.subarray(0, 100)), []);
  const frames = reader.push(chunk.subarray(100));
  chunk.fill(0);
  assert.equal(frames.length, 1);
  assert.ok(frames[0].type === 'notification');
  const n = frames[0].notification;
  assert.equal(n.syscall, 'mkdir');
  assert.equal(n.id, 42n);
  assert.equal(n.pid, 1234);
  assert.deepEqual(n.stringArgs.map((s) => [s.index, s.truncated, s.value, s.raw?.toString('latin1')]), [
    [0, false, 'bad\ufffd\ufffd', 'bad\xff\xfe'],
    [1, true, '/ok', '/ok'],
  ]);
});
