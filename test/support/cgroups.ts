// Cgroups the tests name (a kubelet-style pod cgroup), removed afterwards as the kubelet does:
// the runtimes delete a container's own cgroup, never its parents.
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Removes the (empty) cgroups `paths` (e.g. /kubepods/besteffort/pod<uid>) from every hierarchy. */
export function removeCgroups(paths: Iterable<string>): void {
  for (const hierarchy of ['', ...fs.readdirSync('/sys/fs/cgroup')]) {
    for (const cgroup of paths) {
      try {
        fs.rmdirSync(path.join('/sys/fs/cgroup', hierarchy, cgroup));
      } catch {
        // Not in this hierarchy, or not a hierarchy ('' is the v2-only layout).
      }
    }
  }
}
