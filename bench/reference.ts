// Scenario (a): the bare C responder answers every notification with CONTINUE. The reference
// every other figure is divided by; with `idleThreads`, the same responder in a multi-threaded
// process (`ownFdTable`: its answering thread with a file table of its own); with `spreadWakeUps`,
// without SYNC_WAKE_UP.
import * as path from 'node:path';
import { runScenario } from './scenario-process';
import { checkTools, runWorkload, startResponder, workloadMetrics } from './tools';

runScenario(async ({ params, dir, children }) => {
  checkTools(['seccompRun', 'workload', 'responder']);
  const socket = path.join(dir, 'responder.sock');
  await startResponder(children, socket, 'responder', { idleThreads: params.idleThreads, ownFdTable: params.ownFdTable, spreadWakeUps: params.spreadWakeUps });
  const result = await runWorkload(children, {
    listenerSocket: socket, threads: params.threads, seconds: params.seconds, warmupMs: params.warmupMs,
    syscall: params.syscall, workDir: dir, id: 'bench-reference',
  });
  return workloadMetrics(result);
});
