// The native engine driven directly (no gRPC, no TypeScript data plane): real filters installed by
// seccomp-run, real notify fds over the real listener socket, real syscalls answered.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

import {
  type NativeDecision,
  type NativeEvent,
  type NotificationEvent,
} from '../../dataplane/native';
import { AnsweredBy } from '../../proto/gen/seccompagent/v1/dataplane';
import { BENCH_WORKLOAD } from '../support/paths';
import { EngineHarness as Harness, fdCountBackTo, native } from '../support/engine-harness';
import { sleep, waitUntil } from '../support/wait';

const NR_MKDIR = 83;
const NR_MKDIRAT = 258;
const EPERM = 1;
const EEXIST = 17;


function isMkdirOf(dir: string) {
  return (e: NativeEvent): e is NotificationEvent =>
    e.type === 'notification' &&
    (e.nr === NR_MKDIR || e.nr === NR_MKDIRAT) &&
    e.strings.some((s) => s.value === dir);
}

test('native engine: syscallNames, syscallTables and openFdCount describe x86_64, i386, x32 and this process', () => {
  const names = native.syscallNames();
  assert.equal(names[NR_MKDIR], 'mkdir');
  assert.equal(names[NR_MKDIRAT], 'mkdirat');
  assert.equal(native.AUDIT_ARCH_X86_64, 0xc000003e);
  assert.equal(native.AUDIT_ARCH_I386, 0x40000003);
  const tables = native.syscallTables();
  assert.deepEqual([tables.x86_64[NR_MKDIR], tables.i386[39], tables.i386[296], tables.i386[195], tables.x32[83], tables.x32[520], tables.x32[13]],
    ['mkdir', 'mkdir', 'mkdirat', 'stat64', 'mkdir', 'execve', undefined]);
  const before = native.openFdCount();
  const fd = fs.openSync('/dev/null', 'r');
  assert.equal(native.openFdCount(), before + 1);
  fs.closeSync(fd);
  assert.equal(native.openFdCount(), before);
});

test('native engine default continue: mkdir is notified with its path, answered natively, the directory exists', async (t) => {
  const h = new Harness(t);
  const target = path.join(h.dir, 'made');
  const { exit } = h.run(['--syscalls', 'mkdir,mkdirat', '--annotation', 'k=v'], ['/bin/mkdir', target]);
  const n = await h.waitFor(isMkdirOf(target), 'the mkdir notification');
  assert.equal(n.forwarded, false);
  assert.equal(n.arch, native.AUDIT_ARCH_X86_64);
  assert.equal(typeof n.id, 'bigint');
  assert.equal(n.args.length, 6);
  assert.deepEqual(n.strings.find((s) => s.value === target), { index: n.nr === NR_MKDIR ? 0 : 1, value: target, truncated: false, raw: Buffer.from(target) });
  const answered = await h.waitFor((e) => e.type === 'answered' && e.id === n.id, 'its answer');
  assert.deepEqual(
    { by: answered.type === 'answered' && answered.by, action: answered.type === 'answered' && answered.action },
    { by: AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE, action: { kind: 'continue' } },
  );
  const result = await exit;
  assert.equal(result.code, 0, result.stderr);
  assert.ok(fs.statSync(target).isDirectory());
  const conn = h.events.find((e) => e.type === 'connection');
  assert.ok(conn && conn.type === 'connection');
  assert.equal(JSON.parse(conn.json).state.annotations.k, 'v');
  assert.equal(conn.peer.uid, 0);
  await h.waitFor((e) => e.type === 'removed' && e.handle === n.handle, 'removed after the workload exits');
  assert.equal(h.engine.stats().containers, 0);
});

test('native engine path strings: mount has three, a NULL pointer has none, a 5000-byte path is truncated', async (t) => {
  const h = new Harness(t);
  // perl (essential in Debian) makes raw syscalls: mount(2) = 165, mkdir(2) = 83 with a NULL path.
  const script = 'my ($s, $t, $f) = ("src-x", "tgt-y", "fstype-z"); syscall(165, $s, $t, $f, 0, 0); syscall(83, 0, 0)';
  const result = await h.run(['--syscalls', 'mount,mkdir'], ['/usr/bin/perl', '-e', script]).exit;
  assert.equal(result.code, 0, result.stderr);
  const mount = await h.waitFor((e) => e.type === 'notification' && e.nr === 165, 'the mount');
  assert.ok(mount.type === 'notification');
  assert.deepEqual(
    mount.strings.map((s) => [s.index, s.value]),
    [[0, 'src-x'], [1, 'tgt-y'], [2, 'fstype-z']],
  );
  const nullMkdir = await h.waitFor((e) => e.type === 'notification' && e.nr === NR_MKDIR, 'the NULL mkdir');
  assert.ok(nullMkdir.type === 'notification');
  assert.deepEqual(nullMkdir.strings, []);
  assert.equal(nullMkdir.args[0], 0n);

  const long = 'a'.repeat(5000);
  const longRun = await h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', long]).exit;
  assert.match(longRun.stderr, /File name too long/);
  const truncated = await h.waitFor(
    (e) => e.type === 'notification' && e.strings.some((s) => s.truncated),
    'the truncated path',
  );
  assert.ok(truncated.type === 'notification');
  const s = truncated.strings.find((x) => x.truncated)!;
  assert.equal(s.value, 'a'.repeat(4096));
});

test('native engine default errno:EPERM: mkdir fails with EPERM', async (t) => {
  const h = new Harness(t, { defaultAction: { kind: 'error', errno: EPERM } });
  const target = path.join(h.dir, 'refused');
  const { exit } = h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]);
  const result = await exit;
  assert.notEqual(result.code, 0);
  assert.match(result.stderr, /Operation not permitted/);
  assert.equal(fs.existsSync(target), false);
  const n = await h.waitFor(isMkdirOf(target), 'the mkdir notification');
  const answered = await h.waitFor((e) => e.type === 'answered' && e.id === n.id, 'its answer');
  assert.ok(answered.type === 'answered');
  assert.deepEqual(answered.action, { kind: 'error', errno: EPERM });
});

