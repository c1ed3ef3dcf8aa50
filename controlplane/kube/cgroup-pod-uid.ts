// The pod UID the kubelet wrote into a container's cgroup path, for containers whose runtime left
// no pod annotations. Both cgroup drivers and both cgroup versions:
//   cgroupfs  /kubepods/burstable/pod1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d/<64 hex>
//             /kubepods/pod<uid>/<64 hex>                              (guaranteed QoS)
//   systemd   /kubepods.slice/kubepods-besteffort.slice/
//             kubepods-besteffort-pod1b2c3d4e_5f60_4a7b_8c9d_0e1f2a3b4c5d.slice/cri-containerd-<id>.scope
// Static pods use their 32-hex config hash as the UID in the path.
import * as fs from 'node:fs';
import { AgentError } from '../../common/errors';

export interface CgroupPodRef {
  /** Pod UID as the API shows it (dashes, lower case), or the 32-hex hash of a static pod. */
  readonly podUid: string;
  /** Container id from the component after the pod's, when it has the runtime's form. */
  readonly containerId: string | null;
  /** The cgroup path it was found in, for log lines. */
  readonly path: string;
}

const UID = '([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32})';
// "pod<uid>" (cgroupfs) or "<prefix>-pod<uid>.slice" (systemd: kubepods-, kubepods-burstable-, ...).
const POD_COMPONENT = new RegExp(`^(?:[a-z0-9_.-]*-)?pod${UID}(?:\\.slice)?$`, 'i');
// "<64 hex>" (cgroupfs), "cri-containerd-<id>.scope", "crio-<id>.scope", "docker-<id>.scope".
// crio-conmon-<id>.scope is the monitor, not the container: it does not match.
const CONTAINER_COMPONENT = /^(?:(?:cri-containerd|crio|docker|cri-dockerd)-)?([0-9a-f]{64})(?:\.scope)?$/i;

/** Finds the pod in one cgroup path; only paths under a kubepods hierarchy count. */
export function podFromCgroupPath(path: string): CgroupPodRef | null {
  const components = path.split('/');
  let underKubepods = false;
  for (let i = 0; i < components.length; i++) {
    const component = components[i];
    if (component.includes('kubepods')) underKubepods = true;
    if (!underKubepods) continue;
    const match = POD_COMPONENT.exec(component);
    if (!match) continue;
    const next = components[i + 1];
    const container = next === undefined ? null : CONTAINER_COMPONENT.exec(next);
    return Object.freeze({
      podUid: match[1].toLowerCase().replace(/_/g, '-'),
      containerId: container ? container[1].toLowerCase() : null,
      path,
    });
  }
  return null;
}

/**
 * Finds the pod in the text of /proc/<pid>/cgroup: v1 lines "N:controllers:/path", the v2 line
 * "0::/path", or both (hybrid). The first line naming a pod wins; all lines name the same one.
 */
export function podFromCgroupFile(text: string): CgroupPodRef | null {
  for (const line of text.split('\n')) {
    const first = line.indexOf(':');
    const second = first === -1 ? -1 : line.indexOf(':', first + 1);
    if (second === -1) continue;
    const found = podFromCgroupPath(line.slice(second + 1).trim());
    if (found) return found;
  }
  return null;
}

/**
 * Reads /proc/<pid>/cgroup and finds the pod. A process that is gone (ENOENT, ESRCH) gives null;
 * any other read error is an AgentError, since it means the agent lacks access (no hostPID?).
 */
export function readCgroupPod(pid: number, procRoot = '/proc'): CgroupPodRef | null {
  if (!Number.isInteger(pid) || pid <= 0) return null;
  let text: string;
  try {
    text = fs.readFileSync(`${procRoot}/${pid}/cgroup`, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ESRCH') return null;
    throw new AgentError(
      'ECGROUP_READ',
      `cannot read ${procRoot}/${pid}/cgroup (${code ?? String(err)}): the pod of this container cannot be found from its cgroup`,
      { cause: err },
    );
  }
  return podFromCgroupFile(text);
}
