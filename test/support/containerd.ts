// A private containerd 1.6 with its CRI plugin, for driving it the way a kubelet does: its own
// root, state, sockets and config.toml in a temp folder, one CRI runtime handler per OCI runtime
// binary (runc, the crun wrapper), a local sandbox image, restrict_oom_score_adj (no
// CAP_SYS_RESOURCE here). Pods use the host network (hostname empty), so no CNI plugin is needed.
// Stopping removes every pod through CRI first (shims and containers outlive containerd), then
// stops containerd, then sweeps what a failed removal left (containers in the runtimes' roots,
// mounts under the folder) and removes the folder.
// Shared with bench/: nothing here depends on node:test except containerdForTest().
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { removeCgroups } from './cgroups';
import { CriClient } from './cri-client';
import { writeCrunWrapper } from './crun';

import { unmountUnder } from './mounts';
import { buildBusyboxImage, IMAGE, IMAGE_REPOSITORY } from './oci-image';
import { run, start, stop, type Started } from './processes';
import { waitUntil } from './wait';

/** containerd's fixed shim socket folder (1.6 puts every shim socket in <default state>/s). */
const SHIM_SOCKET_ROOT = '/run/containerd';

/** The CRI runtime handlers, by name; the first is the default. */
export type RuntimeHandlers = Record<string, 'runc' | 'crun'>;

export interface Containerd {
  dir: string;
  socket: string;
  cri: CriClient;
  proc: Started;
  /** Where pods' logs go (PodSandboxConfig.log_directory lives under it). */
  logRoot: string;
  /**
   * The cgroup parent a kubelet (cgroupfs driver) gives pod `uid`: /kubepods/besteffort/pod<uid>.
   * Like the kubelet, stop() removes that pod cgroup once the pod is gone.
   */
  podCgroupParent(uid: string): string;
  /** Removes every pod through CRI, stops containerd, sweeps leftovers, removes the folder. */
  stop(): Promise<void>;
}

function toml(value: string): string {
  return JSON.stringify(value);
}

function configToml(dir: string, socket: string, runtimes: Record<string, string>): string {
  const cri = '[plugins."io.containerd.grpc.v1.cri"';
  const lines = [
    'version = 2',
    `root = ${toml(path.join(dir, 'root'))}`,
    `state = ${toml(path.join(dir, 'state'))}`,
    // Snapshotters that cannot work here and only log errors.
    'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]',
    '[grpc]', `  address = ${toml(socket)}`,
    '[ttrpc]', `  address = ${toml(`${socket}.ttrpc`)}`,
    '[debug]', `  address = ${toml(path.join(dir, 'debug.sock'))}`,
    '[plugins."io.containerd.internal.v1.opt"]', `  path = ${toml(path.join(dir, 'opt'))}`,
    `${cri}]`,
    `  sandbox_image = ${toml(IMAGE)}`,
    '  restrict_oom_score_adj = true',
    '  disable_apparmor = true',
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    `${cri}.containerd]`,
    `  default_runtime_name = ${toml(Object.keys(runtimes)[0])}`,
    `${cri}.cni]`,
    `  bin_dir = ${toml(path.join(dir, 'cni', 'bin'))}`,
    `  conf_dir = ${toml(path.join(dir, 'cni', 'net.d'))}`,
  ];
  for (const [name, binary] of Object.entries(runtimes)) {
    lines.push(
      `${cri}.containerd.runtimes.${name}]`,
      '  runtime_type = "io.containerd.runc.v2"',
      `${cri}.containerd.runtimes.${name}.options]`,
      `  BinaryName = ${toml(binary)}`,
      `  Root = ${toml(runtimeRoot(dir, name))}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

function runtimeRoot(dir: string, name: string): string {
  return path.join(dir, `runtime-${name}`);
}

/**
 * Starts containerd with `handlers` (runc as installed, crun through the wrapper in the folder),
 * waits for CRI to answer, imports the local image (also the sandbox image) into k8s.io.
 */
export async function startContainerd(handlers: RuntimeHandlers): Promise<Containerd> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seccomp-agent-containerd-'));
  const runtimes: Record<string, string> = {};
  for (const [name, runtime] of Object.entries(handlers)) runtimes[name] = runtime === 'crun' ? writeCrunWrapper(dir) : 'runc';
  const socket = path.join(dir, 'containerd.sock');
  const configPath = path.join(dir, 'config.toml');
  const logRoot = path.join(dir, 'pod-logs');
  fs.mkdirSync(logRoot);
  fs.writeFileSync(configPath, configToml(dir, socket, runtimes));
  const shimRootExisted = fs.existsSync(SHIM_SOCKET_ROOT);
  const proc = start(null, 'containerd', ['--config', configPath]);
  const cri = new CriClient(socket);
  const podCgroups = new Set<string>();
  const containerd: Containerd = {
    dir, socket, cri, proc, logRoot,
    podCgroupParent: (uid) => {
      const parent = `/kubepods/besteffort/pod${uid}`;
      podCgroups.add(parent);
      return parent;
    },
    stop: async () => {
      try {
        await stopContainerd(containerd, runtimes, shimRootExisted);
      } finally {
        removeCgroups(podCgroups);
      }
    },
  };
  try {
    await waitUntil(async () => {
      if (proc.child.exitCode !== null || proc.child.signalCode !== null) throw new Error('containerd exited at start');
      return cri.version().then(() => true, () => false);
    }, 30_000, `containerd's CRI plugin to answer on ${socket}`).catch((err: Error) => {
      throw new Error(`${err.message}; containerd's output:\n${proc.output().slice(-4000)}`);
    });
    const image = buildBusyboxImage(path.join(dir, 'image'));
    const imported = await run('ctr', ['--address', socket, '-n', 'k8s.io', 'images', 'import', '--base-name', IMAGE_REPOSITORY, image.archive]);
    if (imported.code !== 0) throw new Error(`ctr images import failed (${imported.code}): ${imported.stderr}`);
  } catch (err) {
    await containerd.stop();
    throw err;
  }
  return containerd;
}

