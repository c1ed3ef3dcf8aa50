import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { Notification } from '../../../proto/gen/seccompagent/v1/dataplane';
import type { ContainerEntry } from '../../container-registry';
import { ExecHolds, MAX_HELD, MAX_HELD_PER_CONTAINER, msSinceStart, processStartTicks, sidecarDelayApplies } from './exec-hold';
import { parseListenerMetadata } from '../../../common/profile/listener-metadata';

const silent = pino({ level: 'silent' });
/** Every caller lives, started at tick 1. */
const alive = async () => 1;
const entryWith = (metadata: string, over: Partial<ContainerEntry> = {}): ContainerEntry => ({
  handle: 1, containerId: 'c1', pid: 100, initFd: true, filterPid: 100, annotations: {}, policy: parseListenerMetadata(metadata).policy, cgroup: null,
  resolution: 'annotations', identity: { namespace: 'shop', pod: 'web-1', container: 'app', podUid: null, source: 'annotations' }, mkdir: { kind: 'none' }, unresolvedReason: '', ...over,
});
const execve = (path: string, pid = 100, truncated = false): Notification => ({
  handle: 1n, id: 9n, pid, syscallNr: 59, syscall: 'execve', arch: 0, instructionPointer: 0n, args: [0n, 0n, 0n, 0n, 0n, 0n],
  stringArgs: [{ index: 0, value: path, truncated, raw: Buffer.from(path) }], containerId: 'c1', receivedAt: undefined,
});

test('exec holds: EXEC_PATTERN holds only an execve of exactly that path, with a Hold first; others continue at once', async () => {
  const holds: number[] = [];
  const exec = new ExecHolds((_n, ms) => (holds.push(ms), true), silent, undefined, alive);
  const entry = entryWith('EXEC_PATTERN=/bin/true\nEXEC_DURATION=150ms');
  assert.deepEqual(exec.decide(entry, execve('/bin/truex')), { $case: 'continue', continue: {} });
  assert.deepEqual(exec.decide(entry, execve('/bin/true', 100, true)), { $case: 'continue', continue: {} }, 'a truncated read never matches');
  assert.equal(exec.decide(entry, { ...execve('/bin/true'), syscall: 'mkdir' }), null, 'not an execve: the rest of the policy decides');
  assert.equal(exec.decide(entryWith(''), execve('/bin/true')), null, 'no EXEC_PATTERN or SIDECARS');
  const began = Date.now();
  const held = exec.decide(entry, execve('/bin/true'));
  assert.ok(held instanceof Promise);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(exec.active, 1);
  assert.deepEqual(await held, { $case: 'continue', continue: {} });
  assert.ok(Date.now() - began >= 140, `held ${Date.now() - began} ms`);
  assert.deepEqual(holds, [150]);
  assert.equal(exec.active, 0);
});

test('exec holds: without hold.v1 a matching execve continues at once (never cut short by the deadline instead)', async () => {
  const exec = new ExecHolds(() => false, silent, undefined, alive);
  const began = Date.now();
  assert.deepEqual(await exec.decide(entryWith('EXEC_PATTERN=/bin/true\nEXEC_DURATION=5s'), execve('/bin/true')), { $case: 'continue', continue: {} });
  assert.ok(Date.now() - began < 1000);
  assert.equal(exec.refused, 1);
});

test('exec holds: SIDECARS holds only the init process\'s execve on the init fd of a container not listed, until its start + delay', async () => {
  const holds: number[] = [];
  const exec = new ExecHolds((_n, ms) => (holds.push(ms), true), silent, async () => 100, alive);
  const app = entryWith('SIDECARS=proxy\nSIDECARS_DELAY=300ms');
  assert.equal(sidecarDelayApplies(app), true);
  assert.equal(sidecarDelayApplies(entryWith('SIDECARS=proxy,app\nSIDECARS_DELAY=300ms')), false, 'a listed sidecar');
  assert.equal(sidecarDelayApplies({ ...app, initFd: false }), false, 'an exec fd');
  assert.equal(sidecarDelayApplies(entryWith('SIDECARS=proxy\nSIDECARS_DELAY=300ms', { identity: null })), true, 'an unknown name is not listed');
  assert.deepEqual(exec.decide(app, execve('/bin/sh', 101)), { $case: 'continue', continue: {} }, 'not the init process');
  const held = exec.decide(app, execve('/bin/sh', 100));
  assert.ok(held instanceof Promise);
  assert.deepEqual(await held, { $case: 'continue', continue: {} });
  assert.deepEqual(holds, [200], 'start + 300 ms, 100 ms after the start');
  const late = new ExecHolds(() => assert.fail('no hold past the delay'), silent, async () => 400, alive);
  assert.deepEqual(await late.decide(app, execve('/bin/sh', 100)), { $case: 'continue', continue: {} });
});

