// Both planes under containerd 1.6's CRI plugin, driven over CRI gRPC as a kubelet drives it
// (RunPodSandbox, CreateContainer with a Localhost seccomp profile, StartContainer, ExecSync,
// then the kubelet's teardown), with runc and with crun as the runtime handler. The pod identity
// comes from containerd's own io.kubernetes.cri.* annotations; nothing is hand-written.
import assert from 'node:assert/strict';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { startAgent, type Agent } from '../support/agent';
import { containerdForTest, type Containerd } from '../support/containerd';
import type { ContainerConfig, NamespaceOption, PodSandboxConfig } from '../support/cri-client';

import { IMAGE } from '../support/oci-image';
import { requireRunc } from '../support/runc';
import { scratchDir } from '../support/scratch';
import { writeNotifyProfile } from '../support/seccomp-profile';
import { waitUntil } from '../support/wait';

const NAMESPACE = 'shop';
// Host network: containerd 1.6 needs a CNI result with eth0 otherwise; the hostname stays empty.
const HOST_NETWORK: NamespaceOption = { network: 'NODE', pid: 'CONTAINER', ipc: 'POD' };

/** What a kubelet sends for a pod: metadata, log directory, pod cgroup (cgroupfs driver). */
function sandboxConfig(containerd: Containerd, name: string): PodSandboxConfig {
  const uid = crypto.randomUUID();
  return {
    metadata: { name, uid, namespace: NAMESPACE, attempt: 0 },
    hostname: '',
    logDirectory: path.join(containerd.logRoot, `${NAMESPACE}_${name}_${uid}`),
    linux: { cgroupParent: containerd.podCgroupParent(uid), securityContext: { namespaceOptions: HOST_NETWORK } },
  };
}

function appConfig(profile: string): ContainerConfig {
  return {
    metadata: { name: 'app', attempt: 0 },
    image: { image: IMAGE },
    command: ['/bin/sleep', '600'],
    logPath: 'app/0.log',
    linux: { securityContext: { namespaceOptions: HOST_NETWORK, seccomp: { profileType: 'Localhost', localhostRef: profile } } },
  };
}