test('native engine tally: unwatched, 20,000 default answers reach JS as a few tally events, counted exactly through a 64-event queue', async (t) => {
  const h = new Harness(t, { maxQueuedEvents: 64, batchDelayUs: 20_000 });
  h.engine.setDetailedEvents(false);
  const calls = 20_000;
  const NR_GETPPID = 110;
  const result = await h.run(['--syscalls', 'getppid'], ['/usr/bin/perl', '-e', `syscall(${NR_GETPPID}) for 1..${calls}`]).exit;
  assert.equal(result.code, 0, result.stderr);
  const removed = await h.waitFor((e) => e.type === 'removed', 'the container removed');
  const at = h.events.indexOf(removed);
  const tallies = h.events.filter((e) => e.type === 'tally');
  assert.equal(h.events.filter((e) => e.type === 'answered' || e.type === 'notification').length, 0, 'no event per answer');
  // One per batch delay at most (the workload runs for well under a second), all before 'removed'.
  assert.ok(tallies.length >= 1 && tallies.length <= 100, `${tallies.length} tally events`);
  assert.ok(tallies.every((e) => h.events.indexOf(e) < at), 'every count arrives before its container is removed');
  let total = 0;
  for (const tally of tallies) {
    assert.deepEqual({ handle: tally.handle, nr: tally.nr, arch: tally.arch, by: tally.by, gone: tally.gone },
      { handle: removed.handle, nr: NR_GETPPID, arch: native.AUDIT_ARCH_X86_64, by: AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE, gone: false });
    assert.equal(tally.latencyBuckets.length, native.latencyBucketsNs.length);
    const bucketed = tally.latencyBuckets.reduce((a, b) => a + b, 0);
    assert.ok(bucketed <= tally.count && bucketed > 0, `${bucketed} of ${tally.count} answers within the largest bound`);
    assert.ok(tally.latencySumNs > 0n);
    total += tally.count;
  }
  // perl makes no getppid of its own: every call of the loop, and only those, counted.
  assert.equal(total, calls);
  assert.equal(h.engine.stats().eventsDropped, 0, 'nothing dropped although 20,000 answers passed a 64-event queue');
});

test('native engine tally: one answer of a container that stays alive is counted within the batch delay, by the timer alone', async (t) => {
  const h = new Harness(t, { batchDelayUs: 20_000 });
  h.engine.setDetailedEvents(false);
  const started = Date.now();
  const { child } = h.run(['--syscalls', 'getppid'], ['/usr/bin/perl', '-e', 'syscall(110); sleep 30']);
  const tally = await h.waitFor((e) => e.type === 'tally', 'the tally of the one answer', 2000);
  assert.ok(tally.type === 'tally' && tally.count === 1 && tally.by === AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE);
  assert.equal(h.events.filter((e) => e.type === 'removed').length, 0, 'the container is still alive: no removal flushed it');
  assert.ok(Date.now() - started < 2000);
  child.kill('SIGKILL');
});

test('native engine forwarding: respond error EPERM fails the mkdir; a second respond is unknown', async (t) => {
  const h = new Harness(t);
  h.attach();
  const target = path.join(h.dir, 'denied');
  const { exit } = h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]);
  const n = await h.waitFor(isMkdirOf(target), 'the forwarded mkdir');
  assert.equal(n.forwarded, true);
  assert.equal(h.engine.stats().pending, 1);
  const first = h.engine.respond(n.handle, n.id, { kind: 'error', errno: EPERM }, 1);
  assert.equal(first.status, 'ok');
  assert.equal(typeof first.latencyNs, 'bigint');
  assert.ok(first.latencyNs > 0n);
  assert.equal(h.engine.respond(n.handle, n.id, { kind: 'continue' }, 1).status, 'unknown');
  const result = await exit;
  assert.match(result.stderr, /Operation not permitted/);
  assert.equal(fs.existsSync(target), false);
  assert.equal(h.engine.stats().pending, 0);
  assert.equal(h.events.filter((e) => e.type === 'answered').length, 0);
});

test('native engine forwarding: respond continue lets the mkdir happen; an unknown id is unknown', async (t) => {
  const h = new Harness(t);
  h.attach();
  const target = path.join(h.dir, 'allowed');
  const { exit } = h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]);
  const n = await h.waitFor(isMkdirOf(target), 'the forwarded mkdir');
  assert.equal(h.engine.respond(n.handle, n.id + 1n, { kind: 'continue' }, 1).status, 'unknown');
  assert.equal(h.engine.respond(n.handle + 1000, n.id, { kind: 'continue' }, 1).status, 'unknown');
  assert.equal(h.engine.respond(n.handle, n.id, { kind: 'continue' }, 2).status, 'unknown', 'session 2 does not own it');
  assert.throws(() => h.engine.respond(n.handle, n.id, { kind: 'error', errno: 0 }, 1), RangeError);
  assert.throws(() => h.engine.respond(n.handle, n.id, { kind: 'error', errno: 4096 }, 1), RangeError);
  assert.equal(h.engine.respond(n.handle, n.id, { kind: 'continue' }, 1).status, 'ok');
  const result = await exit;
  assert.equal(result.code, 0, result.stderr);
  assert.ok(fs.statSync(target).isDirectory());
});

test('native engine forwarding: respond value makes the syscall return it', async (t) => {
  const h = new Harness(t);
  h.attach();
  h.onEvent = (e) => {
    if (e.type === 'notification' && e.forwarded) h.engine.respond(e.handle, e.id, { kind: 'value', value: 0n }, 1);
  };
  const target = path.join(h.dir, 'pretended');
  const result = await h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]).exit;
  // mkdir "succeeded" without the directory being made: the answer came from us, not the kernel.
  assert.equal(result.code, 0, result.stderr);
  assert.equal(fs.existsSync(target), false);
});

test('native engine deadline: an unanswered notification gets the default action by deadline; a late respond is unknown', async (t) => {
  const h = new Harness(t, { decisionTimeoutMs: 200 });
  h.attach();
  const target = path.join(h.dir, 'late');
  const started = Date.now();
  const { exit } = h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]);
  const n = await h.waitFor(isMkdirOf(target), 'the forwarded mkdir');
  const answered = await h.waitFor((e) => e.type === 'answered' && e.id === n.id, 'the deadline answer');
  assert.ok(answered.type === 'answered');
  assert.equal(answered.by, AnsweredBy.ANSWERED_BY_DEFAULT_DEADLINE);
  assert.ok(answered.latencyNs >= 200_000_000n, `latency ${answered.latencyNs}`);
  assert.ok(Date.now() - started >= 200);
  assert.equal(h.engine.respond(n.handle, n.id, { kind: 'error', errno: EPERM }, 1).status, 'late');
  const result = await exit;
  assert.equal(result.code, 0, result.stderr);
  assert.ok(fs.statSync(target).isDirectory());
});

