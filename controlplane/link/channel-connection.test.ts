// The control plane's end of the decision channel against a channel server played in this process
// (a real Unix socket): what it reads and writes, with the addon's direct reads while it polls and
// libuv's while it sleeps, and without the addon. No root, no kernel feature.
import assert from 'node:assert/strict';
import * as net from 'node:net';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { FRAME_HEADER, type ChannelFrame } from '../../common/decision-channel';
import { scratchDir } from '../../test/support/scratch';
import { sleep, waitUntil } from '../../test/support/wait';
import { ChannelConnection, loadChannelIo, type ChannelIo } from './channel-connection';

const TOKEN = Buffer.from(Array.from({ length: 16 }, (_, i) => i + 1));

function readyFrame(): Buffer {
  const ready = Buffer.alloc(16);
  ready.writeUInt32LE(16, 0);
  ready.writeUInt16LE(2, 4);
  ready.writeBigUInt64LE(7n, 8);
  return ready;
}

/** A kNotification frame (native/common/decision_channel.h) with no string arguments. */
function notificationFrame(id: bigint): Buffer {
  const name = 'getppid';
  const frame = Buffer.alloc(FRAME_HEADER + 88 + name.length);
  frame.writeUInt32LE(frame.length, 0);
  frame.writeUInt16LE(3, 4);
  frame.writeBigUInt64LE(id, FRAME_HEADER);
  frame.writeUInt32LE(1, FRAME_HEADER + 64);
  frame.writeUInt8(name.length, FRAME_HEADER + 80);
  frame.write(name, FRAME_HEADER + 88, 'latin1');
  return frame;
}