async function stopContainerd(containerd: Containerd, runtimes: Record<string, string>, shimRootExisted: boolean): Promise<void> {
  const errors: string[] = [];
  if (containerd.proc.child.exitCode === null && containerd.proc.child.signalCode === null) {
    try {
      for (const pod of await containerd.cri.listPodSandbox()) {
        await containerd.cri.stopPodSandbox(pod.id).catch((err: Error) => errors.push(err.message));
        await containerd.cri.removePodSandbox(pod.id).catch((err: Error) => errors.push(err.message));
      }
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
  containerd.cri.close();
  await stop(containerd.proc.child, 10_000);
  // What a failed removal left: containers in the runtimes' roots (their shims exit with them).
  for (const [name, binary] of Object.entries(runtimes)) {
    const root = runtimeRoot(containerd.dir, name);
    for (const namespace of fs.existsSync(root) ? fs.readdirSync(root) : []) {
      const listed = await run(binary, ['--root', path.join(root, namespace), 'list', '-q']);
      for (const id of listed.stdout.split('\n').filter(Boolean)) {
        errors.push(`container ${id} (${name}) was still there after containerd stopped`);
        await run(binary, ['--root', path.join(root, namespace), 'delete', '--force', id]);
      }
    }
  }
  for (const mount of await unmountUnder(containerd.dir)) errors.push(`${mount} was still mounted after containerd stopped`);
  fs.rmSync(containerd.dir, { recursive: true, force: true });
  if (!shimRootExisted) {
    for (const folder of [path.join(SHIM_SOCKET_ROOT, 's'), SHIM_SOCKET_ROOT]) {
      try {
        fs.rmdirSync(folder);
      } catch {
        // Not empty (someone else's containerd) or not there: leave it.
      }
    }
  }
  if (errors.length > 0) throw new Error(`containerd clean-up: ${errors.join('; ')}`);
}

/** startContainerd(), stopped when the test ends (pass or fail). */
export async function containerdForTest(t: TestContext, handlers: RuntimeHandlers): Promise<Containerd> {
  const containerd = await startContainerd(handlers);
  t.after(() => containerd.stop());
  return containerd;
}
