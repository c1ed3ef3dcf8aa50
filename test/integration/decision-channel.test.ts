// The native decision channel (docs/decision-channel.md) driven over node:net with the control
// plane's codec (common/decision-channel.ts): real filters installed by seccomp-run, real notify
// fds, real frames on the real Unix socket the engine serves.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';

import {
  ChannelDecisionKind,
  encodeDecisions,
  encodeHello,
  FrameReader,
  type ChannelDecision,
  type ChannelFrame,
} from '../../common/decision-channel';
import { AnsweredBy, type Notification } from '../../proto/gen/seccompagent/v1/dataplane';
import {
  type NativeEngineOptions,
  type NativeEvent,
  type NotificationEvent,
} from '../../dataplane/native';
import { containerIdOf, EngineHarness, fdCountBackTo, native, until } from '../support/engine-harness';

const EPERM = 1;
const EACCES = 13;


/** One engine with its runtime listener and its decision channel socket, events recorded. */
/** The engine harness plus its decision channel socket and the channel clients a test opens. */
class Harness extends EngineHarness {
  readonly channelSocket: string;
  private readonly clients: ChannelClient[] = [];

  constructor(t: TestContext, options: Partial<NativeEngineOptions> = {}) {
    super(t, { decisionTimeoutMs: 10_000, ...options }, 'decision-channel-');
    this.channelSocket = path.join(this.dir, 'channel.sock');
    t.after(() => {
      for (const client of this.clients) client.socket.destroy();
    });
    this.engine.listenChannel(this.channelSocket, 0o600);
  }

  /** Opens session `session` with a fresh token; returns the token. */
  open(session: number, activate = true): Buffer {
    const token = crypto.randomBytes(16);
    this.engine.openSession(session, token);
    if (activate) this.engine.setActiveSession(session);
    return token;
  }

  /** A connected channel client that said Hello with `token` and got Ready. */
  async attachChannel(token: Uint8Array): Promise<ChannelClient> {
    const client = await this.connect();
    client.socket.write(encodeHello(token));
    await client.waitFrame((f) => f.type === 'ready', 'Ready');
    return client;
  }

  async connect(): Promise<ChannelClient> {
    const client = await ChannelClient.connect(this.channelSocket);
    this.clients.push(client);
    return client;
  }
}

/** The control plane's end of a channel: frames received are recorded; decisions sent in one write. */
class ChannelClient {
  readonly frames: ChannelFrame[] = [];
  ended = false;
  readonly closed: Promise<void>;
  private readonly reader = new FrameReader();
  private readonly waiters = new Set<() => void>();
  /** Called for each frame after it is recorded. */
  onFrame: (frame: ChannelFrame) => void = () => {};

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      for (const frame of this.reader.push(chunk)) {
        this.frames.push(frame);
        this.onFrame(frame);
      }
      this.wake();
    });
    this.closed = new Promise((resolve) => socket.on('close', () => {
      this.ended = true;
      this.wake();
      resolve();
    }));
    socket.on('error', () => {});
  }

  static connect(socketPath: string): Promise<ChannelClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(socketPath);
      socket.once('connect', () => resolve(new ChannelClient(socket)));
      socket.once('error', reject);
    });
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  notifications(): Notification[] {
    return this.frames.flatMap((f) => (f.type === 'notification' ? [f.notification] : []));
  }

  waitFrame(pred: (f: ChannelFrame) => boolean, what: string, timeoutMs = 5000): Promise<ChannelFrame> {
    return until(this.waiters, () => this.frames.find(pred), () => `${what} on the channel (${this.frames.length} frames, ended ${this.ended})`, timeoutMs);
  }

  waitNotification(pred: (n: Notification) => boolean, what: string, timeoutMs = 5000): Promise<Notification> {
    return until(this.waiters, () => this.notifications().find(pred), () => `${what} on the channel`, timeoutMs);
  }

  waitClosed(timeoutMs = 5000): Promise<true> {
    return until(this.waiters, () => (this.ended ? true : undefined), () => 'the channel to close', timeoutMs);
  }

  decide(decisions: ChannelDecision[]): void {
    this.socket.write(encodeDecisions(decisions));
  }
}

function decision(n: Notification, kind: ChannelDecisionKind, errno = 0, value = 0n): ChannelDecision {
  return { handle: Number(n.handle), id: n.id, kind, errno, value };
}

function mkdirOf(dir: string) {
  return (n: Notification): boolean => (n.syscall === 'mkdir' || n.syscall === 'mkdirat') && n.stringArgs.some((s) => s.value === dir);
}

