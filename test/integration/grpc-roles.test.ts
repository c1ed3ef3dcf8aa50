// Roles on the data plane's gRPC API (issue 8, item 2): observing (Watch, ListContainers,
// GetStatus, health, reflection) on the observer socket, controlling (Attach) on the control
// socket only; a control plane that a client took over from resumes when that client leaves
// within --resume-grace; Hello's fields are bounded.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { getStatus, listContainers } from '../../common/dataplane-client';
import type { AttachResponse, DataPlaneClient, Event, Hello } from '../../proto/gen/seccompagent/v1/dataplane';
import { startControlPlane } from '../support/controlplane';
import { startDataPlane, type RunningDataPlane } from '../support/dataplane';
import { ROOT } from '../support/paths';
import { metricsUrl, run, type Started } from '../support/processes';
import { scratchDir } from '../support/scratch';
import { sleep, waitUntil } from '../support/wait';
import { runUnderFilter, startUnderFilter } from '../support/workload';

/** `promise`, or a failure naming `what` after `ms` (a test fails rather than hangs). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms)));
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** containerd's pod annotations: the identity MKDIR_TMPL renders from, with --no-kubernetes. */
const POD = { 'io.kubernetes.cri.sandbox-namespace': 'cp', 'io.kubernetes.cri.sandbox-name': 'pod' };

/** Opens Attach with `hello` and resolves with the first message or the status that ended it. */
function attach(t: TestContext, client: DataPlaneClient, hello: Partial<Hello>) {
  const call = client.attach();
  t.after(() => call.cancel());
  const messages: AttachResponse[] = [];
  const ended = within(new Promise<grpc.ServiceError | null>((resolve) => {
    call.on('error', (err: grpc.ServiceError) => resolve(err));
    call.on('end', () => resolve(null));
  }), 20_000, 'end of the Attach stream');
  const first = within(new Promise<AttachResponse | grpc.ServiceError | null>((resolve) => {
    call.on('data', (m: AttachResponse) => {
      messages.push(m);
      resolve(m);
    });
    void ended.then(resolve, () => undefined);
  }), 20_000, 'first Attach message');
  ended.catch(() => undefined);
  first.catch(() => undefined);
  call.write({ message: { $case: 'hello', hello: { name: 'test', version: '0', features: [], takeover: false, ...hello } } });
  return { call, first, ended, messages };
}

/** One Watch event (any), or the status that ended the stream. */
function firstWatchEvent(t: TestContext, client: DataPlaneClient) {
  const call = client.watch({ containerIds: [], syscalls: [] });
  t.after(() => call.cancel());
  return within(new Promise<Event | grpc.ServiceError>((resolve) => {
    call.on('data', resolve);
    call.on('error', resolve);
  }), 10_000, 'Watch event');
}

/** Makes the scratch folders traversable by anyone, so only a socket's own mode decides who connects. */
function openFolders(dp: RunningDataPlane): void {
  for (const dir of [dp.dir, path.dirname(dp.grpcSocket)]) fs.chmodSync(dir, fs.statSync(dir).mode | 0o011);
}

/**
 * connect(2) to each socket as uid 65534 with a plain `node -e` (nothing from the checkout, which
 * CI clones into a 0700 folder the user cannot read); prints "PATH ok" or "PATH ERRNO".
 */
async function connectAsNobody(t: TestContext, sockets: string[], gid = 65534): Promise<string> {
  const cwd = scratchDir(t, 'seccomp-agent-roles-client-');
  fs.chmodSync(cwd, 0o755);
  const probe = `const net = require('node:net');
    for (const p of ${JSON.stringify(sockets)}) {
      const s = net.connect(p);
      s.on('connect', () => { console.log(p + ' ok'); s.destroy(); });
      s.on('error', (e) => console.log(p + ' ' + e.code));
    }`;
  const result = await run(process.execPath, ['-e', probe], { uid: 65534, gid, cwd });
  return result.stdout + result.stderr;
}

