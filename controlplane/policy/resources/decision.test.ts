import assert from 'node:assert/strict';
import { test } from 'node:test';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import type { Notification } from '../../../proto/gen/seccompagent/v1/dataplane';
import { DEFAULT_CEL_COST_LIMIT } from './cel-condition';
import type { ContainerEntry } from '../../container-registry';
import { parseListenerMetadata } from '../../../common/profile/listener-metadata';
import type { PolicyObject } from './objects';
import { PolicySet } from './set';
import { ResourcePolicy } from './decision';

const silent = pino({ level: 'silent' });
const entry: ContainerEntry = {
  handle: 7, containerId: 'c1', pid: 1, initFd: true, filterPid: 1, annotations: {}, policy: parseListenerMetadata('').policy, cgroup: null, resolution: 'annotations',
  identity: { namespace: 'shop', pod: 'web-1', container: 'app', podUid: null, source: 'annotations' }, mkdir: { kind: 'none' }, unresolvedReason: '',
};
const notification = (syscall: string, strings: Array<[number, string]>, args: bigint[] = [0n, 0o750n, 0n, 0n, 0n, 0n]): Notification => ({
  handle: 7n, id: 1n, pid: 1, syscallNr: 0, syscall, arch: 0, instructionPointer: 0n, args, stringArgs: strings.map(([index, value]) => ({ index, value, truncated: false })), containerId: 'c1', receivedAt: undefined,
});
const policy = (name: string, spec: unknown, scope: 'namespaced' | 'cluster' = 'namespaced'): PolicyObject => ({ scope, namespace: scope === 'namespaced' ? 'shop' : '', name, uid: name, generation: 1, spec, ready: null });

function setup(...policies: PolicyObject[]) {
  const set = new PolicySet(DEFAULT_CEL_COST_LIMIT, silent);
  for (const p of policies) set.update(p);
  const resources = new ResourcePolicy(set, { podLabels: () => ({ labels: { app: 'web' }, annotations: {} }), namespaceLabels: () => ({}) }, silent);
  return { set, resources };
}

test('resource policy: no policy answers: null (listenerMetadata decides)', () => {
  const { resources } = setup(policy('p', { rules: [{ syscalls: ['mount'], errno: 'EPERM' }] }));
  assert.equal(resources.decide(entry, notification('mkdir', [[0, '/x']])), null);
});

test('resource policy: Audit reports what Enforce would do and lets the next policy answer; log continues and counts', () => {
  const { resources } = setup(
    policy('a-audit', { mode: 'Audit', rules: [{ name: 'r', syscalls: ['mkdir'], kill: {} }] }),
    policy('b-log', { rules: [{ name: 'l', syscalls: ['mkdir'], log: {} }] }),
  );
  assert.deepEqual(resources.decide(entry, notification('mkdir', [[0, '/x']])), { $case: 'continue', continue: {} });
  assert.deepEqual([...resources.audits], [['shop/a-audit\u0000r\u0000shop', 1]]);
  assert.deepEqual([...resources.answers], [['shop/b-log\u0000l\u0000log', 1]]);
});

test('resource policy: mkdir renders its suffix and keeps the mode; mount answers only its filesystems', () => {
  const { resources } = setup(
    policy('m', { rules: [{ syscalls: ['mkdirat'], mkdir: { suffix: '-{{.Namespace}}-{{.Container}}' } }, { syscalls: ['mount'], mount: { filesystems: ['proc'] } }] }),
  );
  assert.deepEqual(resources.decide(entry, notification('mkdirat', [[1, '/tmp/a/']], [0n, 0n, 0o750n, 0n, 0n, 0n])), { $case: 'mkdir', mkdir: { path: '/tmp/a-shop-app', mode: 0o750, pathBytes: Buffer.from('/tmp/a-shop-app') } });
  const proc = resources.decide(entry, notification('mount', [[0, 'proc'], [1, '/p'], [2, 'proc']]));
  assert.equal(proc?.$case, 'mount');
  assert.equal(resources.decide(entry, notification('mount', [[0, 't'], [1, '/t'], [2, 'tmpfs']])), null, 'tmpfs is not this rule\'s');
});

