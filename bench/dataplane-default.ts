// Scenario (b): the data plane with no control plane attached answers by its default action
// (continue) natively, on its epoll thread.
import { startDataPlane } from './dataplane-process';
import { runScenario } from './scenario-process';
import { checkTools, runWorkload, workloadMetrics } from './tools';

runScenario(async ({ params, dir, children }) => {
  checkTools(['seccompRun', 'workload', 'dataplaneMain']);
  const dataplane = await startDataPlane(children, dir);
  try {
    const result = await runWorkload(children, {
      listenerSocket: dataplane.listenerSocket, threads: params.threads, seconds: params.seconds,
      warmupMs: params.warmupMs, syscall: params.syscall, workDir: dir, id: 'bench-default',
    });
    const { counters } = await dataplane.status();
    // A figure of some other path would be meaningless. The counters come from events the data
    // plane may drop under load (eventsDropped), so they prove the path, not the exact count.
    const byDefault = Number(counters?.answeredDefaultNoControlPlane ?? 0n);
    const byControlPlane = Number(counters?.answeredControlPlane ?? 0n);
    if (byDefault === 0 || byControlPlane !== 0) {
      throw new Error(`not the default path: ${byDefault} default answers, ${byControlPlane} by a control plane, for ${result.calls} calls`);
    }
    return { ...workloadMetrics(result), eventsDropped: Number(counters?.eventsDropped ?? 0n), rssMiB: dataplane.rssMiB() };
  } finally {
    dataplane.close();
  }
});
