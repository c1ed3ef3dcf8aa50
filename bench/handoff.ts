// Scenario: a planned data plane handoff (a successor started with --takeover) while N idle
// containers (1,000 unless --containers says otherwise) and one getppid workload are live. The
// pause is the old data plane's own figure, from parking its engine to the successor's ack (what
// it logs as "nothing was answered for X ms"); beside it, the workload's longest call across the
// handoff, and how long the whole handoff took from the successor's start.
import * as fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDataPlane, waitForContainers, type DataPlaneProcess } from './dataplane-process';
import { runScenario } from './scenario-process';
import { checkTools, startIdleContainer, startWorkload } from './tools';

/** Long enough to span the successor's start; the workload is stopped (SIGTERM) once it is over. */
const WORKLOAD_MAX_SECONDS = 60;

/** The pause the old data plane logged when it handed over, in ms. */
function loggedPauseMs(logFile: string): number | undefined {
  const match = /"pauseMs":([\d.]+)/.exec(fs.readFileSync(logFile, 'utf8'));
  return match ? Number(match[1]) : undefined;
}

runScenario(async ({ params, dir, children }) => {
  checkTools(['seccompRun', 'workload', 'dataplaneMain']);
  const old = await startDataPlane(children, dir, ['--log-level', 'info'], 'dataplane-old');
  let successor: DataPlaneProcess | undefined;
  try {
    for (let i = 0; i < params.containers; i++) startIdleContainer(children, old.listenerSocket, `bench-idle-${i}`);
    await waitForContainers(old, params.containers, 120_000);
    const workload = startWorkload(children, {
      listenerSocket: old.listenerSocket, threads: 1, seconds: WORKLOAD_MAX_SECONDS, warmupMs: params.warmupMs,
      syscall: 'getppid', workDir: dir, id: 'bench-handoff',
    });
    // The measured window has begun (and the workload's notify fd is held) before the handoff.
    await waitForContainers(old, params.containers + 1, 10_000);
    await sleep(params.warmupMs + 200);
    const started = process.hrtime.bigint();
    successor = await startDataPlane(children, dir, ['--takeover', '--log-level', 'info'], 'dataplane-successor');
    await waitForContainers(successor, params.containers + 1, 60_000);
    const exit = await Promise.race([old.child.exited, sleep(20_000).then(() => 'still running')]);
    if (exit !== 0) throw new Error(`the old data plane did not exit cleanly after the handoff (${exit}): ${old.child.stderr().trim()}`);
    const handoffMs = Number(process.hrtime.bigint() - started) / 1e6;
    const pauseMs = loggedPauseMs(old.logFile);
    if (pauseMs === undefined) throw new Error(`the old data plane logged no handoff pause: ${old.child.stderr().trim()}`);
    await sleep(200);
    workload.child.process.kill('SIGTERM');
    const measured = await workload.result;
    return {
      containers: params.containers,
      pauseMs,
      workloadMaxMs: measured.maxUs / 1000,
      workloadP99Us: measured.p99Us,
      handoffMs,
    };
  } finally {
    old.close();
    successor?.close();
  }
});
