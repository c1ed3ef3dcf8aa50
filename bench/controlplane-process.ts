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
    TOOLS.controlplaneMain, '--grpc-socket', dataplane.grpcSocket, '--control-socket', dataplane.controlSocket, '--no-kubernetes', '--state-dir', '', '--log-level', 'warn', ...extra,
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

/** The pod the MKDIR_TMPL rows' workload is, by containerd annotations: "-bench-pod" suffixes. */
export const BENCH_POD = { namespace: 'bench', pod: 'pod' } as const;

/** seccomp-run flags of a workload whose profile says MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}, as BENCH_POD. */
export const MKDIR_TMPL_RUN_ARGS: readonly string[] = [
  '--metadata', 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}',
  '--annotation', `io.kubernetes.cri.sandbox-namespace=${BENCH_POD.namespace}`,
  '--annotation', `io.kubernetes.cri.sandbox-name=${BENCH_POD.pod}`,
];