test('gRPC roles: Attach on the observer socket is refused with PERMISSION_DENIED naming the control socket; Watch, ListContainers and GetStatus work there', async (t) => {
  const dp = await startDataPlane(t);
  const refused = attach(t, dp.client, { name: 'rogue', takeover: true });
  const err = (await refused.ended) as grpc.ServiceError;
  assert.equal(err?.code, grpc.status.PERMISSION_DENIED, String(err?.details));
  assert.match(err.details, /Attach is refused on the observer socket/);
  assert.ok(err.details.includes(dp.controlSocket), `the message names the control socket: ${err.details}`);
  assert.equal(refused.messages.length, 0, 'no Welcome, no snapshot');
  // Observing works on the same socket, and nobody is attached.
  const event = firstWatchEvent(t, dp.client);
  const status = await getStatus(dp.client);
  assert.equal(status.controlPlane, undefined);
  assert.equal(status.pid, dp.proc.child.pid);
  assert.deepEqual((await listContainers(dp.client)).containers, []);
  await waitUntil(async () => (await dp.status()).watchers === 1, 5000, 'the watcher to be counted');
  // The control socket serves Attach, and the observer's Watch sees it.
  const cp = attach(t, dp.controlClient, { name: 'real' });
  const welcome = await cp.first;
  assert.equal((welcome as AttachResponse).message?.$case, 'welcome');
  const seen = (await event) as Event;
  assert.equal(seen.event?.$case, 'controlPlaneAttached');
  assert.equal((await dp.status()).controlPlane?.name, 'real');
});

test('gRPC roles: the control socket and the decision channel are 0600 root; uid 65534 cannot connect to them but reaches a 0666 observer socket', async (t) => {
  const dp = await startDataPlane(t, ['--socket-mode', '0666']);
  const channel = path.join(path.dirname(dp.grpcSocket), 'decisions.sock');
  for (const socket of [dp.controlSocket, channel]) {
    const stat = fs.statSync(socket);
    assert.deepEqual({ socket: stat.isSocket(), mode: stat.mode & 0o777, uid: stat.uid, gid: stat.gid }, { socket: true, mode: 0o600, uid: 0, gid: 0 }, socket);
  }
  assert.equal(fs.statSync(dp.grpcSocket).mode & 0o777, 0o666);
  // seccompctl health --control asks the control socket (the control plane's probe).
  const ctl = path.join(ROOT, 'bin', 'seccompctl');
  const control = await run(ctl, ['health', '--control', '--grpc-socket', dp.grpcSocket, '--control-socket', dp.controlSocket, '--timeout', '5']);
  assert.equal(control.code, 0, control.stderr);
  assert.equal(control.stdout.trim(), `data plane at ${dp.controlSocket}: SERVING`);
  openFolders(dp);
  const out = await connectAsNobody(t, [dp.grpcSocket, dp.controlSocket, channel]);
  assert.match(out, new RegExp(`^${dp.grpcSocket} ok$`, 'm'), out);
  assert.match(out, new RegExp(`^${dp.controlSocket} EACCES$`, 'm'), out);
  assert.match(out, new RegExp(`^${channel} EACCES$`, 'm'), out);
  assert.equal((await dp.status()).controlPlane, undefined);
});

test('seccomp-dataplane --socket-group gives the listener socket that group as well as the observer socket, with --socket-mode (issue 17)', async (t) => {
  const dp = await startDataPlane(t, ['--socket-mode', '0660', '--socket-group', '65533']);
  for (const socket of [dp.listenerSocket, dp.grpcSocket]) {
    const stat = fs.statSync(socket);
    assert.deepEqual({ mode: stat.mode & 0o777, uid: stat.uid, gid: stat.gid }, { mode: 0o660, uid: 0, gid: 65533 }, socket);
  }
  openFolders(dp);
  const member = await connectAsNobody(t, [dp.listenerSocket], 65533);
  assert.match(member, new RegExp(`^${dp.listenerSocket} ok$`, 'm'), member);
});