test('native engine closeSession: what the session owns is answered at once as detached; new notifications are answered natively', async (t) => {
  const h = new Harness(t, { decisionTimeoutMs: 60_000 });
  h.attach();
  const target = path.join(h.dir, 'detached');
  const { exit } = h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]);
  const n = await h.waitFor(isMkdirOf(target), 'the forwarded mkdir');
  assert.deepEqual({ forwarded: n.forwarded, session: n.session, viaChannel: n.viaChannel }, { forwarded: true, session: 1, viaChannel: false });
  assert.equal(h.engine.sessionPending(1), 1);
  assert.equal(h.engine.closeSession(1), 1);
  assert.equal(h.engine.stats().pending, 0);
  assert.equal(h.engine.sessionPending(1), 0);
  assert.equal(h.engine.closeSession(1), 0, 'closing a closed session answers nothing');
  assert.equal(h.engine.respond(n.handle, n.id, { kind: 'continue' }, 1).status, 'unknown');
  const answered = await h.waitFor((e) => e.type === 'answered' && e.id === n.id, 'the detached answer');
  assert.ok(answered.type === 'answered');
  assert.equal(answered.by, AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED);
  const result = await exit;
  assert.equal(result.code, 0, result.stderr);
  // The closed session was the active one: from now on the engine answers by itself.
  const second = path.join(h.dir, 'native-again');
  assert.equal((await h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', second]).exit).code, 0);
  const n2 = await h.waitFor(isMkdirOf(second), 'the second mkdir');
  assert.deepEqual({ forwarded: n2.forwarded, session: n2.session }, { forwarded: false, session: 0 });
  assert.throws(() => h.engine.setActiveSession(1), RangeError, 'a closed session cannot be made active');
  assert.equal(h.events.filter((e) => e.type === 'session-drained').length, 0, 'a closed session is not reported drained');
});

test('native engine setActiveSession(0): new notifications are answered natively, pending ones stay with their session until answered, then session-drained', async (t) => {
  const h = new Harness(t, { decisionTimeoutMs: 60_000 });
  h.attach();
  const first = path.join(h.dir, 'owned-by-1');
  const { exit } = h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', first]);
  const n = await h.waitFor(isMkdirOf(first), 'the forwarded mkdir');
  h.engine.setActiveSession(0);
  const second = path.join(h.dir, 'native');
  assert.equal((await h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', second]).exit).code, 0);
  const n2 = await h.waitFor(isMkdirOf(second), 'the native mkdir');
  assert.equal(n2.forwarded, false);
  assert.equal(h.engine.sessionPending(1), 1, 'still pending, still owned by session 1');
  assert.equal(h.events.some((e) => e.type === 'session-drained'), false);
  const dropped = h.engine.stats().decisionsDropped;
  assert.equal(h.engine.respond(n.handle, n.id, { kind: 'continue' }, 2).status, 'unknown', 'another session cannot answer it');
  assert.equal(h.engine.stats().decisionsDropped, dropped + 1);
  assert.equal(h.engine.respond(n.handle, n.id, { kind: 'continue' }, 1).status, 'ok');
  const drained = await h.waitFor((e) => e.type === 'session-drained', 'session-drained');
  assert.deepEqual(drained, { type: 'session-drained', session: 1 });
  assert.equal((await exit).code, 0);
  assert.ok(fs.statSync(first).isDirectory());
  assert.equal(h.engine.closeSession(1), 0);
  assert.equal(h.events.filter((e) => e.type === 'session-drained').length, 1, 'reported once');
});

test('native engine sessions: bad arguments throw; respond with session 0 answers whatever the owner', async (t) => {
  const h = new Harness(t);
  const token = crypto.randomBytes(16);
  assert.throws(() => h.engine.openSession(0, token), RangeError);
  assert.throws(() => h.engine.openSession(1, new Uint8Array(15)), TypeError);
  assert.throws(() => h.engine.openSession(1.5, token), RangeError);
  h.engine.openSession(1, token);
  assert.throws(() => h.engine.openSession(1, crypto.randomBytes(16)), /already open/);
  assert.throws(() => h.engine.openSession(2, Uint8Array.from(token)), /already has this token/);
  assert.throws(() => h.engine.setActiveSession(3), RangeError);
  assert.throws(() => h.engine.setActiveSession(-1), RangeError);
  assert.throws(() => h.engine.listenChannel(path.join(h.dir, 'x'.repeat(200)), 0o600), /longer than/);
  assert.equal(h.engine.sessionPending(7), 0);
  h.engine.setActiveSession(1);
  const target = path.join(h.dir, 'any-owner');
  const { exit } = h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]);
  const n = await h.waitFor(isMkdirOf(target), 'the forwarded mkdir');
  assert.throws(() => h.engine.respond(n.handle, n.id, { kind: 'continue' }, -1), RangeError);
  assert.equal(h.engine.respond(n.handle, n.id, { kind: 'error', errno: EPERM }, 0).status, 'ok');
  assert.match((await exit).stderr, /Operation not permitted/);
});

test('native engine respond after the target was killed: gone or unknown, never a throw', async (t) => {
  const h = new Harness(t, { decisionTimeoutMs: 60_000 });
  h.attach();
  const target = path.join(h.dir, 'killed');
  const { child, exit } = h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]);
  const n = await h.waitFor(isMkdirOf(target), 'the forwarded mkdir');
  child.kill('SIGKILL');
  const result = await exit;
  assert.equal(result.signal, 'SIGKILL');
  const status = h.engine.respond(n.handle, n.id, { kind: 'continue' }, 1).status;
  assert.ok(status === 'gone' || status === 'unknown', status);
  await h.waitFor((e) => e.type === 'removed' && e.handle === n.handle, 'removed');
  assert.equal(h.engine.stats().pending, 0);
});

test('native engine 8 parallel processes under one filter: every notification answered exactly once', async (t) => {
  const h = new Harness(t, { decisionTimeoutMs: 10_000 });
  h.attach();
  const statuses = new Map<string, string>();
  let duplicates = 0;
  h.onEvent = (e) => {
    if (e.type !== 'notification') return;
    const key = `${e.handle}/${e.id}`;
    if (statuses.has(key)) duplicates++;
    statuses.set(key, h.engine.respond(e.handle, e.id, { kind: 'continue' }, 1).status);
  };
  const script = 'for i in 1 2 3 4 5 6 7 8; do (for j in 1 2 3 4 5 6 7 8 9 10; do mkdir "$0/$i-$j"; done) & done; wait';
  const result = await h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/sh', '-c', script, h.dir]).exit;
  assert.equal(result.code, 0, result.stderr);
  const made = fs.readdirSync(h.dir).filter((name) => /^\d+-\d+$/.test(name));
  assert.equal(made.length, 80);
  const mkdirs = h.notifications().filter((e) => e.strings.some((s) => /\/\d+-\d+$/.test(s.value)));
  assert.equal(mkdirs.length, 80);
  assert.equal(duplicates, 0);
  assert.equal(statuses.size, h.notifications().length);
  assert.ok([...statuses.values()].every((s) => s === 'ok'), JSON.stringify([...statuses.values()]));
  assert.equal(h.events.filter((e) => e.type === 'answered').length, 0);
  assert.equal(h.engine.stats().pending, 0);
});

