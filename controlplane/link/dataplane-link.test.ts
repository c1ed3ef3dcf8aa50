// The control plane's side of Attach against a data plane played in this process: a real gRPC
// server on a Unix socket (the generated DataPlane service, Attach only) and a real Unix socket
// speaking the decision channel's frames. No root, no kernel feature.
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import * as net from 'node:net';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { CHANNEL_FEATURE, FRAME_HEADER } from '../../common/decision-channel';
import { VERSION } from '../../common/version';
import {
  AttachResponse,
  Container,
  DataPlaneService,
  Notification,
  type AttachRequest,
  type Decision,
  type Hello,
} from '../../proto/gen/seccompagent/v1/dataplane';
import { captureLogger } from '../../test/support/log-capture';
import { scratchDir } from '../../test/support/scratch';
import { sleep, waitUntil } from '../../test/support/wait';
import type { ContainerHandle } from '../../common/container-handle';
import { DataPlaneLink, type LinkState, type PolicyHandlers } from './dataplane-link';

type AttachCall = grpc.ServerDuplexStream<AttachRequest, AttachResponse>;

/** One Attach stream as the fake data plane sees it. */
interface Session {
  call: AttachCall;
  hello: Hello;
  decisions: Decision[][];
  ended: boolean;
}

/** A data plane that only serves Attach, as each test scripts it. */
async function fakeDataPlane(t: TestContext, dir: string) {
  const socket = path.join(dir, 'dataplane.sock');
  const sessions: Session[] = [];
  let onSession: (s: Session) => void = () => undefined;
  const server = new grpc.Server();
  server.addService(DataPlaneService, {
    attach: (call: AttachCall) => {
      let session: Session | null = null;
      call.on('data', (request: AttachRequest) => {
        const m = request.message;
        if (m?.$case === 'hello' && !session) {
          session = { call, hello: m.hello, decisions: [], ended: false };
          sessions.push(session);
          onSession(session);
        } else if (m?.$case === 'decisions') session?.decisions.push(m.decisions.decisions);
      });
      call.on('end', () => {
        if (session) session.ended = true;
        call.end();
      });
      call.on('error', () => undefined);
    },
  });
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  t.after(() => server.forceShutdown());
  return {
    socket,
    sessions,
    set onSession(f: (s: Session) => void) {
      onSession = f;
    },
  };
}

const send = (s: Session, message: AttachResponse['message']) => s.call.write(AttachResponse.fromPartial({ message }));
const welcome = (s: Session, extra: { decisionChannel?: { socketPath: string; token: Buffer } } = {}) =>
  send(s, { $case: 'welcome', welcome: { sessionId: `s${s.hello.name}`, dataplaneVersion: 'test', features: [], decisionTimeout: undefined, defaultAction: undefined, decisionChannel: extra.decisionChannel } });
const container = (handle: number) => Container.fromPartial({ handle: BigInt(handle), containerId: `c${handle}`, pid: 100 + handle });
const notification = (handle: number, id: bigint, syscall = 'chmod') => Notification.fromPartial({ handle: BigInt(handle), id, syscall, pid: 7 });

/** A policy that knows what the snapshot and container_added said, and answers mkdir with an emulation, anything else with continue. */
function recordingPolicy() {
  const known = new Set<ContainerHandle>();
  const decided: Array<{ id: bigint; knownThen: boolean }> = [];
  const handlers: PolicyHandlers = {
    knows: (handle) => known.has(handle),
    onSnapshot: (containers) => {
      known.clear();
      for (const c of containers) known.add(Number(c.handle));
    },
    onContainerAdded: (c) => known.add(Number(c.handle)),
    onContainerRemoved: (r) => known.delete(Number(r.handle)),
    decide: (n) => {
      decided.push({ id: n.id, knownThen: known.has(Number(n.handle)) });
      return n.syscall === 'mkdir'
        ? { handle: n.handle, id: n.id, action: { $case: 'mkdir', mkdir: { path: '/made', mode: 0o755 } }, findings: [] }
        : { handle: n.handle, id: n.id, action: { $case: 'continue', continue: {} }, findings: [] };
    },
  };
  return { handlers, decided };
}

