// Pushed container policy (proto/seccompagent/v1/policy.proto) on real filters: NACKs keep the
// last good version, and the fast path survives a data plane SIGKILL under seccomp-keeper and a
// data plane handoff with no control plane attached.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { startControlPlane } from '../support/controlplane';
import { attachPusher, rule } from '../support/policy-pusher';
import { keeperChild, startDataPlane, type RunningDataPlane } from '../support/dataplane';
import { scratchDir } from '../support/scratch';
import { startUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';

const EACCES = 13;
const CONTAINERD = {
  'io.kubernetes.cri.sandbox-namespace': 'ns',
  'io.kubernetes.cri.sandbox-name': 'pod',
  'io.kubernetes.cri.container-name': 'c',
  'io.kubernetes.cri.sandbox-uid': 'uid-pod',
};

/** A workload that makes `mkdir DIR/<n>` each time TRIGGER-<n> appears, and prints the result. */
function mkdirOnTrigger(t: TestContext, dp: RunningDataPlane, dir: string, options: { metadata?: string; annotations?: Record<string, string> }) {
  const work = path.join(dir, `work-${Math.random().toString(36).slice(2, 8)}`);
  fs.mkdirSync(work);
  const script = `n=0; while [ -d ${work} ]; do if [ -e ${work}/trigger-$n ]; then mkdir ${work}/d$n; echo "mkdir $n rc=$?"; n=$((n+1)); fi; sleep 0.02; done`;
  const proc = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir'], id: `w-${path.basename(work)}`, ...options }, ['/bin/sh', '-c', script]);
  let n = 0;
  const mkdir = async (): Promise<{ rc: number; made: string[] }> => {
    const k = n++;
    fs.writeFileSync(path.join(work, `trigger-${k}`), '');
    const line = await proc.waitFor(new RegExp(`mkdir ${k} rc=(\\d+)`), 15_000);
    return { rc: Number(/rc=(\d+)/.exec(line)![1]), made: fs.readdirSync(work).filter((f) => f.startsWith(`d${k}`)) };
  };
  t.after(() => fs.rmSync(work, { recursive: true, force: true })); // the loop ends with its folder
  return { proc, mkdir, id: `w-${path.basename(work)}` };
}

test('policy push: a NACK names the rule and the reason, and the previous version goes on answering', async (t) => {
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, [], dir);
  const w = mkdirOnTrigger(t, dp, dir, {});
  await waitUntil(async () => (await dp.status()).containers === 1, 10_000, 'the workload to register');
  const client = await attachPusher(t, dp);
  const handle = client.handle();
  const unknown = await client.push({ handle, version: 'bad', rules: [rule(['getppid'], { $case: 'continue', continue: {} }), rule(['nosuchcall'], { $case: 'continue', continue: {} })], labels: {} });
  assert.deepEqual([unknown.accepted, unknown.ruleIndex, unknown.reason, unknown.version, unknown.refusedVersion], [false, 1, 'unknown-syscall', '', 'bad']);
  const v1 = await client.push({ handle, version: 'v1', rules: [rule(['mkdir'], { $case: 'error', error: { errno: EACCES } })], labels: { pod: 'p' } });
  assert.deepEqual([v1.accepted, v1.version], [true, 'v1']);
  for (const [bad, reason] of [
    [rule(['mkdir'], { $case: 'error', error: { errno: 0 } }), 'bad-errno'],
    [rule(['getppid'], { $case: 'mkdir', mkdir: { suffix: Buffer.from('-x') } }), 'wrong-syscall'],
    [{ ...rule(['mkdir'], { $case: 'continue', continue: {} }), action: undefined }, 'no-action'],
  ] as const) {
    const nack = await client.push({ handle, version: 'v2', rules: [bad], labels: {} });
    assert.deepEqual([nack.accepted, nack.ruleIndex, nack.reason, nack.version], [false, 0, reason, 'v1'], nack.detail);
  }
  assert.deepEqual((await w.mkdir()).rc, 1, 'v1 answers: mkdir fails (EACCES) with no control plane deciding');
  const [listed] = (await new Promise<{ containers: { policyVersion: string; labels: Record<string, string> }[] }>((resolve, reject) =>
    dp.client.listContainers({}, (err, r) => (err ? reject(err) : resolve(r!)))
  )).containers;
  assert.deepEqual([listed.policyVersion, listed.labels], ['v1', { pod: 'p' }]);
  // Answers given natively reach the counters with the engine's next batch.
  await waitUntil(async () => (await dp.status()).counters!.answeredFastPath === 1n, 5_000, 'the fast-path answer to be counted');
  const counters = (await dp.status()).counters!;
  assert.equal(counters.policiesRefused, 4n);
  assert.equal(counters.policiesAccepted, 1n);
  assert.equal(counters.answeredFastPath, 1n);
});