test('native engine 200 containers come and go: fd count returns to where it began', async (t) => {
  const h = new Harness(t);
  const baseline = native.openFdCount();
  const total = 200;
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < total) {
      const i = next++;
      const result = await h.run(['--syscalls', 'mkdir', '--id', `c${i}`], ['/bin/mkdir', path.join(h.dir, `c${i}`)]).exit;
      assert.equal(result.code, 0, result.stderr);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  await h.until(() => (h.events.filter((e) => e.type === 'removed').length === total ? true : undefined), '200 removals');
  assert.equal(h.events.filter((e) => e.type === 'connection').length, total);
  const stats = h.engine.stats();
  assert.equal(stats.containers, 0);
  assert.equal(stats.pendingConnections, 0);
  assert.equal(stats.eventsDropped, 0);
  assert.equal(await fdCountBackTo(baseline), baseline);
});

test('native engine EPOLLHUP: the last task leaving the filter reports removed and closes the fd', async (t) => {
  const h = new Harness(t);
  const baseline = native.openFdCount();
  const { exit } = h.run(['--syscalls', 'mkdir'], ['/bin/sleep', '0.2']);
  const conn = await h.waitFor((e) => e.type === 'connection', 'the connection');
  assert.ok(conn.type === 'connection');
  await h.until(() => (h.engine.stats().containers === 1 ? true : undefined), 'the container adopted');
  assert.equal((await exit).code, 0);
  await h.waitFor((e) => e.type === 'removed', 'removed');
  assert.equal(h.engine.stats().containers, 0);
  assert.equal(await fdCountBackTo(baseline), baseline);
});

test('native engine ingest: a 2 MiB message is too-large and everything it sent is closed', async (t) => {
  const h = new Harness(t);
  const baseline = native.openFdCount();
  const big = path.join(h.dir, 'big.json');
  fs.writeFileSync(big, `{"pad":"${'x'.repeat(2 * 1024 * 1024)}"}`);
  const { exit } = h.run(['--syscalls', 'mkdir', '--raw-message', big], ['/bin/true']);
  const err = await h.waitFor((e) => e.type === 'ingest-error', 'the ingest error');
  assert.ok(err.type === 'ingest-error');
  assert.equal(err.code, 'too-large');
  assert.match(err.message, /closed the 1 fd/);
  await exit;
  assert.equal(h.engine.stats().pendingConnections, 0);
  assert.equal(await fdCountBackTo(baseline), baseline);
});

test('native engine ingest: a client that connects and sends nothing times out', async (t) => {
  const h = new Harness(t, { ingestTimeoutMs: 300 });
  const client = net.connect(h.socket);
  t.after(() => client.destroy());
  client.on('error', () => {});
  const err = await h.waitFor((e) => e.type === 'ingest-error', 'the timeout');
  assert.ok(err.type === 'ingest-error');
  assert.equal(err.code, 'timeout');
  assert.equal(err.peer.pid, process.pid);
  // The engine still serves others.
  const target = path.join(h.dir, 'after-timeout');
  assert.equal((await h.run(['--syscalls', 'mkdir'], ['/bin/mkdir', target]).exit).code, 0);
  assert.ok(fs.existsSync(target));
});

test('native engine ingest: three fds arrive as one connection with three seccomp fds; reject closes them', async (t) => {
  const h = new Harness(t);
  const baseline = native.openFdCount();
  const { exit } = h.run(['--syscalls', 'mkdir', '--send-fds', '3'], ['/bin/true']);
  const conn = await h.waitFor((e) => e.type === 'connection', 'the connection');
  assert.ok(conn.type === 'connection');
  assert.deepEqual(conn.fds, [{ seccomp: true }, { seccomp: true }, { seccomp: true }]);
  assert.deepEqual(JSON.parse(conn.json).fds, ['seccompFd', 'seccompFd', 'seccompFd']);
  assert.equal(h.engine.stats().pendingConnections, 1);
  h.engine.reject(conn.conn);
  assert.equal(h.engine.stats().pendingConnections, 0);
  assert.throws(() => h.engine.adopt(conn.conn, 0, '{}'), RangeError);
  await exit;
  assert.equal(await fdCountBackTo(baseline), baseline);
});

test('native engine ingest: more than 16 fds is too-many-fds', async (t) => {
  const h = new Harness(t);
  const baseline = native.openFdCount();
  const { exit } = h.run(['--syscalls', 'mkdir', '--send-fds', '17'], ['/bin/true']);
  const err = await h.waitFor((e) => e.type === 'ingest-error', 'the ingest error');
  assert.ok(err.type === 'ingest-error');
  assert.equal(err.code, 'too-many-fds');
  await exit;
  assert.equal(await fdCountBackTo(baseline), baseline);
});

test('native engine ingest: a pipe instead of a seccomp fd is reported seccomp:false and cannot be adopted', async (t) => {
  const h = new Harness(t);
  const { exit } = h.run(['--no-filter', '--send-pipe'], ['/bin/true']);
  const conn = await h.waitFor((e) => e.type === 'connection', 'the connection');
  assert.ok(conn.type === 'connection');
  assert.deepEqual(conn.fds, [{ seccomp: false }]);
  assert.throws(() => h.engine.adopt(conn.conn, 0, '{}'), RangeError);
  h.engine.reject(conn.conn);
  assert.equal(h.engine.stats().pendingConnections, 0);
  assert.equal((await exit).code, 0);
});

test('native engine ingest: a message sent in chunks over several sendmsg calls is parsed whole', async (t) => {
  const h = new Harness(t);
  const target = path.join(h.dir, 'chunked');
  const { exit } = h.run(
    ['--syscalls', 'mkdir', '--chunk', '7', '--metadata', 'MKDIR_TMPL=-x', '--annotation', 'io.kubernetes.pod.name=p1', '--id', 'chunky', '--status', 'running'],
    ['/bin/mkdir', target],
  );
  const conn = await h.waitFor((e) => e.type === 'connection', 'the connection');
  assert.ok(conn.type === 'connection');
  const message = JSON.parse(conn.json);
  assert.equal(message.metadata, 'MKDIR_TMPL=-x');
  assert.equal(message.state.id, 'chunky');
  assert.equal(message.state.status, 'running');
  assert.equal(message.state.annotations['io.kubernetes.pod.name'], 'p1');
  assert.equal(message.pid, conn.peer.pid);
  assert.equal((await exit).code, 0);
  assert.ok(fs.existsSync(target));
});

