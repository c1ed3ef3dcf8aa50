// Starts a real seccomp-controlplane process against a test data plane.
import type { TestContext } from 'node:test';
import { CONTROLPLANE_MAIN, TEST_CONTROL_PLANE } from './paths';
import { start, type Started } from './processes';

/** test/cmd/test-control-plane in `mode` (continue, errno:NAME, ignore, late:MS, bogus), once attached. */
export async function startTestControlPlane(t: TestContext, grpcSocket: string, mode: string, extra: string[] = []): Promise<Started> {
  const cp = start(t, process.execPath, [TEST_CONTROL_PLANE, '--grpc-socket', grpcSocket, '--mode', mode, ...extra]);
  await cp.waitFor(/attached \S+/);
  return cp;
}

export async function startControlPlane(t: TestContext, grpcSocket: string, extraArgs: string[] = ['--no-kubernetes']): Promise<Started> {
  // --state-dir '': no node checkpoint outside the test's scratch dir (test/support/policy.ts gives one).
  const proc = start(t, process.execPath, [CONTROLPLANE_MAIN, '--grpc-socket', grpcSocket, '--log-level', 'debug', '--reconnect-max', '500ms', '--state-dir', '', ...extraArgs]);
  await proc.waitFor(/attached to the data plane/, 20_000);
  return proc;
}
