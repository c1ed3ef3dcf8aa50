import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Container, type Decision, type Notification } from '../../proto/gen/seccompagent/v1/dataplane';
import { captureLogger } from '../../test/support/log-capture';
import { ContainerRegistry } from '../container-registry';
import { PolicyEngine } from './engine';

const ANNOTATIONS = { 'io.kubernetes.cri.sandbox-namespace': 'ns', 'io.kubernetes.cri.sandbox-name': 'pod' };
const ENOENT = 2;
const EINVAL = 22;
const ENAMETOOLONG = 36;
const EFAULT = 14;

function engineFor(metadata: string) {
  const { logger } = captureLogger();
  const registry = new ContainerRegistry({ logger, pods: null, unresolvedAction: 'continue' });
  registry.add(Container.fromPartial({ handle: 1n, containerId: 'c1', pid: 1, annotations: ANNOTATIONS, metadata }));
  return new PolicyEngine(registry, { kind: 'continue' }, logger);
}

type Arg = { index: number; raw?: Buffer; value?: string; truncated?: boolean };
function notification(syscall: string, args: Arg[], raw: bigint[] = [0n, 0o755n, 0n, 0n, 0n, 0n]): Notification {
  return {
    handle: 1n, id: 7n, pid: 1, syscallNr: 0, syscall, arch: 0, instructionPointer: 0n, args: raw, containerId: 'c1', receivedAt: undefined,
    stringArgs: args.map((a) => ({ index: a.index, value: a.value ?? a.raw!.toString('utf8'), truncated: a.truncated ?? false, raw: a.raw })),
  };
}
const latin1 = (s: string) => Buffer.from(s, 'latin1');

function mkdirOf(d: Decision) {
  assert.equal(d.action?.$case, 'mkdir', JSON.stringify(d.action));
  return (d.action as Extract<Decision['action'], { $case: 'mkdir' }>).mkdir;
}
function errnoOf(d: Decision): number {
  assert.equal(d.action?.$case, 'error', JSON.stringify(d.action));
  return (d.action as Extract<Decision['action'], { $case: 'error' }>).error.errno;
}

test('policy engine MKDIR_TMPL: a non-UTF-8 name gets the suffix byte for byte; two names that read the same stay distinct', () => {
  const policy = engineFor('MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}');
  const one = mkdirOf(policy.decide(notification('mkdir', [{ index: 0, raw: latin1('/tmp/bad\xff\xfe') }])));
  const two = mkdirOf(policy.decide(notification('mkdir', [{ index: 0, raw: latin1('/tmp/bad\xff\xfd') }])));
  assert.equal(one.pathBytes?.toString('latin1'), '/tmp/bad\xff\xfe-ns-pod');
  assert.equal(two.pathBytes?.toString('latin1'), '/tmp/bad\xff\xfd-ns-pod');
  // The string field is only the lossy reading, for older data planes: both read the same.
  assert.equal(one.path, '/tmp/bad\ufffd\ufffd-ns-pod');
  assert.equal(one.path, two.path);
  assert.equal(one.mode, 0o755);
  // mkdirat: the path is argument 1 and the mode argument 2.
  const at = mkdirOf(policy.decide(notification('mkdirat', [{ index: 1, raw: latin1('r\xe9l') }], [0xffffff9cn, 0n, 0o700n, 0n, 0n, 0n])));
  assert.equal(at.pathBytes?.toString('latin1'), 'r\xe9l-ns-pod');
  assert.equal(at.mode, 0o700);
});

test('policy engine MKDIR_TMPL: from a data plane without raw bytes, the text is used as UTF-8', () => {
  const policy = engineFor('MKDIR_TMPL=-{{.Pod}}');
  const m = mkdirOf(policy.decide(notification('mkdir', [{ index: 0, value: '/tmp/é' }])));
  assert.deepEqual(m.pathBytes, Buffer.from('/tmp/é-pod', 'utf8'));
});

test('policy engine MKDIR_TMPL: "." and ".." go unsuffixed (the emulation says EEXIST), "" is ENOENT, truncated or unread is ENAMETOOLONG or EFAULT', () => {
  const policy = engineFor('MKDIR_TMPL=-{{.Pod}}');
  for (const path of ['.', '..', '/tmp/..', '/tmp/.', 'a/.', 'a/../', '/']) {
    const m = mkdirOf(policy.decide(notification('mkdir', [{ index: 0, raw: latin1(path) }])));
    assert.equal(m.pathBytes?.toString('latin1'), path);
    assert.equal(m.path, path);
  }
  assert.equal(errnoOf(policy.decide(notification('mkdir', [{ index: 0, raw: Buffer.alloc(0) }]))), ENOENT);
  assert.equal(errnoOf(policy.decide(notification('mkdir', [{ index: 0, raw: latin1('x'.repeat(4096)), truncated: true }]))), ENAMETOOLONG);
  assert.equal(errnoOf(policy.decide(notification('mkdir', []))), EFAULT);
  assert.equal(policy.counts.get('error'), 3);
});

test('policy engine mount: source, target, fstype and data (argument 4) as bytes; a truncated data argument is EINVAL', () => {
  const policy = engineFor('MOUNT_OTHER_FS_LIST=tmpfs');
  const args = [0n, 0n, 0n, 6n, 0n, 0n];
  const d = policy.decide(notification('mount', [
    { index: 0, raw: latin1('none') }, { index: 1, raw: latin1('/tmp/\xff') }, { index: 2, raw: latin1('tmpfs') }, { index: 4, raw: latin1('size=1m,mode=0700') },
  ], args));
  assert.equal(d.action?.$case, 'mount');
  const m = (d.action as Extract<Decision['action'], { $case: 'mount' }>).mount;
  assert.equal(m.targetBytes?.toString('latin1'), '/tmp/\xff');
  assert.equal(m.target, '/tmp/\ufffd');
  assert.equal(m.sourceBytes?.toString('latin1'), 'none');
  assert.equal(m.fstype, 'tmpfs');
  assert.equal(m.data, 'size=1m,mode=0700');
  assert.equal(m.dataBytes?.toString('latin1'), 'size=1m,mode=0700');
  assert.equal(m.flags, 6n);
  // No data argument (a NULL pointer): empty data.
  const bare = policy.decide(notification('mount', [{ index: 1, raw: latin1('/t') }, { index: 2, raw: latin1('tmpfs') }], args));
  assert.equal((bare.action as Extract<Decision['action'], { $case: 'mount' }>).mount.dataBytes?.length, 0);
  const truncated = policy.decide(notification('mount', [{ index: 1, raw: latin1('/t') }, { index: 2, raw: latin1('tmpfs') }, { index: 4, raw: latin1('x'.repeat(4096)), truncated: true }], args));
  assert.equal(errnoOf(truncated), EINVAL);
  // The fstype is compared as bytes: "tmpfs\xff" is not tmpfs.
  const other = policy.decide(notification('mount', [{ index: 1, raw: latin1('/t') }, { index: 2, raw: latin1('tmpfs\xff') }], args));
  assert.equal(other.action?.$case, 'continue');
});
