// Both planes as real child processes for the runtime end-to-end tests (containerd CRI, crun,
// Podman), with what those tests read back: the data plane's Watch events and container list,
// and the control plane's view of the containers from its /metrics.
import type { TestContext } from 'node:test';
import { listContainers } from '../../common/dataplane-client';
import type { Container } from '../../proto/gen/seccompagent/v1/dataplane';
import { startControlPlane } from './controlplane';
import { startDataPlane, watchEvents, type RunningDataPlane } from './dataplane';
import { metricsUrl, type Started } from './processes';
import { waitUntil } from './wait';

export interface Agent {
  dp: RunningDataPlane;
  cp: Started;
  watch: Awaited<ReturnType<typeof watchEvents>>;
  /** Every fd of `containerId` that arrived so far (Watch containerAdded), in order. */
  fdsOf(containerId: string): Container[];
  /** The data plane's container list now (one entry per live notify fd). */
  containers(): Promise<Container[]>;
  /** The control plane's containers by resolution (annotations, cgroup, unresolved), from /metrics. */
  controlPlaneContainers(): Promise<Record<string, number>>;
  /**
   * Waits until the agent's containers are the runtime's (`runtimeIds`, what `runtime` lists):
   * the data plane holds an init fd for each and no other, and the control plane holds every
   * fd the data plane does, each resolved from annotations.
   */
  listsAgree(runtimeIds: readonly string[], runtime: string): Promise<void>;
  /** Waits until the data plane said `containerId` is gone and lists none of its fds. */
  gone(containerId: string): Promise<void>;
}

/** Data plane in `dir`, then the control plane (--metrics-addr on a free port) attached to it. */
export async function startAgent(t: TestContext, dir: string, controlPlaneArgs: string[] = ['--no-kubernetes']): Promise<Agent> {
  const dp = await startDataPlane(t, [], dir);
  const watch = await watchEvents(t, dp.client);
  const cp = await startControlPlane(t, dp, [...controlPlaneArgs, '--metrics-addr', '127.0.0.1:0']);
  const metrics = await metricsUrl(cp);
  const containers = async () => (await listContainers(dp.client)).containers;
  const controlPlaneContainers = async () => {
    const text = await (await fetch(`${metrics}/metrics`)).text();
    const counts: Record<string, number> = {};
    for (const match of text.matchAll(/^seccomp_agent_controlplane_containers\{resolution="([^"]+)"\} (\d+)$/gm)) counts[match[1]] = Number(match[2]);
    return counts;
  };
  return {
    dp, cp, watch, containers, controlPlaneContainers,
    fdsOf: (containerId) => watch.events.flatMap((e) =>
      e.event?.$case === 'containerAdded' && e.event.containerAdded.containerId === containerId ? [e.event.containerAdded] : []),
    listsAgree: async (runtimeIds, runtime) => {
      const expected = JSON.stringify([...runtimeIds].sort());
      await waitUntil(async () => JSON.stringify(initIds(await containers())) === expected, 10_000, `the data plane to list ${runtime}'s containers ${expected}`);
      await waitUntil(async () => {
        const counts = await controlPlaneContainers();
        return counts.annotations === (await containers()).length && !counts.unresolved;
      }, 10_000, 'the control plane to hold every fd, resolved from annotations');
    },
    gone: async (containerId) => {
      await watch.waitFor((e) => e.event?.$case === 'containerRemoved' && e.event.containerRemoved.containerId === containerId, 15_000);
      await waitUntil(async () => (await containers()).every((c) => c.containerId !== containerId), 15_000, `every fd of ${containerId} to be gone`);
    },
  };
}

/** The ids of the containers whose init fd (status "creating") the data plane holds, sorted. */
function initIds(containers: readonly Container[]): string[] {
  return containers.filter((c) => c.status === 'creating').map((c) => c.containerId).sort();
}
