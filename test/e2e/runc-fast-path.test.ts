// Issue 9's promise on real runc containers: the answer a container gets does not depend on which
// process is up. Each container's policy is compiled by the control plane, pushed to the data
// plane, and answered there natively (the fast path), with or without a control plane attached.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { AnsweredBy, type Container } from '../../proto/gen/seccompagent/v1/dataplane';
import { startControlPlane } from '../support/controlplane';
import { startDataPlane, watchEvents, type RunningDataPlane } from '../support/dataplane';
import { run } from '../support/processes';
import { runcExec, sleepingContainer } from '../support/runc';
import { scratchDir } from '../support/scratch';
import { waitUntil } from '../support/wait';

const CONTAINERD = {
  'io.kubernetes.cri.sandbox-namespace': 'shop',
  'io.kubernetes.cri.sandbox-name': 'web-1',
  'io.kubernetes.cri.container-name': 'app',
  'io.kubernetes.cri.sandbox-uid': 'uid-web-1',
};

function listContainers(dp: RunningDataPlane): Promise<Container[]> {
  return new Promise((resolve, reject) => dp.client.listContainers({}, (err, r) => (err ? reject(err) : resolve(r!.containers))));
}

/** Waits until every container the data plane lists has a policy in force; returns the listing. */
async function policiesInForce(dp: RunningDataPlane, count: number): Promise<Container[]> {
  let listed: Container[] = [];
  await waitUntil(async () => {
    listed = await listContainers(dp);
    return listed.length >= count && listed.every((c) => c.policyVersion !== '');
  }, 15_000, `${count} containers with a policy in force`);
  return listed;
}

async function stopped(bundle: { stateRoot: string }, id: string): Promise<boolean> {
  const state = await run('runc', ['--root', bundle.stateRoot, 'state', id]);
  return state.code !== 0 || /"status": "stopped"/.test(state.stdout);
}

async function planes(t: TestContext) {
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, [], dir);
  const cp = await startControlPlane(t, dp);
  return { dir, dp, cp };
}

test('fast path on runc: with the control plane SIGKILLed, MKDIR_TMPL still suffixes, DEFAULT_ACTION=kill-container still kills, and an exec answers as its container', async (t) => {
  const { dir, dp, cp } = await planes(t);
  const mk = await sleepingContainer(t, dir, dp.listenerSocket, 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', ['mkdir', 'mkdirat'], CONTAINERD);
  const victim = await sleepingContainer(t, dir, dp.listenerSocket, 'DEFAULT_ACTION=kill-container', ['mkdir', 'mkdirat']);
  const listed = await policiesInForce(dp, 2);
  const mkVersion = listed.find((c) => c.containerId === mk.id)!.policyVersion;
  assert.deepEqual(listed.find((c) => c.containerId === mk.id)!.labels, { resolution: 'annotations', namespace: 'shop', pod: 'web-1', container: 'app', 'pod-uid': 'uid-web-1' });
  cp.child.kill('SIGKILL');
  await cp.exited;
  await waitUntil(async () => (await dp.status()).controlPlane === undefined, 10_000, 'the data plane to see the control plane gone');
  const watch = await watchEvents(t, dp.client, { containerIds: [mk.id] });
  await waitUntil(async () => (await dp.status()).watchers >= 1, 5_000, 'the watcher to subscribe');

  // A runc exec is a new notify fd the (dead) control plane never heard of: it inherits the policy.
  const made = await runcExec(mk.bundle, mk.id, ['/bin/mkdir', '/tmp/a']);
  assert.equal(made.code, 0, made.stderr);
  assert.ok(fs.statSync(path.join(mk.bundle.rootfs, 'tmp', 'a-shop-web-1')).isDirectory(), 'the suffix came from the data plane alone');
  assert.equal(fs.existsSync(path.join(mk.bundle.rootfs, 'tmp', 'a')), false);
  const answer = await watch.waitFor((e) => e.event?.$case === 'answer' && e.event.answer.syscall === 'mkdir').catch((err) => { throw new Error(`${err.message}: ${JSON.stringify(watch.events, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`); });
  assert.ok(answer.event?.$case === 'answer');
  assert.equal(answer.event.answer.answeredBy, AnsweredBy.ANSWERED_BY_FAST_PATH);
  assert.equal(answer.event.answer.ruleIndex, 0);
  assert.equal(answer.event.answer.policyVersion, mkVersion);

  const killed = await runcExec(victim.bundle, victim.id, ['/bin/sh', '-c', 'mkdir /tmp/z; echo survived']);
  assert.doesNotMatch(killed.stdout, /survived/);
  await waitUntil(() => stopped(victim.bundle, victim.id), 10_000, 'the victim to be killed with no control plane up');
  await waitUntil(async () => (await dp.status()).counters!.answeredFastPath >= 2n, 5_000, 'the fast-path answers to be counted');
  const counters = (await dp.status()).counters!;
  assert.equal(counters.answeredDefaultNoControlPlane, 0n, 'no container with a known policy got the default action');
  assert.ok(counters.answeredFastPath >= 2n);
  assert.ok(counters.policiesAccepted >= 2n);
});
