// The kernel's seccomp features are known from the start: the probe (a throwaway filter in a
// forked child) agrees with the kernel release, and a data plane that has no container yet
// reports them. Before, status said "sync wake-up no (kernel < 6.6)" until the first fd arrived.
import assert from 'node:assert/strict';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { loadNative } from '../../dataplane/native';
import { startDataPlane } from '../support/dataplane';
import { ROOT } from '../support/paths';
import { run } from '../support/processes';

/** SYNC_WAKE_UP came with 6.6 (what the probe must find, here read from uname instead). */
function releaseHasSyncWakeUp(release = os.release()): boolean {
  const [major, minor] = release.split('.').map((n) => parseInt(n, 10));
  return major > 6 || (major === 6 && minor >= 6);
}

test('probeKernel: NOTIF_SET_FLAGS(SYNC_WAKE_UP) on a throwaway listener agrees with the kernel release', () => {
  const probe = loadNative().probeKernel();
  assert.equal(probe.syncWakeUp, releaseHasSyncWakeUp(), `kernel ${os.release()}: ${probe.detail}`);
  assert.match(probe.detail, probe.syncWakeUp ? /accepted/ : /refused|not run/);
  const fds = loadNative().openFdCount();
  loadNative().probeKernel();
  assert.equal(loadNative().openFdCount(), fds, 'the probe leaves no fd behind');
});

test('seccomp-dataplane GetStatus and seccompctl status report sync wake-up before any container arrived', async (t) => {
  const dp = await startDataPlane(t);
  const status = await dp.status();
  assert.equal(status.containers, 0);
  assert.equal(status.syncWakeUp, releaseHasSyncWakeUp(), `kernel ${os.release()}`);
  const ctl = await run(path.join(ROOT, 'bin', 'seccompctl'), ['status', '--grpc-socket', dp.grpcSocket]);
  assert.equal(ctl.code, 0, ctl.stderr);
  assert.match(ctl.stdout, releaseHasSyncWakeUp() ? /^sync wake-up\s+yes \(0 containers spread: many callers at once, alone\)$/m : /^sync wake-up\s+no \(kernel < 6\.6\)$/m);
  assert.match(dp.proc.output(), /"syncWakeUpProbe":"[^"]+"/, 'the start line says what the probe saw');
});
