// The policy engine on real registry entries (listenerMetadata parsed, pod identity from the
// runtime's annotations): what each notification gets, and what it counts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Container, Notification } from '../../proto/gen/seccompagent/v1/dataplane';
import { captureLogger } from '../../test/support/log-capture';
import { ContainerRegistry } from '../container-registry';
import { PolicyEngine } from './engine';

const EPERM = 1;
const EFAULT = 14;
const ENAMETOOLONG = 36;
const ANNOTATIONS = {
  'io.kubernetes.cri.sandbox-namespace': 'shop',
  'io.kubernetes.cri.sandbox-name': 'web-1',
  'io.kubernetes.cri.container-name': 'app',
};

/** An engine over a registry holding one container per metadata, handles 1, 2, ... */
function engineWith(metadata: string[], unresolvedAction: { kind: 'continue' } | { kind: 'error'; errno: number } = { kind: 'continue' }) {
  const { logger, lines } = captureLogger();
  const registry = new ContainerRegistry({ logger, pods: null, unresolvedAction: 'continue', readCgroup: () => null });
  metadata.forEach((m, i) => registry.add(Container.fromPartial({ handle: BigInt(i + 1), containerId: `c${i + 1}`, pid: 4242, annotations: i === 0 ? ANNOTATIONS : {}, metadata: m })));
  return { engine: new PolicyEngine(registry, unresolvedAction, logger), lines };
}

function notification(handle: number, syscall: string, args: bigint[], strings: Array<[number, string, boolean?]> = []): Notification {
  return Notification.fromPartial({
    handle: BigInt(handle), id: 77n, pid: 4243, syscall, args,
    stringArgs: strings.map(([index, value, truncated]) => ({ index, value, truncated: truncated ?? false })),
  });
}

test('policy engine: a mkdir path that was not read gets EFAULT, a truncated one ENAMETOOLONG; never the unsuffixed path', () => {
  const { engine } = engineWith(['MKDIR_TMPL=-{{.Namespace}}']);
  assert.deepEqual(engine.decide(notification(1, 'mkdir', [0n, 0o755n])).action, { $case: 'error', error: { errno: EFAULT } });
  assert.deepEqual(engine.decide(notification(1, 'mkdir', [0x1000n, 0o755n], [[0, '/tmp/x', true]])).action, { $case: 'error', error: { errno: ENAMETOOLONG } });
  assert.deepEqual(engine.decide(notification(1, 'mkdirat', [3n, 0x1000n, 0o755n], [[0, 'wrong index']])).action, { $case: 'error', error: { errno: EFAULT } });
  assert.deepEqual([...engine.counts], [['error', 3]]);
});

test('policy engine: a template whose identity is unknown gets --unresolved-action, continue or an errno', () => {
  const n = notification(2, 'mkdir', [0x1000n, 0o755n], [[0, '/tmp/x']]);
  const continuing = engineWith(['', 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}']).engine;
  assert.deepEqual(continuing.decide(n).action, { $case: 'continue', continue: {} });
  const refusing = engineWith(['', 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}'], { kind: 'error', errno: EPERM }).engine;
  assert.deepEqual(refusing.decide(n).action, { $case: 'error', error: { errno: EPERM } });
  assert.deepEqual([...refusing.counts], [['unresolved', 1]]);
});

test('policy engine: DEFAULT_ACTION kills or freezes for syscalls without a rule; mkdir without MKDIR_TMPL follows it too', () => {
  const { engine } = engineWith(['DEFAULT_ACTION=freeze-container', 'DEFAULT_ACTION=kill-container']);
  assert.deepEqual(engine.decide(notification(1, 'mkdir', [0x1000n, 0o755n], [[0, '/x']])).action, { $case: 'freeze', freeze: { errno: 0 } });
  assert.deepEqual(engine.decide(notification(2, 'chmod', [0x1000n, 0o755n])).action, { $case: 'kill', kill: { signal: 0 } });
  assert.deepEqual(Object.fromEntries(engine.counts), { freeze: 1, kill: 1 });
});

test('policy engine: a notification for a handle the registry does not know continues, and says so at debug level', () => {
  const { engine, lines } = engineWith(['DEFAULT_ACTION=kill-container']);
  assert.deepEqual(engine.decide(notification(9, 'mkdir', [0n, 0n])), { handle: 9n, id: 77n, action: { $case: 'continue', continue: {} }, findings: [] });
  assert.ok(lines.some((l) => l.handle === 9 && /does not know yet/.test(l.msg)));
});