function isEventMkdirOf(dir: string) {
  return (e: NativeEvent): e is NotificationEvent => e.type === 'notification' && e.strings.some((s) => s.value === dir);
}

test('decision channel hello: the right token gets Ready; a mkdir arrives as a Notification frame with its path; continue, errno and value decisions reach the workload', async (t) => {
  const h = new Harness(t);
  assert.equal(fs.statSync(h.channelSocket).mode & 0o777, 0o600);
  const token = h.open(1);
  const client = await h.attachChannel(token);
  assert.deepEqual(client.frames[0], { type: 'ready', session: 1n, ring: false });
  const connected = await h.waitFor((e) => e.type === 'channel', 'the channel event');
  assert.deepEqual(connected, { type: 'channel', session: 1, state: 'connected', reason: '' });

  const allowed = path.join(h.dir, 'allowed');
  const before = Date.now();
  const allowedRun = h.mkdir(allowed);
  const n = await client.waitNotification(mkdirOf(allowed), 'the mkdir');
  assert.equal(n.pid > 0, true);
  // The same record as on gRPC: which container (the runtime's id), and when it was received.
  const registered = h.events.find((e) => e.type === 'connection');
  assert.ok(registered?.type === 'connection');
  assert.equal(n.containerId, containerIdOf(registered.json));
  assert.match(n.containerId, /^seccomp-run-\d+$/);
  assert.ok(n.receivedAt instanceof Date, 'receivedAt is set');
  assert.ok(n.receivedAt.getTime() >= before - 1000 && n.receivedAt.getTime() <= Date.now() + 1000, `receivedAt ${n.receivedAt.toISOString()} is now`);
  assert.equal(n.arch, native.AUDIT_ARCH_X86_64);
  assert.equal(n.args.length, 6);
  assert.equal(native.syscallNames()[n.syscallNr], n.syscall);
  assert.deepEqual(n.stringArgs.find((s) => s.value === allowed), { index: n.syscall === 'mkdir' ? 0 : 1, value: allowed, truncated: false, raw: Buffer.from(allowed) });
  // JS hears of it too, as a report: the channel has it.
  const event = await h.waitFor(isEventMkdirOf(allowed), 'its notification event');
  assert.deepEqual(
    { forwarded: event.forwarded, viaChannel: event.viaChannel, session: event.session, id: event.id, handle: event.handle },
    { forwarded: true, viaChannel: true, session: 1, id: n.id, handle: Number(n.handle) },
  );
  assert.equal(h.engine.sessionPending(1), 1);
  client.decide([decision(n, ChannelDecisionKind.Continue)]);
  const result = await allowedRun.exit;
  assert.equal(result.code, 0, result.stderr);
  assert.ok(fs.statSync(allowed).isDirectory());
  const answered = await h.waitFor((e) => e.type === 'answered' && e.id === n.id, 'its answered event');
  assert.ok(answered.type === 'answered');
  assert.deepEqual({ by: answered.by, action: answered.action, gone: answered.gone }, { by: AnsweredBy.ANSWERED_BY_CONTROL_PLANE, action: { kind: 'continue' }, gone: false });

  const denied = path.join(h.dir, 'denied');
  const deniedRun = h.mkdir(denied);
  const n2 = await client.waitNotification(mkdirOf(denied), 'the second mkdir');
  client.decide([decision(n2, ChannelDecisionKind.Error, EACCES)]);
  assert.match((await deniedRun.exit).stderr, /Permission denied/);
  assert.equal(fs.existsSync(denied), false);
  const answered2 = await h.waitFor((e) => e.type === 'answered' && e.id === n2.id, 'the errno answer');
  assert.ok(answered2.type === 'answered');
  assert.deepEqual(answered2.action, { kind: 'error', errno: EACCES });

  const pretended = path.join(h.dir, 'pretended');
  const pretendedRun = h.mkdir(pretended);
  const n3 = await client.waitNotification(mkdirOf(pretended), 'the third mkdir');
  client.decide([decision(n3, ChannelDecisionKind.Value, 0, 0n)]);
  assert.equal((await pretendedRun.exit).code, 0, 'mkdir "succeeded"');
  assert.equal(fs.existsSync(pretended), false, 'without the kernel making it');

  const stats = h.engine.stats();
  assert.equal(stats.channelDecisions, 3);
  assert.equal(stats.decisionsDropped, 0);
  assert.equal(stats.pending, 0);
  assert.equal(h.engine.sessionPending(1), 0);
  assert.equal(h.events.some((e) => e.type === 'decision-dropped' || e.type === 'session-drained'), false);
});

