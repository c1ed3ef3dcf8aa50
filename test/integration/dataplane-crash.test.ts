// Data plane crash survival: under seccomp-keeper (the fd store protocol, as systemd speaks it), a
// SIGKILLed data plane loses no container: the keeper holds every fd, restarts it, and the new one
// restores containers, records, listener and the ids it had in flight.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { listContainers } from '../../common/dataplane-client';
import { startTestControlPlane } from '../support/controlplane';
import { keeperChild, startDataPlane } from '../support/dataplane';
import { BENCH_WORKLOAD } from '../support/paths';
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
