// The self-hang experiment: does a runtime (runc, crun) itself make syscall S after it installed
// the container's filter and before it handed the notify fd to the listener? Start a container
// (busybox `true`) whose profile notifies S alone, with a real data plane answering `continue` on
// the listener: when the runtime makes S before the fd is handed over, nobody can answer it and
// the start hangs; after the handover the data plane answers and the container exits 0.
// Used by test/cmd/self-hang-probe (the whole candidate list, whose result common/profile/lint.ts
// records) and by test/e2e/lint-self-hang.test.ts (re-checks some of it against the runtime).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { writeCrunWrapper } from './crun';
import { descendants, run, start } from './processes';
import { makeBundle } from './runc';
import { sleep } from './wait';

export type ProbeRuntime = 'runc' | 'crun';

export interface ProbeResult {
  syscall: string;
  /** hang: no exit within the timeout; ok: exit 0; failed: another exit (the output says why). */
  outcome: 'hang' | 'ok' | 'failed';
  ms: number;
  detail: string;
}

/**
 * Runs one container through `runtime` with a profile notifying `syscall` to `listenerPath`
 * (a data plane must serve it), waits `timeoutMs` at most, then removes every process, the
 * container and its folder, whatever happened.
 */
export async function probeSelfHang(runtime: ProbeRuntime, syscall: string, listenerPath: string, dir: string, timeoutMs: number, noNewPrivileges = true): Promise<ProbeResult> {
  const id = `hang-${runtime}-${syscall.replace(/[^a-z0-9]/g, '')}-${Math.random().toString(36).slice(2, 7)}`;
  const bundleDir = path.join(dir, id);
  const bundle = makeBundle(bundleDir, ['/bin/true'], { listenerPath, syscalls: [syscall] });
  // runc installs the filter just before execve with no_new_privs, and before it drops its
  // capabilities without (a Kubernetes pod's default, allowPrivilegeEscalation unset).
  const config = JSON.parse(fs.readFileSync(bundle.configPath, 'utf8'));
  config.process.noNewPrivileges = noNewPrivileges;
  fs.writeFileSync(bundle.configPath, JSON.stringify(config, null, 2));
  const binary = runtime === 'runc' ? 'runc' : writeCrunWrapper(bundleDir);
  const began = Date.now();
  const proc = start(null, binary, ['--root', bundle.stateRoot, 'run', '--bundle', bundle.dir, id]);
  try {
    const status = await Promise.race([proc.exited, sleep(timeoutMs).then(() => 'timeout' as const)]);
    const ms = Date.now() - began;
    if (status === 'timeout') return { syscall, outcome: 'hang', ms, detail: `no exit within ${timeoutMs} ms` };
    return { syscall, outcome: status === 0 ? 'ok' : 'failed', ms, detail: status === 0 ? '' : `exit ${status}: ${proc.output().trim().slice(0, 300)}` };
  } finally {
    // The container's processes wait in a notified syscall nobody answers: SIGKILL ends that wait.
    for (const pid of descendants(proc.child.pid!).reverse()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
    await Promise.race([proc.exited, sleep(5000)]);
    await run(binary, ['--root', bundle.stateRoot, 'delete', '--force', id]);
    fs.rmSync(bundle.stateRoot, { recursive: true, force: true });
    fs.rmSync(bundleDir, { recursive: true, force: true });
  }
}
