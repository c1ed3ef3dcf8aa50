// Both planes with crun on its own (`crun run`, `crun exec`), through the wrapper that unmounts
// the hybrid v2 hierarchy when it has controllers. crun sends ociVersion "0.2.0" and, for an
// exec, pid 0 and bundle ".": the control plane must take such an fd's cgroup from the init.
import assert from 'node:assert/strict';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { FakeKubeApiServer } from '../cmd/fake-kube-apiserver/server';
import { startAgent, type Agent } from '../support/agent';
import { removeCgroups } from '../support/cgroups';
import { crunExec, crunList, crunRuntime, runCrunContainer, type CrunRuntime } from '../support/crun';

import { makeBundle, type Bundle } from '../support/runc';
import { scratchDir } from '../support/scratch';
import { waitUntil } from '../support/wait';

const CONTAINERD = {
  'io.kubernetes.cri.sandbox-namespace': 'shop',
  'io.kubernetes.cri.sandbox-name': 'web-crun',
  'io.kubernetes.cri.container-name': 'app',
};

/** A crun container that sleeps, its init fd registered. */
async function sleepingContainer(
  crun: CrunRuntime, agent: Agent, dir: string, metadata: string,
  annotations: Record<string, string>, cgroupsPath?: string,
): Promise<{ bundle: Bundle; id: string }> {
  const id = `crun-${crypto.randomBytes(4).toString('hex')}`;
  const bundle = makeBundle(path.join(dir, id), ['/bin/sh', '-c', 'echo started; exec sleep 600'], { listenerPath: agent.dp.listenerSocket, listenerMetadata: metadata, syscalls: ['mkdir', 'mkdirat'] }, annotations, cgroupsPath);
  const proc = runCrunContainer(crun, bundle, id);
  await proc.waitFor(/started/, 20_000);
  await waitUntil(() => agent.fdsOf(id).length === 1, 10_000, `the init fd of ${id}`);
  return { bundle, id };
}

test('crun run / crun exec: ociVersion 0.2.0, each exec its own running fd with pid 0 and bundle ".", MKDIR_TMPL suffix from the annotations, lists agree', async (t) => {
  const crun = crunRuntime(t);
  const dir = scratchDir(t);
  const agent = await startAgent(t, dir);
  const { bundle, id } = await sleepingContainer(crun, agent, dir, 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}-{{.Container}}', CONTAINERD);
  const [init] = agent.fdsOf(id);
  const listed = await crunList(crun);
  assert.deepEqual(listed.map((c) => [c.id, c.status]), [[id, 'running']]);
  assert.deepEqual([init.status, init.pid, init.bundle, init.ociVersion], ['creating', listed[0].pid, bundle.dir, '0.2.0']);

  for (const name of ['a', 'b']) {
    const made = await crunExec(crun, id, ['/bin/mkdir', `/tmp/${name}`]);
    assert.equal(made.code, 0, made.stderr);
  }
  await waitUntil(() => agent.fdsOf(id).length === 3, 10_000, 'two exec fds');
  const execs = agent.fdsOf(id).slice(1);
  assert.deepEqual(execs.map((e) => [e.status, e.pid, e.bundle, e.ociVersion]), [['running', 0, '.', '0.2.0'], ['running', 0, '.', '0.2.0']]);
  assert.equal(new Set([init.handle, ...execs.map((e) => e.handle)]).size, 3, 'one handle per fd');
  for (const name of ['a', 'b']) {
    assert.ok(fs.statSync(path.join(bundle.rootfs, 'tmp', `${name}-shop-web-crun-app`)).isDirectory());
    assert.equal(fs.existsSync(path.join(bundle.rootfs, 'tmp', name)), false, 'the unsuffixed path must not be made');
  }

  // A failed exec is a connection without an fd (crun connects before it creates the process):
  // refused and counted, and the container is served as before.
  const rejectedBefore = (await agent.dp.status()).counters!.ingestRejected;
  const missing = await crunExec(crun, id, ['/bin/no-such-command']);
  assert.notEqual(missing.code, 0);
  await waitUntil(async () => (await agent.dp.status()).counters!.ingestRejected === rejectedBefore + 1n, 10_000, 'the fd-less connection to be refused');
  const again = await crunExec(crun, id, ['/bin/mkdir', '/tmp/c']);
  assert.equal(again.code, 0, again.stderr);
  assert.ok(fs.existsSync(path.join(bundle.rootfs, 'tmp', 'c-shop-web-crun-app')));

  const ids = (await crunList(crun)).map((c) => c.id).sort();
  await agent.listsAgree(ids, 'crun');
});

