// The read watch (native/addon/engine_read_watch.cpp): a task that holds the engine's read of its
// path argument (a userfaultfd page nobody resolves) holds one thread, not the lane that serves it
// and every other container there. Real filters, a real userfaultfd, the real engine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import type { NativeEvent, ReadStallEvent } from '../../dataplane/native';
import { EngineHarness as Harness, fdCountBackTo, native, type Exit } from '../support/engine-harness';
import { startTestControlPlane } from '../support/controlplane';
import { keeperChild, startDataPlane } from '../support/dataplane';
import { waitUntil } from '../support/wait';
import { UFFD_WORKLOAD } from '../support/paths';
import { metricsUrl } from '../support/processes';
import { runUnderFilter, startUnderFilter } from '../support/workload';

const MKDIR_SYSCALLS = ['--syscalls', 'mkdir,mkdirat'];

/** Resolves once `child`'s stdout has said `stalled` (its userfaultfd saw the fault). */
function stalled(child: { stdout: NodeJS.ReadableStream | null }): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`no fault on the workload's page within 10 s (stdout: ${seen})`)), 10_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      if (seen.includes('stalled')) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}

/** `exit`, or a failure after `ms` (the test then ends, and its harness kills what it started). */
function within(exit: Promise<Exit>, ms: number, what: string): Promise<Exit> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms)));
  return Promise.race([exit, late]).finally(() => clearTimeout(timer));
}

function resultOf(exit: Exit): { mkdir: number[]; errno: number[] } {
  assert.equal(exit.code, 0, exit.stderr);
  return JSON.parse(exit.stdout.trim().split('\n').pop()!) as { mkdir: number[]; errno: number[] };
}

const takenOver = (e: NativeEvent): e is ReadStallEvent => e.type === 'read-stall' && !e.returned;
const returned = (e: NativeEvent): e is ReadStallEvent => e.type === 'read-stall' && e.returned;

test('read watch: the kernel\'s own run of the workload (no agent) waits on the page, then makes each directory once', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'uffd-bare-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const child = spawn(UFFD_WORKLOAD, [path.join(dir, 'made'), '3'], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exit = new Promise<Exit>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
  await stalled(child);
  assert.deepEqual(fs.readdirSync(dir), [], 'nothing made while the page is held');
  child.kill('SIGUSR1');
  assert.deepEqual(resultOf(await within(exit, 10_000, 'the bare workload')), { mkdir: [0, 0, 0], errno: [0, 0, 0] });
  assert.deepEqual(fs.readdirSync(dir).sort(), ['made.0', 'made.1', 'made.2']);
});

test('read watch: a container that stalls the read of its path holds one thread, not its lane; its call then completes once, as in the kernel', async (t) => {
  // One lane: the stalled container and the other one share the engine thread.
  const h = new Harness(t, { lanes: 1 });
  const made = path.join(h.dir, 'made');
  const stuck = h.run(MKDIR_SYSCALLS, [UFFD_WORKLOAD, made]);
  await stalled(stuck.child);

  // The engine thread is in the read; the watch gives lane 0 a new thread, which serves the rest.
  const other = path.join(h.dir, 'other');
  const otherRun = await within(h.mkdir(other).exit, 10_000, 'another container\'s mkdir on the same lane while the read is stuck');
  assert.equal(otherRun.code, 0, otherRun.stderr);
  assert.ok(fs.statSync(other).isDirectory());
  const stall = await h.waitFor(takenOver, 'the take-over reported');
  assert.ok(fs.existsSync(`/proc/${stuck.child.pid}/task/${stall.pid}`), `the stalled task named: ${stall.pid}, the workload's thread in mkdir`);
  assert.equal(stall.lane, 0);
  assert.ok(stall.stalledNs >= 50_000_000n, `taken over after the watch's 50 ms: ${stall.stalledNs} ns`);
  assert.equal(fs.existsSync(made), false, 'the stalled call has not been answered');

  // Its page resolved, the read returns; the lane's new thread decides it (the default, continue).
  stuck.child.kill('SIGUSR1');
  assert.deepEqual(resultOf(await within(stuck.exit, 10_000, 'the stalled mkdir after its page resolved')), { mkdir: [0], errno: [0] });
  assert.ok(fs.statSync(made).isDirectory());
  assert.equal(h.events.filter(takenOver).length, 1, 'one take-over');
  const back = await h.waitFor(returned, 'the read\'s return reported');
  assert.equal(back.handle, stall.handle);
  assert.ok(back.stalledNs > stall.stalledNs);
  assert.equal(h.engine.stats().lanes[0].received, 2);
});

