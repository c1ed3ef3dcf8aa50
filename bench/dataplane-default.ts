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
    const byDefault = Number(counters?.answeredDefaultNoControlPlane ?? 0n);
    // Measuring anything else than the default path would make the figure meaningless.
    if (byDefault < result.calls) {
      throw new Error(`the data plane counts ${byDefault} default answers for ${result.calls} measured calls`);
    }
    return { ...workloadMetrics(result), rssMiB: dataplane.rssMiB() };
  } finally {
    dataplane.close();
  }
});