async function podLifecycle(t: TestContext, containerd: Containerd, agent: Agent, profile: string, handler: 'runc' | 'crun'): Promise<void> {
  const { cri } = containerd;
  const podName = `web-${handler}`;
  const sandbox = sandboxConfig(containerd, podName);
  const podId = await cri.runPodSandbox(sandbox, handler);
  // On failure too, so the next handler starts from an empty node (containerd 1.6 answers
  // NOT_FOUND for a pod already removed, so only one still listed).
  t.after(async () => {
    if (!(await cri.listPodSandbox()).some((p) => p.id === podId)) return;
    await cri.stopPodSandbox(podId);
    await cri.removePodSandbox(podId);
  });
  const containerId = await cri.createContainer(podId, appConfig(profile), sandbox);
  const began = process.hrtime.bigint();
  await cri.startContainer(containerId);
  t.diagnostic(`CRI StartContainer (${handler}, Localhost profile with listenerPath): ${(Number(process.hrtime.bigint() - began) / 1e6).toFixed(1)} ms`);

  await waitUntil(() => agent.fdsOf(containerId).length === 1, 15_000, `the init fd of ${containerId}`);
  const [init] = agent.fdsOf(containerId);
  assert.equal(init.status, 'creating');
  assert.equal(init.pid, await cri.containerPid(containerId), 'the pid the runtime sent is the container init CRI reports');
  assert.equal(init.metadata, 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}-{{.Container}}', 'containerd passes listenerMetadata through');
  assert.equal(init.ociVersion, handler === 'crun' ? '0.2.0' : '1.0.2-dev');
  // containerd's own annotations, from the kubelet's PodSandboxConfig and ContainerConfig.
  assert.equal(init.annotations['io.kubernetes.cri.container-type'], 'container');
  assert.equal(init.annotations['io.kubernetes.cri.sandbox-id'], podId);
  assert.equal(init.annotations['io.kubernetes.cri.sandbox-namespace'], NAMESPACE);
  assert.equal(init.annotations['io.kubernetes.cri.sandbox-name'], podName);
  assert.equal(init.annotations['io.kubernetes.cri.sandbox-uid'], sandbox.metadata.uid);
  assert.equal(init.annotations['io.kubernetes.cri.container-name'], 'app');
  assert.equal(init.annotations['io.kubernetes.cri.image-name'], IMAGE);

  // Each ExecSync is its own fd with status running.
  for (const dir of ['a', 'b']) {
    const made = await cri.execSync(containerId, ['/bin/mkdir', `/tmp/${dir}`]);
    assert.equal(made.exitCode, 0, `mkdir /tmp/${dir}: ${made.stderr.toString()}`);
  }
  await waitUntil(() => agent.fdsOf(containerId).length === 3, 15_000, `two exec fds of ${containerId}`);
  const execs = agent.fdsOf(containerId).slice(1);
  assert.deepEqual(execs.map((e) => e.status), ['running', 'running']);
  assert.equal(new Set([init.handle, ...execs.map((e) => e.handle)]).size, 3, 'one handle per fd');
  for (const exec of execs) {
    assert.equal(exec.annotations['io.kubernetes.cri.sandbox-name'], podName);
    // runc reports the container's init for an exec; crun sends pid 0 and bundle ".".
    if (handler === 'crun') assert.deepEqual([exec.pid, exec.bundle], [0, '.']);
    else assert.equal(exec.pid, init.pid);
  }
  const tmp = `/proc/${init.pid}/root/tmp`;
  const suffix = `-${NAMESPACE}-${podName}-app`;
  for (const dir of ['a', 'b']) {
    assert.ok(fs.statSync(path.join(tmp, `${dir}${suffix}`)).isDirectory(), `${dir}${suffix} in the container; /tmp has ${fs.readdirSync(tmp).join(', ')}`);
    assert.equal(fs.existsSync(path.join(tmp, dir)), false, `the unsuffixed /tmp/${dir} must not be made`);
  }

  // The agent's containers are the runtime's: data plane, control plane and CRI agree.
  const running = (await cri.listContainers({ state: 'CONTAINER_RUNNING' })).map((c) => c.id).sort();
  assert.deepEqual(running, [containerId]);
  await agent.listsAgree(running, 'CRI');

  // The kubelet's teardown: the fds go with the container.
  await cri.stopContainer(containerId, 0);
  await cri.removeContainer(containerId);
  await cri.stopPodSandbox(podId);
  await cri.removePodSandbox(podId);
  await agent.gone(containerId);
  assert.deepEqual(await cri.listPodSandbox(), []);
}

test('containerd 1.6 CRI (kubelet-style calls): MKDIR_TMPL suffix from containerd\'s annotations, one running fd per ExecSync, lists agree; runc and crun handlers', async (t) => {
  requireRunc();
  // Registered first, so it is cleaned first: every pod removed and containerd stopped before
  // the planes stop and the scratch folder goes.
  const containerd = await containerdForTest(t, { runc: 'runc', crun: 'crun' });
  const version = await containerd.cri.version();
  assert.equal(version.runtimeName, 'containerd');
  assert.equal(version.runtimeApiVersion, 'v1');
  t.diagnostic(`containerd ${version.runtimeVersion}`);
  const dir = scratchDir(t);
  const agent = await startAgent(t, dir);
  const profile = writeNotifyProfile(path.join(dir, 'notify-mkdir.json'), agent.dp.listenerSocket, 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}-{{.Container}}', ['mkdir', 'mkdirat']);
  await t.test('runc handler', (st) => podLifecycle(st, containerd, agent, profile, 'runc'));
  await t.test('crun handler (the wrapper as BinaryName)', (st) => podLifecycle(st, containerd, agent, profile, 'crun'));
});
