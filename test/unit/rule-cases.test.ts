// test/testdata/rule-cases.json, the control plane's side: the file's compiled rules, matched by
// controlplane/policy/rule-matcher.ts, must give each call what the file says; the native tests
// (test/cmd/native-tests, RuleCaseFileCases) run the same file through the data plane's MatchRule
// and rule_arguments, so the two readings of a policy cannot drift. Each rule list that says what
// it is compiled from must be exactly what the compilers write, and the file must hold a policy
// for every listenerMetadata key and every resource action. A mkdir is checked in both forms:
// the whole path for a data plane without the suffix feature (mkdir-path.ts's fallback), and the
// caller's path and the suffix, built by the addon's own SuffixedPath (dataplane/decisions.ts).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import type { FallbackAction } from '../../common/default-action';
import { DEFAULT_CEL_COST_LIMIT } from '../../controlplane/policy/resources/cel-condition';
import { ContainerRegistry, type ContainerEntry } from '../../controlplane/container-registry';
import { KNOWN_KEYS } from '../../common/profile/listener-metadata';
import { compileContainerPolicy, resourceRules } from '../../controlplane/policy/compiler';
import { PolicySet } from '../../controlplane/policy/resources/set';
import { ACTIONS } from '../../controlplane/policy/resources/compiler';
import { ResourcePolicy } from '../../controlplane/policy/resources/decision';
import { matchRule, OLDEST_FORMS, ruleDecision, type Action } from '../../controlplane/policy/rule-matcher';
import { toNativeDecision } from '../../dataplane/decisions';
import { loadNative } from '../../dataplane/native';
import { Container, type Notification } from '../../proto/gen/seccompagent/v1/dataplane';
import { ArgOp, PathOp, type Rule, type RuleAction } from '../../proto/gen/seccompagent/v1/policy';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const FILE = path.join(ROOT, 'test', 'testdata', 'rule-cases.json');

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
interface Call { note?: string; syscall: string; abi?: string; args?: Array<number | string>; paths?: Json[]; rule: number; answer?: string | Json }
interface Policy { name: string; from?: Json; rules: Json[]; calls: Call[] }

const cases: { policies: Policy[] } = JSON.parse(fs.readFileSync(FILE, 'utf8'));
/** Strings in the file are bytes, one character each. */
const bytes = (s: string) => Buffer.from(s, 'latin1');
const ANNOTATIONS = {
  'io.kubernetes.cri.sandbox-namespace': 'ns',
  'io.kubernetes.cri.sandbox-name': 'pod',
  'io.kubernetes.cri.container-name': 'app',
};
const silent = pino({ level: 'silent' });
const ARG_OPS: Record<string, ArgOp> = {
  eq: ArgOp.ARG_OP_EQ, ne: ArgOp.ARG_OP_NE, lt: ArgOp.ARG_OP_LT, le: ArgOp.ARG_OP_LE, gt: ArgOp.ARG_OP_GT, ge: ArgOp.ARG_OP_GE, 'masked-eq': ArgOp.ARG_OP_MASKED_EQ,
};

function actionOf(j: Json): RuleAction['action'] {
  const [kind, body] = Object.entries(j)[0] as [string, Json];
  switch (kind) {
    case 'mkdir': return { $case: 'mkdir', mkdir: { suffix: bytes(body.suffix) } };
    case 'value': return { $case: 'value', value: { value: BigInt(body.value) } };
    default: return { $case: kind, [kind]: body } as RuleAction['action'];
  }
}

function ruleOf(j: Json): Rule {
  return {
    syscalls: j.syscalls ?? [],
    args: (j.args ?? []).map((a: Json) => ({ index: a.index, op: ARG_OPS[a.op], value: BigInt(a.value), valueTwo: BigInt(a.valueTwo ?? 0) })),
    paths: (j.paths ?? []).map((p: Json) => ({ index: p.index, op: p.op === 'prefix' ? PathOp.PATH_OP_PREFIX : PathOp.PATH_OP_EQUAL, value: bytes(p.value) })),
    action: { action: actionOf(j.action) },
    origin: '',
  };
}

function notificationOf(call: Call): Notification {
  const args = [...(call.args ?? []).map((a) => BigInt(a))];
  while (args.length < 6) args.push(0n);
  return {
    handle: 1n, id: 1n, pid: 1, syscallNr: 0, syscall: call.syscall, arch: 0, instructionPointer: 0n, args, containerId: 'c1', receivedAt: undefined,
    stringArgs: (call.paths ?? []).map((p) => {
      const raw = bytes(String(p.value).repeat(p.repeat ?? 1));
      return { index: p.index, value: raw.toString('utf8'), truncated: p.truncated === true, raw };
    }),
  };
}

/** The container a `from` compiles for: identity ns/pod/app from annotations, or none. */
function entryOf(from: Json): ContainerEntry {
  const registry = new ContainerRegistry({ logger: silent, pods: null, unresolvedAction: 'continue', readCgroup: () => null });
  return registry.add(Container.fromPartial({
    handle: 1n, containerId: 'c1', pid: 4242, annotations: from.identity === 'none' ? {} : ANNOTATIONS, metadata: from.listenerMetadata ?? '',
    status: from.initFd ? 'creating' : 'running',
  }));
}