test('native engine stop: idempotent, closes every fd it owns, later calls fail cleanly', async (t) => {
  const before = native.openFdCount();
  const h = new Harness(t);
  const result = await h.run(['--syscalls', 'mkdir'], ['/bin/mkdir', path.join(h.dir, 'x')]).exit;
  assert.equal(result.code, 0, result.stderr);
  h.engine.stop();
  h.engine.stop();
  assert.equal(await fdCountBackTo(before), before);
  assert.equal(fs.existsSync(h.socket), true);
  assert.throws(() => h.engine.start());
  assert.equal(h.engine.respond(1, 1n, { kind: 'continue' }, 1).status, 'unknown');
});

// ---- emulated decisions: the engine applies mkdir, mount, kill, freeze for the control plane ----

type Answered = Extract<NativeEvent, { type: 'answered' }>;

function answeredFor(id: bigint) {
  return (e: NativeEvent): e is Answered => e.type === 'answered' && e.id === id;
}

/** A minimal busybox root (Debian's busybox-static): /bin, /tmp (1777), /proc. */
function makeRootfs(dir: string): string {
  const root = path.join(dir, 'rootfs');
  for (const d of ['bin', 'tmp', 'proc', 'mnt']) fs.mkdirSync(path.join(root, d), { recursive: true });
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
  fs.copyFileSync('/bin/busybox', path.join(root, 'bin', 'busybox'));
  fs.chmodSync(path.join(root, 'bin', 'busybox'), 0o755);
  for (const applet of ['sh', 'mkdir', 'mount', 'cat']) fs.symlinkSync('busybox', path.join(root, 'bin', applet));
  return root;
}

/** Children of this process with `state` (e.g. /^Z/) and/or named seccomp-nshelper. */
function children(filter: { zombie?: boolean; helper?: boolean }): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = fs.readFileSync(`/proc/${entry}/status`, 'utf8');
      if (!new RegExp(`^PPid:\\s+${process.pid}$`, 'm').test(status)) continue;
      if (filter.zombie && !/^State:\s+Z/m.test(status)) continue;
      if (filter.helper && !/^Name:\s+seccomp-nshelpe/m.test(status)) continue;
      out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function exists(p: string): boolean {
  try {
    fs.lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

test('native engine emulated mkdir: respond {mkdir, path+"-suffix"} makes the suffixed directory, not the original; mkdir returns 0', async (t) => {
  const h = new Harness(t);
  h.attach();
  const target = path.join(h.dir, 'wanted');
  const statuses: string[] = [];
  h.onEvent = (e) => {
    if (e.type === 'notification' && e.forwarded) {
      const decision = isMkdirOf(target)(e)
        ? { kind: 'mkdir' as const, path: `${target}-suffix`, mode: 0o755 }
        : { kind: 'continue' as const };
      statuses.push(h.engine.respond(e.handle, e.id, decision, 1).status);
    }
  };
  const result = await h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]).exit;
  assert.equal(result.code, 0, result.stderr);
  assert.ok(fs.statSync(`${target}-suffix`).isDirectory());
  assert.equal(exists(target), false, 'the original path was not created');
  assert.deepEqual(statuses, ['accepted']);
  const n = await h.waitFor(isMkdirOf(target), 'the mkdir');
  const answered = await h.waitFor(answeredFor(n.id), 'its answered event');
  assert.equal(answered.by, AnsweredBy.ANSWERED_BY_CONTROL_PLANE);
  assert.deepEqual(answered.action, { kind: 'mkdir', errno: 0, value: 0n });
  assert.equal(answered.gone, false);
  assert.ok(answered.latencyNs > 0n);
  assert.equal(h.engine.stats().pending, 0);
  // The kept helper leaves with the container (EPOLLHUP -> forget).
  await h.waitFor((e) => e.type === 'removed' && e.handle === n.handle, 'removed');
  await waitUntil(() => h.engine.stats().emulationHelpers === 0, 10_000, 'the helper to exit');
  assert.equal(h.events.filter((e) => e.type === 'error').length, 0, JSON.stringify(h.events.filter((e) => e.type === 'error')));
});

test('native engine emulated mkdir: EEXIST from the emulation reaches the workload as EEXIST', async (t) => {
  const h = new Harness(t);
  h.attach();
  const existing = path.join(h.dir, 'already');
  fs.mkdirSync(existing);
  const target = path.join(h.dir, 'fresh');
  h.onEvent = (e) => {
    if (e.type === 'notification' && e.forwarded) {
      h.engine.respond(e.handle, e.id, isMkdirOf(target)(e) ? { kind: 'mkdir', path: existing, mode: 0o777 } : { kind: 'continue' }, 1);
    }
  };
  const result = await h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]).exit;
  assert.equal(result.code, 1);
  assert.match(result.stderr, /File exists/);
  assert.equal(exists(target), false);
  const n = await h.waitFor(isMkdirOf(target), 'the mkdir');
  const answered = await h.waitFor(answeredFor(n.id), 'its answered event');
  assert.deepEqual(answered.action, { kind: 'mkdir', errno: EEXIST, value: 0n });
});

test('native engine emulated mkdirat: the path is resolved from the notification dirfd, not the cwd', async (t) => {
  const h = new Harness(t);
  h.attach();
  const base = path.join(h.dir, 'base');
  const cwd = path.join(h.dir, 'cwd');
  fs.mkdirSync(base);
  fs.mkdirSync(cwd);
  let mkdirat: NotificationEvent | undefined;
  h.onEvent = (e) => {
    if (e.type !== 'notification' || !e.forwarded) return;
    if (e.nr === NR_MKDIRAT && e.strings.some((s) => s.value === 'sub')) {
      mkdirat = e;
      assert.equal(h.engine.respond(e.handle, e.id, { kind: 'mkdir', path: 'sub-x', mode: 0o700 }, 1).status, 'accepted');
    } else {
      h.engine.respond(e.handle, e.id, { kind: 'continue' }, 1);
    }
  };
  const py = `import os; os.chdir(${JSON.stringify(cwd)}); fd = os.open(${JSON.stringify(base)}, os.O_RDONLY); os.mkdir("sub", dir_fd=fd)`;
  const result = await h.run(['--syscalls', 'mkdir,mkdirat'], ['/usr/bin/python3', '-c', py]).exit;
  assert.equal(result.code, 0, result.stderr);
  assert.ok(mkdirat, 'python made a mkdirat');
  assert.ok(fs.statSync(path.join(base, 'sub-x')).isDirectory());
  assert.equal(fs.statSync(path.join(base, 'sub-x')).mode & 0o777, 0o700);
  assert.deepEqual(fs.readdirSync(cwd), []);
  assert.equal(exists(path.join(base, 'sub')), false);
  const answered = await h.waitFor(answeredFor(mkdirat.id), 'its answered event');
  assert.equal(answered.action.kind, 'mkdir');
});

