import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { DEFAULT_CEL_COST_LIMIT } from './cel-condition';
import { compileLabelSelector } from './compiler';
import type { PolicyObject } from './objects';
import { PolicySet, type PolicySubject } from './set';
import { ROOT } from '../../../test/support/paths';

const silent = pino({ level: 'silent' });
const policy = (scope: 'namespaced' | 'cluster', name: string, spec: unknown, generation = 1, namespace = 'shop'): PolicyObject => ({
  scope, namespace: scope === 'namespaced' ? namespace : '', name, uid: `uid-${scope}-${name}`, generation, spec, ready: null,
});
const rules = (syscalls = ['mkdir']) => [{ syscalls, errno: 'EPERM' }];
const subject = (over: Partial<PolicySubject> = {}): PolicySubject => ({ namespace: 'shop', pod: 'web-1', container: 'app', labels: { app: 'web' }, namespaceLabels: { team: 'shop' }, ...over });
const names = (set: PolicySet, s: PolicySubject) => set.select(s).policies.map((p) => `${p.object.scope}:${p.object.name}`);

test('policy set: namespaced policies of the pod\'s namespace by name, then cluster policies by name, whatever the order they arrive in', () => {
  const set = new PolicySet(DEFAULT_CEL_COST_LIMIT, silent);
  set.update(policy('cluster', 'b', { rules: rules() }));
  set.update(policy('namespaced', 'z', { rules: rules() }));
  set.update(policy('cluster', 'a', { rules: rules() }));
  set.update(policy('namespaced', 'm', { rules: rules() }));
  set.update(policy('namespaced', 'a', { rules: rules() }, 1, 'other'));
  assert.deepEqual(names(set, subject()), ['namespaced:m', 'namespaced:z', 'cluster:a', 'cluster:b']);
});

test('policy set: selectors: podSelector, containers, namespaceSelector (unknown namespace labels: not selected)', () => {
  const set = new PolicySet(DEFAULT_CEL_COST_LIMIT, silent);
  set.update(policy('namespaced', 'web', { selector: { podSelector: { matchLabels: { app: 'web' } } }, rules: rules() }));
  set.update(policy('namespaced', 'sidecar', { containers: ['proxy'], rules: rules() }));
  set.update(policy('cluster', 'team', { selector: { namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'In', values: ['shop'] }] } }, rules: rules() }));
  assert.deepEqual(names(set, subject()), ['namespaced:web', 'cluster:team']);
  assert.deepEqual(names(set, subject({ labels: { app: 'db' }, container: 'proxy' })), ['namespaced:sidecar', 'cluster:team']);
  assert.deepEqual(names(set, subject({ namespaceLabels: null })), ['namespaced:web']);
  assert.deepEqual(names(set, subject({ namespaceLabels: { team: 'blog' } })), ['namespaced:web']);
});

test('policy set: a same-level conflict names the first by name as winner; other levels and Audit policies do not conflict', () => {
  const set = new PolicySet(DEFAULT_CEL_COST_LIMIT, silent);
  set.update(policy('namespaced', 'b', { rules: rules(['mkdir', 'mount']) }));
  set.update(policy('namespaced', 'a', { rules: rules(['mkdir']) }));
  set.update(policy('namespaced', 'c', { mode: 'Audit', rules: rules(['mkdir']) }));
  set.update(policy('cluster', 'x', { rules: rules(['mkdir']) }));
  assert.deepEqual(set.select(subject()).conflicts, [{ winner: 'namespaced/shop/a', loser: 'namespaced/shop/b', syscalls: ['mkdir'] }]);
});

test('policy set: a generation that does not compile keeps the previous one in force; a recreated policy (new uid) does not inherit it', () => {
  const set = new PolicySet(DEFAULT_CEL_COST_LIMIT, silent);
  set.update(policy('namespaced', 'p', { rules: [{ syscalls: ['mkdir'], when: 'paths[0] == "/x"', errno: 'EPERM' }] }, 1));
  set.update(policy('namespaced', 'p', { rules: [{ name: 'bad', syscalls: ['mkdir'], when: 'paths[0] ==', errno: 'EPERM' }] }, 2));
  const entry = set.get('namespaced/shop/p')!;
  assert.equal(entry.inForce?.generation, 1);
  assert.equal(entry.error?.code, 'ECEL_COMPILE');
  assert.match(entry.error!.message, /^rules\[0\] \(bad\)\.when: /);
  set.update({ ...policy('namespaced', 'p', { rules: [{ syscalls: ['mkdir'], kill: {}, errno: 'EPERM' }] }, 3) });
  assert.equal(set.get('namespaced/shop/p')!.error?.code, 'EPOLICY_INVALID');
  assert.equal(set.get('namespaced/shop/p')!.inForce?.generation, 1);
  set.update({ ...policy('namespaced', 'p', { rules: [{ syscalls: ['mkdir'], when: 'oops(', errno: 'EPERM' }] }, 1), uid: 'new' });
  assert.equal(set.get('namespaced/shop/p')!.inForce, null);
  set.remove(policy('namespaced', 'p', {}));
  assert.equal(set.size, 0);
});

