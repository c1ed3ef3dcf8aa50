// Mounts a runtime left under a test's folder (a container's rootfs or shm when its removal
// failed): found in /proc/self/mountinfo and lazily unmounted, so the folder can be removed.
import * as fs from 'node:fs';
import { run } from './processes';

/** Unmounts every mount point under `dir`, deepest first; returns them. */
export async function unmountUnder(dir: string): Promise<string[]> {
  const prefix = `${dir}/`;
  const mounts = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
    .map((line) => line.split(' ')[4])
    .filter((mountPoint): mountPoint is string => mountPoint !== undefined && mountPoint.startsWith(prefix))
    .sort((a, b) => b.length - a.length);
  for (const mount of mounts) await run('umount', ['-l', mount]);
  return mounts;
}
