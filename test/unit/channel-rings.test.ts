// The control plane's side of the decision channel's rings (native/channel/ring_io.cpp) on a file
// laid out as the engine lays out its memfd (native/common/decision_ring.h): what it takes, what it
// puts, what it refuses. The engine's side is tested against the real engine in
// test/integration/decision-rings.test.ts. No root, no kernel feature.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { loadChannelIo, type ChannelIo } from '../../controlplane/link/channel-connection';
import { scratchDir } from '../support/scratch';

const HEADER = 4096;
const TO_CP = 256 << 10;
const TO_ENGINE = 256 << 10;
const OFFSETS = { toCpHead: 64, toCpTail: 128, toEngineHead: 192, toEngineTail: 256, cpSleeps: 320, engineSleeps: 384 };

function io(): ChannelIo {
  const addon = loadChannelIo();
  assert.ok(addon, 'the channel addon is built (npm ci builds it)');
  return addon;
}

/** A ring file with the engine's header; returns its path and an fd the test keeps (the "engine"). */
function ringFile(t: TestContext, magic = 0x31524353): { file: string; engine: number } {
  const file = path.join(scratchDir(t), 'rings');
  fs.writeFileSync(file, Buffer.alloc(0));
  fs.truncateSync(file, HEADER + TO_CP + TO_ENGINE);
  const engine = fs.openSync(file, 'r+');
  t.after(() => fs.closeSync(engine));
  const header = Buffer.alloc(12);
  header.writeUInt32LE(magic, 0);
  header.writeUInt32LE(TO_CP, 4);
  header.writeUInt32LE(TO_ENGINE, 8);
  fs.writeSync(engine, header, 0, header.length, 0);
  return { file, engine };
}

function writeU32(fd: number, offset: number, value: number): void {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(value, 0);
  fs.writeSync(fd, b, 0, 4, offset);
}

function readU32(fd: number, offset: number): number {
  const b = Buffer.alloc(4);
  fs.readSync(fd, b, 0, 4, offset);
  return b.readUInt32LE(0);
}

test('channel rings: the control plane takes what the engine put, across the end of the ring, and says how far it read', (t) => {
  const { file, engine } = ringFile(t);
  // The engine has put and the control plane taken all but 6 bytes of a ring's worth: the next 10 wrap.
  const start = TO_CP - 6;
  writeU32(engine, OFFSETS.toCpHead, start);
  writeU32(engine, OFFSETS.toCpTail, start);
  const ring = io().ringOpen(fs.openSync(file, 'r+'), -1);
  if (typeof ring === 'string') return assert.fail(ring);
  t.after(() => io().ringClose(ring));
  const into = Buffer.alloc(64);
  assert.equal(io().ringTake(ring, into), 0, 'nothing put yet');
  fs.writeSync(engine, Buffer.from('abcdef'), 0, 6, HEADER + TO_CP - 6);
  fs.writeSync(engine, Buffer.from('ghij'), 0, 4, HEADER);
  writeU32(engine, OFFSETS.toCpTail, start + 10);
  assert.equal(io().ringTake(ring, into), 10);
  assert.equal(into.subarray(0, 10).toString(), 'abcdefghij');
  assert.equal(readU32(engine, OFFSETS.toCpHead), (start + 10) >>> 0, 'the head published');
  assert.equal(io().ringTake(ring, into), 0, 'each byte once');
});

