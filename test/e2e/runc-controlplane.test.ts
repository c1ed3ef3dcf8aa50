// Both planes with the real runc: Kubernetes-aware policy on real containers.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { FakeKubeApiServer } from '../cmd/fake-kube-apiserver/server';
import { startControlPlane } from '../support/controlplane';
import type { Container } from '../../proto/gen/seccompagent/v1/dataplane';
import { removeCgroups } from '../support/cgroups';
import { startDataPlane } from '../support/dataplane';
import { metricsUrl, run, stop } from '../support/processes';
import { runcExec, sleepingContainer } from '../support/runc';
import { scratchDir } from '../support/scratch';
import { sleep, waitUntil } from '../support/wait';

const CONTAINERD = (ns: string, pod: string, container: string) => ({
  'io.kubernetes.cri.sandbox-namespace': ns,
  'io.kubernetes.cri.sandbox-name': pod,
  'io.kubernetes.cri.container-name': container,
  'io.kubernetes.cri.sandbox-uid': `uid-${pod}`,
});
const CRIO = (ns: string, pod: string, container: string) => ({
  'io.kubernetes.pod.namespace': ns,
  'io.kubernetes.pod.name': pod,
  'io.kubernetes.container.name': container,
  'io.kubernetes.pod.uid': `uid-${pod}`,
});

async function planes(t: TestContext, controlPlaneArgs?: string[]) {
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, [], dir);
  const cp = await startControlPlane(t, dp, controlPlaneArgs);
  return { dir, dp, cp };
}

for (const [runtime, annotations] of [['containerd', CONTAINERD('shop', 'web-1', 'app')], ['CRI-O', CRIO('shop', 'web-1', 'app')]] as const) {
  test(`seccomp-controlplane MKDIR_TMPL with ${runtime} annotations: mkdir lands with the suffix inside the rootfs, ../../../x stays inside, EEXIST is EEXIST`, async (t) => {
    const { dir, dp } = await planes(t);
    const { bundle, id } = await sleepingContainer(t, dir, dp.listenerSocket, 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}-{{.Container}}', ['mkdir', 'mkdirat'], annotations);
    const first = await runcExec(bundle, id, ['/bin/mkdir', '/tmp/a']);
    assert.equal(first.code, 0, first.stderr);
    assert.ok(fs.statSync(path.join(bundle.rootfs, 'tmp', 'a-shop-web-1-app')).isDirectory());
    assert.equal(fs.existsSync(path.join(bundle.rootfs, 'tmp', 'a')), false, 'the unsuffixed path must not be created');
    const again = await runcExec(bundle, id, ['/bin/mkdir', '/tmp/a']);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /File exists/);
    const escape = await runcExec(bundle, id, ['/bin/sh', '-c', 'cd /tmp && mkdir ../../../escape']);
    assert.equal(escape.code, 0, escape.stderr);
    assert.ok(fs.existsSync(path.join(bundle.rootfs, 'escape-shop-web-1-app')), 'resolved against the container root');
    assert.equal(fs.existsSync('/escape-shop-web-1-app'), false, 'never on the host');
    const relative = await runcExec(bundle, id, ['/bin/sh', '-c', 'cd /tmp && mkdir rel']);
    assert.equal(relative.code, 0, relative.stderr);
    assert.ok(fs.existsSync(path.join(bundle.rootfs, 'tmp', 'rel-shop-web-1-app')), 'relative to the caller cwd');
  });
}

