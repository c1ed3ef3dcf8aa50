// Both planes as real child processes for the runtime end-to-end tests (containerd CRI, crun,
// Podman), with what those tests read back: the data plane's Watch events and container list,
// and the control plane's view of the containers from its /metrics.
import type { TestContext } from 'node:test';
import { listContainers } from '../../common/dataplane-client';
import type { Container } from '../../proto/gen/seccompagent/v1/dataplane';
import { startControlPlane } from './controlplane';
import { startDataPlane, watchEvents, type RunningDataPlane } from './dataplane';
import type { Started } from './processes';

export interface Agent {
  dp: RunningDataPlane;
  cp: Started;
  watch: ReturnType<typeof watchEvents>;
  /** Every fd of `containerId` that arrived so far (Watch containerAdded), in order. */
  fdsOf(containerId: string): Container[];
  /** The data plane's container list now (one entry per live notify fd). */
  containers(): Promise<Container[]>;
  /** The control plane's containers by resolution (annotations, cgroup, unresolved), from /metrics. */
  controlPlaneContainers(): Promise<Record<string, number>>;
}

/** Data plane in `dir`, then the control plane (--metrics-addr on a free port) attached to it. */
export async function startAgent(t: TestContext, dir: string, controlPlaneArgs: string[] = ['--no-kubernetes']): Promise<Agent> {
  const dp = await startDataPlane(t, [], dir);
  const watch = watchEvents(t, dp.client);
  const cp = await startControlPlane(t, dp.grpcSocket, [...controlPlaneArgs, '--metrics-addr', '127.0.0.1:0']);
  const address = /"address":"([^"]+)","msg":"Prometheus metrics serving/.exec(await cp.waitFor(/"address":"[^"]+","msg":"Prometheus metrics serving/))![1];
  return {
    dp, cp, watch,
    fdsOf: (containerId) => watch.events.flatMap((e) =>
      e.event?.$case === 'containerAdded' && e.event.containerAdded.containerId === containerId ? [e.event.containerAdded] : []),
    containers: async () => (await listContainers(dp.client)).containers,
    controlPlaneContainers: async () => {
      const text = await (await fetch(`http://${address}/metrics`)).text();
      const counts: Record<string, number> = {};
      for (const match of text.matchAll(/^seccomp_agent_controlplane_containers\{resolution="([^"]+)"\} (\d+)$/gm)) counts[match[1]] = Number(match[2]);
      return counts;
    },
  };
}

/** The ids of the containers whose init fd (status "creating") the data plane holds, sorted. */
export function initIds(containers: readonly Container[]): string[] {
  return containers.filter((c) => c.status === 'creating').map((c) => c.containerId).sort();
}