function startLink(t: TestContext, socket: string, handlers: PolicyHandlers, over: { channel?: boolean; decisionSliceMs?: number; reconnectMaxMs?: number } = {}) {
  const { logger, lines } = captureLogger();
  const link = new DataPlaneLink({ grpcSocket: socket, controlSocket: socket, name: 'cp-test', features: ['decision.continue'], reconnectMaxMs: 200, ...over }, handlers, logger);
  const states: LinkState[] = [];
  link.on('state', (s: LinkState) => states.push(s));
  link.start();
  t.after(() => link.stop());
  return { link, states, lines };
}

test('dataplane link: hello names the control plane, its version and features with channel.v1; the snapshot reaches the policy; one turn\'s decisions go back as one batch', async (t) => {
  const dp = await fakeDataPlane(t, scratchDir(t));
  const policy = recordingPolicy();
  dp.onSession = (s) => {
    welcome(s);
    send(s, { $case: 'snapshot', snapshot: { containers: [container(1)] } });
    send(s, { $case: 'notifications', notifications: { notifications: [notification(1, 10n), notification(1, 11n, 'mkdir')] } });
  };
  // A turn's slice longer than any machine's first decisions: a slow one would otherwise split
  // the two into two turns (fair-queue.ts), and so two batches.
  const { link, states } = startLink(t, dp.socket, policy.handlers, { decisionSliceMs: 60_000 });
  await waitUntil(() => dp.sessions[0]?.decisions.length === 1, 10_000, 'the decisions');
  assert.deepEqual(dp.sessions[0].hello, { name: 'cp-test', version: VERSION, features: ['decision.continue', CHANNEL_FEATURE], takeover: false });
  assert.deepEqual(policy.decided, [{ id: 10n, knownThen: true }, { id: 11n, knownThen: true }]);
  assert.deepEqual(dp.sessions[0].decisions[0].map((d) => [d.handle, d.id, d.action?.$case]), [[1n, 10n, 'continue'], [1n, 11n, 'mkdir']]);
  assert.equal(link.state, 'attached');
  assert.deepEqual(states, ['attached']);
  assert.equal(link.sessionId, 'scp-test');
  assert.deepEqual([link.decisionsSent, link.batchesSent], [2, 1]);
});

test('dataplane link: a notification for a container not announced yet waits for its container_added, at most 500 ms', async (t) => {
  const dp = await fakeDataPlane(t, scratchDir(t));
  const policy = recordingPolicy();
  let session: Session | undefined;
  dp.onSession = (s) => {
    session = s;
    welcome(s);
    send(s, { $case: 'snapshot', snapshot: { containers: [] } });
    send(s, { $case: 'notifications', notifications: { notifications: [notification(5, 1n), notification(6, 2n)] } });
  };
  startLink(t, dp.socket, policy.handlers);
  await waitUntil(() => session !== undefined, 10_000, 'the session');
  // Handle 5 is announced after its notification; handle 6 never is.
  await sleep(100);
  assert.deepEqual(policy.decided, [], 'nothing decided for containers the policy does not know');
  const announcedAt = Date.now();
  send(session!, { $case: 'containerAdded', containerAdded: container(5) });
  await waitUntil(() => policy.decided.length === 1, 10_000, 'the parked notification of handle 5');
  assert.deepEqual(policy.decided[0], { id: 1n, knownThen: true });
  await waitUntil(() => policy.decided.length === 2, 10_000, 'the notification of handle 6, after the wait');
  assert.deepEqual(policy.decided[1], { id: 2n, knownThen: false }, 'decided anyway once the wait is over');
  assert.ok(Date.now() - announcedAt < 2000);
  await waitUntil(() => session!.decisions.flat().length === 2, 10_000, 'both decisions sent');
});

