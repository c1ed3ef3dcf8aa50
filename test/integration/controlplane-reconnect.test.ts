// seccomp-controlplane started before its data plane, and across a data plane restart.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import { startDataPlane } from '../support/dataplane';
import { socketArgs } from '../support/controlplane';
import { CONTROLPLANE_MAIN } from '../support/paths';
import { start, stop } from '../support/processes';
import { scratchDir } from '../support/scratch';
import { sleep, waitUntil } from '../support/wait';

test('seccomp-controlplane reconnect: waits for a data plane with capped backoff, says so once, attaches when it appears and again after a restart', async (t) => {
  const dir = scratchDir(t);
  const grpcSocket = path.join(dir, 'grpc', 'dataplane.sock');
  const controlSocket = path.join(dir, 'grpc', 'control.sock');
  const cp = start(t, process.execPath, [CONTROLPLANE_MAIN, ...socketArgs({ grpcSocket, controlSocket }), '--no-kubernetes', '--reconnect-max', '300ms', '--log-level', 'info']);
  await cp.waitFor(/data plane unreachable or session ended/);
  await sleep(1500); // several retries at the 300 ms cap
  assert.equal((cp.output().match(/data plane unreachable or session ended/g) ?? []).length, 1, 'one line per state change, not per retry');
  const first = await startDataPlane(t, [], dir);
  await cp.waitFor(/attached to the data plane/, 10_000);
  assert.equal((await first.status()).controlPlane?.name, 'seccomp-controlplane');
  await stop(first.proc.child);
  await cp.waitFor(/data plane unreachable[\s\S]*data plane unreachable/, 10_000);
  const second = await startDataPlane(t, [], dir);
  await waitUntil(async () => (await second.status()).controlPlane !== undefined, 10_000, 'the control plane to reattach to the restarted data plane');
  assert.equal((await second.status()).controlPlane?.name, 'seccomp-controlplane', 'reattached to the restarted data plane');
});
