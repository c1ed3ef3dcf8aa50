// Podman with a private containers.conf and storage.conf in a temp folder (CONTAINERS_CONF,
// CONTAINERS_STORAGE_CONF): vfs storage, cgroupfs, file events and locks, ulimits within the
// machine's, no network needed (containers run with --network none). The local image is loaded
// from its OCI archive, nothing is pulled. When done, every container is removed (`rm -f`), then
// the folder. What stays outside it: the runtimes' default state roots (/run/runc, /run/crun,
// entries named by the random container ids, removed with the containers) and c/image's blob
// info cache in /var/lib/containers/cache.
// Shared with bench/: nothing here depends on node:test except podmanForTest().
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { removeCgroups } from './cgroups';
import { writeCrunWrapper } from './crun';
import { unmountUnder } from './mounts';
import { buildBusyboxImage, IMAGE } from './oci-image';
import { run } from './processes';

export interface Podman {
  dir: string;
  /**
   * `--cgroup-parent` for `podman run`: a cgroup of this instance's own, removed by stop()
   * (Podman's default, /libpod_parent, is never removed). Conmon stays in the caller's cgroup.
   */
  cgroupParent: string;
  /** OCI runtime binary for --runtime: runc as installed, crun through the wrapper. */
  runtime(name: 'runc' | 'crun'): string;
  /** Runs `podman ARGS` with the private configuration. */
  podman(args: string[]): Promise<{ code: number | string; stdout: string; stderr: string }>;
  /** Like podman(), but throws unless it exits 0; returns stdout trimmed. */
  ok(args: string[]): Promise<string>;
  /** Removes every container, then the folder. */
  stop(): Promise<void>;
}

/** Soft and hard limits of this process, from /proc/self/limits, by its row title. */
function limit(title: string): number {
  const row = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find((line) => line.startsWith(title));
  const hard = row?.slice(title.length).trim().split(/\s+/)[1];
  return hard === undefined || hard === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(hard);
}

function configs(dir: string): { containersConf: string; storageConf: string } {
  // Podman's own defaults for root (nofile and nproc up to 1048576) exceed this machine's hard
  // limits, and raising a hard limit needs CAP_SYS_RESOURCE: stay well within them.
  const nofile = Math.min(1024, limit('Max open files'));
  const nproc = Math.min(4096, limit('Max processes'));
  const q = JSON.stringify;
  const containersConf = path.join(dir, 'containers.conf');
  fs.writeFileSync(containersConf, [
    '[containers]',
    'cgroups = "no-conmon"',
    `default_ulimits = [${q(`nofile=${nofile}:${nofile}`)}, ${q(`nproc=${nproc}:${nproc}`)}]`,
    'log_driver = "k8s-file"',
    '[engine]',
    'cgroup_manager = "cgroupfs"',
    'events_logger = "file"',
    `events_logfile_path = ${q(path.join(dir, 'events.log'))}`,
    `tmp_dir = ${q(path.join(dir, 'tmp'))}`,
    `static_dir = ${q(path.join(dir, 'storage', 'libpod'))}`,
    `volume_path = ${q(path.join(dir, 'storage', 'volumes'))}`,
    'lock_type = "file"',
    '[network]',
    'network_backend = "cni"',
    `network_config_dir = ${q(path.join(dir, 'cni'))}`,
    '',
  ].join('\n'));
  const storageConf = path.join(dir, 'storage.conf');
  fs.writeFileSync(storageConf, [
    '[storage]',
    'driver = "vfs"',
    `graphroot = ${q(path.join(dir, 'storage'))}`,
    `runroot = ${q(path.join(dir, 'run'))}`,
    '',
  ].join('\n'));
  return { containersConf, storageConf };
}

/** Writes the configuration, loads the local image as IMAGE. */
export async function startPodman(): Promise<Podman> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seccomp-agent-podman-'));
  const { containersConf, storageConf } = configs(dir);
  const env = { ...process.env, CONTAINERS_CONF: containersConf, CONTAINERS_STORAGE_CONF: storageConf };
  const crun = writeCrunWrapper(dir);
  const podman = (args: string[]) => run('podman', args, { env, cwd: dir });
  const ok = async (args: string[]) => {
    const result = await podman(args);
    if (result.code !== 0) throw new Error(`podman ${args.join(' ')} exited ${result.code}: ${result.stderr.trim()}`);
    return result.stdout.trim();
  };
  const cgroupParent = `/seccomp-e2e-${path.basename(dir)}`;
  const handle: Podman = {
    dir, podman, ok, cgroupParent,
    runtime: (name) => (name === 'crun' ? crun : 'runc'),
    stop: async () => {
      const errors: string[] = [];
      const removed = await podman(['rm', '--all', '--force', '--time', '0']);
      if (removed.code !== 0) errors.push(`podman rm --all: ${removed.stderr.trim()}`);
      const left = await podman(['ps', '--all', '--quiet']);
      if (left.stdout.trim() !== '') errors.push(`containers left after podman rm --all: ${left.stdout.trim()}`);
      for (const mount of await unmountUnder(dir)) errors.push(`${mount} was still mounted after podman rm --all`);
      fs.rmSync(dir, { recursive: true, force: true });
      removeCgroups([cgroupParent]);
      if (errors.length > 0) throw new Error(`podman clean-up: ${errors.join('; ')}`);
    },
  };
  try {
    const image = buildBusyboxImage(path.join(dir, 'image'));
    const loaded = /Loaded image(?:\(s\))?: (\S+)/.exec(await ok(['load', '--input', image.archive]));
    if (!loaded) throw new Error('podman load named no image');
    await ok(['tag', loaded[1], IMAGE]);
  } catch (err) {
    await handle.stop();
    throw err;
  }
  return handle;
}

/** startPodman(), cleaned up when the test ends (pass or fail). */
export async function podmanForTest(t: TestContext): Promise<Podman> {
  const podman = await startPodman();
  t.after(() => podman.stop());
  return podman;
}
