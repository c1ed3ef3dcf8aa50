// The decision channel's shared-memory rings (native/common/decision_ring.h) between the real
// engine and the control plane's real channel connection (controlplane/link/channel-connection.ts):
// real filters installed by seccomp-run, real notify fds, the memfd passed on the real socket.
// Each side's sleep is held where the test needs it (a busy poll of 1 ms, decisions held back 30
// ms), so the wake-ups are what answers, on a fast machine and a slow one.
import assert from 'node:assert/strict';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { ChannelDecisionKind, encodeDecisions, type ChannelFrame } from '../../common/decision-channel';
import { ChannelConnection, loadChannelIo, type ChannelIo } from '../../controlplane/link/channel-connection';
import type { NativeEngineOptions } from '../../dataplane/native';
import { AnsweredBy, type Notification } from '../../proto/gen/seccompagent/v1/dataplane';
import { EngineHarness } from '../support/engine-harness';
import { waitUntil } from '../support/wait';

/** decision_ring.h's RingHeader: where the control plane's index of the decisions ring is. */
const TO_ENGINE_TAIL_OFFSET = 256;
const RING_HEADER_BYTES = 4096;
const TO_CONTROL_PLANE_BYTES = 256 << 10;

class Harness extends EngineHarness {
  readonly channelSocket: string;

  constructor(t: TestContext, options: Partial<NativeEngineOptions> = {}) {
    super(t, { decisionTimeoutMs: 10_000, ...options }, 'decision-rings-');
    this.channelSocket = path.join(this.dir, 'channel.sock');
    this.engine.listenChannel(this.channelSocket, 0o600);
  }

  open(session: number): Buffer {
    const token = crypto.randomBytes(16);
    this.engine.openSession(session, token);
    this.engine.setActiveSession(session);
    return token;
  }
}

function io(): ChannelIo {
  const addon = loadChannelIo();
  assert.ok(addon, 'the channel addon is built (npm ci builds it)');
  return addon;
}

/**
 * A control plane's channel that answers every mkdir notification `continue`, `holdMs` after its
 * read; what it read, and how, is recorded.
 */
function controlPlane(t: TestContext, h: Harness, token: Buffer, options: { busyPollMs: number; holdMs?: number; channelIo?: ChannelIo }) {
  const seen = { notifications: [] as Notification[], ready: null as ChannelFrame | null, closed: [] as string[], refused: [] as string[] };
  let batch: Notification[] = [];
  const connection: ChannelConnection = new ChannelConnection(
    { socketPath: h.channelSocket, token, busyPollMs: options.busyPollMs, io: options.channelIo ?? io() },
    {
      onFrame: (frame) => {
        if (frame.type === 'ready') seen.ready = frame;
        else batch.push(frame.notification);
      },
      onReadEnd: () => {
        const decided = batch;
        batch = [];
        if (decided.length === 0) return;
        seen.notifications.push(...decided);
        const bytes = encodeDecisions(decided.map((n) => ({ handle: Number(n.handle), id: n.id, kind: ChannelDecisionKind.Continue, errno: 0, value: 0n })));
        if (options.holdMs) setTimeout(() => connection.write(bytes), options.holdMs);
        else connection.write(bytes);
      },
      onBadFrame: () => undefined,
      onRingRefused: (reason) => seen.refused.push(reason),
      onClosed: (reason) => seen.closed.push(reason),
    },
  );
  t.after(() => connection.destroy());
  return { connection, seen };
}

/** mkdir `count` directories one after another (each waits for its answer); the time each took. */
async function mkdirs(h: Harness, names: string[], gapMs = 0): Promise<number[]> {
  const took: number[] = [];
  for (const name of names) {
    const started = Date.now();
    const result = await h.mkdir(path.join(h.dir, name)).exit;
    assert.equal(result.code, 0, result.stderr);
    took.push(Date.now() - started);
    if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
  }
  return took;
}