test('gRPC roles: --control-socket-group gives the control socket and the decision channel that group, mode 0660; a member connects', async (t) => {
  const dp = await startDataPlane(t, ['--control-socket-group', '65534']);
  const channel = path.join(path.dirname(dp.grpcSocket), 'decisions.sock');
  for (const socket of [dp.controlSocket, channel]) {
    const stat = fs.statSync(socket);
    assert.deepEqual({ mode: stat.mode & 0o777, uid: stat.uid, gid: stat.gid }, { mode: 0o660, uid: 0, gid: 65534 }, socket);
  }
  // The observer socket keeps its own mode (0600 root): the group is for control only.
  assert.deepEqual({ mode: fs.statSync(dp.grpcSocket).mode & 0o777, gid: fs.statSync(dp.grpcSocket).gid }, { mode: 0o600, gid: 0 });
  openFolders(dp);
  const member = await connectAsNobody(t, [dp.controlSocket, dp.grpcSocket]);
  assert.match(member, new RegExp(`^${dp.controlSocket} ok$`, 'm'), member);
  assert.match(member, new RegExp(`^${dp.grpcSocket} EACCES$`, 'm'), member);
  const stranger = await connectAsNobody(t, [dp.controlSocket], 65533);
  assert.match(stranger, new RegExp(`^${dp.controlSocket} EACCES$`, 'm'), stranger);
});

test('gRPC roles: Hello bounds: a 15 MB name, a long version and 65 features are refused with INVALID_ARGUMENT; the data plane serves on and a real control plane attaches', async (t) => {
  const dp = await startDataPlane(t);
  const cases: Array<[Partial<Hello>, RegExp]> = [
    [{ name: 'x'.repeat(15 * 1024 * 1024) }, /Hello\.name is 15728640 bytes; at most 256 are accepted/],
    [{ version: 'v'.repeat(257) }, /Hello\.version is 257 bytes/],
    [{ features: Array.from({ length: 65 }, (_, i) => `f${i}`) }, /Hello\.features has 65 entries; at most 64/],
    [{ features: ['ok', 'y'.repeat(300)] }, /Hello\.features\[1\] is 300 bytes/],
  ];
  for (const [hello, message] of cases) {
    const err = (await attach(t, dp.controlClient, hello).ended) as grpc.ServiceError;
    assert.equal(err?.code, grpc.status.INVALID_ARGUMENT, `${message}: ${err?.details}`);
    assert.match(err.details, message);
  }
  const status = await dp.status();
  assert.equal(status.controlPlane, undefined, 'no session was opened');
  assert.equal(status.pid, dp.proc.child.pid);
  const cp = await startControlPlane(t, dp);
  await waitUntil(async () => (await dp.status()).controlPlane?.name === 'seccomp-controlplane', 10_000, 'the real control plane');
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'], metadata: 'MKDIR_TMPL=-{{.Namespace}}', annotations: POD }, ['/bin/mkdir', path.join(dp.dir, 'd')]);
  assert.equal(result.code, 0, result.stderr);
  assert.ok(fs.existsSync(path.join(dp.dir, 'd-cp')), 'the control plane decided (emulated mkdir with the template)');
  assert.equal(cp.child.exitCode, null);
});

/** A workload that runs `mkdir DIR/<n>` each time TRIGGER-<n> appears and prints what exists after. */
function mkdirOnTrigger(t: TestContext, dp: RunningDataPlane, work: string) {
  fs.mkdirSync(work);
  const script = `n=0; while [ -d ${work} ]; do if [ -e ${work}/trigger-$n ]; then mkdir ${work}/d$n; echo "mkdir $n rc=$?"; n=$((n+1)); fi; sleep 0.02; done`;
  const proc = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'roles-w', metadata: 'MKDIR_TMPL=-{{.Namespace}}', annotations: POD }, ['/bin/sh', '-c', script]);
  t.after(() => fs.rmSync(work, { recursive: true, force: true }));
  let n = 0;
  return async (): Promise<string[]> => {
    const k = n++;
    fs.writeFileSync(path.join(work, `trigger-${k}`), '');
    await proc.waitFor(new RegExp(`mkdir ${k} rc=\\d+`), 15_000);
    return fs.readdirSync(work).filter((f) => f === `d${k}` || f.startsWith(`d${k}-`));
  };
}

