// Every ABI the filter lets through (issue 17, defect 3): a filter that also notifies i386 calls
// (int $0x80) and x32 calls (nr | 0x40000000), as a profile listing SCMP_ARCH_X86 and
// SCMP_ARCH_X32 makes it (seccomp-run --arch x86,x32), and a static workload that makes its mkdir
// through that ABI (test/cmd/abi-workload). The agent must decide those calls as it decides the
// x86_64 ones: MKDIR_TMPL's suffix, a native errno rule, a CEL deny, kill-container without a
// control plane. On this kernel (no CONFIG_X86_X32_ABI) an x32 call reaches seccomp all the same:
// the kernel looks the number up only after the filter (and then answers ENOSYS).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { execFileSync } from 'node:child_process';
import type { FakeKubeApiServer } from '../cmd/fake-kube-apiserver/server';
import { listContainers } from '../../common/dataplane-client';
import { AUDIT_ARCH_I386, AUDIT_ARCH_X86_64 } from '../../common/syscall-abi';
import { startControlPlane } from '../support/controlplane';
import { startDataPlane, watchEvents, type RunningDataPlane } from '../support/dataplane';
import { ABI_WORKLOAD } from '../support/paths';
import { attachPusher, rule } from '../support/policy-pusher';
import { applyPolicy, containerd, NODE, policyPlanes } from '../support/policy';
import { stop } from '../support/processes';
import { runUnderFilter, startUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';

const ANNOTATIONS = { 'io.kubernetes.cri.sandbox-namespace': 'ns', 'io.kubernetes.cri.sandbox-name': 'pod' };
const ARCH = ['--arch', 'x86,x32'];
const EPERM = 1;
const EACCES = 13;

interface Made {
  abi: string;
  call: string;
  rc: number;
  errno: number;
}

/** The JSON lines the workload printed, one per call. */
function reports(stdout: string): Made[] {
  return stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Made);
}

/** One shell line per call: `abi-workload ABI CALL PATH`. */
function calls(list: Array<[string, string, string]>): string {
  return list.map(([abi, call, p]) => `${ABI_WORKLOAD} ${abi} ${call} '${p}'`).join('; ');
}

/** A workload that waits on a fifo before its calls (so a policy can be pushed first); returns the release. */
function heldWorkload(t: TestContext, dp: RunningDataPlane, dir: string, id: string, script: string, extra: { metadata?: string; launcher?: string[] } = {}) {
  const fifo = path.join(dir, `${id}.go`);
  execFileSync('mkfifo', [fifo]);
  const proc = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id, annotations: ANNOTATIONS, metadata: extra.metadata, extra: ARCH, launcher: extra.launcher },
    ['/bin/sh', '-c', `read go < '${fifo}'; ${script}; echo done`]);
  const release = () => fs.writeFileSync(fifo, 'go\n');
  return { proc, release };
}

test('seccomp-run --arch x86,x32: the workload\'s i386 and x32 mkdir are notified, under their own names, with their arch', async (t) => {
  const dp = await startDataPlane(t);
  const watch = await watchEvents(t, dp.client, { syscalls: ['mkdir', 'mkdirat'] });
  const dir = path.join(dp.dir, 'names');
  fs.mkdirSync(dir);
  // No control plane, default continue: the kernel then makes each (x32's: ENOSYS on this kernel).
  const r = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id: 'names', extra: ARCH },
    ['/bin/sh', '-c', calls([['i386', 'mkdir', `${dir}/a`], ['i386', 'mkdirat', `${dir}/b`], ['x32', 'mkdir', `${dir}/c`]])]);
  assert.equal(r.code, 0, r.stderr);
  const made = reports(r.stdout);
  assert.deepEqual(made.map((m) => `${m.abi} ${m.call} ${m.rc}`).slice(0, 2), ['i386 mkdir 0', 'i386 mkdirat 0']);
  const notifications = () => watch.events.flatMap((e) => (e.event?.$case === 'notification' ? [e.event.notification] : []));
  await waitUntil(() => notifications().length >= 3, 10_000, 'three notifications');
  const seen = notifications();
  assert.deepEqual(seen.map((n) => [n.syscall, n.syscallNr, n.arch, n.stringArgs[0]?.value]), [
    ['mkdir', 39, AUDIT_ARCH_I386, `${dir}/a`],
    ['mkdirat', 296, AUDIT_ARCH_I386, `${dir}/b`],
    ['mkdir', 0x40000000 + 83, AUDIT_ARCH_X86_64, `${dir}/c`],
  ]);
  // i386's AT_FDCWD is the 32-bit -100: the argument is the low half, zero-extended.
  assert.equal(seen[1].args[0], 0xffffff9cn);
});

test('seccomp-controlplane MKDIR_TMPL on i386 and x32: int $0x80 mkdir and mkdirat and the x32 mkdir get the suffix', async (t) => {
  const dp = await startDataPlane(t);
  const cp = await startControlPlane(t, dp);
  const dir = path.join(dp.dir, 'tmpl');
  fs.mkdirSync(dir);
  const r = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id: 'tmpl', metadata: 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', annotations: ANNOTATIONS, extra: ARCH },
    ['/bin/sh', '-c', calls([['i386', 'mkdir', `${dir}/a`], ['i386', 'mkdirat', `${dir}/b`], ['x32', 'mkdir', `${dir}/c`], ['x86_64', 'mkdir', `${dir}/d`]])]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(reports(r.stdout).map((m) => `${m.abi} ${m.call} ${m.rc}`), ['i386 mkdir 0', 'i386 mkdirat 0', 'x32 mkdir 0', 'x86_64 mkdir 0']);
  assert.deepEqual(fs.readdirSync(dir).sort(), ['a-ns-pod', 'b-ns-pod', 'c-ns-pod', 'd-ns-pod'], 'every ABI\'s mkdir got the suffix; none was made as named');
  assert.doesNotMatch(cp.output(), /"level":(50|60)/);
});

