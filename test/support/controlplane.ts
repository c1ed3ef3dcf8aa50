// Starts a real seccomp-controlplane process against a test data plane.
import type { TestContext } from 'node:test';
import { controlSocketPath } from '../../common/shared-options';
import { CURRENT_BUILD, TEST_CONTROL_PLANE, type AgentBuild } from './paths';
import { start, type Started } from './processes';

/** A data plane's two sockets: control planes attach on the control one. */
export interface DataPlaneSockets {
  grpcSocket: string;
  controlSocket: string;
}

/**
 * The flags that point a control plane at both sockets of `dp`. A bare observer socket path
 * (tests written before the control socket) means the control socket beside it, the default.
 */
export function socketArgs(dp: DataPlaneSockets | string): string[] {
  const sockets = typeof dp === 'string' ? { grpcSocket: dp, controlSocket: controlSocketPath('', dp) } : dp;
  return ['--grpc-socket', sockets.grpcSocket, '--control-socket', sockets.controlSocket];
}

/** test/cmd/test-control-plane in `mode` (continue, errno:NAME, ignore, late:MS, bogus), once attached. */
export async function startTestControlPlane(t: TestContext, dp: DataPlaneSockets | string, mode: string, extra: string[] = []): Promise<Started> {
  const cp = start(t, process.execPath, [TEST_CONTROL_PLANE, ...socketArgs(dp), '--mode', mode, ...extra]);
  await cp.waitFor(/attached \S+/);
  return cp;
}

/** A seccomp-controlplane of `build` (this tree's unless said), once attached. */
export async function startControlPlane(
  t: TestContext, dp: DataPlaneSockets | string, extraArgs: string[] = ['--no-kubernetes'], build: AgentBuild = CURRENT_BUILD,
): Promise<Started> {
  // --state-dir '': no node checkpoint outside the test's scratch dir (test/support/policy.ts gives one).
  const proc = start(t, process.execPath, [build.controlplaneMain, ...socketArgs(dp), '--log-level', 'debug', '--reconnect-max', '500ms', '--state-dir', '', ...extraArgs]);
  await proc.waitFor(/attached to the data plane/, 20_000);
  return proc;
}
