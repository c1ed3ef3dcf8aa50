// The real control plane as the bench runs it: `node dist/controlplane/main.js --no-kubernetes`
// (or against the loopback Kubernetes API stand-in) attached to a bench data plane, its log in the
// scenario's temp dir; and how a scenario sees that a container's policy is in force.
import * as net from 'node:net';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Container } from '../proto/gen/seccompagent/v1/dataplane';
import type { Child, Children } from './children';
import type { DataPlaneProcess } from './dataplane-process';
import { TOOLS } from './tools';

/** Starts it with `extra` flags and returns once the data plane reports it attached. */
export async function startRealControlPlane(children: Children, dataplane: DataPlaneProcess, dir: string, extra: string[]): Promise<Child> {
  const child = children.start('control plane', process.execPath, [
    TOOLS.controlplaneMain, '--grpc-socket', dataplane.grpcSocket, '--control-socket', dataplane.controlSocket, '--no-kubernetes', '--state-dir', '', '--log-level', 'warn', ...extra,
  ], { logFile: path.join(dir, 'controlplane.log') });
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (!child.alive() || Date.now() > deadline) {
      throw new Error(`the control plane did not attach to the data plane: ${child.stderr().trim() || 'no output'}`);
    }
    try {
      if ((await dataplane.status()).controlPlane !== undefined) return child;
    } catch {
      // the data plane is busy starting; ask again
    }
    await sleep(20);
  }
}

/** The pod the MKDIR_TMPL rows' workload is, by containerd annotations: "-bench-pod" suffixes. */
export const BENCH_POD = { namespace: 'bench', pod: 'pod' } as const;

/** seccomp-run flags of a workload whose profile says MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}, as BENCH_POD. */
export const MKDIR_TMPL_RUN_ARGS: readonly string[] = [
  '--metadata', 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}',
  '--annotation', `io.kubernetes.cri.sandbox-namespace=${BENCH_POD.namespace}`,
  '--annotation', `io.kubernetes.cri.sandbox-name=${BENCH_POD.pod}`,
];

/**
 * Starts it against a Kubernetes API (the loopback stand-in's kubeconfig) with its metrics on
 * 127.0.0.1:`metricsPort`, and returns once `policies` policy resources are ready and it is attached.
 */
export async function startKubeControlPlane(
  children: Children, dataplane: DataPlaneProcess, dir: string,
  kube: { kubeconfig: string; nodeName: string; metricsPort: number; policies: number },
): Promise<Child> {
  const child = children.start('control plane', process.execPath, [
    TOOLS.controlplaneMain, '--grpc-socket', dataplane.grpcSocket, '--control-socket', dataplane.controlSocket, '--kubeconfig', kube.kubeconfig,
    '--node-name', kube.nodeName, '--state-dir', '', '--metrics-addr', `127.0.0.1:${kube.metricsPort}`, '--ctl-socket', 'off', '--log-level', 'warn',
  ], { logFile: path.join(dir, 'controlplane.log') });
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (!child.alive() || Date.now() > deadline) throw new Error(`the control plane did not load the ${kube.policies} policies: ${child.stderr().trim() || 'no output'}`);
    try {
      const text = await (await fetch(`http://127.0.0.1:${kube.metricsPort}/metrics`)).text();
      const ready = [...text.matchAll(/^seccompagent_policies\{scope="[^"]+",ready="True"\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
      if (ready === kube.policies && (await dataplane.status()).controlPlane !== undefined) return child;
    } catch {
      // not serving yet
    }
    await sleep(50);
  }
}

/** A TCP port free on 127.0.0.1 now (for a control plane's metrics). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** The data plane's record of the container `containerId` (seccomp-run --id), or undefined. */
export function containerRecord(dataplane: DataPlaneProcess, containerId: string): Promise<Container | undefined> {
  return new Promise((resolve) => dataplane.client.listContainers({}, (err, r) => resolve(err ? undefined : r?.containers.find((c) => c.containerId === containerId))));
}

/**
 * Waits until the data plane holds a pushed policy for `containerId`; its version, or '' when
 * none came by `timeoutMs`.
 */
export async function waitForPolicy(dataplane: DataPlaneProcess, containerId: string, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const version = (await containerRecord(dataplane, containerId))?.policyVersion ?? '';
    if (version !== '' || Date.now() >= deadline) return version;
    await sleep(10);
  }
}
