// Both planes and the Kubernetes API stand-in, for the policy resources' tests: a data plane, a
// real control plane pointed at the stand-in, and mkdir under a real filter as a pod's container.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { FakeKubeApiServer, type PolicyInput, type PolicyResource } from '../cmd/fake-kube-apiserver/server';
import { socketArgs } from './controlplane';
import { CONTROLPLANE_MAIN } from './paths';
import { startDataPlane, type RunningDataPlane } from './dataplane';
import { metricsUrl, start, type Started } from './processes';
import { scratchDir } from './scratch';
import { runUnderFilter } from './workload';

export const NODE = 'node-policy';

/** The containerd CRI annotations of a pod's container: the identity without the API server. */
export function containerd(namespace: string, pod: string, container: string): Record<string, string> {
  return {
    'io.kubernetes.cri.sandbox-namespace': namespace,
    'io.kubernetes.cri.sandbox-name': pod,
    'io.kubernetes.cri.container-name': container,
  };
}

export interface PolicyPlanes {
  dir: string;
  api: FakeKubeApiServer;
  kubeconfig: string;
  stateDir: string;
  dp: RunningDataPlane;
  cp: Started;
  /** The control plane's metrics URL. */
  metrics: string;
}

/** A control plane against the stand-in with small timings, its state dir and metrics in the scratch dir. */
export async function startPolicyControlPlane(t: TestContext, dp: RunningDataPlane, kubeconfig: string, stateDir: string, extra: string[] = []): Promise<{ cp: Started; metrics: string }> {
  const cp = start(t, process.execPath, [
    CONTROLPLANE_MAIN, ...socketArgs(dp), '--kubeconfig', kubeconfig, '--node-name', NODE, '--state-dir', stateDir,
    '--metrics-addr', '127.0.0.1:0', '--status-period', '300ms', '--reconnect-max', '300ms', '--log-level', 'debug', ...extra,
  ]);
  await cp.waitFor(/attached to the data plane/, 20_000);
  return { cp, metrics: await metricsUrl(cp) };
}

export async function policyPlanes(t: TestContext, setup: (api: FakeKubeApiServer) => void = () => undefined, extra: string[] = []): Promise<PolicyPlanes> {
  const dir = scratchDir(t);
  const api = await FakeKubeApiServer.create();
  t.after(() => api.stop());
  setup(api);
  const kubeconfig = api.writeKubeconfig(path.join(dir, 'kubeconfig'));
  const stateDir = path.join(dir, 'state');
  const dp = await startDataPlane(t, [], dir);
  const { cp, metrics } = await startPolicyControlPlane(t, dp, kubeconfig, stateDir, extra);
  return { dir, api, kubeconfig, stateDir, dp, cp, metrics };
}

/** mkdir TARGET under a real filter, as container `annotations`; 'made' or the error text. */
export async function mkdirAs(dp: RunningDataPlane, annotations: Record<string, string>, target: string): Promise<string> {
  const r = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], annotations }, ['/bin/sh', '-c', `mkdir '${target}' 2>&1 && echo made`]);
  const out = `${r.stdout}${r.stderr}`;
  if (/made/.test(out) && fs.existsSync(target)) return 'made';
  if (/Operation not permitted/.test(out)) return 'EPERM';
  if (/Permission denied/.test(out)) return 'EACCES';
  return `other: ${out.trim()}`;
}

/** A SeccompNotifyPolicy or ClusterSeccompNotifyPolicy, as kubectl apply would make it. */
export function applyPolicy(api: FakeKubeApiServer, resource: PolicyResource, input: PolicyInput): void {
  api.applyPolicy(resource, input);
}

export async function metricsText(metrics: string): Promise<string> {
  return (await fetch(`${metrics}/metrics`)).text();
}