test('decision rings: a control plane that busy-polls gets them, yielding after every empty look; every notification and decision crosses in them, each once', async (t) => {
  const h = new Harness(t, { busyPollUs: 200 });
  const token = h.open(1);
  const addon = io();
  let yields = 0;
  // Looks that found the ring empty, one after another with no yield between (a woken thread of
  // another container would wait that long for this CPU).
  let emptyLooksInARow = 0;
  let mostEmptyLooksInARow = 0;
  const channelIo: ChannelIo = {
    ...addon,
    yieldCpu: () => {
      yields++;
      emptyLooksInARow = 0;
      addon.yieldCpu();
    },
    ringTake: (ring, into) => {
      const n = addon.ringTake(ring, into);
      emptyLooksInARow = n === 0 ? emptyLooksInARow + 1 : 0;
      mostEmptyLooksInARow = Math.max(mostEmptyLooksInARow, emptyLooksInARow);
      return n;
    },
  };
  const { connection, seen } = controlPlane(t, h, token, { busyPollMs: 200, channelIo });
  await waitUntil(() => seen.ready !== null, 10_000, 'the Ready');
  assert.deepEqual(seen.ready, { type: 'ready', session: 1n, ring: true });
  assert.equal(connection.usesRings, true);
  const connected = await h.waitFor((e) => e.type === 'channel', 'the channel event');
  assert.deepEqual(connected, { type: 'channel', session: 1, state: 'connected', reason: 'shared-memory rings' });

  const names = Array.from({ length: 20 }, (_, i) => `ring-${i}`);
  await mkdirs(h, names);
  for (const name of names) assert.ok(fs.statSync(path.join(h.dir, name)).isDirectory());
  const mkdirNotifications = seen.notifications.filter((n) => n.stringArgs.some((s) => names.some((name) => s.value.endsWith(`/${name}`))));
  assert.equal(mkdirNotifications.length, names.length, 'each mkdir once');
  assert.equal(connection.framesRead.socket, 0, 'no notification on the socket');
  assert.ok(yields > 0, 'a turn that found the ring empty yielded the CPU');
  assert.equal(mostEmptyLooksInARow, 1, 'every empty look is followed by a yield before the next look');
  assert.equal(connection.framesRead.ring, seen.notifications.length);
  await h.until(() => (h.events.filter((e) => e.type === 'answered' && e.by === AnsweredBy.ANSWERED_BY_CONTROL_PLANE).length >= names.length ? true : undefined), 'the answers');
  const stats = h.engine.stats();
  assert.equal(stats.channelDecisions, seen.notifications.length);
  assert.equal(stats.decisionsDropped, 0);
  assert.equal(stats.pending, 0);
  assert.deepEqual(seen.closed, []);
});

test('decision rings: a control plane asleep is woken by the engine, an engine asleep by the control plane', async (t) => {
  // The engine polls 1 ms after its last event and the control plane 1 ms after its last read; the
  // decisions are held 30 ms, so the engine sleeps before each comes, and 50 ms between mkdirs,
  // so the control plane sleeps before each notification. Without a wake-up either way, a mkdir
  // would wait for the 10 s deadline (and be answered by it, not the control plane).
  const h = new Harness(t, { busyPollUs: 1000 });
  const token = h.open(1);
  const { connection, seen } = controlPlane(t, h, token, { busyPollMs: 1, holdMs: 30 });
  await waitUntil(() => seen.ready !== null, 10_000, 'the Ready');
  assert.equal(connection.usesRings, true);
  const names = Array.from({ length: 5 }, (_, i) => `woken-${i}`);
  const took = await mkdirs(h, names, 50);
  // Something else wakes the engine within 5 s (a deadline of its own); a wake-up comes in milliseconds.
  assert.ok(took.every((ms) => ms < 2000), `each mkdir answered in far less than the 5 s another timer would take, and the 10 s deadline (${took.join(', ')} ms)`);
  assert.ok(connection.framesRead.ring >= names.length, 'read from the ring after each wake-up');
  const answers = h.events.filter((e) => e.type === 'answered');
  assert.ok(answers.length >= names.length);
  assert.ok(answers.every((e) => e.type === 'answered' && e.by === AnsweredBy.ANSWERED_BY_CONTROL_PLANE), 'every answer the control plane\'s, none the deadline\'s');
});

