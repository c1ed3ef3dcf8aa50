// Data plane crash survival: under seccomp-keeper (the fd store protocol, as systemd speaks it), a
// SIGKILLed data plane loses no container: the keeper holds every fd, restarts it, and the new one
// restores containers, records, listener and the ids it had in flight.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { listContainers } from '../../common/dataplane-client';
import { startTestControlPlane } from '../support/controlplane';
import { keeperChild, startDataPlane, type RunningDataPlane } from '../support/dataplane';
import { attachPusher, rule } from '../support/policy-pusher';
import { BENCH_WORKLOAD } from '../support/paths';
import { engineThreadName, requireStrace, start, stop, threadNamed } from '../support/processes';
import { scratchDir } from '../support/scratch';
import { runUnderFilter, startUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';

interface WorkloadReport {
  calls: number;
  errors: number;
  firstErrno: number;
  maxUs: number;
}

async function killDataPlane(keeperPid: number): Promise<number> {
  const victim = keeperChild(keeperPid);
  assert.ok(victim > 0, 'the keeper runs a data plane');
  process.kill(victim, 'SIGKILL');
  let next = 0;
  await waitUntil(() => {
    next = keeperChild(keeperPid);
    return next > 0 && next !== victim;
  }, 10_000, 'the keeper to restart the data plane');
  return next;
}

test('SIGKILL of the data plane under seccomp-keeper: containers stay, a 4-thread workload sees a pause and no failure', async (t) => {
  const dp = await startDataPlane(t, ['--log-level', 'info'], undefined, true);
  const keeper = dp.proc.child.pid!;
  assert.equal((await dp.status()).fdStore, true);
  const load = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['getppid'], id: 'busy', metadata: 'KEY=1' },
    [BENCH_WORKLOAD, '--threads', '4', '--seconds', '6']);
  await waitUntil(async () => (await dp.status()).counters!.notifications > 1000n, 10_000, 'the workload to run');
  for (let round = 0; round < 2; round++) {
    const restarted = await killDataPlane(keeper);
    await waitUntil(async () => (await dp.status().catch(() => null))?.pid === restarted, 15_000, 'the restarted data plane to serve');
    const status = await dp.status();
    assert.equal(status.origin, 'fd-store');
    const { containers } = await listContainers(dp.client);
    const busy = containers.find((c) => c.containerId === 'busy');
    assert.ok(busy, `containers after the restart: ${containers.map((c) => c.containerId).join(', ')}`);
    assert.equal(busy.metadata, 'KEY=1', 'its record came back from the store');
  }
  assert.equal(await load.exited, 0, load.output());
  const report = JSON.parse(load.output().trim().split('\n').pop()!) as WorkloadReport;
  assert.equal(report.errors, 0, `failed syscalls (first errno ${report.firstErrno}): no ENOSYS while the keeper holds the fds`);
  t.diagnostic(`longest syscall across two data plane SIGKILLs: ${(report.maxUs / 1000).toFixed(0)} ms; ${report.calls} calls`);
  // The listener came back from the store: new containers still register.
  const late = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['getppid'], id: 'after' }, ['/bin/true']);
  assert.equal(late.code, 0, late.stderr);
  assert.match(dp.proc.output(), /restarting the child with the kept fds/);
});

test('after a SIGKILL, ids the dead data plane had forwarded to a control plane go to the next control plane', async (t) => {
  const dp = await startDataPlane(t, ['--log-level', 'info', '--decision-timeout', '60s'], undefined, true);
  await startTestControlPlane(t, dp, 'ignore');
  const started = Date.now();
  const call = runUnderFilter({ socket: dp.listenerSocket, syscalls: ['getppid'], id: 'held' }, ['/bin/sh', '-c', 'echo ppid $PPID']);
  await waitUntil(async () => (await dp.status()).pending >= 1, 10_000, 'a held notification');
  const restarted = await killDataPlane(dp.proc.child.pid!);
  await waitUntil(async () => (await dp.status().catch(() => null))?.pid === restarted, 15_000, 'the restarted data plane to serve');
  assert.match(dp.proc.output(), /"inFlightHeld":[1-9]/);
  await startTestControlPlane(t, dp, 'errno:EACCES');
  const done = await call;
  assert.ok(Date.now() - started < 30_000, 'answered by the next control plane, not by the 60 s deadline');
  // getppid failed (EACCES, the control plane's decision); the default (continue) gives the real ppid.
  assert.match(done.stdout, /ppid -\d+\b/, `the control plane's decision, not the default: ${done.stdout}`);
  const counters = (await dp.status()).counters!;
  assert.ok(counters.answeredControlPlane >= 1n);
  assert.equal(counters.answeredDefaultRecovered + counters.answeredDefaultNoControlPlane, 0n);
});