test('resource policy: nativeRules lists every rule of the container\'s policies in order, when-rules as ask, JSON-safe', () => {
  const { resources } = setup(
    policy('base', { rules: [{ syscalls: ['mkdir'], errno: 'EACCES' }] }, 'cluster'),
    policy('ns', { mode: 'Audit', rules: [{ name: 'w', syscalls: ['mkdir'], when: 'paths[0] == "/x"', allow: {} }, { syscalls: ['mkdir'], mkdir: { suffix: '-x' } }] }),
  );
  const rules = resources.nativeRules(entry);
  assert.deepEqual(JSON.parse(JSON.stringify(rules)), rules);
  assert.deepEqual(rules.map((r) => [r.policy.name, r.rule.name, r.action, r.audit]), [
    ['ns', 'w', { kind: 'ask' }, true],
    ['ns', 'rules[1]', { kind: 'mkdir', suffix: '-x' }, true],
    ['base', 'rules[0]', { kind: 'errno', errno: 13, name: 'EACCES' }, false],
  ]);
});

test('resource policy: a when reached after the decision\'s deadline gives way to its failurePolicy: errno rules fail closed by default, Ignore lets the next rule decide (issue 17)', () => {
  const { resources, set } = setup(
    policy('a-deny', { rules: [{ name: 'no-etc', syscalls: ['mkdir'], when: 'paths[0].startsWith("/etc")', errno: 'EACCES' }] }),
    policy('b-allow', { rules: [{ name: 'soft', syscalls: ['mkdir'], when: 'paths[0].startsWith("/etc")', errno: 'EPERM', failurePolicy: 'Ignore' }, { syscalls: ['mkdir'], errno: 'EROFS' }] }),
    policy('c-bad', { rules: [{ syscalls: ['mkdir'], errno: 'EPERM', failurePolicy: 'Sometimes' }] }),
  );
  assert.match(set.get('namespaced/shop/c-bad')?.error?.message ?? '', /failurePolicy: "Sometimes" is not Fail or Ignore/);
  const past = performance.now() - 1;
  // In time: /tmp matches no when, so the last rule (EROFS) answers.
  assert.deepEqual(resources.decide(entry, notification('mkdir', [[0, '/tmp/x']])), { $case: 'error', error: { errno: 30 } });
  // Out of time: the deny rule (default Fail) answers although /tmp would not have matched.
  assert.deepEqual(resources.decide(entry, notification('mkdir', [[0, '/tmp/x']]), undefined, past), { $case: 'error', error: { errno: 13 } });
  assert.equal([...resources.overBudget.values()].reduce((a, b) => a + b, 0), 1);
});

test('resource policy: failurePolicy Ignore skips the rule out of time, and an allow rule ignores by default', () => {
  const { resources } = setup(
    policy('a', { rules: [{ syscalls: ['mkdir'], when: 'true', errno: 'EPERM', failurePolicy: 'Ignore' }, { syscalls: ['mkdir'], when: 'true', allow: {} }, { syscalls: ['mkdir'], errno: 'EROFS' }] }),
  );
  assert.deepEqual(resources.decide(entry, notification('mkdir', [[0, '/x']]), undefined, performance.now() - 1), { $case: 'error', error: { errno: 30 } });
});

test('resource policy: a when whose regex compiles to a program over the budget is refused at admission, the status naming the rule (issue 17)', () => {
  const { set, resources } = setup(policy('heavy', { rules: [{ name: 'slow-re', syscalls: ['mkdir'], when: `paths[0].matches("${'[a-z]{1000}'.repeat(8)}")`, errno: 'EPERM' }] }));
  const entry0 = set.get('namespaced/shop/heavy');
  assert.equal(entry0?.inForce, null);
  assert.equal(entry0?.error?.code, 'ECEL_COST');
  assert.match(entry0?.error?.message ?? '', /^rules\[0\] \(slow-re\)\.when: estimated worst-case cost \d+ exceeds the limit 100000/);
  assert.equal(resources.decide(entry, notification('mkdir', [[0, '/x']])), null);
});