test('seccomp-controlplane pod identity from the cgroup and the Kubernetes API stand-in; API server down and back', async (t) => {
  const api = await FakeKubeApiServer.create();
  t.after(() => api.stop());
  const uid1 = '6f1c2a4e-1111-4a5b-9c3d-00000000a001';
  const uid2 = '6f1c2a4e-2222-4a5b-9c3d-00000000a002';
  api.addPod({ name: 'kpod', namespace: 'kns', uid: uid1, nodeName: 'node-e2e' });
  const dir = scratchDir(t);
  const kubeconfig = api.writeKubeconfig(path.join(dir, 'kubeconfig'));
  const dp = await startDataPlane(t, [], dir);
  const cp = await startControlPlane(t, dp, ['--kubeconfig', kubeconfig, '--node-name', 'node-e2e', '--metrics-addr', '127.0.0.1:0']);
  const metrics = await metricsUrl(cp);
  const health = async () => (await (await fetch(`${metrics}/healthz`)).json()) as { status: string; kubernetes: string };
  await waitUntil(async () => (await health()).status === 'ok', 15_000, 'the control plane to be healthy with the API server synced');
  await cp.waitFor(/"msg":"[^"]*pods? cached|synced|reachable/i, 15_000).catch(() => undefined);

  const one = await sleepingContainer(t, dir, dp.listenerSocket, 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', ['mkdir', 'mkdirat'], {}, `/kubepods/besteffort/pod${uid1}/e2e-${process.pid}-1`);
  await waitUntil(async () => (await runcExec(one.bundle, one.id, ['/bin/mkdir', '-p', '/tmp'])).code === 0, 10_000, 'exec to work');
  const found = await runcExec(one.bundle, one.id, ['/bin/mkdir', '/tmp/k']);
  assert.equal(found.code, 0, found.stderr);
  assert.ok(fs.existsSync(path.join(one.bundle.rootfs, 'tmp', 'k-kns-kpod')), `resolved from the cgroup; log:\n${cp.output().slice(-3000)}`);

  await api.stop();
  const two = await sleepingContainer(t, dir, dp.listenerSocket, 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', ['mkdir', 'mkdirat'], {}, `/kubepods/besteffort/pod${uid2}/e2e-${process.pid}-2`);
  await cp.waitFor(/Kubernetes API server unreachable at/, 30_000);
  const began = Date.now();
  const whileDown = await runcExec(two.bundle, two.id, ['/bin/mkdir', '/tmp/u']);
  assert.equal(whileDown.code, 0, whileDown.stderr);
  assert.ok(Date.now() - began < 1500, 'a syscall never waits for the API server');
  assert.ok(fs.existsSync(path.join(two.bundle.rootfs, 'tmp', 'u')), 'unresolved: --unresolved-action continue makes the plain directory');
  assert.equal((cp.output().match(/Kubernetes API server unreachable at/g) ?? []).length, 1, 'the outage is reported once');
  assert.match(cp.output(), /is unresolved/);
  const during = await health();
  assert.equal(during.status, 'degraded');
  assert.equal(during.kubernetes, 'unreachable');
  assert.match(await (await fetch(`${metrics}/metrics`)).text(), /^seccomp_agent_kubernetes_api_reachable 0$/m);

  api.addPod({ name: 'kpod2', namespace: 'kns', uid: uid2, nodeName: 'node-e2e' }, { notify: false });
  await api.start();
  await cp.waitFor(/reachable again/, 30_000);
  await waitUntil(() => /resolved to pod kns\/kpod2/.test(cp.output()), 15_000, 'the unresolved container to be resolved again');
  assert.equal((await health()).status, 'ok');
  assert.match(await (await fetch(`${metrics}/metrics`)).text(), /^seccomp_agent_kubernetes_api_reachable 1$/m);
  const after = await runcExec(two.bundle, two.id, ['/bin/mkdir', '/tmp/u2']);
  assert.equal(after.code, 0, after.stderr);
  assert.ok(fs.existsSync(path.join(two.bundle.rootfs, 'tmp', 'u2-kns-kpod2')));
});

test('seccomp-controlplane restarted while the API server is stopped, with no node checkpoint: a container resolved earlier from its cgroup keeps its MKDIR_TMPL suffix (identity from the data plane\'s labels)', async (t) => {
  const api = await FakeKubeApiServer.create();
  t.after(() => api.stop());
  const uid = '6f1c2a4e-3333-4a5b-9c3d-00000000a003';
  api.addPod({ name: 'lpod', namespace: 'lns', uid, nodeName: 'node-e2e' });
  const dir = scratchDir(t);
  const kubeconfig = api.writeKubeconfig(path.join(dir, 'kubeconfig'));
  const dp = await startDataPlane(t, [], dir);
  // --state-dir '' (startControlPlane): no node checkpoint, so only the data plane can remember.
  const args = ['--kubeconfig', kubeconfig, '--node-name', 'node-e2e'];
  const first = await startControlPlane(t, dp, args);
  const podCgroup = `/kubepods/besteffort/pod${uid}`;
  const c = await sleepingContainer(t, dir, dp.listenerSocket, 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', ['mkdir', 'mkdirat'], {}, `${podCgroup}/e2e-${process.pid}-labels`);
  t.after(() => removeCgroups([podCgroup]));
  const listed = async () => (await new Promise<Container[]>((resolve, reject) => dp.client.listContainers({}, (err, r) => (err ? reject(err) : resolve(r!.containers))))).find((x) => x.containerId === c.id);
  await waitUntil(async () => (await listed())?.labels.resolution === 'cgroup', 15_000, () => `the container to resolve through its cgroup; log:\n${first.output().slice(-3000)}`);
  const before = (await listed())!;
  assert.deepEqual(before.labels, { resolution: 'cgroup', namespace: 'lns', pod: 'lpod', 'pod-uid': uid });
  const made = await runcExec(c.bundle, c.id, ['/bin/mkdir', '/tmp/before']);
  assert.equal(made.code, 0, made.stderr);
  assert.ok(fs.existsSync(path.join(c.bundle.rootfs, 'tmp', 'before-lns-lpod')));

  await api.stop();
  first.child.kill('SIGKILL');
  await first.exited;
  const second = await startControlPlane(t, dp, args);
  // The new one read the snapshot and decided about the container, one way or the other.
  await second.waitFor(new RegExp(`container ${c.id} (keeps the pod identity|is unresolved)`), 15_000);
  await second.waitFor(/Kubernetes API server unreachable at/, 30_000);
  await sleep(500); // a push it would make is answered within this
  const after = (await listed())!;
  assert.deepEqual(after.labels, before.labels, `the labels the data plane holds; log:\n${second.output().slice(-3000)}`);
  assert.equal(after.policyVersion, before.policyVersion, 'nothing changed, so nothing was pushed again');
  const again = await runcExec(c.bundle, c.id, ['/bin/mkdir', '/tmp/after']);
  assert.equal(again.code, 0, again.stderr);
  assert.ok(fs.existsSync(path.join(c.bundle.rootfs, 'tmp', 'after-lns-lpod')), 'the suffix survived the restart during the outage');
  assert.equal(fs.existsSync(path.join(c.bundle.rootfs, 'tmp', 'after')), false);
  assert.match(second.output(), new RegExp(`container ${c.id} keeps the pod identity the data plane holds for it \\(lns/lpod`));
});

test('seccomp-controlplane DEFAULT_ACTION=kill-container kills that container and nothing else', async (t) => {
  const { dir, dp } = await planes(t);
  const victim = await sleepingContainer(t, dir, dp.listenerSocket, 'DEFAULT_ACTION=kill-container', ['mkdir', 'mkdirat']);
  const bystander = await sleepingContainer(t, dir, dp.listenerSocket, '', ['mkdir', 'mkdirat']);
  const result = await runcExec(victim.bundle, victim.id, ['/bin/sh', '-c', 'mkdir /tmp/z; echo survived']);
  assert.doesNotMatch(result.stdout, /survived/);
  await waitUntil(async () => {
    const state = await run('runc', ['--root', victim.bundle.stateRoot, 'state', victim.id]);
    return state.code !== 0 || /"status": "stopped"/.test(state.stdout);
  }, 10_000, 'the victim to stop');
  const other = await run('runc', ['--root', bystander.bundle.stateRoot, 'state', bystander.id]);
  assert.match(other.stdout, /"status": "running"/);
  assert.equal(fs.existsSync(path.join(victim.bundle.rootfs, 'tmp', 'z')), false);
});

test('seccomp-controlplane DEFAULT_ACTION=freeze-container: the mkdir stays blocked while frozen; with no control plane, thawed, it completes', async (t) => {
  const { dir, dp, cp } = await planes(t, ['--no-kubernetes', '--fast-path=false']); // decided by the control plane alone
  const c = await sleepingContainer(t, dir, dp.listenerSocket, 'DEFAULT_ACTION=freeze-container', ['mkdir', 'mkdirat']);
  const runc = (...args: string[]) => run('runc', ['--root', c.bundle.stateRoot, ...args]);
  const paused = async () => /"status": "paused"/.test((await runc('state', c.id)).stdout);
  let finished = false;
  const mkdir = runcExec(c.bundle, c.id, ['/bin/mkdir', '/tmp/frozen']).finally(() => (finished = true));
  await waitUntil(paused, 10_000, 'runc to report the container paused');
  await sleep(1000);
  assert.equal(finished, false, 'the mkdir is still blocked a second after the container froze');
  assert.ok(await paused(), 'and the container is still frozen');
  assert.equal(fs.existsSync(path.join(c.bundle.rootfs, 'tmp', 'frozen')), false);

  // Which answer the thawed mkdir sees is the freezer's to choose (docs/emulation.md): the v1
  // freezer interrupts the notified call, so thawed it restarts as a new notification that the
  // data plane's default (continue, no control plane now) answers; the v2 freezer usually lets
  // the agent's answer (EPERM, sent after freezing) in first. Either way exactly one of them, and
  // the directory exists exactly when the call continued.
  await stop(cp.child);
  await waitUntil(async () => (await dp.status()).controlPlane === undefined, 10_000, 'the control plane to detach');
  assert.equal((await runc('resume', c.id)).code, 0);
  const result = await mkdir;
  const made = fs.existsSync(path.join(c.bundle.rootfs, 'tmp', 'frozen'));
  if (result.code === 0) {
    assert.ok(made, 'a mkdir that succeeded made its directory');
    const counters = (await dp.status()).counters!;
    assert.ok(counters.answeredDefaultNoControlPlane + counters.answeredDefaultDetached > 0n, 'the restarted call was answered by the default');
  } else {
    assert.match(result.stderr, /Operation not permitted/, `the freeze's own answer, nothing else: ${result.stderr}`);
    assert.equal(made, false, 'an EPERM mkdir made nothing');
  }
  assert.equal(await paused(), false);
});

test('seccomp-controlplane MOUNT_PROC: mount of proc is emulated where allowed, refused without CAP_SYS_ADMIN when asked, and sysfs is not emulated', async (t) => {
  const { dir, dp } = await planes(t);
  const allowed = await sleepingContainer(t, dir, dp.listenerSocket, 'MOUNT_PROC=true', ['mount']);
  const ok = await runcExec(allowed.bundle, allowed.id, ['/bin/sh', '-c', 'mkdir -p /tmp/p && mount -t proc proc /tmp/p && test -e /tmp/p/1/status && echo mounted']);
  assert.match(ok.stdout, /mounted/, ok.stderr);
  const sysfs = await runcExec(allowed.bundle, allowed.id, ['/bin/sh', '-c', 'mkdir -p /tmp/s && mount -t sysfs sysfs /tmp/s']);
  assert.notEqual(sysfs.code, 0, 'sysfs is not in the policy: the kernel refuses it for an unprivileged container');
  const needsAdmin = await sleepingContainer(t, dir, dp.listenerSocket, 'MOUNT_PROC=true\nMOUNT_NEED_CAP_ADMIN=true', ['mount']);
  const refused = await runcExec(needsAdmin.bundle, needsAdmin.id, ['/bin/sh', '-c', 'mkdir -p /tmp/p && mount -t proc proc /tmp/p']);
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /Operation not permitted|permission denied/i);
});

test('seccomp-controlplane killed and restarted while a workload runs: no syscall fails, the default answers the gap, the new one resumes', async (t) => {
  const { dir, dp, cp } = await planes(t, ['--no-kubernetes', '--fast-path=false']); // the gap is the point here (test/e2e/runc-fast-path closes it)
  const c = await sleepingContainer(t, dir, dp.listenerSocket, 'MKDIR_TMPL=-sfx', ['mkdir', 'mkdirat'], CONTAINERD('n', 'p', 'c'));
  const loop = 'i=0; while [ ! -e /stop ]; do mkdir /tmp/d$i || echo FAIL $i; i=$((i+1)); done; echo made $i';
  const workload = runcExec(c.bundle, c.id, ['/bin/sh', '-c', loop]);
  const tmp = path.join(c.bundle.rootfs, 'tmp');
  const suffixed = () => fs.readdirSync(tmp).filter((n) => n.endsWith('-sfx')).length;
  await waitUntil(() => suffixed() > 20, 10_000, 'suffixed directories before the kill');
  cp.child.kill('SIGKILL');
  await cp.exited;
  await waitUntil(() => fs.readdirSync(tmp).some((n) => /^d\d+$/.test(n)), 10_000, 'the default action to answer the gap');
  const restarted = await startControlPlane(t, dp, ['--no-kubernetes', '--fast-path=false']);
  const before = suffixed();
  await waitUntil(() => suffixed() > before + 20, 10_000, 'the new control plane to decide again');
  fs.writeFileSync(path.join(c.bundle.rootfs, 'stop'), '');
  const result = await workload;
  assert.equal(result.code, 0, result.stderr);
  assert.doesNotMatch(result.stdout, /FAIL/);
  assert.match(result.stdout, /made \d+/);
  assert.equal(restarted.child.exitCode, null);
  const counters = await dp.settledCounters();
  assert.ok(counters.answeredDefaultNoControlPlane + counters.answeredDefaultDetached > 0n);
  assert.equal(counters.answeredDefaultDeadline, 0n);
});