test('SIGTERM of the data plane alone is a restart: the keeper starts it again with every fd', async (t) => {
  const dp = await startDataPlane(t, ['--log-level', 'info'], undefined, true);
  const idle = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['getppid'], id: 'idle' }, ['/bin/sleep', '60']);
  await waitUntil(async () => (await dp.status()).containers === 1, 10_000, 'the container');
  const first = keeperChild(dp.proc.child.pid!);
  process.kill(first, 'SIGTERM');
  await waitUntil(async () => {
    const s = await dp.status().catch(() => null);
    return s !== null && s.pid !== first && s.containers === 1;
  }, 15_000, 'a restarted data plane with the container');
  assert.match(dp.proc.output(), /the fd store keeps the notify fds of 1 container/);
  idle.child.kill('SIGTERM');
  await idle.exited;
});

/**
 * A workload under the filter of data plane `dp` (under seccomp-keeper) that makes DIR/first, then,
 * once released, DIR/made: the engine thread serving it is held by strace in its NOTIF_SEND for the
 * second mkdir (received, its path read, its answer not sent) and the data plane SIGKILLed there. Before
 * the release, `prepare` runs (a policy push). Resolves with the workload's `rc=N` and whether
 * DIR/made exists.
 */
async function killBeforeAnswer(t: TestContext, dp: RunningDataPlane, dir: string, prepare: () => Promise<void>) {
  const keeper = dp.proc.child.pid!;
  const go = path.join(dir, 'go');
  const made = path.join(dir, 'made');
  const workload = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id: 'lost-id' },
    ['/bin/sh', '-c', `mkdir ${dir}/first; while [ ! -e ${go} ]; do sleep 0.05; done; mkdir ${made}; echo rc=$?`]);
  await waitUntil(() => fs.existsSync(path.join(dir, 'first')), 10_000, 'the first mkdir');
  await prepare();
  const dataplane = keeperChild(keeper);
  // The engine thread that serves it: its home lane (lane 1 of two takes a lone container).
  const name = engineThreadName(Math.max(0, (await dp.status()).engineThreads.findIndex((e) => e.containers > 0)));
  const engine = threadNamed(dataplane, name);
  assert.ok(engine, `no ${name} thread`);
  // The engine thread's ioctls for the next notification: NOTIF_RECV, NOTIF_ID_VALID (after reading
  // its path), NOTIF_SEND of its answer: the third is held, the id received and not answered.
  const trace = start(t, 'strace', ['-p', String(engine), '-e', 'trace=ioctl', '-e', 'inject=ioctl:delay_enter=100000000:when=3']);
  await trace.waitFor(/attached/i, 10_000);
  fs.writeFileSync(go, '');
  await trace.waitFor(/SECCOMP_IOCTL_NOTIF_ID_VALID.*= 0/, 10_000);
  await waitUntil(() => fs.readFileSync(`/proc/${engine}/syscall`, 'utf8').startsWith('16 '), 10_000, 'the engine thread to stop in its NOTIF_SEND');
  process.kill(dataplane, 'SIGKILL');
  await stop(trace.child);
  const rc = await workload.waitFor(/rc=\d+/, 20_000);
  return { rc, made: fs.existsSync(made), output: workload.output() };
}

test('a data plane SIGKILLed after it received a notification, before its default answer: the successor answers it from the journal (no task waits forever)', { timeout: 60_000 }, async (t) => {
  requireStrace();
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, ['--log-level', 'info'], dir, true);
  const result = await killBeforeAnswer(t, dp, dir, async () => undefined);
  assert.equal(result.rc, 'rc=0', result.output);
  assert.ok(result.made, 'the default (continue) let the kernel make it');
  await waitUntil(() => /"inFlightAnswered":1/.test(dp.proc.output()), 10_000, () => `the successor to find it in the journal and answer it; output:\n${dp.proc.output().slice(-2000)}`);
});

test('a data plane SIGKILLed after it received a notification its rule answers, before the answer: the successor gives the rule\'s answer, not the default (the receipt in the journal)', { timeout: 60_000 }, async (t) => {
  requireStrace();
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, ['--log-level', 'info'], dir, true);
  const result = await killBeforeAnswer(t, dp, dir, async () => {
    const pusher = await attachPusher(t, dp);
    const ack = await pusher.push({ handle: pusher.handle(), version: 'eacces', rules: [rule(['mkdir', 'mkdirat'], { $case: 'error', error: { errno: 13 } })], labels: {} });
    assert.equal(ack.accepted, true, `${ack.reason}: ${ack.detail}`);
  });
  assert.match(result.rc, /rc=[1-9]/, `the rule's EACCES, as the dead data plane would have answered; ${result.output}`);
  assert.match(result.output, /Permission denied/);
  assert.equal(result.made, false, 'the default (continue) answered it: the kernel made the directory the rule refuses');
  await waitUntil(() => /"inFlightByRules":1/.test(dp.proc.output()), 10_000, () => `the successor to count it as answered by the rules; output:\n${dp.proc.output().slice(-2000)}`);
});