test('exec holds: msSinceStart reads this process\'s own start from /proc', async () => {
  const ms = await msSinceStart(process.pid);
  assert.ok(ms >= 0 && ms < process.uptime() * 1000 + 1000, `${ms} ms vs uptime ${process.uptime() * 1000} ms`);
});

test('exec holds: one container cannot take the node\'s holds: past its own cap its execves continue, and another container\'s execve is still held (issue 17)', async () => {
  const exec = new ExecHolds(() => true, silent, undefined, alive);
  const a = entryWith('EXEC_PATTERN=/bin/true\nEXEC_DURATION=60s', { containerId: 'a' });
  const b = entryWith('EXEC_PATTERN=/bin/true\nEXEC_DURATION=60s', { containerId: 'b', handle: 2 });
  const pending: Array<Promise<unknown>> = [];
  for (let i = 0; i < MAX_HELD; i++) pending.push(Promise.resolve(exec.decide(a, execve('/bin/true', 1000 + i))));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(exec.heldFor('a'), MAX_HELD_PER_CONTAINER);
  assert.equal(exec.refused, MAX_HELD - MAX_HELD_PER_CONTAINER);
  const held = exec.decide(b, execve('/bin/true', 5000));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(exec.heldFor('b'), 1, 'b\'s execve is held although a tried to fill the node');
  assert.ok(held instanceof Promise);
  exec.stop();
  await Promise.all([held, ...pending]);
  assert.equal(exec.active, 0);
});

test('exec holds: a hold is released when the process that made the call dies (pid gone, or reused by another start)', async () => {
  const starts = new Map<number, number>([[7001, 50], [7002, 60]]);
  const startOf = async (pid: number) => {
    const t = starts.get(pid);
    if (t === undefined) throw new Error('ENOENT');
    return t;
  };
  const exec = new ExecHolds(() => true, silent, undefined, startOf, 20);
  const a = entryWith('EXEC_PATTERN=/bin/true\nEXEC_DURATION=60s', { containerId: 'a' });
  const first = exec.decide(a, execve('/bin/true', 7001));
  const second = exec.decide(a, execve('/bin/true', 7002));
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(exec.heldFor('a'), 2);
  starts.delete(7001); // killed
  starts.set(7002, 61); // killed, and its pid reused by a new process
  const began = Date.now();
  assert.deepEqual(await first, { $case: 'continue', continue: {} });
  assert.deepEqual(await second, { $case: 'continue', continue: {} });
  assert.ok(Date.now() - began < 5000, 'released long before the 60 s hold');
  assert.equal(exec.heldFor('a'), 0);
  assert.equal(exec.active, 0);
  assert.equal(exec.released, 2);
});

test('exec holds: processStartTicks reads this process\'s start, and rejects for a pid that does not exist', async () => {
  assert.ok((await processStartTicks(process.pid)) > 0);
  await assert.rejects(processStartTicks(4194304 + 1));
});

test('exec holds: a thread whose execve comes back as a new notification (a signal restarted it) is held once in the counts, however often it comes back', async () => {
  const holds: number[] = [];
  const exec = new ExecHolds((_n, ms) => (holds.push(ms), true), silent, undefined, alive);
  const entry = entryWith('EXEC_PATTERN=/bin/true\nEXEC_DURATION=200ms');
  // Go's runtime restarts a held execve every few ms (SIGURG): more comebacks than one container may hold.
  const pending: Array<Promise<unknown>> = [];
  for (let i = 0; i < MAX_HELD_PER_CONTAINER + 10; i++) {
    pending.push(Promise.resolve(exec.decide(entry, { ...execve('/bin/true'), id: BigInt(i) })));
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(exec.active, 1, 'only the latest call of the thread counts');
  assert.equal(exec.heldFor('c1'), 1);
  assert.equal(exec.refused, 0, 'none was refused for the container cap');
  assert.equal(holds.length, MAX_HELD_PER_CONTAINER + 10, 'each comeback got its hold');
  await Promise.all(pending);
  assert.equal(exec.active, 0);
  assert.equal(exec.heldFor('c1'), 0);
});
