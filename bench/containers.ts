// Scenario: the data plane with 1, N (1,000) and M (10,000) live containers. Each idle container
// is a seccomp-run'd process holding its own notify fd and never calling. Measures the data
// plane's RSS at 1 and at N (issue 18's memory target is at 1,000), and the latency of one
// workload beside 1 and beside M (its scale target is at 10,000), default path.
import type { Child, Children } from './children';
import { startDataPlane, waitForContainers, type DataPlaneProcess } from './dataplane-process';
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
    await growTo(dataplane, idle, params.containers, children);
    const rssNMiB = dataplane.rssMiB();
    await growTo(dataplane, idle, params.scale, children);
    // Spawning them is the harness's work (fork and exec of every idle process), not the data plane's.
    const startSeconds = Number(process.hrtime.bigint() - started) / 1e9;
    const rssMMiB = dataplane.rssMiB();
    const beside = await measure(`bench-beside-${params.scale}`);
    const dead = idle.filter((child) => !child.alive());
    if (dead.length > 0) {
      throw new Error(`${dead.length} idle containers exited early, e.g. ${dead[0].name}: ${dead[0].stderr().trim()}`);
    }
    return {
      containers: params.containers,
      scale: params.scale,
      startSeconds,
      rss1MiB,
      rssNMiB,
      rssMMiB,
      aloneP50Us: alone.p50Us,
      aloneP99Us: alone.p99Us,
      aloneCallsPerSec: alone.callsPerSec,
      besideP50Us: beside.p50Us,
      // Paired within the run (the same machine state for both): the median of these is the row's
      // ratio. p50s here are bimodal (5.7 or 7.x µs by where the scheduler puts the two threads),
      // and the medians of the two columns taken apart can pair a low one with a high one.
      besideVsAlone: beside.p50Us / alone.p50Us,
      besideP99Us: beside.p99Us,
      besideCallsPerSec: beside.callsPerSec,
    };
  } finally {
    dataplane.close();
  }
});

/** Starts idle containers until `count` live, and waits until the data plane holds them all. */
async function growTo(dataplane: DataPlaneProcess, idle: Child[], count: number, children: Children): Promise<void> {
  while (idle.length < count) idle.push(startIdleContainer(children, dataplane.listenerSocket, `bench-idle-${idle.length}`));
  // About 5 ms a container to spawn them (fork and exec from this process), and a margin.
  await waitForContainers(dataplane, count, 60_000 + count * 10);
}