test('policy push: a push older than the last one applied in the session (a rollback) and a push from a session replaced by a takeover, still draining, are refused (issue 17)', async (t) => {
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, ['--decision-timeout', '5s'], dir);
  const w = mkdirOnTrigger(t, dp, dir, {});
  await waitUntil(async () => (await dp.status()).containers === 1, 10_000, 'the workload to register');
  const a = await attachPusher(t, dp, { name: 'old' });
  const handle = a.handle();
  const cont = (syscalls: string[]) => rule(syscalls, { $case: 'continue', continue: {} });
  const v2 = await a.push({ handle, version: 'v2', rules: [cont(['getppid'])], labels: {}, sequence: 2n });
  assert.deepEqual([v2.accepted, v2.version], [true, 'v2'], v2.detail);
  const v1 = await a.push({ handle, version: 'v1', rules: [cont(['getpid'])], labels: {}, sequence: 1n });
  assert.deepEqual([v1.accepted, v1.reason, v1.version, v1.refusedVersion], [false, 'stale-version', 'v2', 'v1'], v1.detail);
  // A mkdir no rule answers goes to the attached session, which holds it: replaced, it drains.
  w.mkdir().catch(() => undefined);
  await waitUntil(() => a.notified() > 0, 10_000, 'the old session to hold a notification');
  const b = await attachPusher(t, dp, { name: 'new', takeover: true });
  assert.equal(b.handle(), handle);
  const late = await a.push({ handle, version: 'v3', rules: [cont(['getuid'])], labels: {}, sequence: 3n });
  assert.deepEqual([late.accepted, late.reason, late.version, late.refusedVersion], [false, 'not-active-session', 'v2', 'v3'], late.detail);
  assert.match(late.detail, /was replaced by session .* \(new\) and is draining/);
  // The attached one still pushes, from its own sequence.
  const v4 = await b.push({ handle, version: 'v4', rules: [cont(['getppid', 'mkdir'])], labels: {}, sequence: 1n });
  assert.deepEqual([v4.accepted, v4.version], [true, 'v4'], v4.detail);
});

test('policy push: the fast path survives a data plane SIGKILL under seccomp-keeper and a handoff, with no control plane attached', async (t) => {
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, ['--log-level', 'info'], dir, true);
  const cp = await startControlPlane(t, dp, ['--no-kubernetes']);
  const w = mkdirOnTrigger(t, dp, dir, { metadata: 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', annotations: CONTAINERD });
  const listed = async () => new Promise<{ policyVersion: string }[]>((resolve, reject) => dp.client.listContainers({}, (err, r) => (err ? reject(err) : resolve(r!.containers))));
  await waitUntil(async () => (await listed())[0]?.policyVersion !== '' && (await listed()).length === 1, 15_000, 'the policy in force');
  assert.deepEqual((await w.mkdir()).made, ['d0-ns-pod']);
  cp.child.kill('SIGKILL');
  await cp.exited;

  const first = keeperChild(dp.proc.child.pid!);
  process.kill(first, 'SIGKILL');
  await waitUntil(async () => {
    const now = keeperChild(dp.proc.child.pid!);
    return now !== 0 && now !== first && (await dp.status().then((s) => s.pid === now, () => false));
  }, 15_000, 'the keeper to restart the data plane');
  assert.deepEqual((await w.mkdir()).made, ['d1-ns-pod'], 'after a data plane crash the restored policy answers');

  const successor = await startDataPlane(t, ['--log-level', 'info', '--takeover', '--control-plane-grace', '0'], dir);
  assert.deepEqual((await w.mkdir()).made, ['d2-ns-pod'], 'after a handoff the policy answers in the successor');
  await waitUntil(async () => (await successor.status()).counters!.answeredFastPath >= 1n, 5_000, 'the successor\'s fast-path answer to be counted');
  const counters = (await successor.status()).counters!;
  assert.equal(counters.answeredDefaultNoControlPlane + counters.answeredDefaultRecovered, 0n);
});
