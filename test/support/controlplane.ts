// Starts a real seccomp-controlplane process against a test data plane.
import type { TestContext } from 'node:test';
import { CONTROLPLANE_MAIN, TEST_CONTROL_PLANE } from './paths';
import { start, type Started } from './processes';

/** A data plane's two sockets: control planes attach on the control one. */
export interface DataPlaneSockets {
  grpcSocket: string;
  controlSocket: string;
}

/** The flags that point a control plane at both sockets of `dp`. */
export function socketArgs(dp: DataPlaneSockets): string[] {
  return ['--grpc-socket', dp.grpcSocket, '--control-socket', dp.controlSocket];
}

/** test/cmd/test-control-plane in `mode` (continue, errno:NAME, ignore, late:MS, bogus), once attached. */
export async function startTestControlPlane(t: TestContext, dp: DataPlaneSockets, mode: string, extra: string[] = []): Promise<Started> {
  const cp = start(t, process.execPath, [TEST_CONTROL_PLANE, ...socketArgs(dp), '--mode', mode, ...extra]);
  await cp.waitFor(/attached \S+/);
  return cp;
}

export async function startControlPlane(t: TestContext, dp: DataPlaneSockets, extraArgs: string[] = ['--no-kubernetes']): Promise<Started> {
  // --state-dir '': no node checkpoint outside the test's scratch dir (test/support/policy.ts gives one).
  const proc = start(t, process.execPath, [CONTROLPLANE_MAIN, ...socketArgs(dp), '--log-level', 'debug', '--reconnect-max', '500ms', '--state-dir', '', ...extraArgs]);
  await proc.waitFor(/attached to the data plane/, 20_000);
  return proc;
}