test('decision rings: a control plane that breaks them loses its channel, not the data plane: an impossible index, a part of a frame; the memfd cannot be resized', async (t) => {
  const h = new Harness(t, { busyPollUs: 200 });
  const token = h.open(1);
  const addon = io();
  // The control plane's own fd to the memfd, as a hostile one would keep it.
  const memfds: number[] = [];
  t.after(() => memfds.forEach((fd) => fs.closeSync(fd)));
  const keeping: ChannelIo = {
    ...addon,
    ringOpen: (memfd, socketFd) => {
      memfds.push(fs.openSync(`/proc/self/fd/${memfd}`, 'r+'));
      return addon.ringOpen(memfd, socketFd);
    },
  };

  const first = controlPlane(t, h, token, { busyPollMs: 200, channelIo: keeping });
  await waitUntil(() => first.seen.ready !== null, 10_000, 'the Ready');
  const memfd = memfds[0];
  assert.throws(() => fs.ftruncateSync(memfd, 0), /EPERM/, 'sealed: it cannot be shrunk');
  assert.throws(() => fs.ftruncateSync(memfd, 64 << 20), /EPERM/, 'sealed: it cannot be grown');
  // More decisions waiting than the ring holds.
  const impossible = Buffer.alloc(4);
  impossible.writeUInt32LE(0x7fffffff, 0);
  fs.writeSync(memfd, impossible, 0, 4, TO_ENGINE_TAIL_OFFSET);
  const closed = await h.waitFor((e) => e.type === 'channel' && e.state === 'closed', 'the channel closed');
  assert.ok(closed.type === 'channel');
  assert.match(closed.reason, /bad ring: the control plane's index of the decisions ring is impossible/);
  await waitUntil(() => first.seen.closed.length > 0, 10_000, 'the control plane sees its channel closed');

  // The session attaches again; this time 3 bytes of a frame are put in the decisions ring.
  const second = controlPlane(t, h, token, { busyPollMs: 200, channelIo: keeping });
  await waitUntil(() => second.seen.ready !== null, 10_000, 'the second Ready');
  const part = Buffer.from([40, 0, 0]);
  fs.writeSync(memfds[1], part, 0, part.length, RING_HEADER_BYTES + TO_CONTROL_PLANE_BYTES);
  const three = Buffer.alloc(4);
  three.writeUInt32LE(3, 0);
  fs.writeSync(memfds[1], three, 0, 4, TO_ENGINE_TAIL_OFFSET);
  await h.until(() => (h.events.filter((e) => e.type === 'channel' && e.state === 'closed').length === 2 ? true : undefined), 'the second channel closed');
  const closedAgain = h.events.filter((e) => e.type === 'channel' && e.state === 'closed')[1];
  assert.ok(closedAgain.type === 'channel');
  assert.match(closedAgain.reason, /bad ring: a partial frame in the decisions ring/);

  // The data plane goes on: a third channel decides a mkdir through fresh rings.
  const third = controlPlane(t, h, token, { busyPollMs: 200 });
  await waitUntil(() => third.seen.ready !== null, 10_000, 'the third Ready');
  await mkdirs(h, ['after']);
  assert.equal(third.connection.framesRead.ring >= 1, true);
});

test('decision rings: with busy polling off a control plane does not ask for them, and the socket carries everything', async (t) => {
  const h = new Harness(t, { busyPollUs: 200 });
  const token = h.open(1);
  const { connection, seen } = controlPlane(t, h, token, { busyPollMs: 0 });
  await waitUntil(() => seen.ready !== null, 10_000, 'the Ready');
  assert.deepEqual(seen.ready, { type: 'ready', session: 1n, ring: false });
  await mkdirs(h, ['plain']);
  assert.equal(connection.usesRings, false);
  assert.ok(connection.framesRead.socket >= 1);
  assert.equal(connection.framesRead.ring, 0);
});

test('decision rings: a full notifications ring spills onto the socket; the control plane decides both, each notification once', async (t) => {
  const h = new Harness(t, { busyPollUs: 200 });
  const token = h.open(1);
  const addon = io();
  // A control plane that does not look at its ring until told: the ring fills up.
  let taking = false;
  const slow: ChannelIo = { ...addon, ringTake: (ring, into) => (taking ? addon.ringTake(ring, into) : 0) };
  const { connection, seen } = controlPlane(t, h, token, { busyPollMs: 200, channelIo: slow });
  await waitUntil(() => seen.ready !== null, 10_000, 'the Ready');
  assert.equal(connection.usesRings, true);
  // Each notification carries a ~4,000-byte path, so about 63 fill the 256 KiB ring.
  const count = 80;
  const long = (i: number) => path.join(h.dir, `${i}-`.padEnd(4000 - h.dir.length, 'x'));
  const runs = Array.from({ length: count }, (_, i) => h.mkdir(long(i)));
  await waitUntil(() => connection.framesRead.socket >= count - 64, 20_000, `the ring full and the rest on the socket (socket ${connection.framesRead.socket})`);
  assert.equal(connection.framesRead.ring, 0);
  taking = true;
  const exits = await Promise.all(runs.map((r) => r.exit));
  // The kernel refuses a name this long (ENAMETOOLONG) once the control plane lets the call go on.
  assert.ok(exits.every((e) => e.code === 1 && /File name too long/.test(e.stderr)), exits.map((e) => `${e.code} ${e.stderr.trim()}`).join('\n'));
  const seenPaths = seen.notifications.flatMap((n) => n.stringArgs.map((s) => s.value)).filter((p) => p.length > 3000).sort();
  assert.deepEqual(seenPaths, Array.from({ length: count }, (_, i) => long(i)).sort(), 'each notification once');
  assert.ok(connection.framesRead.ring > 0, 'the ring\'s after it was looked at');
  assert.equal(connection.framesRead.ring + connection.framesRead.socket, seen.notifications.length);
  assert.equal(h.engine.stats().pending, 0);
});