/** A channel server with one connection at a time: what it received, and its end of the socket. */
async function channelServer(t: TestContext, readAtOnce = true) {
  const socketPath = path.join(scratchDir(t), 'channel.sock');
  const state = { conn: null as net.Socket | null, received: [] as Buffer[] };
  const server = net.createServer((conn) => {
    state.conn = conn;
    conn.on('error', () => undefined);
    if (readAtOnce) conn.on('data', (chunk) => state.received.push(chunk));
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  t.after(() => {
    state.conn?.destroy();
    server.close();
  });
  return { socketPath, state, bytes: () => Buffer.concat(state.received) };
}

/** The addon, with its calls counted. */
function countingIo(): { io: ChannelIo; calls: { recv: number; send: number } } {
  const addon = loadChannelIo();
  assert.ok(addon, 'the channel addon is built (npm ci builds it)');
  const calls = { recv: 0, send: 0 };
  return {
    calls,
    io: {
      ...addon,
      recv: (fd, into) => (calls.recv++, addon.recv(fd, into)),
      send: (fd, bytes) => (calls.send++, addon.send(fd, bytes)),
    },
  };
}

/** A connection whose handler answers each notification with `answer(id)` at the end of its read. */
function connect(t: TestContext, socketPath: string, io: ChannelIo | null, busyPollMs: number, answer = (id: bigint) => Buffer.from(`decision ${id};`)) {
  const seen = { frames: [] as ChannelFrame[], reads: 0, closed: [] as string[], bad: [] as Error[], refused: [] as string[] };
  let ids: bigint[] = [];
  const connection: ChannelConnection = new ChannelConnection(
    { socketPath, token: TOKEN, busyPollMs, io },
    {
      onFrame: (frame) => {
        seen.frames.push(frame);
        if (frame.type === 'notification') ids.push(frame.notification.id);
      },
      onReadEnd: () => {
        seen.reads++;
        if (ids.length > 0) connection.write(Buffer.concat(ids.map(answer)));
        ids = [];
      },
      onBadFrame: (err) => seen.bad.push(err),
      onRingRefused: (reason) => seen.refused.push(reason),
      onClosed: (reason) => seen.closed.push(reason),
    },
  );
  t.after(() => connection.destroy());
  return { connection, seen };
}

function helloOf(bytes: Buffer): number[] {
  return [bytes.readUInt32LE(0), bytes.readUInt16LE(4), ...bytes.subarray(8, 24)];
}

test('channel connection: while it polls, the addon reads and writes the socket; asleep, libuv reads it and nothing spins', async (t) => {
  const server = await channelServer(t);
  const { io, calls } = countingIo();
  const { seen } = connect(t, server.socketPath, io, 100);
  await waitUntil(() => server.state.conn !== null && server.bytes().length >= 24, 10_000, 'the hello');
  assert.deepEqual(helloOf(server.bytes()), [24, 1, ...TOKEN]);
  // A Ready without rings (this server has none): the socket, read by the addon while it polls.
  server.state.conn!.write(Buffer.concat([readyFrame(), notificationFrame(1n)]));
  await waitUntil(() => server.bytes().includes('decision 1;'), 10_000, 'the first decision');
  server.state.conn!.write(notificationFrame(2n));
  await waitUntil(() => server.bytes().includes('decision 2;'), 10_000, 'the second decision');
  assert.ok(calls.recv > 0, 'read by the addon while polling');
  assert.ok(calls.send >= 1, 'written by the addon');
  // Asleep after busyPollMs without traffic: no more direct reads.
  await sleep(400);
  const recvAsleep = calls.recv;
  await sleep(200);
  assert.equal(calls.recv, recvAsleep, 'asleep, it no longer reads in a loop');
  server.state.conn!.write(notificationFrame(3n));
  await waitUntil(() => server.bytes().includes('decision 3;'), 10_000, 'a decision after sleeping: libuv woke it');
  assert.deepEqual(seen.frames.map((f) => (f.type === 'ready' ? 'ready' : f.notification.id)), ['ready', 1n, 2n, 3n]);
  assert.equal(server.bytes().subarray(24).toString(), 'decision 1;decision 2;decision 3;', 'each decision once, in order');
  assert.deepEqual(seen.closed, []);
});

test('channel connection: without the addon, libuv reads and writes, and the same decisions go back', async (t) => {
  const server = await channelServer(t);
  const { seen } = connect(t, server.socketPath, null, 100);
  await waitUntil(() => server.state.conn !== null, 10_000, 'the connection');
  server.state.conn!.write(Buffer.concat([readyFrame(), notificationFrame(1n), notificationFrame(2n)]));
  await waitUntil(() => server.bytes().includes('decision 2;'), 10_000, 'the decisions');
  assert.equal(server.bytes().subarray(24).toString(), 'decision 1;decision 2;');
  assert.equal(seen.frames.length, 3);
});

test('channel connection: the peer closing while the addon reads is reported once', async (t) => {
  const server = await channelServer(t);
  const { io, calls } = countingIo();
  const { seen } = connect(t, server.socketPath, io, 60_000);
  await waitUntil(() => server.state.conn !== null, 10_000, 'the connection');
  server.state.conn!.write(Buffer.concat([readyFrame(), notificationFrame(1n)]));
  await waitUntil(() => calls.recv > 0, 10_000, 'polling with the addon');
  server.state.conn!.end();
  await waitUntil(() => seen.closed.length > 0, 10_000, 'the close');
  await sleep(100);
  assert.deepEqual(seen.closed, ['closed']);
});

test('channel connection: a bad frame read by the addon closes the connection with its reason', async (t) => {
  const server = await channelServer(t);
  const { io, calls } = countingIo();
  const { seen } = connect(t, server.socketPath, io, 60_000);
  await waitUntil(() => server.state.conn !== null, 10_000, 'the connection');
  server.state.conn!.write(readyFrame());
  await waitUntil(() => calls.recv > 0, 10_000, 'polling with the addon');
  const bad = Buffer.alloc(8);
  bad.writeUInt32LE(3, 0); // shorter than a header
  server.state.conn!.write(bad);
  await waitUntil(() => seen.closed.length > 0, 10_000, 'the close');
  assert.match(seen.bad[0]?.message ?? '', /bad frame length 3/);
  assert.deepEqual(seen.closed, ['bad frame']);
});

for (const withAddon of [true, false]) {
  test(`channel connection: writes that find the socket full wait, in order, behind the ones before (${withAddon ? 'addon' : 'libuv'})`, async (t) => {
    const server = await channelServer(t, false);
    const io = withAddon ? countingIo().io : null;
    // Each decision 4 KiB, numbered: far more than a Unix socket buffers while the peer does not read.
    const answer = (id: bigint) => Buffer.alloc(4096, Number(id % 251n));
    const { seen } = connect(t, server.socketPath, io, 60_000, answer);
    await waitUntil(() => server.state.conn !== null, 10_000, 'the connection');
    const count = 600;
    server.state.conn!.write(readyFrame());
    for (let i = 1; i <= count; i++) server.state.conn!.write(notificationFrame(BigInt(i)));
    await waitUntil(() => seen.frames.length === count + 1, 10_000, 'every notification read');
    const got: Buffer[] = [];
    server.state.conn!.on('data', (chunk) => got.push(chunk));
    const expected = Buffer.concat([Buffer.alloc(24), ...Array.from({ length: count }, (_, i) => answer(BigInt(i + 1)))]);
    await waitUntil(() => Buffer.concat(got).length >= expected.length, 10_000, 'every decision written');
    const all = Buffer.concat(got);
    assert.equal(all.length, expected.length, 'nothing written twice');
    assert.ok(all.subarray(24).equals(expected.subarray(24)), 'every decision, in order');
    assert.deepEqual(seen.closed, []);
  });
}

test('channel connection: a write the addon refuses (-EAGAIN) or takes in part goes on through libuv, once and in order', async (t) => {
  const server = await channelServer(t);
  const addon = countingIo().io;
  // Every third send is refused whole, every other one takes only 5 bytes: what a full socket does.
  let sends = 0;
  const io: ChannelIo = {
    ...addon,
    send: (fd, bytes) => {
      sends++;
      if (sends % 3 === 0) return -11;
      return sends % 2 === 0 ? addon.send(fd, bytes.subarray(0, 5)) : addon.send(fd, bytes);
    },
  };
  const { connection } = connect(t, server.socketPath, io, 60_000);
  await waitUntil(() => server.state.conn !== null && server.bytes().length >= 24, 10_000, 'the hello');
  const expected: string[] = [];
  for (let i = 0; i < 40; i++) {
    expected.push(`decision ${i};`);
    connection.write(Buffer.from(expected[i]));
    // Let libuv drain what it holds now and then, so later writes find it empty and try the addon again.
    if (i % 4 === 3) await waitUntil(() => server.bytes().length === 24 + expected.join('').length, 10_000, 'the writes so far');
  }
  await waitUntil(() => server.bytes().length >= 24 + expected.join('').length, 10_000, 'every write');
  assert.equal(server.bytes().subarray(24).toString(), expected.join(''));
  assert.ok(sends >= 10, `the addon was tried again after libuv drained (${sends} sends)`);
});