test('native engine emulated mkdir: ../../../x from a chrooted target in its own mount namespace stays inside its root', async (t) => {
  const h = new Harness(t);
  h.attach();
  const root = makeRootfs(h.dir);
  const marker = `engine-climb-${process.pid}-${Date.now()}`;
  const climb = `../../../${marker}`;
  h.onEvent = (e) => {
    if (e.type !== 'notification' || !e.forwarded) return;
    const decision = e.strings.some((s) => s.value === climb)
      ? { kind: 'mkdir' as const, path: `${climb}-s`, mode: 0o755 }
      : { kind: 'continue' as const };
    h.engine.respond(e.handle, e.id, decision, 1);
  };
  const result = await h.run(
    ['--syscalls', 'mkdir,mkdirat'],
    ['unshare', '-m', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', `cd /tmp && mkdir ${climb}`],
  ).exit;
  assert.equal(result.code, 0, result.stderr);
  assert.ok(fs.statSync(path.join(root, `${marker}-s`)).isDirectory(), 'made at the root of the target');
  for (const outside of [`/${marker}-s`, `/tmp/${marker}-s`, path.join(h.dir, `${marker}-s`), path.join(root, marker)]) {
    assert.equal(exists(outside), false, `${outside} must not exist`);
  }
  const n = await h.waitFor((e) => e.type === 'notification' && e.strings.some((s) => s.value === climb), 'the mkdir');
  assert.ok(n.type === 'notification');
  const answered = await h.waitFor(answeredFor(n.id), 'its answered event');
  assert.deepEqual(answered.action, { kind: 'mkdir', errno: 0, value: 0n });
});

test('native engine emulated mount: respond {mount} mounts proc in the target namespaces with its flags', async (t) => {
  const h = new Harness(t);
  h.attach();
  const root = makeRootfs(h.dir);
  const NR_MOUNT = 165;
  let mountId: bigint | undefined;
  h.onEvent = (e) => {
    if (e.type !== 'notification' || !e.forwarded) return;
    const [source, target, fstype] = e.strings.map((s) => s.value);
    // unshare's own propagation change (no fstype) and the target's own /proc (whose masks an
    // emulated proc copies) run as they would without the agent.
    if (e.nr !== NR_MOUNT || fstype !== 'proc' || target !== '/mnt') return void h.engine.respond(e.handle, e.id, { kind: 'continue' }, 1);
    mountId = e.id;
    const decision = { kind: 'mount' as const, source, target, fstype, flags: e.args[3], data: '', requireCapSysAdmin: true };
    assert.equal(h.engine.respond(e.handle, e.id, decision, 1).status, 'accepted');
  };
  const script = 'mount -t proc proc /proc && mount -t proc -o nosuid,nodev proc /mnt && cat /mnt/1/comm && cat /proc/mounts';
  const result = await h.run(['--syscalls', 'mount'], ['unshare', '-m', '-p', '-f', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', script]).exit;
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, /^sh$/m, 'pid 1 of the mounted proc is the container init');
  assert.match(result.stdout, /^proc \/mnt proc rw,nosuid,nodev,noexec/m);
  assert.deepEqual(fs.readdirSync(path.join(root, 'mnt')), [], 'the host sees no mount on the rootfs');
  assert.ok(mountId !== undefined);
  const answered = await h.waitFor(answeredFor(mountId), 'its answered event');
  assert.deepEqual(answered.action, { kind: 'mount', errno: 0, value: 0n });
});

test('native engine emulated kill: respond {kill} kills the container (its pid namespace) and nothing else', async (t) => {
  const h = new Harness(t);
  h.attach();
  const bystander = spawn('/bin/sleep', ['300'], { stdio: 'ignore' });
  t.after(() => bystander.kill('SIGKILL'));
  const tag = `${4000 + (process.pid % 1000)}.25`;
  let initPid = 0;
  h.onEvent = (e) => {
    if (e.type === 'connection') initPid = JSON.parse(e.json).pid as number;
    if (e.type === 'notification' && e.forwarded) {
      assert.equal(h.engine.respond(e.handle, e.id, { kind: 'kill', signal: 9, initPid, errno: EPERM }, 1).status, 'accepted');
    }
  };
  const target = path.join(h.dir, 'k');
  const result = await h.run(['--syscalls', 'mkdir,mkdirat'], ['unshare', '-p', '-f', '/bin/sh', '-c', `sleep ${tag} & mkdir ${target}; echo survived`]).exit;
  assert.doesNotMatch(result.stdout, /survived/);
  assert.notEqual(result.code, 0);
  assert.equal(exists(target), false);
  const n = await h.waitFor(isMkdirOf(target), 'the mkdir');
  const answered = await h.waitFor(answeredFor(n.id), 'its answered event');
  assert.equal(answered.by, AnsweredBy.ANSWERED_BY_CONTROL_PLANE);
  assert.equal(answered.action.kind, 'kill');
  assert.equal((answered.action as { errno: number }).errno, 0, 'killed');
  await waitUntil(() => {
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        if (fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(tag)) return false;
      } catch {
        // gone
      }
    }
    return true;
  }, 10_000, 'the container sleep to be gone');
  assert.equal(bystander.exitCode, null);
  assert.equal(bystander.signalCode, null);
});

