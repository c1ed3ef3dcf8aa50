// Both planes under Podman (`podman run --security-opt seccomp=PROFILE`, `podman exec`) with
// runc and with crun as --runtime. Podman passes listenerPath through and adds no pod
// annotations of its own: the pod identity is what `--annotation` gives it, as for any user.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { startAgent, type Agent } from '../support/agent';

import { IMAGE } from '../support/oci-image';
import { podmanForTest, type Podman } from '../support/podman';
import { scratchDir } from '../support/scratch';
import { writeNotifyProfile } from '../support/seccomp-profile';
import { waitUntil } from '../support/wait';

async function containerLifecycle(t: TestContext, podman: Podman, agent: Agent, profile: string, runtime: 'runc' | 'crun'): Promise<void> {
  const pod = `web-${runtime}`;
  const began = process.hrtime.bigint();
  const id = await podman.ok([
    'run', '--detach', '--network', 'none', '--cgroup-parent', podman.cgroupParent, '--runtime', podman.runtime(runtime), '--security-opt', `seccomp=${profile}`,
    '--annotation', 'io.kubernetes.cri.sandbox-namespace=shop', '--annotation', `io.kubernetes.cri.sandbox-name=${pod}`,
    '--annotation', 'io.kubernetes.cri.container-name=app', IMAGE,
  ]);
  t.diagnostic(`podman run --detach (${runtime}, seccomp profile with listenerPath): ${(Number(process.hrtime.bigint() - began) / 1e6).toFixed(1)} ms`);
  t.after(() => podman.podman(['rm', '--force', '--time', '0', id]));

  await waitUntil(() => agent.fdsOf(id).length === 1, 15_000, `the init fd of ${id}`);
  const [init] = agent.fdsOf(id);
  assert.equal(init.status, 'creating');
  assert.equal(init.pid, Number(await podman.ok(['inspect', '--format', '{{.State.Pid}}', id])));
  assert.equal(init.ociVersion, runtime === 'crun' ? '0.2.0' : '1.0.2-dev');
  assert.equal(init.metadata, 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}-{{.Container}}', 'Podman passes listenerMetadata through');
  assert.equal(init.annotations['io.kubernetes.cri.sandbox-name'], pod);
  assert.equal(init.annotations['io.podman.annotations.seccomp'], profile, 'Podman\'s own annotations come along');

  for (const dir of ['a', 'b']) await podman.ok(['exec', id, '/bin/mkdir', `/tmp/${dir}`]);
  await waitUntil(() => agent.fdsOf(id).length === 3, 15_000, `two exec fds of ${id}`);
  const execs = agent.fdsOf(id).slice(1);
  assert.deepEqual(execs.map((e) => e.status), ['running', 'running']);
  assert.equal(new Set([init.handle, ...execs.map((e) => e.handle)]).size, 3, 'one handle per fd');
  for (const exec of execs) {
    if (runtime === 'crun') assert.deepEqual([exec.pid, exec.bundle], [0, '.']);
    else assert.equal(exec.pid, init.pid);
  }
  const tmp = `/proc/${init.pid}/root/tmp`;
  for (const dir of ['a', 'b']) {
    assert.ok(fs.statSync(path.join(tmp, `${dir}-shop-${pod}-app`)).isDirectory(), `/tmp has ${fs.readdirSync(tmp).join(', ')}`);
    assert.equal(fs.existsSync(path.join(tmp, dir)), false, `the unsuffixed /tmp/${dir} must not be made`);
  }

  const running = (await podman.ok(['ps', '--quiet', '--no-trunc'])).split('\n').filter(Boolean).sort();
  assert.deepEqual(running, [id]);
  await agent.listsAgree(running, 'Podman');

  await podman.ok(['rm', '--force', '--time', '0', id]);
  await agent.gone(id);
}

test('podman run --security-opt seccomp / podman exec: MKDIR_TMPL suffix from --annotation, one running fd per exec, lists agree; runc and crun runtimes', async (t) => {
  // Registered first, so it is cleaned first: every container removed before the planes stop.
  const podman = await podmanForTest(t);
  const dir = scratchDir(t);
  const agent = await startAgent(t, dir);
  const profile = writeNotifyProfile(path.join(dir, 'notify-mkdir.json'), agent.dp.listenerSocket, 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}-{{.Container}}', ['mkdir', 'mkdirat']);
  await t.test('--runtime runc', (st) => containerLifecycle(st, podman, agent, profile, 'runc'));
  await t.test('--runtime crun (the wrapper)', (st) => containerLifecycle(st, podman, agent, profile, 'crun'));
});