test('crun exec fds (pid 0) of a container without pod annotations resolve through the init\'s cgroup: MKDIR_TMPL suffix from the Kubernetes API stand-in', async (t) => {
  const api = await FakeKubeApiServer.create();
  t.after(() => api.stop());
  const uid = crypto.randomUUID();
  api.addPod({ name: 'kpod', namespace: 'kns', uid, nodeName: 'node-e2e' });
  const crun = crunRuntime(t);
  const dir = scratchDir(t);
  const podCgroup = `/kubepods/besteffort/pod${uid}`;
  t.after(() => removeCgroups([podCgroup]));
  const agent = await startAgent(t, dir, ['--kubeconfig', api.writeKubeconfig(path.join(dir, 'kubeconfig')), '--node-name', 'node-e2e']);
  const { bundle, id } = await sleepingContainer(crun, agent, dir, 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', {}, `${podCgroup}/${crypto.randomBytes(32).toString('hex')}`);
  await waitUntil(async () => (await agent.controlPlaneContainers()).cgroup === 1, 15_000, 'the init to resolve through its cgroup and the pod cache');

  const made = await crunExec(crun, id, ['/bin/mkdir', '/tmp/k']);
  assert.equal(made.code, 0, made.stderr);
  await waitUntil(() => agent.fdsOf(id).length === 2, 10_000, 'the exec fd');
  const exec = agent.fdsOf(id)[1];
  assert.deepEqual([exec.status, exec.pid], ['running', 0]);
  const tmp = path.join(bundle.rootfs, 'tmp');
  assert.ok(fs.existsSync(path.join(tmp, 'k-kns-kpod')), `the exec's mkdir gets the pod's suffix; /tmp has ${fs.readdirSync(tmp).join(', ')}; log:\n${agent.cp.output().slice(-3000)}`);
  assert.equal(fs.existsSync(path.join(tmp, 'k')), false);
});

test('crun exec with DEFAULT_ACTION=kill-container: the exec fd (pid 0) kills the container through its init, the mkdir is not made', async (t) => {
  const crun = crunRuntime(t);
  const dir = scratchDir(t);
  const agent = await startAgent(t, dir);
  const victim = await sleepingContainer(crun, agent, dir, 'DEFAULT_ACTION=kill-container', {});
  const bystander = await sleepingContainer(crun, agent, dir, 'DEFAULT_ACTION=kill-container', {});
  const result = await crunExec(crun, victim.id, ['/bin/sh', '-c', 'mkdir /tmp/z; echo survived']);
  assert.doesNotMatch(result.stdout, /survived/);
  // Watch delivers the exec fd's containerAdded on its own schedule: the kill can come first.
  await waitUntil(() => agent.fdsOf(victim.id).length === 2, 10_000, 'the exec fd on Watch');
  assert.deepEqual(agent.fdsOf(victim.id).slice(1).map((e) => [e.status, e.pid]), [['running', 0]]);
  await waitUntil(async () => !(await crunList(crun)).some((c) => c.id === victim.id && c.status === 'running'), 10_000, 'the victim to stop');
  assert.deepEqual((await crunList(crun)).filter((c) => c.status === 'running').map((c) => c.id), [bystander.id]);
  assert.equal(fs.existsSync(path.join(victim.bundle.rootfs, 'tmp', 'z')), false);
});
