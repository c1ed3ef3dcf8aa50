// Issue 3: the real control plane (`seccomp-controlplane`, its policy engine, pod identity from
// containerd annotations with --no-kubernetes) attached to the real data plane. The profile's
// listenerMetadata asks for MKDIR_TMPL: getppid is continued over the decision channel, mkdir is
// emulated with the "-bench-pod" suffix (a decision that goes over gRPC to the emulator).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BENCH_POD, MKDIR_TMPL_RUN_ARGS, startRealControlPlane } from './controlplane-process';
import { startDataPlane } from './dataplane-process';
import { runScenario } from './scenario-process';
import { checkTools, runWorkload, workloadMetrics } from './tools';

runScenario(async ({ params, dir, children }) => {
  checkTools(['seccompRun', 'workload', 'dataplaneMain', 'controlplaneMain']);
  const dataplane = await startDataPlane(children, dir);
  try {
    await startRealControlPlane(children, dataplane, dir, ['--fast-path=false']);
    const before = (await dataplane.status()).counters;
    const result = await runWorkload(children, {
      listenerSocket: dataplane.listenerSocket, threads: params.threads, seconds: params.seconds,
      warmupMs: params.warmupMs, syscall: params.syscall, workDir: dir, id: 'bench-policy',
      runArgs: [...MKDIR_TMPL_RUN_ARGS],
    });
    const after = (await dataplane.status()).counters;
    const answered = Number((after?.answeredControlPlane ?? 0n) - (before?.answeredControlPlane ?? 0n));
    const byDefault = Number((after?.answeredDefaultDeadline ?? 0n) + (after?.answeredDefaultDetached ?? 0n)
      + (after?.answeredDefaultNoControlPlane ?? 0n));
    const rss = dataplane.rssMiB();
    // Every measured call must have been decided by the control plane, or this is not the path.
    if (answered < result.calls) {
      throw new Error(`the control plane answered ${answered} notifications for ${result.calls} measured calls; ${byDefault} default answers`);
    }
    // The suffixed directory proves the mkdirs were emulated as the policy says, not continued.
    const suffixed = path.join(dir, `mkdir-bench-policy-0-${BENCH_POD.namespace}-${BENCH_POD.pod}`);
    if (params.syscall === 'mkdir' && !fs.existsSync(suffixed)) {
      throw new Error(`${suffixed} was not created: mkdir was not emulated with the MKDIR_TMPL suffix`);
    }
    return { ...workloadMetrics(result), decisionsPerSec: result.callsPerSec, defaultAnswers: byDefault, rssMiB: rss };
  } finally {
    dataplane.close();
  }
});
