import assert from 'node:assert/strict';
import { test } from 'node:test';
import { captureLogger } from '../../test/support/log-capture';
import { ContainerRegistry } from '../container-registry';
import { Container } from '../../proto/gen/seccompagent/v1/dataplane';
import { compileContainerPolicy, LABEL } from './compiler';

const CONTAINERD = {
  'io.kubernetes.cri.sandbox-namespace': 'shop',
  'io.kubernetes.cri.sandbox-name': 'web-1',
  'io.kubernetes.cri.container-name': 'app',
  'io.kubernetes.cri.sandbox-uid': 'uid-1',
};

function entryFor(metadata: string, annotations: Record<string, string> = CONTAINERD, handle = 1) {
  const { logger } = captureLogger();
  const registry = new ContainerRegistry({ logger, pods: null, unresolvedAction: 'continue', readCgroup: () => null });
  return registry.add(Container.fromPartial({ handle: BigInt(handle), containerId: 'c'.repeat(64), pid: 1, annotations, metadata }));
}

const CONTINUE = { kind: 'continue' } as const;
const actions = (metadata: string, annotations?: Record<string, string>) =>
  compileContainerPolicy(entryFor(metadata, annotations), CONTINUE).rules.map((r) => [r.syscalls.join(','), r.action?.action?.$case]);

test('policy compiler: no listenerMetadata key compiles to one rule that continues every syscall natively', () => {
  assert.deepEqual(actions(''), [['', 'continue']]);
});

test('policy compiler: MKDIR_TMPL, mounts and DEFAULT_ACTION compile in order, the catch-all last', () => {
  assert.deepEqual(actions('MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}\nMOUNT_PROC=true\nMOUNT_OTHER_FS_LIST=tmpfs\nDEFAULT_ACTION=kill-container'), [
    ['mkdir,mkdirat', 'mkdir'],
    ['mount', 'mount'],
    ['mount', 'mount'],
    ['', 'kill'],
  ]);
  const policy = compileContainerPolicy(entryFor('MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}\nMOUNT_PROC=true\nMOUNT_NEED_CAP_ADMIN=true'), CONTINUE);
  const mkdir = policy.rules[0].action!.action;
  assert.equal(mkdir?.$case === 'mkdir' && Buffer.from(mkdir.mkdir.suffix).toString(), '-shop-web-1');
  assert.deepEqual(policy.rules[1].paths.map((p) => [p.index, p.op, Buffer.from(p.value).toString()]), [[2, 1, 'proc']]);
  const mount = policy.rules[1].action!.action;
  assert.equal(mount?.$case === 'mount' && mount.mount.requireCapSysAdmin, true);
  assert.deepEqual(actions('DEFAULT_ACTION=freeze-container'), [['', 'freeze']]);
});

test('policy compiler: an unresolved MKDIR_TMPL compiles to --unresolved-action for mkdir, never to an empty suffix', () => {
  const entry = entryFor('MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', {});
  assert.equal(entry.resolution, 'unresolved');
  const errno = compileContainerPolicy(entry, { kind: 'error', errno: 11 });
  assert.deepEqual(errno.rules[0].action?.action, { $case: 'error', error: { errno: 11 } });
  assert.deepEqual(compileContainerPolicy(entry, CONTINUE).rules[0].action?.action, { $case: 'continue', continue: {} });
});

test('policy compiler: labels carry the identity; the version is a digest of rules and labels', () => {
  const a = compileContainerPolicy(entryFor('MKDIR_TMPL=-x'), CONTINUE);
  assert.deepEqual(a.labels, { [LABEL.resolution]: 'annotations', [LABEL.namespace]: 'shop', [LABEL.pod]: 'web-1', [LABEL.container]: 'app', [LABEL.podUid]: 'uid-1' });
  assert.match(a.version, /^[0-9a-f]{16}$/);
  assert.equal(compileContainerPolicy(entryFor('MKDIR_TMPL=-x', CONTAINERD, 2), CONTINUE).version, a.version, 'the handle is not part of the version');
  assert.notEqual(compileContainerPolicy(entryFor('MKDIR_TMPL=-y'), CONTINUE).version, a.version);
  assert.notEqual(compileContainerPolicy(entryFor('MKDIR_TMPL=-x', { ...CONTAINERD, 'io.kubernetes.cri.sandbox-name': 'web-2' }), CONTINUE).version, a.version);
});

test('policy compiler: resource rules without when compile to native answers in precedence order; when, Audit, log and an unknown mkdir suffix stay ask rules', async () => {
  const { resourceRules } = await import('./compiler');
  const entry = entryFor('');
  const policy = (name: string, scope: 'namespaced' | 'cluster' = 'namespaced') => ({ scope, namespace: scope === 'namespaced' ? 'shop' : '', name, generation: 1 });
  const spec = (name: string, rule: string, syscalls: string[], action: import('./resources/decision').NativeRuleSpec['action'], audit = false, scope: 'namespaced' | 'cluster' = 'namespaced') =>
    ({ policy: policy(name, scope), rule: { index: 0, name: rule }, syscalls, action, audit });
  const rules = resourceRules([
    spec('ns', 'w', ['mkdir'], { kind: 'ask' }),
    spec('ns', 'deny', ['mkdirat'], { kind: 'errno', errno: 13, name: 'EACCES' }),
    spec('ns', 'sfx', ['mkdir'], { kind: 'mkdir', suffix: '-{{.Namespace}}' }),
    spec('audit', 'a', ['rmdir'], { kind: 'kill' }, true),
    spec('ns', 'l', ['unlink'], { kind: 'log' }),
    spec('base', 'm', ['mount'], { kind: 'mount', filesystems: ['proc', 'tmpfs'], requireCapSysAdmin: true }, false, 'cluster'),
    spec('base', 'ok', ['chmod'], { kind: 'allow' }, false, 'cluster'),
  ], entry);
  assert.deepEqual(rules.map((r) => [r.syscalls.join(','), r.action?.action?.$case]), [
    ['mkdir', 'ask'], ['mkdirat', 'error'], ['mkdir', 'mkdir'], ['rmdir', 'ask'], ['unlink', 'ask'], ['mount', 'mount'], ['mount', 'mount'], ['chmod', 'continue'],
  ]);
  assert.equal(rules[1].origin, 'SeccompNotifyPolicy shop/ns rule deny');
  const sfx = rules[2].action!.action;
  assert.equal(sfx?.$case === 'mkdir' && Buffer.from(sfx.mkdir.suffix).toString(), '-shop');
  assert.deepEqual(rules.slice(5, 7).map((r) => Buffer.from(r.paths[0].value).toString()), ['proc', 'tmpfs']);
  // {{.Container}} of a container whose name is not known: the control plane decides.
  const unnamed = entryFor('', { 'io.kubernetes.cri.sandbox-namespace': 'shop', 'io.kubernetes.cri.sandbox-name': 'web-1' });
  assert.equal(resourceRules([spec('ns', 'sfx', ['mkdir'], { kind: 'mkdir', suffix: '-{{.Container}}' })], unnamed)[0].action?.action?.$case, 'ask');
});