test('decision channel refusals: a wrong token, a second Hello for a bound token, a frame before Hello, a bad length and silence are closed with a message', async (t) => {
  const h = new Harness(t);
  const token = h.open(1);

  const wrong = await h.connect();
  wrong.socket.write(encodeHello(crypto.randomBytes(16)));
  await wrong.waitClosed();
  assert.equal(wrong.frames.length, 0);
  await h.waitFor((e) => e.type === 'error' && /token of no open session/.test(e.message), 'the unknown-token error');

  const first = await h.attachChannel(token);
  const second = await h.connect();
  second.socket.write(encodeHello(token));
  await second.waitClosed();
  assert.equal(second.frames.length, 0);
  await h.waitFor((e) => e.type === 'error' && /already has a decision channel/.test(e.message), 'the second-Hello error');
  assert.equal(first.ended, false, 'the first channel stays');

  const early = await h.connect();
  early.decide([{ handle: 1, id: 1n, kind: ChannelDecisionKind.Continue, errno: 0, value: 0n }]);
  await early.waitClosed();
  await h.waitFor((e) => e.type === 'error' && /before the Hello/.test(e.message), 'the no-Hello-first error');

  // A bound channel that sends a frame shorter than its header is closed; the session survives.
  const bad = Buffer.alloc(8);
  bad.writeUInt32LE(4, 0);
  first.socket.write(bad);
  await first.waitClosed();
  const closed = await h.waitFor((e) => e.type === 'channel' && e.state === 'closed', 'the channel closed event');
  assert.ok(closed.type === 'channel');
  assert.equal(closed.session, 1);
  assert.match(closed.reason, /bad frame/);
  // The session may connect again once its channel is gone.
  const again = await h.attachChannel(token);
  assert.equal(again.ended, false);

  const silent = await h.connect();
  await silent.waitClosed(8000);
  await h.waitFor((e) => e.type === 'error' && /no Hello within 5 s/.test(e.message), 'the Hello timeout error');
});

test('decision channel ownership: a decision for another session\'s notification is dropped wrong-session, an unknown id unknown; the owner still answers it', async (t) => {
  const h = new Harness(t);
  const one = await h.attachChannel(h.open(1));
  const two = await h.attachChannel(h.open(2, false));
  const target = path.join(h.dir, 'owned');
  const run = h.mkdir(target);
  const n = await one.waitNotification(mkdirOf(target), 'the mkdir on session 1');
  two.decide([decision(n, ChannelDecisionKind.Error, EPERM), { ...decision(n, ChannelDecisionKind.Continue), id: n.id + 1000n }]);
  const wrong = await h.waitFor((e) => e.type === 'decision-dropped' && e.reason === 'wrong-session', 'wrong-session');
  assert.deepEqual(wrong, { type: 'decision-dropped', session: 2, handle: Number(n.handle), id: n.id, reason: 'wrong-session' });
  const unknown = await h.waitFor((e) => e.type === 'decision-dropped' && e.reason === 'unknown', 'unknown');
  assert.ok(unknown.type === 'decision-dropped');
  assert.equal(unknown.id, n.id + 1000n);
  assert.equal(h.engine.sessionPending(1), 1, 'still pending for its owner');
  assert.equal(h.engine.respond(Number(n.handle), n.id, { kind: 'continue' }, 2).status, 'unknown', 'respond checks the owner too');
  one.decide([decision(n, ChannelDecisionKind.Continue)]);
  assert.equal((await run.exit).code, 0);
  assert.ok(fs.statSync(target).isDirectory());
  assert.equal(h.engine.stats().decisionsDropped, 3);
  assert.equal(two.notifications().length, 0);
});

