// Issue 3: the emulated mkdir round trip. The workload's mkdir notifications are answered by the
// emulator itself (Emulator.benchMkdir: NOTIF_RECV, read the path, Emulator::Mkdir with
// respond=true), with the helper kept per mount namespace or (spawnPerCall) spawned per call.
// No data plane: this is the emulation's own cost, as docs/emulation.md describes it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadEmulatorAddon, type EmulatorBenchResult } from '../test/support/emulator-addon';
import { runScenario } from './scenario-process';
import { checkTools, runWorkload, TOOLS, workloadMetrics } from './tools';

runScenario(async ({ params, dir, children }) => {
  checkTools(['seccompRun', 'workload', 'nshelper']);
  const addon = loadEmulatorAddon();
  // The kept helper polls for its next request as the data plane runs it (--busy-poll, 200 µs by default).
  const emulator = new addon.Emulator({ helperPath: TOOLS.nshelper, spawnPerCall: params.spawnPerCall === true, busyPollUs: 200 });
  try {
    const socket = path.join(dir, 'emulator.sock');
    const received = addon.emulatorTestSupport.receiveNotifyFd(socket, 10_000);
    for (let i = 0; i < 500 && !fs.existsSync(socket); i++) await sleep(10);
    const workload = runWorkload(children, {
      listenerSocket: socket, threads: 1, seconds: params.seconds, warmupMs: params.warmupMs,
      syscall: 'mkdir', workDir: dir, id: 'bench-emulated',
    });
    // Reject early if the workload dies before it sends its fd; otherwise answer until it hangs up.
    const { fds } = await Promise.race([received, workload.then(() => { throw new Error('the workload ended before sending its notify fd'); })]);
    let bench: EmulatorBenchResult;
    try {
      bench = await emulator.benchMkdir({ notifyFd: fds[0], count: 1e9, timeoutMs: 5000 });
    } finally {
      addon.emulatorTestSupport.closeFd(fds[0]);
    }
    const result = await workload;
    if (bench.unanswered > 0 || bench.n < result.calls) {
      throw new Error(`the emulator answered ${bench.n - bench.unanswered} of ${bench.n} mkdirs for ${result.calls} measured calls`);
    }
    return { ...workloadMetrics(result), agentP50Us: bench.p50Us, agentP99Us: bench.p99Us, helperP50Us: bench.helperP50Us };
  } finally {
    emulator.close();
  }
});
