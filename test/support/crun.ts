// crun for the end-to-end tests, on its own or as containerd's and Podman's runtime. On a
// hybrid cgroup host (v1 controllers plus a v2 hierarchy at /sys/fs/cgroup/unified) crun refuses
// to run while that v2 hierarchy has controllers ("cgroups in hybrid mode not supported"); the
// wrapper then runs it in a private mount namespace with /sys/fs/cgroup/unified unmounted, so it
// uses the v1 controllers. Elsewhere the wrapper just execs crun.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { run, start, stop, type Started } from './processes';
import type { Bundle } from './runc';

/** Absolute path of crun; fails (never skips) when it is missing. */
export function crunBinary(): string {
  try {
    return execFileSync('sh', ['-c', 'command -v crun'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('crun is not installed: run "bash test/ensure-deps.sh" (npm test does) to install it from Debian\'s packages');
  }
}

/**
 * Writes the wrapper as `dir`/crun and returns its path: usable wherever a runtime binary is
 * asked for (containerd's BinaryName, `podman --runtime`). It decides per call whether the v2
 * hierarchy has controllers, so it is right on every host layout.
 */
export function writeCrunWrapper(dir: string): string {
  const crun = crunBinary();
  const wrapper = path.join(dir, 'crun');
  fs.writeFileSync(wrapper, `#!/bin/sh
# crun, with /sys/fs/cgroup/unified unmounted in a private mount namespace when that hybrid v2
# hierarchy has controllers (crun refuses to run otherwise). Written by test/support/crun.ts.
if [ -n "$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]; then
  exec unshare -m --propagation private sh -c 'umount /sys/fs/cgroup/unified && exec ${crun} "$@"' crun "$@"
fi
exec ${crun} "$@"
`, { mode: 0o755 });
  return wrapper;
}

export interface CrunRuntime {
  wrapper: string;
  stateRoot: string;
  /** The `crun run` processes in the foreground, waited for before the state root goes. */
  running: Started[];
}

/**
 * A wrapper and a private state root (`crun --root`). When the test ends, every container in that
 * root is force-deleted (killed first), its `crun run` has exited (it writes to the state root on
 * its way out), then the folder is removed.
 */
export function crunRuntime(t: TestContext): CrunRuntime {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seccomp-agent-crun-'));
  const runtime: CrunRuntime = { wrapper: writeCrunWrapper(dir), stateRoot: path.join(dir, 'state'), running: [] };
  t.after(async () => {
    for (const { id } of await crunList(runtime).catch(() => [])) {
      await run(runtime.wrapper, ['--root', runtime.stateRoot, 'delete', '--force', id]);
    }
    await Promise.all(runtime.running.map((proc) => stop(proc.child)));
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return runtime;
}

/**
 * `crun run` of a makeBundle() bundle in the foreground (a child of the test); crunRuntime's
 * clean-up deletes the container. The bundle's runc state root is not used: removed now.
 */
export function runCrunContainer(crun: CrunRuntime, bundle: Bundle, id: string): Started {
  fs.rmSync(bundle.stateRoot, { recursive: true, force: true });
  const proc = start(null, crun.wrapper, ['--root', crun.stateRoot, 'run', '--bundle', bundle.dir, id]);
  crun.running.push(proc);
  return proc;
}

export function crunExec(crun: CrunRuntime, id: string, args: string[]) {
  return run(crun.wrapper, ['--root', crun.stateRoot, 'exec', id, ...args]);
}

/** Ids of the containers `crun list` shows, with their state. */
export async function crunList(crun: CrunRuntime): Promise<Array<{ id: string; pid: number; status: string }>> {
  const listed = await run(crun.wrapper, ['--root', crun.stateRoot, 'list', '--format', 'json']);
  if (listed.code !== 0) throw new Error(`crun list failed: ${listed.stderr}`);
  return JSON.parse(listed.stdout || '[]') as Array<{ id: string; pid: number; status: string }>;
}