test('channel rings: the control plane puts a write whole or not at all, and refuses an impossible index', (t) => {
  const { file, engine } = ringFile(t);
  const ring = io().ringOpen(fs.openSync(file, 'r+'), -1);
  if (typeof ring === 'string') return assert.fail(ring);
  t.after(() => io().ringClose(ring));
  assert.equal(io().ringPut(ring, Buffer.from('decision')), 1);
  const got = Buffer.alloc(8);
  fs.readSync(engine, got, 0, 8, HEADER + TO_CP);
  assert.equal(got.toString(), 'decision');
  assert.equal(readU32(engine, OFFSETS.toEngineTail), 8);
  // The engine has taken nothing: a write larger than the room left is refused whole.
  assert.equal(io().ringPut(ring, Buffer.alloc(TO_ENGINE - 8 + 1)), 0, 'no room: nothing put');
  assert.equal(readU32(engine, OFFSETS.toEngineTail), 8, 'the tail did not move');
  assert.equal(io().ringPut(ring, Buffer.alloc(TO_ENGINE - 8)), 1, 'exactly the room left');
  assert.throws(() => io().ringPut(ring, Buffer.alloc(TO_ENGINE + 1)), TypeError, 'more than a ring holds');
  // An engine whose indices say more is waiting than the ring holds.
  writeU32(engine, OFFSETS.toCpTail, TO_CP + 1);
  assert.equal(io().ringTake(ring, Buffer.alloc(16)), -1);
  writeU32(engine, OFFSETS.toEngineHead, 0x80000000);
  assert.equal(io().ringPut(ring, Buffer.from('x')), -1);
});

test('channel rings: sleep is announced unless something came, and waking clears it; a closed ring is refused', (t) => {
  const { file, engine } = ringFile(t);
  const ring = io().ringOpen(fs.openSync(file, 'r+'), -1);
  if (typeof ring === 'string') return assert.fail(ring);
  assert.equal(io().ringMaySleep(ring), true);
  assert.equal(readU32(engine, OFFSETS.cpSleeps), 1);
  io().ringAwake(ring);
  assert.equal(readU32(engine, OFFSETS.cpSleeps), 0);
  writeU32(engine, OFFSETS.toCpTail, 8);
  assert.equal(io().ringMaySleep(ring), false, 'a frame waits: poll on');
  assert.equal(readU32(engine, OFFSETS.cpSleeps), 0);
  io().ringClose(ring);
  io().ringClose(ring);
  assert.throws(() => io().ringTake(ring, Buffer.alloc(8)), TypeError);
});

test('channel rings: a sleep still announced stays announced, with nothing come; a frame come, or the producer\'s wake-up, clears it', (t) => {
  const { file, engine } = ringFile(t);
  const ring = io().ringOpen(fs.openSync(file, 'r+'), -1);
  if (typeof ring === 'string') return assert.fail(ring);
  t.after(() => io().ringClose(ring));
  assert.equal(io().ringMaySleep(ring), true);
  assert.equal(io().ringMaySleep(ring), true, 'awake again without ringAwake: nothing came, sleep on');
  assert.equal(readU32(engine, OFFSETS.cpSleeps), 1);
  writeU32(engine, OFFSETS.toCpTail, 8);
  assert.equal(io().ringMaySleep(ring), false, 'a frame came while the flag was still set: poll on');
  assert.equal(readU32(engine, OFFSETS.cpSleeps), 0, 'and the flag cleared, so the producer sends no wake-up');
  assert.equal(io().ringTake(ring, Buffer.alloc(16)), 8);
  // The producer cleared the flag as it sent its wake-up (RingShouldWake): the next sleep announces anew.
  assert.equal(io().ringMaySleep(ring), true);
  writeU32(engine, OFFSETS.cpSleeps, 0);
  assert.equal(io().ringMaySleep(ring), true);
  assert.equal(readU32(engine, OFFSETS.cpSleeps), 1);
});

test('channel rings: a file of another layout, or too small, is refused with a reason', (t) => {
  const other = ringFile(t, 0x12345678);
  assert.match(String(io().ringOpen(fs.openSync(other.file, 'r+'), -1)), /another layout/);
  const small = path.join(scratchDir(t), 'small');
  fs.writeFileSync(small, Buffer.alloc(4096));
  assert.match(String(io().ringOpen(fs.openSync(small, 'r+'), -1)), /smaller than the rings/);
});