test('decision channel late and invalid decisions: late after the deadline answered it; an invalid kind or errno is dropped and the workload gets the default at once', async (t) => {
  const h = new Harness(t, { decisionTimeoutMs: 300, defaultAction: { kind: 'error', errno: EPERM } });
  const client = await h.attachChannel(h.open(1));

  const late = path.join(h.dir, 'late');
  const lateRun = h.mkdir(late);
  const n = await client.waitNotification(mkdirOf(late), 'the mkdir');
  const byDeadline = await h.waitFor((e) => e.type === 'answered' && e.id === n.id, 'the deadline answer');
  assert.ok(byDeadline.type === 'answered');
  assert.equal(byDeadline.by, AnsweredBy.ANSWERED_BY_DEFAULT_DEADLINE);
  client.decide([decision(n, ChannelDecisionKind.Continue)]);
  const dropped = await h.waitFor((e) => e.type === 'decision-dropped', 'the late drop');
  assert.deepEqual(dropped, { type: 'decision-dropped', session: 1, handle: Number(n.handle), id: n.id, reason: 'late' });
  assert.match((await lateRun.exit).stderr, /Operation not permitted/);

  for (const [name, bad] of [['kind', { kind: 9 as ChannelDecisionKind, errno: 0 }], ['errno', { kind: ChannelDecisionKind.Error, errno: 5000 }]] as const) {
    const target = path.join(h.dir, `invalid-${name}`);
    const run = h.mkdir(target);
    const m = await client.waitNotification(mkdirOf(target), `the mkdir for an invalid ${name}`);
    client.decide([{ ...decision(m, bad.kind, bad.errno) }]);
    const result = await run.exit;
    assert.match(result.stderr, /Operation not permitted/, 'the default action');
    const drop = await h.waitFor((e) => e.type === 'decision-dropped' && e.id === m.id, 'the invalid drop');
    assert.ok(drop.type === 'decision-dropped');
    assert.equal(drop.reason, 'invalid');
    const answered = await h.waitFor((e) => e.type === 'answered' && e.id === m.id, 'its default answer');
    assert.ok(answered.type === 'answered');
    // At once, not by the deadline.
    assert.deepEqual({ by: answered.by, action: answered.action }, { by: AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE, action: { kind: 'error', errno: EPERM } });
  }
  assert.equal(h.engine.stats().pending, 0);
});

test('decision channel closed mid-flight: pending notifications stay answerable through respond(), new ones arrive as JS events', async (t) => {
  const h = new Harness(t, { decisionTimeoutMs: 60_000 });
  const client = await h.attachChannel(h.open(1));
  const first = path.join(h.dir, 'in-flight');
  const firstRun = h.mkdir(first);
  const n = await client.waitNotification(mkdirOf(first), 'the mkdir');
  client.socket.destroy();
  const closed = await h.waitFor((e) => e.type === 'channel' && e.state === 'closed', 'the channel closed event');
  assert.ok(closed.type === 'channel');
  assert.equal(closed.session, 1);
  assert.equal(h.engine.sessionPending(1), 1, 'still pending');

  const second = path.join(h.dir, 'after-close');
  const secondRun = h.mkdir(second);
  const e2 = await h.waitFor(isEventMkdirOf(second), 'the next mkdir as an event');
  assert.deepEqual({ forwarded: e2.forwarded, viaChannel: e2.viaChannel, session: e2.session }, { forwarded: true, viaChannel: false, session: 1 });
  assert.equal(h.engine.respond(Number(n.handle), n.id, { kind: 'continue' }, 1).status, 'ok');
  assert.equal(h.engine.respond(e2.handle, e2.id, { kind: 'error', errno: EPERM }, 1).status, 'ok');
  assert.equal((await firstRun.exit).code, 0);
  assert.match((await secondRun.exit).stderr, /Operation not permitted/);
  assert.equal(h.engine.sessionPending(1), 0);
});

test('decision channel closeSession: pending notifications get the default at once, the channel closes with reason session closed, fds return to baseline', async (t) => {
  const before = native.openFdCount();
  const h = new Harness(t, { decisionTimeoutMs: 60_000 });
  const baseline = native.openFdCount();
  const client = await h.attachChannel(h.open(1));
  const target = path.join(h.dir, 'detached');
  const run = h.mkdir(target);
  await client.waitNotification(mkdirOf(target), 'the mkdir');
  assert.equal(h.engine.closeSession(1), 1);
  assert.equal((await run.exit).code, 0, 'the default action (continue)');
  const answered = await h.waitFor((e) => e.type === 'answered' && e.by === AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED, 'the detached answer');
  assert.ok(answered.type === 'answered');
  await client.waitClosed();
  const closed = await h.waitFor((e) => e.type === 'channel' && e.state === 'closed', 'the channel closed event');
  assert.deepEqual(closed, { type: 'channel', session: 1, state: 'closed', reason: 'session closed' });
  await h.waitFor((e) => e.type === 'removed', 'the container removed');
  assert.equal(await fdCountBackTo(baseline), baseline);

  // A session whose channel never connected closes the same way.
  h.open(2);
  const other = path.join(h.dir, 'no-channel');
  const otherRun = h.mkdir(other);
  await h.waitFor(isEventMkdirOf(other), 'the mkdir as an event');
  assert.equal(h.engine.closeSession(2), 1);
  assert.equal((await otherRun.exit).code, 0);
  h.engine.stop();
  assert.equal(await fdCountBackTo(before), before);
});

