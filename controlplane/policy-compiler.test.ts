import assert from 'node:assert/strict';
import { test } from 'node:test';
import { captureLogger } from '../test/support/log-capture';
import { ContainerRegistry, type ContainerInfo } from './container-registry';
import { compileContainerPolicy, LABEL } from './policy-compiler';

const CONTAINERD = {
  'io.kubernetes.cri.sandbox-namespace': 'shop',
  'io.kubernetes.cri.sandbox-name': 'web-1',
  'io.kubernetes.cri.container-name': 'app',
  'io.kubernetes.cri.sandbox-uid': 'uid-1',
};

function entryFor(metadata: string, annotations: Record<string, string> = CONTAINERD, handle = 1) {
  const { logger } = captureLogger();
  const registry = new ContainerRegistry({ logger, pods: null, unresolvedAction: 'continue', readCgroup: () => null });
  const info: ContainerInfo = { handle, containerId: 'c'.repeat(64), pid: 1, annotations, metadata };
  return registry.add(info);
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