test('dataplane link: the decision channel gets the token; simple decisions of channel notifications go back as frames, emulations over gRPC', async (t) => {
  const dir = scratchDir(t);
  const dp = await fakeDataPlane(t, dir);
  const channelSocket = path.join(dir, 'decisions.sock');
  const token = Buffer.from(Array.from({ length: 16 }, (_, i) => 0xa0 + i));
  const received: Buffer[] = [];
  const channel = net.createServer((conn) => {
    conn.on('data', (chunk) => received.push(chunk));
    conn.on('error', () => undefined);
    const ready = Buffer.alloc(16);
    ready.writeUInt32LE(16, 0);
    ready.writeUInt16LE(2, 4);
    ready.writeBigUInt64LE(1n, 8);
    conn.write(Buffer.concat([ready, notificationFrame(3, 20n, 'chmod'), notificationFrame(3, 21n, 'mkdir')]));
  });
  await new Promise<void>((resolve) => channel.listen(channelSocket, resolve));
  t.after(() => channel.close());
  dp.onSession = (s) => {
    welcome(s, { decisionChannel: { socketPath: channelSocket, token } });
    send(s, { $case: 'snapshot', snapshot: { containers: [container(3)] } });
  };
  startLink(t, dp.socket, recordingPolicy().handlers);
  await waitUntil(() => Buffer.concat(received).length >= 24 + 40 && dp.sessions[0]?.decisions.length === 1, 10_000, 'a decision on each path');
  const bytes = Buffer.concat(received);
  assert.deepEqual([bytes.readUInt32LE(0), bytes.readUInt16LE(4)], [24, 1], 'hello first');
  assert.deepEqual([...bytes.subarray(8, 24)], [...token]);
  const decision = bytes.subarray(24);
  assert.deepEqual([decision.readUInt32LE(0), decision.readUInt16LE(4), decision.readBigUInt64LE(8), decision.readUInt32LE(24), decision.readUInt8(32)], [40, 4, 20n, 3, 1], 'continue for id 20 on the channel');
  assert.equal(decision.length, 40, 'nothing else on the channel');
  assert.deepEqual(dp.sessions[0].decisions[0].map((d) => [d.id, d.action?.$case]), [[21n, 'mkdir']], 'the emulation over gRPC');
});

/** A kNotification frame (native/common/decision_channel.h) with no string arguments. */
function notificationFrame(handle: number, id: bigint, name: string): Buffer {
  const frame = Buffer.alloc(FRAME_HEADER + 88 + name.length);
  frame.writeUInt32LE(frame.length, 0);
  frame.writeUInt16LE(3, 4);
  frame.writeBigUInt64LE(id, FRAME_HEADER);
  frame.writeUInt32LE(handle, FRAME_HEADER + 64);
  frame.writeUInt8(name.length, FRAME_HEADER + 80);
  frame.write(name, FRAME_HEADER + 88, 'latin1');
  return frame;
}

test('dataplane link: with channel false it neither asks for nor opens the channel', async (t) => {
  const dir = scratchDir(t);
  const dp = await fakeDataPlane(t, dir);
  let connections = 0;
  const channelSocket = path.join(dir, 'decisions.sock');
  const channel = net.createServer((conn) => (connections++, conn.destroy()));
  await new Promise<void>((resolve) => channel.listen(channelSocket, resolve));
  t.after(() => channel.close());
  dp.onSession = (s) => {
    welcome(s, { decisionChannel: { socketPath: channelSocket, token: Buffer.alloc(16) } });
    send(s, { $case: 'snapshot', snapshot: { containers: [container(1)] } });
    send(s, { $case: 'notifications', notifications: { notifications: [notification(1, 1n)] } });
  };
  startLink(t, dp.socket, recordingPolicy().handlers, { channel: false });
  await waitUntil(() => dp.sessions[0]?.decisions.length === 1, 10_000, 'the decision over gRPC');
  assert.deepEqual(dp.sessions[0].hello.features, ['decision.continue']);
  assert.equal(connections, 0);
});

