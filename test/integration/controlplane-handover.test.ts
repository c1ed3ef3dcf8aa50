// Planned control plane handover (Hello.takeover) under a running workload.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { startControlPlane } from '../support/controlplane';
import { startDataPlane, watchEvents } from '../support/dataplane';
import { startUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';

test('seccomp-controlplane --takeover: a successor takes over under load, the old one drains and exits, no notification gets the default', async (t) => {
  const dp = await startDataPlane(t, ['--log-level', 'info']);
  const watch = await watchEvents(t, dp.client);
  const first = await startControlPlane(t, dp, ['--no-kubernetes', '--takeover', '--fast-path=false']);
  const stopFile = path.join(dp.dir, 'stop');
  const loop = `i=0; while [ ! -e ${stopFile} ]; do mkdir ${dp.dir}/d$i || echo FAIL $i; i=$((i+1)); done; echo made $i`;
  const workload = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'busy' }, ['/bin/sh', '-c', loop]);
  const answered = async () => (await dp.status()).counters!.answeredControlPlane;
  await waitUntil(async () => (await answered()) > 50n, 10_000, 'the first control plane to decide');
  let previous = first;
  for (let round = 0; round < 3; round++) {
    const successor = await startControlPlane(t, dp, ['--no-kubernetes', '--takeover', '--fast-path=false']);
    await previous.waitFor(/handed over to seccomp-controlplane \S+: attaching again if it goes away within 30000 ms/);
    assert.equal(previous.child.exitCode, null, 'it stays (idle) so that no supervisor restarts it');
    previous.child.kill('SIGTERM');
    assert.equal(await previous.exited, 0, previous.output());
    previous = successor;
    const before = await answered();
    await waitUntil(async () => (await answered()) > before + 50n, 10_000, `successor ${round} to decide`);
    assert.equal(successor.child.exitCode, null);
  }
  fs.writeFileSync(stopFile, '');
  assert.equal(await workload.exited, 0);
  assert.doesNotMatch(workload.output(), /FAIL/);
  const counters = await dp.settledCounters();
  assert.equal(counters.answeredDefaultDetached + counters.answeredDefaultDeadline + counters.answeredDefaultNoControlPlane, 0n,
    'a planned handover leaves nothing to the default action');
  assert.equal(counters.notifications, counters.answeredControlPlane);
  assert.ok(watch.events.filter((e) => e.event?.$case === 'controlPlaneAttached').length >= 4);
});