test('read watch: a stalled container\'s other calls wait for its read, so it holds one thread however many of its tasks try', async (t) => {
  const h = new Harness(t, { lanes: 1 });
  const made = path.join(h.dir, 'made');
  const stuck = h.run(MKDIR_SYSCALLS, [UFFD_WORKLOAD, made, '4']);
  await stalled(stuck.child);
  await h.waitFor(takenOver, 'the take-over reported');
  // Ten watch periods: a container served again before its read returned would stall the new
  // thread with its next call, and be taken over again.
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(h.events.filter(takenOver).length, 1, 'one take-over for the container');
  assert.equal(h.engine.stats().lanes[0].received, 1, 'its other calls wait in the kernel');
  stuck.child.kill('SIGUSR1');
  assert.deepEqual(resultOf(await within(stuck.exit, 10_000, 'the four mkdirs')), { mkdir: [0, 0, 0, 0], errno: [0, 0, 0, 0] });
  assert.deepEqual(fs.readdirSync(h.dir).filter((f) => f.startsWith('made')).sort(), ['made.0', 'made.1', 'made.2', 'made.3']);
  assert.equal(h.engine.stats().lanes[0].received, 4);
});

test('read watch: a container killed while its read is held is removed, the lanes serve on, and stop closes every fd', async (t) => {
  const baseline = native.openFdCount();
  const h = new Harness(t, { lanes: 2 });
  const stuck = h.run(MKDIR_SYSCALLS, [UFFD_WORKLOAD, path.join(h.dir, 'never')]);
  await stalled(stuck.child);
  await h.waitFor(takenOver, 'the take-over reported');
  // Killed while its read is held: the userfaultfd goes with it, the read fails, the orphan hands
  // the notification back and ends; the container is gone.
  stuck.child.kill('SIGKILL');
  await stuck.exit;
  await h.until(() => (h.events.some((e) => e.type === 'removed') ? true : undefined), 'the killed container removed');
  assert.equal(fs.existsSync(path.join(h.dir, 'never')), false);
  // Both lanes still serve.
  for (const name of ['after-1', 'after-2']) {
    const run = await within(h.mkdir(path.join(h.dir, name)).exit, 10_000, name);
    assert.equal(run.code, 0, run.stderr);
  }
  h.engine.stop();
  assert.equal(await fdCountBackTo(baseline), baseline, 'every lane\'s fds closed: no thread still held one');
});

