// seccomp-dataplane as a real process: real filters (seccomp-run), real gRPC clients.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { listContainers } from '../../common/dataplane-client';
import { AnsweredBy } from '../../proto/gen/seccompagent/v1/dataplane';
import { socketArgs, startTestControlPlane } from '../support/controlplane';
import { startDataPlane, watchEvents } from '../support/dataplane';
import { TEST_CONTROL_PLANE } from '../support/paths';
import { start } from '../support/processes';
import { fdCount, runUnderFilter, startUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';


test('seccomp-dataplane default policy: mkdir under seccomp-run is watched with its path, continued, and the directory exists', async (t) => {
  const dp = await startDataPlane(t);
  const watch = await watchEvents(t, dp.client);
  await waitUntil(async () => (await dp.status()).watchers === 1, 5000, 'the watcher to register');
  const target = path.join(dp.dir, 'made-by-workload');
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id: 'c-default' }, ['/bin/mkdir', target]);
  assert.equal(result.code, 0, result.stderr);
  assert.ok(fs.statSync(target).isDirectory());
  const seen = await watch.waitFor((e) => e.event?.$case === 'notification' && e.event.notification.stringArgs.some((s) => s.value === target));
  assert.equal(seen.event?.$case === 'notification' && seen.event.notification.containerId, 'c-default');
  assert.match(seen.event?.$case === 'notification' ? seen.event.notification.syscall : '', /^mkdir(at)?$/);
  const answer = await watch.waitFor((e) => e.event?.$case === 'answer' && e.event.answer.containerId === 'c-default');
  assert.equal(answer.event?.$case === 'answer' && answer.event.answer.answeredBy, AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE);
  await watch.waitFor((e) => e.event?.$case === 'containerAdded' && e.event.containerAdded.containerId === 'c-default');
  const status = await dp.status();
  assert.ok(status.counters!.answeredDefaultNoControlPlane >= 1n);
  assert.equal(status.controlPlane, undefined);
});

test('seccomp-dataplane --default-action errno:EPERM: mkdir fails with EPERM while no control plane is attached', async (t) => {
  const dp = await startDataPlane(t, ['--default-action', 'errno:EPERM']);
  const target = path.join(dp.dir, 'refused');
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'] }, ['/bin/mkdir', target]);
  assert.notEqual(result.code, 0);
  assert.match(result.stderr, /Operation not permitted/);
  assert.equal(fs.existsSync(target), false);
});

test('seccomp-dataplane Attach: a control plane answering errno:EPERM makes mkdir fail with EPERM, answered by the control plane', async (t) => {
  const dp = await startDataPlane(t);
  const watch = await watchEvents(t, dp.client);
  await startTestControlPlane(t, dp, 'errno:EPERM');
  const status = await dp.status();
  assert.equal(status.controlPlane?.name, 'test-control-plane');
  const target = path.join(dp.dir, 'refused-by-cp');
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id: 'c-cp' }, ['/bin/mkdir', target]);
  assert.match(result.stderr, /Operation not permitted/);
  assert.equal(fs.existsSync(target), false);
  const answer = await watch.waitFor((e) => e.event?.$case === 'answer' && e.event.answer.containerId === 'c-cp');
  assert.equal(answer.event?.$case === 'answer' && answer.event.answer.answeredBy, AnsweredBy.ANSWERED_BY_CONTROL_PLANE);
  assert.equal(answer.event?.$case === 'answer' && answer.event.answer.errno, 1);
});

test('seccomp-dataplane Attach: a second control plane without takeover is refused and the first keeps deciding', async (t) => {
  const dp = await startDataPlane(t);
  await startTestControlPlane(t, dp, 'errno:EACCES');
  const second = start(t, process.execPath, [TEST_CONTROL_PLANE, ...socketArgs(dp), '--mode', 'continue']);
  await second.waitFor(/stream error .*attached already/);
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'] }, ['/bin/mkdir', path.join(dp.dir, 'x')]);
  assert.match(result.stderr, /Permission denied/);
});

test('seccomp-dataplane deadline: a control plane that never answers is overruled by the default action after --decision-timeout', async (t) => {
  const dp = await startDataPlane(t, ['--decision-timeout', '300ms']);
  const watch = await watchEvents(t, dp.client);
  await startTestControlPlane(t, dp, 'ignore');
  const target = path.join(dp.dir, 'after-deadline');
  const began = Date.now();
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'c-deadline' }, ['/bin/mkdir', target]);
  const took = Date.now() - began;
  assert.equal(result.code, 0, result.stderr);
  assert.ok(fs.existsSync(target));
  assert.ok(took >= 250, `answered after ${took} ms, before the deadline`);
  const answer = await watch.waitFor((e) => e.event?.$case === 'answer' && e.event.answer.containerId === 'c-deadline');
  assert.equal(answer.event?.$case === 'answer' && answer.event.answer.answeredBy, AnsweredBy.ANSWERED_BY_DEFAULT_DEADLINE);
  await dp.proc.waitFor(/missed the 300 ms decision deadline/);
});

test('seccomp-dataplane deadline: a late decision is counted and dropped, never applied', async (t) => {
  const dp = await startDataPlane(t, ['--decision-timeout', '200ms']);
  const cp = await startTestControlPlane(t, dp, 'late:700');
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'] }, ['/bin/mkdir', path.join(dp.dir, 'late')]);
  assert.equal(result.code, 0, result.stderr);
  await cp.waitFor(/rejected unknown-id/);
  const status = await dp.status();
  assert.equal(status.counters!.decisionsLate, 1n);
  assert.equal(status.counters!.answeredControlPlane, 0n);
  assert.equal(status.counters!.answeredDefaultDeadline, 1n);
});