/** What the compilers write for `from`: the resource's rules (if any) before the listenerMetadata ones. */
function compiledFrom(from: Json): Rule[] {
  const entry = entryOf(from);
  const unresolved: FallbackAction = from.unresolvedAction === 'EPERM' ? { kind: 'error', errno: 1 } : { kind: 'continue' };
  let before: Rule[] = [];
  if (from.resource) {
    const set = new PolicySet(DEFAULT_CEL_COST_LIMIT, silent);
    set.update({ scope: 'namespaced', namespace: 'ns', name: 'p', uid: 'p', generation: 1, spec: { mode: from.mode, rules: [from.resource] }, ready: null });
    const resources = new ResourcePolicy(set, { podLabels: () => ({ labels: {}, annotations: {} }), namespaceLabels: () => ({}) }, silent);
    before = resourceRules(resources.nativeRules(entry), entry);
  }
  return compileContainerPolicy(entry, unresolved, before).rules.map((r) => ({ ...r, origin: '' }));
}

/** An answer in words, the file's and a decision's alike. */
function expectedWords(answer: string | Json | undefined): string {
  if (answer === undefined || typeof answer === 'string') return String(answer);
  if ('error' in answer) return `error ${answer.error}`;
  if ('value' in answer) return `value ${answer.value}`;
  if ('freeze' in answer) return `freeze ${answer.freeze}`;
  if ('mkdir' in answer) return `mkdir ${JSON.stringify(answer.mkdir)} mode ${answer.mode}`;
  if ('mount' in answer) return `mount cap ${answer.mount.requireCapSysAdmin}`;
  return JSON.stringify(answer);
}

function decisionWords(action: Action | null): string {
  switch (action?.$case) {
    case undefined: return 'ask';
    case 'continue': return 'continue';
    case 'kill': return 'kill';
    case 'error': return `error ${action.error.errno}`;
    case 'value': return `value ${action.value.value}`;
    case 'freeze': return `freeze ${action.freeze.errno}`;
    case 'mkdir': return `mkdir ${JSON.stringify(Buffer.from(action.mkdir.pathBytes ?? []).toString('latin1'))} mode ${action.mkdir.mode}`;
    case 'mount': return `mount cap ${action.mount.requireCapSysAdmin}`;
  }
}

/** A decision in the suffix form, as a data plane that takes it applies it (its addon's SuffixedPath). */
function dataplaneWords(action: Action): string {
  const native = toNativeDecision({ handle: 1n, id: 1n, action, findings: [] }, 1, loadNative().suffixedPath);
  if (typeof native === 'string') return `refused: ${native}`;
  if (native.kind === 'error') return `error ${native.errno}`;
  if (native.kind !== 'mkdir') return native.kind;
  return `mkdir ${JSON.stringify(Buffer.from(native.path).toString('latin1'))} mode ${native.mode}`;
}

for (const policy of cases.policies) {
  test(`rule cases: ${policy.name}`, () => {
    const rules = policy.rules.map(ruleOf);
    if (policy.from) assert.deepEqual(compiledFrom(policy.from), rules, 'the compilers write exactly these rules');
    policy.calls.forEach((call, i) => {
      const what = `call ${i + 1} (${call.syscall}${call.note ? `: ${call.note}` : ''})`;
      const n = notificationOf(call);
      const index = matchRule(rules, n);
      assert.equal(index, call.rule, `${what}: the rule that matches`);
      if (index < 0) return;
      const want = expectedWords(call.answer);
      assert.equal(decisionWords(ruleDecision(rules[index], n, OLDEST_FORMS)), want, `${what}: to a data plane without ${'mkdir-suffix.v1'}`);
      const suffixed = ruleDecision(rules[index], n, { mkdirSuffix: true });
      if (suffixed?.$case === 'mkdir') {
        assert.equal(suffixed.mkdir.pathBytes, undefined, `${what}: only the suffix goes, not the path`);
        assert.equal(dataplaneWords(suffixed), want, `${what}: built by the data plane from the suffix`);
      }
    });
  });
}

test('rule cases: a policy for every listenerMetadata key and every resource action (with when, and in Audit)', () => {
  const metadata = cases.policies.map((p) => String(p.from?.listenerMetadata ?? '')).join('\n');
  const keys = new Set(metadata.split('\n').map((line) => line.split('=')[0]));
  assert.deepEqual([...KNOWN_KEYS].filter((k) => !keys.has(k)), [], 'listenerMetadata keys without a case');
  const resources = cases.policies.map((p) => p.from?.resource).filter((r) => r !== undefined);
  assert.deepEqual(ACTIONS.filter((a) => !resources.some((r) => r[a] !== undefined)), [], 'resource actions without a case');
  assert.ok(resources.some((r) => r.when !== undefined), 'a rule with when');
  assert.ok(cases.policies.some((p) => p.from?.mode === 'Audit'), 'an Audit policy');
});