test('read watch in seccomp-dataplane: one engine thread, a stalled container and another; the other is answered, and two warnings name the stalled one', async (t) => {
  const dp = await startDataPlane(t, ['--engine-threads', '1', '--metrics-addr', '127.0.0.1:0']);
  const metrics = await metricsUrl(dp.proc);
  const made = path.join(dp.dir, 'made');
  const stuck = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id: 'c-stalls' }, [UFFD_WORKLOAD, made]);
  await stuck.waitFor(/stalled/);
  const other = path.join(dp.dir, 'other');
  const otherRun = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id: 'c-other' }, ['/bin/mkdir', other]);
  assert.equal(otherRun.code, 0, otherRun.stderr);
  const line = (pattern: RegExp) => JSON.parse(dp.proc.output().split('\n').find((l) => pattern.test(l)) ?? 'null') as Record<string, unknown> | null;
  await dp.proc.waitFor(/has taken \d+ ms/);
  const taken = line(/has taken \d+ ms/)!;
  assert.equal(taken.level, 40, 'a warning');
  assert.equal(taken.container, 'c-stalls');
  assert.equal(taken.lane, 0);
  assert.ok(Number(taken.stalledMs) >= 50, `stalledMs ${taken.stalledMs}`);
  assert.equal(fs.existsSync(made), false);
  stuck.child.kill('SIGUSR1');
  await stuck.waitFor(/"mkdir":\[0\]/);
  assert.ok(fs.statSync(made).isDirectory());
  await dp.proc.waitFor(/stalled read .* returned/);
  const back = line(/stalled read .* returned/)!;
  assert.equal(back.container, 'c-stalls');
  assert.match(String(back.syscall), /^mkdir(at)?$/);
  assert.ok(Number(back.stalledMs) >= Number(taken.stalledMs));
  // Counted for GetStatus (and seccompctl status) and Prometheus.
  assert.equal((await dp.status()).counters!.readStalls, 1n);
  assert.match(await (await fetch(`${metrics}/metrics`)).text(), /^seccomp_agent_read_stalls_total 1$/m);
});

test('read watch at a restart: the data plane that takes back a stalled notification from the fd store starts and serves; the notification is decided when its read returns', async (t) => {
  const dp = await startDataPlane(t, ['--log-level', 'info', '--decision-timeout', '60s'], undefined, true);
  const keeper = dp.proc.child.pid!;
  await startTestControlPlane(t, dp, 'ignore');
  const made = path.join(dp.dir, 'made');
  const stuck = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id: 'c-stalls' }, [UFFD_WORKLOAD, made]);
  await stuck.waitFor(/stalled/);
  await dp.proc.waitFor(/has taken \d+ ms/);
  // Killed with the notification in its journal: the next one takes it back and, a control plane
  // having been attached, must read its path to hold it for the next one.
  const victim = keeperChild(keeper);
  process.kill(victim, 'SIGKILL');
  await waitUntil(async () => {
    const next = keeperChild(keeper);
    return next > 0 && next !== victim && (await dp.status().catch(() => null))?.pid === next;
  }, 15_000, () => `the restarted data plane to serve (a restore that reads the stalled page on its main thread never does); output:\n${dp.proc.output().slice(-3000)}`);
  await dp.proc.waitFor(/reading its path arguments from task \d+ has taken over 50 ms/);
  // The next control plane decides it once its read returns: EACCES, one result, nothing made.
  await startTestControlPlane(t, dp, 'errno:EACCES');
  stuck.child.kill('SIGUSR1');
  await stuck.waitFor(/"mkdir":\[-1\],"errno":\[13\]/, 20_000);
  assert.equal(fs.existsSync(made), false);
  await dp.proc.waitFor(/stalled read of a mkdir argument returned/);
});

test('read watch: stop while a read is held returns at once; the held task is not left hanging', async (t) => {
  const h = new Harness(t, { lanes: 2 });
  const stuck = h.run(MKDIR_SYSCALLS, [UFFD_WORKLOAD, path.join(h.dir, 'never')]);
  await stalled(stuck.child);
  await h.waitFor(takenOver, 'the take-over reported');
  const started = Date.now();
  h.engine.stop();
  assert.ok(Date.now() - started < 2000, `stop took ${Date.now() - started} ms`);
  // Its page resolved after the engine let go of every fd: the read returns to nobody, and the
  // kernel answers the call (ENOSYS, as for every call of a filter whose listener is gone).
  stuck.child.kill('SIGUSR1');
  const result = resultOf(await within(stuck.exit, 10_000, 'the held mkdir after stop'));
  assert.deepEqual(result, { mkdir: [-1], errno: [38] });
});