test('seccomp-dataplane Attach: SIGKILL of the control plane mid-flight answers what it held with the default action at once', async (t) => {
  const dp = await startDataPlane(t, ['--decision-timeout', '60s']);
  const watch = await watchEvents(t, dp.client);
  const cp = await startTestControlPlane(t, dp, 'ignore');
  const target = path.join(dp.dir, 'held');
  const workload = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'c-held' }, ['/bin/mkdir', target]);
  await watch.waitFor((e) => e.event?.$case === 'notification' && e.event.notification.containerId === 'c-held');
  assert.equal(fs.existsSync(target), false, 'the mkdir must wait for the control plane');
  cp.child.kill('SIGKILL');
  const began = Date.now();
  assert.equal(await workload.exited, 0, workload.output());
  assert.ok(Date.now() - began < 5000);
  assert.ok(fs.existsSync(target));
  const answer = await watch.waitFor((e) => e.event?.$case === 'answer' && e.event.answer.containerId === 'c-held');
  assert.equal(answer.event?.$case === 'answer' && answer.event.answer.answeredBy, AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED);
  await watch.waitFor((e) => e.event?.$case === 'controlPlaneDetached');
  assert.equal((await dp.status()).controlPlane, undefined);
});

test('seccomp-dataplane under load: 8 parallel workers under one filter, every notification answered exactly once through a control plane', async (t) => {
  const dp = await startDataPlane(t, ['--log-level', 'info']);
  await startTestControlPlane(t, dp, 'continue');
  const script = `for i in 1 2 3 4 5 6 7 8; do (j=0; while [ $j -lt 40 ]; do /bin/mkdir "${dp.dir}/w$i-$j" || exit 1; j=$((j+1)); done) & done; wait`;
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'] }, ['/bin/sh', '-c', script]);
  assert.equal(result.code, 0, result.stderr);
  const made = fs.readdirSync(dp.dir).filter((n) => /^w\d-\d+$/.test(n));
  assert.equal(made.length, 320);
  const counters = await dp.settledCounters();
  assert.equal(counters.notifications, 320n);
  assert.equal(counters.answeredControlPlane, 320n);
  assert.equal(counters.answeredDefaultDeadline + counters.answeredDefaultDetached + counters.answeredDefaultNoControlPlane, 0n);
});

test('seccomp-dataplane fds: 200 containers come and go over 3 engine threads and the data plane holds as many fds as before', async (t) => {
  const dp = await startDataPlane(t, ['--log-level', 'warn', '--engine-threads', '3']);
  // Let the process settle (gRPC, logger) before taking the baseline.
  await dp.status();
  const before = fdCount(dp.proc.child.pid!);
  for (let round = 0; round < 10; round++) {
    await Promise.all(Array.from({ length: 20 }, (_, i) =>
      runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'], id: `c-${round}-${i}` }, ['/bin/mkdir', path.join(dp.dir, `d-${round}-${i}`)])
        .then((r) => assert.equal(r.code, 0, r.stderr))));
  }
  await waitUntil(async () => (await dp.status()).counters!.containersRemoved === 200n, 10_000, '200 containers removed');
  const status = await dp.status();
  assert.equal(status.containers, 0);
  assert.equal(status.counters!.containersAdded, 200n);
  assert.equal(fdCount(dp.proc.child.pid!), before);
  // Twenty at a time, spread over the three: each served some, and between them every notification.
  assert.deepEqual(status.engineThreads.map((e) => e.containers), [0, 0, 0]);
  assert.ok(status.engineThreads.every((e) => e.received > 0n), `every engine thread received: ${status.engineThreads.map((e) => e.received).join(', ')}`);
  assert.equal(status.engineThreads.reduce((sum, e) => sum + e.received, 0n), status.counters!.notifications);
});

test('seccomp-dataplane ListContainers: lists a live container with its annotations and metadata', async (t) => {
  const dp = await startDataPlane(t);
  const workload = startUnderFilter(t, {
    socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'c-listed', metadata: 'MKDIR_TMPL=-x',
    annotations: { 'io.kubernetes.pod.name': 'p1' },
  }, ['/bin/sleep', '30']);
  await waitUntil(async () => (await dp.status()).containers === 1, 5000, 'the container to register');
  const { containers } = await listContainers(dp.client);
  assert.equal(containers.length, 1);
  assert.equal(containers[0].containerId, 'c-listed');
  assert.equal(containers[0].metadata, 'MKDIR_TMPL=-x');
  assert.equal(containers[0].annotations['io.kubernetes.pod.name'], 'p1');
  assert.equal(containers[0].status, 'creating');
  assert.equal(containers[0].pid, workload.child.pid);
});

test('seccomp-dataplane sockets: both sockets are mode 0600 and owned by root', async (t) => {
  const dp = await startDataPlane(t);
  for (const socket of [dp.listenerSocket, dp.grpcSocket]) {
    const stat = fs.statSync(socket);
    assert.ok(stat.isSocket());
    assert.equal(stat.mode & 0o777, 0o600, `${socket} mode ${(stat.mode & 0o777).toString(8)}`);
    assert.equal(stat.uid, 0);
  }
});