test('native engine errno rule for mkdir, mkdirat: refuses the i386 and x32 calls too (no control plane attached)', async (t) => {
  const dp = await startDataPlane(t);
  const dir = path.join(dp.dir, 'deny');
  fs.mkdirSync(dir);
  const list: Array<[string, string, string]> = [['i386', 'mkdir', `${dir}/a`], ['i386', 'mkdirat', `${dir}/b`], ['x32', 'mkdir', `${dir}/c`], ['x32', 'mkdirat', `${dir}/d`], ['x86_64', 'mkdir', `${dir}/e`]];
  const { proc, release } = heldWorkload(t, dp, dp.dir, 'deny', calls(list));
  const pusher = await attachPusher(t, dp);
  const ack = await pusher.push({ handle: pusher.handle(), version: 'eperm', rules: [rule(['mkdir', 'mkdirat'], { $case: 'error', error: { errno: EPERM } })], labels: {} });
  assert.equal(ack.accepted, true, `${ack.reason}: ${ack.detail}`);
  release();
  await proc.waitFor(/^done$/m, 15_000);
  assert.deepEqual(reports(proc.output()).map((m) => `${m.abi} ${m.call} ${m.errno}`), list.map(([abi, call]) => `${abi} ${call} ${EPERM}`));
  assert.deepEqual(fs.readdirSync(dir), [], 'nothing made');
  assert.equal(pusher.notified(), 0, 'the rule answered each natively: none reached the Attach session');
});

test('seccomp-controlplane DEFAULT_ACTION=kill-container with the control plane down: an i386 mkdir kills the container', async (t) => {
  const dp = await startDataPlane(t);
  const cp = await startControlPlane(t, dp);
  const dir = path.join(dp.dir, 'kill');
  fs.mkdirSync(dir);
  const { proc, release } = heldWorkload(t, dp, dp.dir, 'victim', `${calls([['i386', 'mkdir', `${dir}/a`]])}; echo survived`,
    { metadata: 'DEFAULT_ACTION=kill-container', launcher: ['/usr/bin/unshare', '-p', '-f'] });
  await waitUntil(async () => (await listContainers(dp.client)).containers.some((c) => c.containerId === 'victim' && c.policyVersion !== ''),
    10_000, 'the victim\'s policy in force');
  await stop(cp.child);
  release();
  await waitUntil(() => proc.child.exitCode !== null || proc.child.signalCode !== null, 15_000, 'the container to end');
  assert.doesNotMatch(proc.output(), /survived|"rc":0/, proc.output());
  assert.equal(fs.existsSync(path.join(dir, 'a')), false);
});

// ---- CEL ------------------------------------------------------------------------------------

const WEB = containerd('shop', 'web-1', 'app');

function pods(api: FakeKubeApiServer): void {
  api.addNamespace('shop', { team: 'shop' });
  api.addPod({ name: 'web-1', namespace: 'shop', nodeName: NODE, labels: { app: 'web' }, containers: [{ name: 'app' }] });
}

test('SeccompNotifyPolicy errno EACCES with a CEL when on paths[0]: refuses the i386 mkdir as the x86_64 one', async (t) => {
  const { dir, api, dp, cp } = await policyPlanes(t, pods);
  for (const d of ['etc', 'a', 'b']) fs.mkdirSync(path.join(dir, d));
  applyPolicy(api, 'seccompnotifypolicies', {
    name: 'deny-etc', namespace: 'shop',
    spec: { selector: { podSelector: { matchLabels: { app: 'web' } } }, mode: 'Enforce', rules: [
      { name: 'no-etc', syscalls: ['mkdir'], when: `syscall == "mkdir" && paths[0].startsWith("${dir}/etc")`, errno: 'EACCES' },
      // A rule may still say otherwise: CEL's arch.
      { name: 'no-i386', syscalls: ['mkdir'], when: `arch == "i386" && paths[0].endsWith("/only64")`, errno: 'EPERM' },
    ] },
  });
  await cp.waitFor(/SeccompNotifyPolicy shop\/deny-etc generation 1 in force/, 10_000);
  const r = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], annotations: WEB, extra: ARCH },
    ['/bin/sh', '-c', calls([['i386', 'mkdir', `${dir}/etc/a`], ['x86_64', 'mkdir', `${dir}/etc/b`], ['i386', 'mkdir', `${dir}/c`],
      ['i386', 'mkdir', `${dir}/a/only64`], ['x86_64', 'mkdir', `${dir}/b/only64`]])]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(reports(r.stdout).map((m) => `${m.abi} ${m.errno}`), [`i386 ${EACCES}`, `x86_64 ${EACCES}`, 'i386 0', `i386 ${EPERM}`, 'x86_64 0']);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'etc')), []);
  assert.ok(fs.existsSync(path.join(dir, 'c')), 'outside etc the when is false');
  assert.ok(!fs.existsSync(path.join(dir, 'a', 'only64')) && fs.existsSync(path.join(dir, 'b', 'only64')), 'arch == "i386" told the two apart');
});