test('native engine emulated freeze: respond {freeze} freezes the v2 cgroup; once thawed the syscall gets the errno', async (t) => {
  const h = new Harness(t);
  h.attach();
  const unified = fs.existsSync('/sys/fs/cgroup/cgroup.controllers') ? '/sys/fs/cgroup' : '/sys/fs/cgroup/unified';
  const cg = path.join(unified, `seccomp-engine-test-${process.pid}-${Date.now()}`);
  fs.mkdirSync(cg);
  t.after(async () => {
    fs.writeFileSync(path.join(cg, 'cgroup.freeze'), '0');
    for (let i = 0; ; i++) {
      for (const pid of fs.readFileSync(path.join(cg, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          // exited meanwhile
        }
      }
      try {
        fs.rmdirSync(cg);
        return;
      } catch (err) {
        if (i > 250) throw err;
        await sleep(20);
      }
    }
  });
  const counter = path.join(h.dir, 'counter');
  const target = path.join(h.dir, 'freeze-me');
  let freezeId: bigint | undefined;
  h.onEvent = (e) => {
    if (e.type !== 'notification' || !e.forwarded) return;
    if (freezeId === undefined && isMkdirOf(target)(e)) {
      freezeId = e.id;
      assert.equal(h.engine.respond(e.handle, e.id, { kind: 'freeze', errno: EPERM }, 1).status, 'accepted');
    } else {
      // v2 usually lets the answer in before the freeze; if not, the call restarts when thawed.
      h.engine.respond(e.handle, e.id, { kind: 'error', errno: EPERM }, 1);
    }
  };
  // A sibling keeps counting: it stops only if the whole cgroup is frozen.
  const script = `(i=0; while :; do i=$((i+1)); echo $i > ${counter}; sleep 0.02; done) & sleep 0.3; mkdir ${target}; echo rc=$?; sleep 0.6; kill $!`;
  const { exit } = h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/sh', '-c', script], `echo $$ > ${path.join(cg, 'cgroup.procs')} && `);
  const n = await h.waitFor(isMkdirOf(target), 'the mkdir');
  const answered = await h.waitFor(answeredFor(n.id), 'the freeze answered');
  assert.equal(answered.by, AnsweredBy.ANSWERED_BY_CONTROL_PLANE);
  assert.deepEqual(answered.action, { kind: 'freeze', errno: 0, value: 0n }, JSON.stringify(h.events.filter((e) => e.type === 'error')));
  await waitUntil(() => /^frozen 1$/m.test(fs.readFileSync(path.join(cg, 'cgroup.events'), 'utf8')), 10_000, 'the cgroup to be frozen');
  const before = fs.readFileSync(counter, 'utf8');
  await sleep(300);
  assert.equal(fs.readFileSync(counter, 'utf8'), before, 'no progress while frozen');
  fs.writeFileSync(path.join(cg, 'cgroup.freeze'), '0');
  const result = await exit;
  assert.match(result.stdout, /rc=1/);
  assert.match(result.stderr, /Operation not permitted/);
  assert.ok(Number(fs.readFileSync(counter, 'utf8')) > Number(before), 'progress again once thawed');
});

test('native engine emulated decisions: unknown ids are unknown; a mismatched syscall or bad arguments throw and leave it pending', async (t) => {
  const h = new Harness(t, { decisionTimeoutMs: 60_000 });
  h.attach();
  const target = path.join(h.dir, 'checked');
  const { exit } = h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]);
  const n = await h.waitFor(isMkdirOf(target), 'the forwarded mkdir');
  const mkdir = { kind: 'mkdir' as const, path: target, mode: 0o755 };
  assert.equal(h.engine.respond(n.handle, n.id + 1n, mkdir, 1).status, 'unknown');
  assert.equal(h.engine.respond(n.handle + 1000, n.id, { kind: 'freeze', errno: EPERM }, 1).status, 'unknown');
  assert.equal(h.engine.respond(n.handle, n.id + 1n, { kind: 'kill', signal: 9, initPid: 1, errno: EPERM }, 1).status, 'unknown');
  assert.equal(h.engine.stats().emulationHelpers, 0);
  const mount = { kind: 'mount' as const, source: 'proc', target: '/proc', fstype: 'proc', flags: 0n, data: '', requireCapSysAdmin: false };
  assert.throws(() => h.engine.respond(n.handle, n.id, mount, 1), (err: Error) => err instanceof RangeError && /answers only mount notifications \(of any ABI\); .* is x86_64 syscall mkdir/.test(err.message));
  assert.throws(() => h.engine.respond(n.handle, n.id, { ...mkdir, mode: 0o10000 }, 1), RangeError);
  assert.throws(() => h.engine.respond(n.handle, n.id, { ...mkdir, path: 'a\0b' }, 1), RangeError);
  assert.throws(() => h.engine.respond(n.handle, n.id, { kind: 'kill', signal: 0, initPid: 1, errno: EPERM }, 1), RangeError);
  assert.throws(() => h.engine.respond(n.handle, n.id, { kind: 'freeze', errno: 0 }, 1), RangeError);
  assert.equal(h.engine.stats().pending, 1, 'still pending after the refusals');
  assert.equal(h.engine.respond(n.handle, n.id, mkdir, 1).status, 'accepted');
  assert.equal(h.engine.respond(n.handle, n.id, mkdir, 1).status, 'unknown', 'an accepted notification is no longer pending');
  assert.equal((await exit).code, 0);
  assert.ok(fs.statSync(target).isDirectory());
});

test('native engine emulated mkdir: the container exits while its emulation is queued: answered as gone, helper and fds released', async (t) => {
  const baseline = native.openFdCount();
  const h = new Harness(t, { decisionTimeoutMs: 60_000 });
  h.attach();
  const first = path.join(h.dir, 'first');
  const second = path.join(h.dir, 'second');
  let stoppedHelpers: number[] = [];
  t.after(() => stoppedHelpers.forEach((pid) => {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // gone
    }
  }));
  h.onEvent = (e) => {
    if (e.type !== 'notification' || !e.forwarded) return;
    if (isMkdirOf(second)(e)) {
      // A stopped helper stands for one stuck on a hung mount: the request waits in its socket.
      stoppedHelpers = children({ helper: true });
      for (const pid of stoppedHelpers) process.kill(pid, 'SIGSTOP');
    }
    h.engine.respond(e.handle, e.id, isMkdirOf(first)(e) || isMkdirOf(second)(e) ? { kind: 'mkdir', path: e.strings[0].value, mode: 0o755 } : { kind: 'continue' }, 1);
  };
  const { child, exit } = h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/sh', '-c', `mkdir ${first} && mkdir ${second}`]);
  const n = await h.waitFor(isMkdirOf(second), 'the second mkdir');
  assert.equal(stoppedHelpers.length, 1, 'the first mkdir started one helper');
  process.kill(n.pid, 'SIGKILL'); // the mkdir process, the filter's last task once its shell is gone
  child.kill('SIGKILL');
  assert.notEqual((await exit).code, 0);
  await h.waitFor((e) => e.type === 'removed' && e.handle === n.handle, 'removed while the emulation is queued');
  for (const pid of stoppedHelpers) process.kill(pid, 'SIGCONT');
  const answered = await h.waitFor(answeredFor(n.id), 'the queued emulation answered');
  assert.equal(answered.gone, true);
  assert.equal(answered.action.kind, 'mkdir');
  assert.equal(exists(second), false);
  await waitUntil(() => h.engine.stats().emulationHelpers === 0 && children({ helper: true }).length === 0, 10_000, 'the helper to exit');
  await waitUntil(() => children({ zombie: true }).length === 0, 10_000, 'no zombie');
  h.engine.stop();
  assert.equal(await fdCountBackTo(baseline), baseline);
});