test('dataplane link: when the data plane ends the session it reconnects with a new hello and takes the new snapshot as the truth', async (t) => {
  const dp = await fakeDataPlane(t, scratchDir(t));
  const policy = recordingPolicy();
  dp.onSession = (s) => {
    welcome(s);
    send(s, { $case: 'snapshot', snapshot: { containers: [container(dp.sessions.length)] } });
    if (dp.sessions.length === 1) setTimeout(() => s.call.end(), 50);
    else send(s, { $case: 'notifications', notifications: { notifications: [notification(1, 5n)] } });
  };
  const { link, states, lines } = startLink(t, dp.socket, policy.handlers);
  await waitUntil(() => dp.sessions.length === 2 && link.state === 'attached', 10_000, 'the second session');
  assert.deepEqual(states, ['attached', 'disconnected', 'attached']);
  assert.ok(lines.some((l) => /default action answers meanwhile; reconnecting/.test(l.msg)));
  // Handle 1 was in the first snapshot only: its notification waits, then is decided unknown.
  await waitUntil(() => policy.decided.length === 1, 10_000, 'the notification');
  assert.deepEqual(policy.decided, [{ id: 5n, knownThen: false }]);
});

test('dataplane link: after an attached session ends, a data plane that refuses for 1.3 s is retried every 25 ms, not with a grown backoff: attached again soon after it accepts', async (t) => {
  const dp = await fakeDataPlane(t, scratchDir(t));
  const policy = recordingPolicy();
  let acceptFrom = Infinity;
  dp.onSession = (s) => {
    if (dp.sessions.length === 1) {
      welcome(s);
      setTimeout(() => { acceptFrom = Date.now() + 1300; s.call.end(); }, 50);
    } else if (Date.now() < acceptFrom) {
      s.call.end(); // a successor not serving yet: the attempt fails
    } else {
      welcome(s);
    }
  };
  // A backoff doubling from 10 ms to a 10 s cap would wait 1.2 s past the 1.3 s (its tries at
  // about 10, 30, 70, 150, 310, 630, 1270 and 2550 ms).
  const { link } = startLink(t, dp.socket, policy.handlers, { reconnectMaxMs: 10_000 });
  await waitUntil(() => dp.sessions.length >= 2 && link.state === 'attached' && Date.now() >= acceptFrom, 10_000, 'attached again');
  const late = Date.now() - acceptFrom;
  assert.ok(late < 600, `attached ${late} ms after the data plane accepted again`);
  assert.ok(dp.sessions.length > 10, `only ${dp.sessions.length} attempts in 1.3 s`);
});

test('dataplane link: drain then the end of the session is a handover: "handed-over", with no resume grace "idle" at once, and no reconnect', async (t) => {
  const dp = await fakeDataPlane(t, scratchDir(t));
  dp.onSession = (s) => {
    welcome(s);
    send(s, { $case: 'snapshot', snapshot: { containers: [] } });
    send(s, { $case: 'drain', drain: { successor: 'cp-next', successorSessionId: 's2' } });
    setTimeout(() => s.call.end(), 50);
  };
  const { link, states } = startLink(t, dp.socket, recordingPolicy().handlers);
  let handedOver = false;
  link.on('handed-over', () => (handedOver = true));
  await waitUntil(() => handedOver, 10_000, 'handed-over');
  await sleep(300); // several backoff periods: a reconnect would have happened
  assert.deepEqual(states, ['attached', 'drained', 'handed-over']);
  assert.equal(link.idle, true, 'no --resume-grace: idle at once');
  assert.equal(link.successor, 'cp-next');
  assert.equal(dp.sessions.length, 1, 'a drained control plane does not attach again');
});