test('decision channel handover: session 2 takes over, session 1 answers what it owns, then session-drained 1', async (t) => {
  const h = new Harness(t, { decisionTimeoutMs: 60_000 });
  const one = await h.attachChannel(h.open(1));
  const a = path.join(h.dir, 'owned-by-1');
  const aRun = h.mkdir(a);
  const na = await one.waitNotification(mkdirOf(a), 'the mkdir of session 1');
  const two = await h.attachChannel(h.open(2, false));
  h.engine.setActiveSession(2);
  const b = path.join(h.dir, 'owned-by-2');
  const bRun = h.mkdir(b);
  const nb = await two.waitNotification(mkdirOf(b), 'the mkdir of session 2');
  assert.equal(one.notifications().some(mkdirOf(b)), false);
  assert.equal(h.events.some((e) => e.type === 'session-drained'), false);
  assert.deepEqual([h.engine.sessionPending(1), h.engine.sessionPending(2)], [1, 1]);
  one.decide([decision(na, ChannelDecisionKind.Continue)]);
  const drained = await h.waitFor((e) => e.type === 'session-drained', 'session-drained');
  assert.deepEqual(drained, { type: 'session-drained', session: 1 });
  assert.equal(h.engine.closeSession(1), 0, 'nothing left to answer with the default');
  two.decide([decision(nb, ChannelDecisionKind.Continue)]);
  assert.equal((await aRun.exit).code, 0);
  assert.equal((await bRun.exit).code, 0);
  assert.ok(fs.statSync(a).isDirectory() && fs.statSync(b).isDirectory());
  assert.equal(h.events.filter((e) => e.type === 'answered' && e.by !== AnsweredBy.ANSWERED_BY_CONTROL_PLANE).length, 0);
});

test('decision channel 8 parallel workers: every notification arrives once on the channel and is answered exactly once', async (t) => {
  const h = new Harness(t);
  const client = await h.attachChannel(h.open(1));
  const seen = new Set<string>();
  let duplicates = 0;
  // Decisions of one read go back in one write, as a control plane batches them.
  client.socket.removeAllListeners('data');
  const reader = new FrameReader();
  client.socket.on('data', (chunk: Buffer) => {
    const batch: ChannelDecision[] = [];
    for (const frame of reader.push(chunk)) {
      if (frame.type !== 'notification') continue;
      const key = `${frame.notification.handle}/${frame.notification.id}`;
      if (seen.has(key)) duplicates++;
      seen.add(key);
      batch.push(decision(frame.notification, ChannelDecisionKind.Continue));
    }
    if (batch.length > 0) client.decide(batch);
  });
  const script = 'for i in 1 2 3 4 5 6 7 8; do (for j in $(seq 1 25); do mkdir "$0/$i-$j"; done) & done; wait';
  const result = await h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/sh', '-c', script, h.dir]).exit;
  assert.equal(result.code, 0, result.stderr);
  assert.equal(fs.readdirSync(h.dir).filter((name) => /^\d+-\d+$/.test(name)).length, 200);
  await h.waitFor((e) => e.type === 'removed', 'the container removed');
  const events = h.events.filter((e): e is NotificationEvent => e.type === 'notification');
  assert.ok(events.length >= 200, `${events.length} notifications`);
  assert.equal(seen.size, events.length, 'every notification went to the channel');
  assert.ok(events.every((e) => e.viaChannel && e.session === 1));
  assert.equal(duplicates, 0);
  const answered = h.events.filter((e) => e.type === 'answered');
  assert.equal(answered.length, seen.size, 'one answer each');
  assert.equal(new Set(answered.map((e) => e.type === 'answered' && `${e.handle}/${e.id}`)).size, seen.size);
  assert.ok(answered.every((e) => e.type === 'answered' && e.by === AnsweredBy.ANSWERED_BY_CONTROL_PLANE));
  const stats = h.engine.stats();
  assert.deepEqual(
    { pending: stats.pending, channelDecisions: stats.channelDecisions, decisionsDropped: stats.decisionsDropped, eventsDropped: stats.eventsDropped },
    { pending: 0, channelDecisions: seen.size, decisionsDropped: 0, eventsDropped: 0 },
  );
});
