// Issue 9, rows (d) and (e): the real control plane attached with its fast path (the default),
// so each container's compiled policy is answered by the data plane's engine thread itself.
// getppid: a container whose listenerMetadata has no keys, compiled to "continue everything"
// (d); mkdir: MKDIR_TMPL with containerd annotations, emulated natively with the "-bench-pod"
// suffix by the helper of the container's mount namespace, no JS and no gRPC on the way (e).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BENCH_POD, MKDIR_TMPL_RUN_ARGS, startRealControlPlane, waitForPolicy } from './controlplane-process';
import { startDataPlane } from './dataplane-process';
import { runScenario } from './scenario-process';
import { checkTools, runWorkload, workloadMetrics } from './tools';

runScenario(async ({ params, dir, children }) => {
  checkTools(['seccompRun', 'workload', 'dataplaneMain', 'controlplaneMain']);
  const dataplane = await startDataPlane(children, dir);
  try {
    await startRealControlPlane(children, dataplane, dir, []);
    const mkdir = params.syscall === 'mkdir';
    const id = 'bench-fast';
    const runArgs = mkdir ? [...MKDIR_TMPL_RUN_ARGS] : [];
    // The policy must be in force before the measured seconds begin: the warm-up covers its push.
    const warmupMs = Math.max(params.warmupMs, 1000);
    const workload = runWorkload(children, {
      listenerSocket: dataplane.listenerSocket, threads: params.threads, seconds: params.seconds,
      warmupMs, syscall: params.syscall, workDir: dir, id, runArgs,
    });
    const pushedBy = Date.now() + warmupMs;
    const version = await waitForPolicy(dataplane, id, warmupMs + 5000);
    const pushedInTime = version !== '' && Date.now() <= pushedBy;
    const result = await workload;
    const { counters } = await dataplane.status();
    const fast = Number(counters?.answeredFastPath ?? 0n);
    const byControlPlane = Number(counters?.answeredControlPlane ?? 0n);
    const byDefault = Number((counters?.answeredDefaultDeadline ?? 0n) + (counters?.answeredDefaultDetached ?? 0n) + (counters?.answeredDefaultNoControlPlane ?? 0n));
    const rss = dataplane.rssMiB();
    if (!pushedInTime) throw new Error(`the container's policy was not in force by the end of the ${warmupMs} ms warm-up (version "${version}")`);
    // The counters come from events the data plane may drop under load, so they prove the path
    // (the fast path answered, the control plane only what came before the push), not the count.
    if (fast === 0 || byControlPlane > fast / 100 || byDefault !== 0) {
      throw new Error(`not the fast path: ${fast} fast-path answers, ${byControlPlane} by the control plane, ${byDefault} by default, for ${result.calls} calls`);
    }
    const suffixed = path.join(dir, `mkdir-${id}-0-${BENCH_POD.namespace}-${BENCH_POD.pod}`);
    if (mkdir && !fs.existsSync(suffixed)) throw new Error(`${suffixed} was not created: mkdir was not emulated with the MKDIR_TMPL suffix`);
    return { ...workloadMetrics(result), byControlPlane, defaultAnswers: byDefault, eventsDropped: Number(counters?.eventsDropped ?? 0n), rssMiB: rss };
  } finally {
    dataplane.close();
  }
});
