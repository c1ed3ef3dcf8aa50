// Scenario: container start time under a real engine, with and without the agent. containerd's
// CRI StartContainer (a kubelet's call; one pod, a container created and removed per start), or
// a whole `podman run --detach`; runc either way. "With": a Localhost/--security-opt profile
// whose listenerPath is the data plane's socket (mkdir notified); "without": the same profile
// minus listenerPath and the notify rule. Starts alternate between the two; medians of each.
import * as path from 'node:path';
import { startContainerd } from '../test/support/containerd';
import { IMAGE } from '../test/support/oci-image';
import { startPodman } from '../test/support/podman';
import { writeAllowProfile, writeNotifyProfile } from '../test/support/seccomp-profile';
import { startDataPlane } from './dataplane-process';
import { runScenario } from './scenario-process';
import { median } from './stats';
import { checkTools } from './tools';

function ms(since: bigint): number {
  return Number(process.hrtime.bigint() - since) / 1e6;
}

/**
 * Starts with and without the agent, alternating, and which goes first alternating too (the
 * start right after a removal pays for it): `startOnce(withAgent)` returns its ms.
 */
async function alternate(starts: number, startOnce: (withAgent: boolean) => Promise<number>) {
  const withAgent: number[] = [];
  const without: number[] = [];
  for (let i = 0; i < starts; i++) {
    for (const agent of i % 2 === 0 ? [false, true] : [true, false]) (agent ? withAgent : without).push(await startOnce(agent));
  }
  const withMs = median(withAgent);
  const withoutMs = median(without);
  return { starts, withAgentMs: withMs, withoutAgentMs: withoutMs, overheadMs: withMs - withoutMs };
}

runScenario(async ({ params, dir, children }) => {
  checkTools(['dataplaneMain']);
  const dataplane = await startDataPlane(children, dir);
  const notify = writeNotifyProfile(path.join(dir, 'notify.json'), dataplane.listenerSocket, '', ['mkdir', 'mkdirat']);
  const plain = writeAllowProfile(path.join(dir, 'plain.json'));
  const profile = (withAgent: boolean) => (withAgent ? notify : plain);
  const starts = Math.max(3, Math.round(params.seconds * 5));
  try {
    if (params.engine === 'podman') {
      const podman = await startPodman();
      try {
        return await alternate(starts, async (withAgent) => {
          const began = process.hrtime.bigint();
          const id = await podman.ok(['run', '--detach', '--network', 'none', '--cgroup-parent', podman.cgroupParent, '--runtime', 'runc', '--security-opt', `seccomp=${profile(withAgent)}`, IMAGE]);
          const took = ms(began);
          await podman.ok(['rm', '--force', '--time', '0', id]);
          return took;
        });
      } finally {
        await podman.stop();
      }
    }
    const containerd = await startContainerd({ runc: 'runc' });
    try {
      const { cri } = containerd;
      const uid = '00000000-0000-4000-8000-00000000b001';
      const hostNetwork = { network: 'NODE', pid: 'CONTAINER', ipc: 'POD' } as const;
      const sandbox = {
        metadata: { name: 'bench', uid, namespace: 'bench', attempt: 0 }, hostname: '',
        logDirectory: path.join(containerd.logRoot, 'bench'),
        linux: { cgroupParent: containerd.podCgroupParent(uid), securityContext: { namespaceOptions: hostNetwork } },
      };
      const podId = await cri.runPodSandbox(sandbox, 'runc');
      let n = 0;
      return await alternate(starts, async (withAgent) => {
        const id = await cri.createContainer(podId, {
          metadata: { name: `c${n++}`, attempt: 0 }, image: { image: IMAGE }, command: ['/bin/sleep', '600'], logPath: `c${n}.log`,
          linux: { securityContext: { namespaceOptions: hostNetwork, seccomp: { profileType: 'Localhost', localhostRef: profile(withAgent) } } },
        }, sandbox);
        const began = process.hrtime.bigint();
        await cri.startContainer(id);
        const took = ms(began);
        await cri.stopContainer(id, 0);
        await cri.removeContainer(id);
        return took;
      });
    } finally {
      await containerd.stop();
    }
  } finally {
    dataplane.close();
  }
});
