// seccompctl against a real data plane: tables for people, --json for scripts, live watch, health.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import { startDataPlane } from '../support/dataplane';
import { ROOT } from '../support/paths';
import { run, start } from '../support/processes';
import { startUnderFilter, runUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';

const CTL = path.join(ROOT, 'bin', 'seccompctl');

test('seccompctl status and containers: readable tables, and --json for scripts', async (t) => {
  const dp = await startDataPlane(t);
  startUnderFilter(t, {
    socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'c-ctl',
    annotations: { 'io.kubernetes.cri.sandbox-namespace': 'ns1', 'io.kubernetes.cri.sandbox-name': 'pod1' },
  }, ['/bin/sleep', '30']);
  await waitUntil(async () => (await dp.status()).containers === 1, 5000, 'the container');
  const status = await run(CTL, ['status', '--grpc-socket', dp.grpcSocket]);
  assert.equal(status.code, 0, status.stderr);
  assert.match(status.stdout, /^control plane\s+none: the default action answers$/m);
  assert.match(status.stdout, /^containers\s+1$/m);
  assert.match(status.stdout, new RegExp(`^pid\\s+${dp.proc.child.pid} \\(started fresh\\)$`, 'm'));
  assert.match(status.stdout, /^fd store\s+no: a crash gives ENOSYS/m);
  const json = await run(CTL, ['status', '--json', '--grpc-socket', dp.grpcSocket]);
  assert.equal(JSON.parse(json.stdout).containers, 1);
  const containers = await run(CTL, ['containers', '--grpc-socket', dp.grpcSocket]);
  assert.match(containers.stdout, /^HANDLE\s+CONTAINER\s+STATUS\s+PID\s+POD/m);
  assert.match(containers.stdout, /c-ctl\s+init\s+\d+\s+ns1\/pod1/);
  const list = JSON.parse((await run(CTL, ['containers', '--json', '--grpc-socket', dp.grpcSocket])).stdout);
  assert.equal(list.containers[0].containerId, 'c-ctl');
});

test('seccompctl watch --container: a live line per event of that container only', async (t) => {
  const dp = await startDataPlane(t);
  const watch = start(t, CTL, ['watch', '--container', 'c-watched', '--grpc-socket', dp.grpcSocket]);
  await waitUntil(async () => (await dp.status()).watchers === 1, 5000, 'the watcher');
  await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'c-other' }, ['/bin/mkdir', path.join(dp.dir, 'other')]);
  await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'c-watched' }, ['/bin/mkdir', path.join(dp.dir, 'watched')]);
  await watch.waitFor(/notify\s+c-watched pid=\d+ mkdir "[^"]*watched"/);
  await watch.waitFor(/answer\s+c-watched mkdir id=\d+ continue by default\(no control plane\)/);
  assert.doesNotMatch(watch.output(), /c-other/);
});

test('seccompctl health: exit 0 while the data plane serves, 1 when it is gone', async (t) => {
  const dp = await startDataPlane(t);
  const ok = await run(CTL, ['health', '--grpc-socket', dp.grpcSocket]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /SERVING/);
  const gone = await run(CTL, ['health', '--grpc-socket', path.join(dp.dir, 'nothing.sock'), '--timeout', '1']);
  assert.equal(gone.code, 1);
  assert.match(gone.stderr, /seccompctl health:/);
});

test('seccompctl: an unknown command or flag is a clear usage error', async () => {
  const bad = await run(CTL, ['stauts']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /unknown command "stauts"|cannot reach the data plane/);
  const flag = await run(CTL, ['status', '--gprc-socket', '/x']);
  assert.equal(flag.code, 2);
  assert.match(flag.stderr, /did you mean --grpc-socket/);
});
