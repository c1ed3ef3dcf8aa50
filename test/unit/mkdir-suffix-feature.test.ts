// mkdir-suffix.v1 (common/mkdir-suffix-feature.ts): a control plane facing a data plane that lists
// it sends a mkdir under a suffix as the caller's path and the suffix, and the data plane builds
// the path with its own SuffixedPath; one facing an older data plane sends the whole path, as
// before. Both planes here (a test may import both).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { MKDIR_SUFFIX_FEATURE } from '../../common/mkdir-suffix-feature';
import { ContainerRegistry } from '../../controlplane/container-registry';
import { dataplaneForms } from '../../controlplane/link/hello-features';
import { PolicyEngine } from '../../controlplane/policy/engine';
import { toNativeDecision } from '../../dataplane/decisions';
import { loadNative } from '../../dataplane/native';
import { Container, Decision, type Notification } from '../../proto/gen/seccompagent/v1/dataplane';

const silent = pino({ level: 'silent' });
const ANNOTATIONS = { 'io.kubernetes.cri.sandbox-namespace': 'ns', 'io.kubernetes.cri.sandbox-name': 'pod' };

function mkdirat(path: string | null, truncated = false): Notification {
  return {
    handle: 1n, id: 7n, pid: 1, syscallNr: 0, syscall: 'mkdirat', arch: 0, instructionPointer: 0n, args: [0xffffff9cn, 0x1000n, 0o750n, 0n, 0n, 0n], containerId: 'c1', receivedAt: undefined,
    stringArgs: path === null ? [] : [{ index: 1, value: path, truncated, raw: Buffer.from(path) }],
  };
}

/** A policy engine over one MKDIR_TMPL container, and the forms main.ts sets from each Welcome. */
function engine() {
  const registry = new ContainerRegistry({ logger: silent, pods: null, unresolvedAction: 'continue' });
  registry.add(Container.fromPartial({ handle: 1n, containerId: 'c1', pid: 1, annotations: ANNOTATIONS, metadata: 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}' }));
  const forms = dataplaneForms([]);
  return { forms, policy: new PolicyEngine(registry, { kind: 'continue' }, silent, undefined, undefined, forms) };
}

test('mkdir suffix feature: an older data plane (no mkdir-suffix.v1 in its Welcome) gets the whole path; one that lists it, the caller\'s path and the suffix only', () => {
  const { forms, policy } = engine();
  assert.deepEqual(policy.decide(mkdirat('/tmp/a/')).action, { $case: 'mkdir', mkdir: { path: '/tmp/a-ns-pod', mode: 0o750, pathBytes: Buffer.from('/tmp/a-ns-pod') } });
  Object.assign(forms, dataplaneForms(['decision.mkdir', MKDIR_SUFFIX_FEATURE]));
  assert.deepEqual(policy.decide(mkdirat('/tmp/a/')).action, {
    $case: 'mkdir', mkdir: { path: '', mode: 0o750, suffixed: { path: Buffer.from('/tmp/a/'), truncated: false, suffix: Buffer.from('-ns-pod') } },
  });
  // What the data plane refuses at once is its to say: the path goes as read (not read, truncated).
  const unread = policy.decide(mkdirat(null)).action;
  assert.ok(unread?.$case === 'mkdir' && unread.mkdir.suffixed?.path === undefined);
  const cut = policy.decide(mkdirat('/tmp/x', true)).action;
  assert.ok(cut?.$case === 'mkdir' && cut.mkdir.suffixed?.truncated === true);
  // Another attach, to an older data plane again: the whole path again.
  Object.assign(forms, dataplaneForms(['decision.mkdir']));
  assert.equal(policy.decide(mkdirat(null)).action?.$case, 'error');
});

test('mkdir suffix feature: the data plane builds the path with its addon\'s SuffixedPath, answers its errno at once, and refuses a suffix that is no plain name', () => {
  const { forms, policy } = engine();
  Object.assign(forms, dataplaneForms([MKDIR_SUFFIX_FEATURE]));
  const { suffixedPath } = loadNative();
  const apply = (n: Notification) => toNativeDecision(Decision.decode(Decision.encode(policy.decide(n)).finish()), 1, suffixedPath);
  const made = apply(mkdirat('/tmp/a/'));
  assert.ok(typeof made === 'object' && made.kind === 'mkdir', JSON.stringify(made));
  assert.equal(Buffer.from(made.path as Uint8Array).toString(), '/tmp/a-ns-pod');
  assert.equal(made.mode, 0o750);
  assert.deepEqual(apply(mkdirat(null)), { kind: 'error', errno: 14 });
  assert.deepEqual(apply(mkdirat('/tmp/x', true)), { kind: 'error', errno: 36 });
  assert.deepEqual(apply(mkdirat('')), { kind: 'error', errno: 2 });
  const mkdir = (suffix: string): Decision => ({ handle: 1n, id: 1n, action: { $case: 'mkdir', mkdir: { path: '', mode: 0o755, suffixed: { path: Buffer.from('/d'), truncated: false, suffix: Buffer.from(suffix) } } }, findings: [] });
  assert.match(String(toNativeDecision(mkdir('a/b'), 1, suffixedPath)), /plain name/);
  assert.match(String(toNativeDecision(mkdir('..'), 1, suffixedPath)), /plain name/);
  // A data plane without the feature reads only path and path_bytes, left empty: refused (its
  // default action answers), never the path without its suffix.
  assert.equal(typeof toNativeDecision({ ...mkdir('-x'), action: { $case: 'mkdir', mkdir: { path: '', mode: 0o755 } } }, 1), 'string');
  assert.equal(typeof toNativeDecision(mkdir('-x'), 1), 'string', 'no SuffixedPath at hand: refused');
});