test('native engine stop with an emulation in flight: the helper is killed and reaped, the syscall gets EPERM, every fd closed', async (t) => {
  const baseline = native.openFdCount();
  const h = new Harness(t, { decisionTimeoutMs: 60_000 });
  h.attach();
  const first = path.join(h.dir, 'first');
  const second = path.join(h.dir, 'second');
  let stoppedHelpers: number[] = [];
  h.onEvent = (e) => {
    if (e.type !== 'notification' || !e.forwarded) return;
    if (isMkdirOf(second)(e)) {
      stoppedHelpers = children({ helper: true });
      for (const pid of stoppedHelpers) process.kill(pid, 'SIGSTOP');
    }
    h.engine.respond(e.handle, e.id, { kind: 'mkdir', path: e.strings[0].value, mode: 0o755 }, 1);
  };
  const { exit } = h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/sh', '-c', `mkdir ${first} && mkdir ${second}`]);
  const n = await h.waitFor(isMkdirOf(second), 'the second mkdir');
  assert.equal(stoppedHelpers.length, 1);
  assert.equal(h.engine.stats().emulationHelpers, 1);
  h.engine.stop();
  const result = await exit;
  assert.equal(result.code, 1);
  assert.match(result.stderr, /Operation not permitted/);
  assert.ok(exists(first));
  assert.equal(exists(second), false);
  const answered = await h.waitFor(answeredFor(n.id), 'the cancelled emulation answered');
  assert.deepEqual(answered.action, { kind: 'mkdir', errno: EPERM, value: 0n });
  assert.deepEqual(children({ helper: true }), []);
  assert.deepEqual(children({ zombie: true }), []);
  assert.equal(await fdCountBackTo(baseline), baseline);
});

test('native engine emulated mkdir without a helper binary: answered EPERM with an error event, never ENOSYS, no crash', async (t) => {
  const h = new Harness(t, { helperPath: path.join(os.tmpdir(), 'no-such-dir', 'seccomp-nshelper') });
  h.attach();
  const target = path.join(h.dir, 'nohelper');
  h.onEvent = (e) => {
    if (e.type === 'notification' && e.forwarded) {
      assert.equal(h.engine.respond(e.handle, e.id, { kind: 'mkdir', path: target, mode: 0o755 }, 1).status, 'accepted');
    }
  };
  const result = await h.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]).exit;
  assert.equal(result.code, 1);
  assert.match(result.stderr, /Operation not permitted/);
  assert.equal(exists(target), false);
  const n = await h.waitFor(isMkdirOf(target), 'the mkdir');
  const answered = await h.waitFor(answeredFor(n.id), 'its answered event');
  assert.deepEqual(answered.action, { kind: 'mkdir', errno: EPERM, value: 0n });
  const error = await h.waitFor((e) => e.type === 'error', 'the error event');
  assert.ok(error.type === 'error');
  assert.match(error.message, /cannot start the emulation helper .*no-such-dir.*answered .*EPERM/);
  assert.equal(h.engine.stats().emulationHelpers, 0);
});

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
}

interface RoundTrips {
  calls: number;
  /** respond() -> the answered event in JS, µs (emulated only). */
  respondToAnswered: number[];
  /** The engine's latencyNs: receipt -> answer, µs (emulated only). */
  receiptToAnswer: number[];
  workload: Record<string, number>;
  unanswered: number;
}

/** One bench workload thread making mkdirs for `seconds`, each forwarded and decided by `decide`. */
async function mkdirRoundTrips(t: TestContext, seconds: number, decide: (e: NotificationEvent) => NativeDecision): Promise<RoundTrips> {
  const h = new Harness(t, { decisionTimeoutMs: 10_000 });
  h.attach();
  const respondedAt = new Map<bigint, bigint>();
  const out: RoundTrips = { calls: 0, respondToAnswered: [], receiptToAnswer: [], workload: {}, unanswered: 0 };
  h.onEvent = (e) => {
    if (e.type === 'notification' && e.forwarded) {
      const at = process.hrtime.bigint();
      const status = h.engine.respond(e.handle, e.id, decide(e), 1).status;
      out.calls++;
      if (status === 'accepted') respondedAt.set(e.id, at);
      else if (status !== 'ok') out.unanswered++;
    } else if (e.type === 'answered' && e.by === AnsweredBy.ANSWERED_BY_CONTROL_PLANE) {
      const at = respondedAt.get(e.id);
      if (at !== undefined) out.respondToAnswered.push(Number(process.hrtime.bigint() - at) / 1000);
      out.receiptToAnswer.push(Number(e.latencyNs) / 1000);
      respondedAt.delete(e.id);
    }
  };
  const { exit } = h.run(['--syscalls', 'mkdir'], [
    BENCH_WORKLOAD, '--threads', '1', '--seconds', String(seconds), '--warmup-ms', '200', '--syscall', 'mkdir', '--path-prefix', path.join(h.dir, 'm'),
  ]);
  const result = await exit;
  assert.equal(result.code, 0, result.stderr);
  out.workload = JSON.parse(result.stdout.split('\n').find((l) => l.startsWith('{')) ?? '{}') as Record<string, number>;
  await h.until(() => (respondedAt.size === 0 ? true : undefined), 'every answered event');
  out.respondToAnswered.sort((a, b) => a - b);
  out.receiptToAnswer.sort((a, b) => a - b);
  return out;
}

test('native engine emulated mkdir round trip through the engine, beside an immediate answer (figures printed, not asserted)', async (t) => {
  const immediate = await mkdirRoundTrips(t, 1, () => ({ kind: 'error', errno: EEXIST }));
  const emulated = await mkdirRoundTrips(t, 2, (e) => ({ kind: 'mkdir', path: e.strings[0]?.value ?? '', mode: 0o755 }));
  const us = (v: number | undefined) => `${(v ?? NaN).toFixed(0)} µs`;
  t.diagnostic(
    `immediate {error EEXIST} through JS: workload's mkdir p50 ${us(immediate.workload.p50Us)} p99 ${us(immediate.workload.p99Us)} ` +
      `(${immediate.workload.callsPerSec} calls/s)`,
  );
  t.diagnostic(
    `emulated {mkdir} through JS and a kept helper, ${emulated.respondToAnswered.length} calls: workload's mkdir p50 ${us(emulated.workload.p50Us)} ` +
      `p99 ${us(emulated.workload.p99Us)} (${emulated.workload.callsPerSec} calls/s); respond() -> answered event ` +
      `p50 ${us(percentile(emulated.respondToAnswered, 50))} p99 ${us(percentile(emulated.respondToAnswered, 99))}; ` +
      `receipt -> answer (latencyNs) p50 ${us(percentile(emulated.receiptToAnswer, 50))} p99 ${us(percentile(emulated.receiptToAnswer, 99))}; ` +
      `load average ${os.loadavg()[0].toFixed(1)}`,
  );
  for (const r of [immediate, emulated]) {
    assert.equal(r.unanswered, 0);
    assert.equal(r.workload.errors, 0);
    assert.ok(r.calls > 50, `${r.calls} mkdirs`);
  }
  assert.equal(emulated.respondToAnswered.length, emulated.calls, 'one answered event per emulated mkdir');
});
