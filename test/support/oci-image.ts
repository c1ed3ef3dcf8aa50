// A local container image, so no runtime test pulls anything: a busybox-static rootfs packed as
// an OCI image layout with umoci (init, new, insert, config), and the same layout as an OCI
// archive (a tar of it) for `ctr images import` and `podman load`.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BUSYBOX } from './runc';

/** The image's name once imported: `ctr images import --base-name` names it REPOSITORY:TAG. */
export const IMAGE_REPOSITORY = 'localhost/seccomp-e2e/busybox';
export const IMAGE_TAG = '1';
export const IMAGE = `${IMAGE_REPOSITORY}:${IMAGE_TAG}`;

const APPLETS = ['sh', 'mkdir', 'sleep', 'ls', 'cat', 'true', 'echo', 'test', '[', 'hostname', 'id'];

export interface LocalImage {
  /** OCI image layout folder (umoci's), tag IMAGE_TAG. */
  layout: string;
  /** The layout as a tar (an OCI archive). */
  archive: string;
}

function tool(command: string, args: string[]): void {
  try {
    execFileSync(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    const stderr = String((err as { stderr?: Buffer }).stderr ?? '').trim();
    throw new Error(`${command} ${args.join(' ')} failed: ${stderr || (err as Error).message}` +
      ((err as NodeJS.ErrnoException).code === 'ENOENT' ? ' (not installed: run "bash test/ensure-deps.sh")' : ''));
  }
}

/**
 * Builds the image in `dir`: busybox and its applets in /bin, empty /tmp, /etc, /proc, /sys,
 * /dev; entrypoint `sleep 86400`, so it also serves as a pod's sandbox (pause) image.
 */
export function buildBusyboxImage(dir: string): LocalImage {
  fs.mkdirSync(dir, { recursive: true });
  if (!fs.existsSync(BUSYBOX)) throw new Error(`${BUSYBOX} is missing: install busybox-static (test/ensure-deps.sh)`);
  const rootfs = path.join(dir, 'image-rootfs');
  for (const sub of ['bin', 'tmp', 'etc', 'proc', 'sys', 'dev']) fs.mkdirSync(path.join(rootfs, sub), { recursive: true });
  fs.chmodSync(path.join(rootfs, 'tmp'), 0o1777);
  fs.copyFileSync(BUSYBOX, path.join(rootfs, 'bin', 'busybox'));
  fs.chmodSync(path.join(rootfs, 'bin', 'busybox'), 0o755);
  for (const applet of APPLETS) fs.symlinkSync('busybox', path.join(rootfs, 'bin', applet));
  const layout = path.join(dir, 'image-layout');
  const image = `${layout}:${IMAGE_TAG}`;
  tool('umoci', ['init', '--layout', layout]);
  tool('umoci', ['new', '--image', image]);
  tool('umoci', ['insert', '--image', image, rootfs, '/']);
  tool('umoci', ['config', '--image', image, '--config.entrypoint', '/bin/sleep', '--config.cmd', '86400', '--config.env', 'PATH=/bin']);
  const archive = path.join(dir, 'image.tar');
  tool('tar', ['-C', layout, '-cf', archive, '.']);
  fs.rmSync(rootfs, { recursive: true, force: true });
  return { layout, archive };
}