test('policy compiler: label selectors as metav1.LabelSelector matches them', () => {
  const m = compileLabelSelector({ matchLabels: { app: 'web' }, matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['db'] }, { key: 'canary', operator: 'DoesNotExist' }] }, 's');
  assert.equal(m({ app: 'web' }), true);
  assert.equal(m({ app: 'web', tier: 'front' }), true);
  assert.equal(m({ app: 'web', tier: 'db' }), false);
  assert.equal(m({ app: 'web', canary: '' }), false);
  assert.equal(m({}), false);
  assert.equal(compileLabelSelector({}, 's')({}), true);
  assert.throws(() => compileLabelSelector({ matchExpressions: [{ key: 'a', operator: 'In' }] }, 's'), /In needs values/);
});

test('policy set: a namespace gets at most the rules the data plane takes: 160 policies x 64 rules keep the first 12 by name, the rest are refused with TooManyRules in their status; another namespace is unaffected (issue 17)', async () => {
  const { readFileSync } = await import('node:fs');
  const path = await import('node:path');
  const { DATAPLANE_MAX_RULES, MAX_CLUSTER_RULES, MAX_RULES_PER_NAMESPACE, METADATA_RULES_RESERVE } = await import('./set');
  const { readyOf } = await import('./status');
  // The data plane's own limit, read from its source, so the two cannot drift.
  const header = readFileSync(path.join(ROOT, 'native', 'addon', 'policy_wire.hpp'), 'utf8');
  assert.equal(Number(/kPolicyMaxRules = (\d+);/.exec(header)?.[1]), DATAPLANE_MAX_RULES);
  assert.equal(MAX_RULES_PER_NAMESPACE + MAX_CLUSTER_RULES + METADATA_RULES_RESERVE, DATAPLANE_MAX_RULES);
  assert.ok(METADATA_RULES_RESERVE >= 32);

  const set = new PolicySet(DEFAULT_CEL_COST_LIMIT, silent);
  const many = Array.from({ length: 64 }, (_, i) => ({ name: `r${i}`, syscalls: ['mkdir'], errno: 'EPERM' }));
  for (let i = 0; i < 160; i++) set.update(policy('namespaced', `p${String(i).padStart(3, '0')}`, { rules: many }));
  set.update(policy('namespaced', 'calm', { rules: rules() }, 1, 'other'));
  const selected = set.select(subject()).policies;
  assert.equal(selected.length, 12);
  assert.equal(selected.reduce((n, p) => n + p.rules.length, 0), 768);
  assert.equal(selected.at(-1)?.object.name, 'p011');
  const refused = set.get('namespaced/shop/p012')!;
  const ready = readyOf(refused, set);
  assert.equal(ready.status, 'False');
  assert.equal(ready.reason, 'TooManyRules');
  assert.match(ready.message, /^namespace shop has 768 rules in policies before this one by name, and this one's 64 would pass the 768/);
  assert.equal(readyOf(set.get('namespaced/shop/p000')!, set).status, 'True');
  assert.deepEqual(names(set, subject({ namespace: 'other' })), ['namespaced:calm']);
  // A mount rule counts one per filesystem type, as the data plane gets it.
  const fs = new PolicySet(DEFAULT_CEL_COST_LIMIT, silent);
  fs.update(policy('cluster', 'mounts', { rules: Array.from({ length: 13 }, () => ({ syscalls: ['mount'], mount: { filesystems: Array.from({ length: 16 }, (_, i) => `fs${i}`) } })) }));
  assert.equal(readyOf(fs.get('cluster//mounts')!, fs).reason, 'TooManyRules', '13 x 16 = 208 native rules > 192');
});
