// Real runc containers from a busybox-static bundle, for end-to-end tests. Each container and its
// state folder is removed when the test ends, pass or fail.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { run, start, type Started } from './processes';
import { sleep } from './wait';

export const BUSYBOX = '/bin/busybox';

export interface SeccompSection {
  listenerPath: string;
  listenerMetadata?: string;
  syscalls: string[];
  /** The profile's `flags` (crun takes SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV; Debian's runc refuses any). */
  flags?: string[];
}

export interface Bundle {
  dir: string;
  rootfs: string;
  stateRoot: string;
  configPath: string;
}

/** Fails (never skips) when runc or a static busybox is missing: `npm test` installs them. */
export function requireRunc(): void {
  for (const tool of ['runc']) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    } catch {
      throw new Error(`${tool} is not installed: run "bash test/ensure-deps.sh" (npm test does) to install it from Debian's packages`);
    }
  }
  if (!fs.existsSync(BUSYBOX)) throw new Error(`${BUSYBOX} is missing: install busybox-static (test/ensure-deps.sh)`);
}

/** Makes a bundle in `dir`: busybox rootfs, `runc spec`, no terminal, writable root, the seccomp section. */
export function makeBundle(
  dir: string,
  args: string[],
  seccomp: SeccompSection,
  annotations: Record<string, string> = {},
  /** e.g. a kubelet-style /kubepods/besteffort/pod<uid>/<id> (cgroupfs driver). */
  cgroupsPath?: string,
): Bundle {
  requireRunc();
  const rootfs = path.join(dir, 'rootfs');
  for (const sub of ['bin', 'proc', 'sys', 'dev', 'tmp', 'etc']) fs.mkdirSync(path.join(rootfs, sub), { recursive: true });
  fs.copyFileSync(BUSYBOX, path.join(rootfs, 'bin', 'busybox'));
  fs.chmodSync(path.join(rootfs, 'bin', 'busybox'), 0o755);
  for (const applet of ['sh', 'mkdir', 'sleep', 'ls', 'cat', 'true', 'echo', 'mount', 'test', '[']) fs.symlinkSync('busybox', path.join(rootfs, 'bin', applet));
  execFileSync('runc', ['spec', '--bundle', dir]);
  const configPath = path.join(dir, 'config.json');
  const config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  config.process.terminal = false;
  config.process.args = args;
  config.root.readonly = false;
  config.annotations = annotations;
  if (cgroupsPath) config.linux.cgroupsPath = cgroupsPath;
  config.linux.seccomp = {
    defaultAction: 'SCMP_ACT_ALLOW',
    listenerPath: seccomp.listenerPath,
    listenerMetadata: seccomp.listenerMetadata ?? '',
    architectures: ['SCMP_ARCH_X86_64'],
    syscalls: [{ names: seccomp.syscalls, action: 'SCMP_ACT_NOTIFY' }],
    ...(seccomp.flags ? { flags: seccomp.flags } : {}),
  };
  fs.writeFileSync(configPath, JSON.stringify(config, null, 2));
  // Not inside the bundle: the test's scratch folder may be removed before the container is.
  const stateRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'seccomp-agent-runc-state-'));
  return { dir, rootfs, stateRoot, configPath };
}

/** `runc run` in the foreground (a child of the test); deleted when the test ends, pass or fail. */
export function runContainer(t: TestContext, bundle: Bundle, id: string): Started {
  const proc = start(null, 'runc', ['--root', bundle.stateRoot, 'run', '--bundle', bundle.dir, id]);
  t.after(async () => {
    // A frozen container (freeze-container) takes no signal until thawed.
    await run('runc', ['--root', bundle.stateRoot, 'resume', id]);
    await run('runc', ['--root', bundle.stateRoot, 'kill', id, 'KILL']);
    await Promise.race([proc.exited, sleep(5000)]);
    await run('runc', ['--root', bundle.stateRoot, 'delete', '--force', id]);
    if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
    fs.rmSync(bundle.stateRoot, { recursive: true, force: true });
  });
  return proc;
}

export function runcExec(bundle: Bundle, id: string, args: string[]) {
  return run('runc', ['--root', bundle.stateRoot, 'exec', id, ...args]);
}

/** A container that prints "started" and sleeps; its syscalls are made with runc exec. */
export async function sleepingContainer(
  t: TestContext, dir: string, listenerPath: string, metadata: string, syscalls: string[],
  annotations: Record<string, string> = {}, cgroupsPath?: string,
): Promise<{ bundle: Bundle; id: string }> {
  const id = `cp-${path.basename(dir)}-${Math.random().toString(36).slice(2, 8)}`;
  const bundle = makeBundle(path.join(dir, id), ['/bin/sh', '-c', 'echo started; exec sleep 600'], { listenerPath, listenerMetadata: metadata, syscalls }, annotations, cgroupsPath);
  const proc = runContainer(t, bundle, id);
  await proc.waitFor(/started/, 20_000);
  return { bundle, id };
}
