// Starts a real seccomp-controlplane process against a test data plane.
import type { TestContext } from 'node:test';
import { CONTROLPLANE_MAIN } from './paths';
import { start, type Started } from './processes';

export async function startControlPlane(t: TestContext, grpcSocket: string, extraArgs: string[] = ['--no-kubernetes']): Promise<Started> {
  const proc = start(t, process.execPath, [CONTROLPLANE_MAIN, '--grpc-socket', grpcSocket, '--log-level', 'debug', '--reconnect-max', '500ms', ...extraArgs]);
  await proc.waitFor(/attached to the data plane/, 20_000);
  return proc;
}
