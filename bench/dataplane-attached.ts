// Scenario (c): every notification makes the whole trip to a control plane in another process
// (continue-control-plane.ts) and back: over the native decision channel, or (channel: false)
// native -> JS -> gRPC -> control plane -> gRPC -> JS -> NOTIF_SEND.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Child, Children } from './children';
import { startDataPlane, type DataPlaneProcess } from './dataplane-process';
import { runScenario } from './scenario-process';
import { checkTools, runWorkload, TOOLS, workloadMetrics } from './tools';

async function startControlPlane(children: Children, dataplane: DataPlaneProcess, channel: boolean): Promise<Child> {
  const args = [TOOLS.continueControlPlane, '--grpc-socket', dataplane.grpcSocket, '--control-socket', dataplane.controlSocket, ...(channel ? [] : ['--no-channel'])];
  const child = children.start('continue control plane', process.execPath, args);
  const deadline = Date.now() + 15_000;
  while (!child.stdout().includes('"attached"')) {
    if (!child.alive() || Date.now() > deadline) {
      throw new Error(`the continue control plane did not attach: ${child.stderr().trim() || 'no output'}`);
    }
    await sleep(10);
  }
  return child;
}

/** The control plane's own count, printed when it stops: {"decisions":N,"batches":B,"rejected":R}. */
async function stopControlPlane(children: Children, controlPlane: Child): Promise<{ decisions: number; batches: number; rejected: number }> {
  await children.stop(controlPlane);
  const match = /\{"decisions".*\}/.exec(controlPlane.stdout());
  if (!match) throw new Error(`the continue control plane printed no count: ${controlPlane.stderr().trim()}`);
  return JSON.parse(match[0]) as { decisions: number; batches: number; rejected: number };
}

runScenario(async ({ params, dir, children }) => {
  checkTools(['seccompRun', 'workload', 'dataplaneMain', 'continueControlPlane']);
  const dataplane = await startDataPlane(children, dir);
  try {
    const controlPlane = await startControlPlane(children, dataplane, params.channel);
    const result = await runWorkload(children, {
      listenerSocket: dataplane.listenerSocket, threads: params.threads, seconds: params.seconds,
      warmupMs: params.warmupMs, syscall: params.syscall, workDir: dir, id: 'bench-attached',
    });
    const { counters } = await dataplane.status();
    const byDefault = Number((counters?.answeredDefaultDeadline ?? 0n) + (counters?.answeredDefaultDetached ?? 0n)
      + (counters?.answeredDefaultNoControlPlane ?? 0n));
    const rss = dataplane.rssMiB();
    const decided = await stopControlPlane(children, controlPlane);
    // Every measured call must have been decided by the control plane, or this is not path (c).
    if (decided.decisions - decided.rejected < result.calls) {
      throw new Error(`the control plane decided ${decided.decisions} (${decided.rejected} rejected) for ${result.calls} measured calls; ${byDefault} default answers`);
    }
    // One decision per intercepted call: the workload's rate is the decision rate.
    return {
      ...workloadMetrics(result), decisionsPerSec: result.callsPerSec, perBatch: decided.decisions / Math.max(decided.batches, 1),
      defaultAnswers: byDefault, rejected: decided.rejected, rssMiB: rss,
    };
  } finally {
    dataplane.close();
  }
});
