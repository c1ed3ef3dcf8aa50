// The real control plane as the bench runs it: `node dist/controlplane/main.js --no-kubernetes`
// attached to a bench data plane, its log in the scenario's temp dir.
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Child, Children } from './children';
import type { DataPlaneProcess } from './dataplane-process';
import { TOOLS } from './tools';

/** Starts it with `extra` flags and returns once the data plane reports it attached. */
export async function startRealControlPlane(children: Children, dataplane: DataPlaneProcess, dir: string, extra: string[]): Promise<Child> {
  const child = children.start('control plane', process.execPath, [
    TOOLS.controlplaneMain, '--grpc-socket', dataplane.grpcSocket, '--no-kubernetes', '--state-dir', '', '--log-level', 'warn', ...extra,
  ], { logFile: path.join(dir, 'controlplane.log') });
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (!child.alive() || Date.now() > deadline) {
      throw new Error(`the control plane did not attach to the data plane: ${child.stderr().trim() || 'no output'}`);
    }
    try {
      if ((await dataplane.status()).controlPlane !== undefined) return child;
    } catch {
      // the data plane is busy starting; ask again
    }
    await sleep(20);
  }
}
