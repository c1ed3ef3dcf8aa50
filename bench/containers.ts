// Scenario: the data plane with 1 and with N (1,000) live containers. Each idle container is a
// seccomp-run'd process holding its own notify fd and never calling. Measures the data plane's
// RSS at 1 and at N, and the latency of one workload beside 1 and beside N (default path).
import type { Child } from './children';
import { startDataPlane, waitForContainers } from './dataplane-process';
import { runScenario } from './scenario-process';
import { checkTools, runWorkload, startIdleContainer } from './tools';

runScenario(async ({ params, dir, children }) => {
  checkTools(['seccompRun', 'workload', 'dataplaneMain']);
  const dataplane = await startDataPlane(children, dir);
  try {
    const idle: Child[] = [startIdleContainer(children, dataplane.listenerSocket, 'bench-idle-0')];
    await waitForContainers(dataplane, 1, 10_000);
    const rss1MiB = dataplane.rssMiB();
    const measure = (id: string) => runWorkload(children, {
      listenerSocket: dataplane.listenerSocket, threads: params.threads, seconds: params.seconds,
      warmupMs: params.warmupMs, syscall: params.syscall, workDir: dir, id,
    });
    const alone = await measure('bench-beside-1');

    const started = process.hrtime.bigint();
    for (let i = 1; i < params.containers; i++) {
      idle.push(startIdleContainer(children, dataplane.listenerSocket, `bench-idle-${i}`));
    }
    await waitForContainers(dataplane, params.containers, 120_000);
    const startSeconds = Number(process.hrtime.bigint() - started) / 1e9;
    const rssNMiB = dataplane.rssMiB();
    const beside = await measure(`bench-beside-${params.containers}`);
    const dead = idle.filter((child) => !child.alive());
    if (dead.length > 0) {
      throw new Error(`${dead.length} idle containers exited early, e.g. ${dead[0].name}: ${dead[0].stderr().trim()}`);
    }
    return {
      containers: params.containers,
      startSeconds,
      rss1MiB,
      rssNMiB,
      aloneP50Us: alone.p50Us,
      aloneP99Us: alone.p99Us,
      aloneCallsPerSec: alone.callsPerSec,
      besideP50Us: beside.p50Us,
      besideP99Us: beside.p99Us,
      besideCallsPerSec: beside.callsPerSec,
    };
  } finally {
    dataplane.close();
  }
});