async function healthOf(cp: Started): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${await metricsUrl(cp)}/healthz`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

test('gRPC roles: a client that takes over on the control socket and leaves: the handed-over control plane resumes within --resume-grace and decides again', async (t) => {
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, ['--decision-timeout', '300ms'], dir);
  // --fast-path=false: the control plane itself decides each mkdir (the template), so whether it
  // decides is visible in the name; the rogue decides nothing (the default continues: plain dN).
  const cp = await startControlPlane(t, dp, ['--no-kubernetes', '--fast-path=false', '--resume-grace', '30s', '--metrics-addr', '127.0.0.1:0']);
  const mkdir = mkdirOnTrigger(t, dp, path.join(dir, 'work'));
  assert.deepEqual(await mkdir(), ['d0-cp'], 'the control plane decides');
  const rogue = attach(t, dp.controlClient, { name: 'rogue', takeover: true });
  assert.equal(((await rogue.first) as AttachResponse).message?.$case, 'welcome');
  await cp.waitFor(/handed over to rogue 0: attaching again if it goes away within 30000 ms/);
  assert.deepEqual(await mkdir(), ['d1'], 'while the rogue holds the session, the control plane does not decide');
  const during = await healthOf(cp);
  assert.equal(during.status, 503);
  assert.equal(during.body.status, 'handed-over');
  assert.equal(during.body.successor, 'rogue 0');
  assert.ok(Number(during.body.resumeGraceLeftMs) > 0 && Number(during.body.resumeGraceLeftMs) <= 30_000, JSON.stringify(during.body));
  const left = Date.now();
  rogue.call.end();
  await cp.waitFor(/went away within the resume grace and none is attached: attaching again to decide/, 10_000);
  await waitUntil(async () => (await dp.status()).controlPlane?.name === 'seccomp-controlplane', 10_000, 'the control plane to attach again');
  const resumedMs = Date.now() - left;
  assert.deepEqual(await mkdir(), ['d2-cp'], 'it decides again');
  const after = await healthOf(cp);
  assert.equal(after.status, 200);
  assert.equal(after.body.status, 'ok');
  assert.equal(after.body.resumed, 1);
  const metrics = await (await fetch(`${await metricsUrl(cp)}/metrics`)).text();
  assert.match(metrics, /^seccomp_agent_controlplane_resumed_total 1$/m);
  assert.match(metrics, /^seccomp_agent_controlplane_handed_over 0$/m);
  t.diagnostic(`resumed ${resumedMs} ms after the rogue left`);
});

test('gRPC roles: past --resume-grace the handed-over control plane stays idle and says so in /healthz', async (t) => {
  const dp = await startDataPlane(t);
  const cp = await startControlPlane(t, dp, ['--no-kubernetes', '--resume-grace', '1s', '--metrics-addr', '127.0.0.1:0']);
  const successor = attach(t, dp.controlClient, { name: 'successor', takeover: true });
  await successor.first;
  await cp.waitFor(/the successor kept the session for the whole resume grace \(1000 ms\): idle from now on/, 10_000);
  await cp.waitFor(/handed over for good: idle until SIGTERM/);
  successor.call.end();
  await waitUntil(async () => (await dp.status()).controlPlane === undefined, 5000, 'the successor to detach');
  await sleep(1500);
  assert.equal((await dp.status()).controlPlane, undefined, 'no resume after the grace');
  const health = await healthOf(cp);
  assert.equal(health.status, 503);
  assert.equal(health.body.status, 'handed-over-idle');
  assert.match(await (await fetch(`${await metricsUrl(cp)}/metrics`)).text(), /^seccomp_agent_controlplane_handed_over 1$/m);
  assert.equal(cp.child.exitCode, null, 'it stays, so no supervisor restarts it');
});
