// The decision of the policy resources for one notification of one container: the first rule, in
// precedence order (set.ts), whose syscalls name the syscall and whose `when` holds. An
// Audit policy's rule does not answer: what Enforce would have done is counted
// (seccompagent_policy_audit_total) and logged, and the search goes on as if the policy were
// absent. null: no policy answers, listenerMetadata decides (../engine.ts).
//
// Synchronous and allocation-light: the selection is cached per container until a policy, a pod
// or a namespace changes; a rule with `when` evaluates CEL (bounded by its cost estimate).
// Rules without `when` need nothing the data plane does not have: nativeRules() lists them per
// container in a plain serialisable form, for compiling into the data plane's rules.
import { errnoName } from '../../../common/errors';
import { abiOf } from '../../../common/syscall-abi';
import type { Logger } from '../../../common/logger';
import type { Decision, Notification, PolicyFinding } from '../../../proto/gen/seccompagent/v1/dataplane';
import { answerKindOf } from '../../../common/answer-labels';
import { performance } from 'node:perf_hooks';
import type { ConditionInput, ConditionResult } from './cel-condition';
import type { ContainerEntry } from '../../container-registry';
import { renderMkdirTemplate } from '../../../common/profile/mkdir-template';
import type { CompiledPolicy, CompiledRule, RuleAction } from './compiler';
import { policyKey, policyLabel, policyRef, type PolicyScope } from './objects';
import type { PolicySet, PolicySubject, Selection } from './set';
import { bytesOf, mkdirDecision, MOUNT_ARGS, mountDecision, OLDEST_FORMS, stringArg, type DataplaneForms } from '../rule-matcher';
import { fallbackMkdirPath } from '../mkdir-path';
import type { ContainerHandle } from '../../../common/container-handle';

type Action = NonNullable<Decision['action']>;

/** Where a container's pod labels and its namespace's labels come from. */
export interface IdentitySources {
  podLabels(namespace: string, pod: string, podUid: string | null): { labels: Readonly<Record<string, string>>; annotations: Readonly<Record<string, string>> } | undefined;
  namespaceLabels(namespace: string): Readonly<Record<string, string>> | undefined;
}

/** One answer of a rule: which policy and rule, and what it gives. */
export interface RuleAnswer {
  readonly policy: CompiledPolicy;
  readonly rule: CompiledRule;
  /** null: the rule matched but its action does not fit this call (a filesystem it does not allow). */
  readonly action: Action;
}

export interface Evaluation {
  /** The Enforce answer, or null (listenerMetadata decides). */
  readonly answer: RuleAnswer | null;
  /** What Audit policies before the answer would have done. */
  readonly audits: readonly RuleAnswer[];
  /** Rules whose `when` failed to evaluate (no such key, not a bool): they did not match. */
  readonly errors: ReadonlyArray<{ readonly policy: CompiledPolicy; readonly rule: CompiledRule; readonly error: string }>;
}

/** A rule without `when`, per container, for the data plane's native rules (JSON-safe). */
export interface NativeRuleSpec {
  readonly policy: { readonly scope: PolicyScope; readonly namespace: string; readonly name: string; readonly generation: number };
  readonly rule: { readonly index: number; readonly name: string };
  readonly syscalls: readonly string[];
  /** ask: the rule has `when`, so the control plane decides it (it keeps its place in the order). */
  readonly action:
    | { readonly kind: 'allow' | 'kill' | 'freeze' | 'log' | 'ask' }
    | { readonly kind: 'errno'; readonly errno: number; readonly name: string }
    | { readonly kind: 'mkdir'; readonly suffix: string }
    | { readonly kind: 'mount'; readonly filesystems: readonly string[]; readonly requireCapSysAdmin: boolean };
  /** Audit policies' rules never answer: the data plane only counts them. */
  readonly audit: boolean;
}


/** What Enforce gives, as words for logs and seccompctl explain: "errno EPERM", "mkdir /tmp/a-x". */
export function describeAction(action: Action | null | undefined): string {
  switch (action?.$case) {
    case 'continue':
      return 'continue';
    case 'error':
      return `errno ${errnoName(action.error.errno)}`;
    case 'kill':
      return 'kill the container';
    case 'freeze':
      return 'freeze the container';
    case 'mkdir':
      return `mkdir ${mkdirPathOf(action.mkdir)} (emulated)`;
    case 'mount':
      return `mount ${action.mount.fstype} on ${action.mount.target} (emulated)`;
    default:
      return 'none';
  }
}

/** The path a mkdir decision creates, for people: one that names a suffix is read as the data plane will build it. */
function mkdirPathOf(mkdir: Extract<Action, { $case: 'mkdir' }>['mkdir']): string {
  const s = mkdir.suffixed;
  if (!s) return mkdir.path;
  const target = fallbackMkdirPath(s.path ?? null, s.truncated, s.suffix);
  return 'path' in target ? target.path.toString('utf8') : `${Buffer.from(s.path ?? []).toString('utf8')} (refused: errno ${errnoName(target.errno)})`;
}

interface CachedSelection {
  readonly epoch: string;
  readonly subject: PolicySubject;
  readonly selection: Selection;
  readonly pod: ConditionInput['pod'];
}

export class ResourcePolicy {
  /** By "policy\u0000rule\u0000namespace": seccompagent_policy_audit_total. */
  readonly audits = new Map<string, number>();
  /** By "policy\u0000rule\u0000action": answers of Enforce rules. */
  readonly answers = new Map<string, number>();
  /** By answerKey: `when` conditions that ran out of budget or deadline (their failurePolicy answered). */
  readonly overBudget = new Map<string, number>();
  /** By "policy\u0000rule": `when` that failed to evaluate. */
  readonly evalErrors = new Map<string, number>();
  private readonly selections = new Map<ContainerHandle, CachedSelection>();
  /** Bumped when a pod or a namespace changes (policy changes bump the set's own version). */
  identityEpoch = 0;
  private readonly lastLogged = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly set: PolicySet,
    private readonly sources: IdentitySources,
    private readonly log: Logger,
    /** What the attached data plane takes (main.ts sets it from each Welcome; shared with the policy engine). */
    private readonly forms: Readonly<DataplaneForms> = OLDEST_FORMS,
  ) {}

  /**
   * For PolicyEngine.decide: the action, or null for listenerMetadata to decide. What Audit
   * policies would have done, and what `log` rules let continue, go into `findings` (the
   * decision carries them to the data plane's Answer event).
   */
  decide(entry: ContainerEntry, n: Notification, findings?: PolicyFinding[], deadline = Infinity): Action | null {
    if (this.set.size === 0) return null;
    const result = this.evaluate(entry, n.syscall, n.args, pathsOf(n), n, deadline);
    for (const audit of result.audits) {
      this.reportAudit(audit, entry, n);
      findings?.push(findingOf(audit, 'Audit'));
    }
    for (const failure of result.errors) this.countError(failure.policy, failure.rule, failure.error, entry);
    if (!result.answer) return null;
    const { policy, rule, action } = result.answer;
    const key = answerKey(policy, rule);
    this.answers.set(key, (this.answers.get(key) ?? 0) + 1);
    if (rule.action.kind === 'log') {
      this.reportAudit(result.answer, entry, n, 'log');
      findings?.push(findingOf(result.answer, 'Log'));
    }
    return action;
  }

  /** The selection for a container, cached until a policy, pod or namespace changes. */
  selectionFor(entry: ContainerEntry): CachedSelection | null {
    const identity = entry.identity;
    if (!identity) return null;
    const epoch = `${this.set.version}/${this.identityEpoch}`;
    const cached = this.selections.get(entry.handle);
    if (cached && cached.epoch === epoch) return cached;
    const pod = this.sources.podLabels(identity.namespace, identity.pod, identity.podUid);
    const subject: PolicySubject = {
      namespace: identity.namespace,
      pod: identity.pod,
      container: identity.container,
      labels: pod?.labels ?? {},
      namespaceLabels: this.sources.namespaceLabels(identity.namespace) ?? null,
    };
    const fresh: CachedSelection = {
      epoch,
      subject,
      selection: this.set.select(subject),
      pod: { namespace: identity.namespace, name: identity.pod, labels: pod?.labels ?? {}, annotations: pod?.annotations ?? {} },
    };
    if (this.selections.size > 65_536) this.selections.clear();
    this.selections.set(entry.handle, fresh);
    return fresh;
  }

  /** A container the data plane closed: forget its cached selection. */
  forget(handle: ContainerHandle): void {
    this.selections.delete(handle);
  }

  /**
   * The shared walk of decide() and seccompctl explain. `n` gives the mkdir/mount operands.
   * `deadline` (performance.now() ms): a `when` reached after it is not evaluated; like one that
   * stops at its evaluation budget, its rule's failurePolicy answers (Fail: the rule's action;
   * Ignore: the next rule), never the data plane's default because someone else was slow.
   */
  evaluate(entry: ContainerEntry, syscall: string, args: readonly bigint[], paths: ReadonlyMap<number, string>, n: Notification | null, deadline = Infinity): Evaluation {
    const none: Evaluation = { answer: null, audits: [], errors: [] };
    const cached = this.selectionFor(entry);
    if (!cached || cached.selection.policies.length === 0) return none;
    const audits: RuleAnswer[] = [];
    const errors: Array<{ policy: CompiledPolicy; rule: CompiledRule; error: string }> = [];
    let input: ConditionInput | null = null;
    for (const policy of cached.selection.policies) {
      if (!policy.syscalls.has(syscall)) continue;
      for (const rule of policy.rules) {
        if (!rule.syscalls.has(syscall)) continue;
        if (rule.when) {
          input ??= { syscall, arch: (n && abiOf(n.arch, n.syscallNr)) || 'x86_64', args, paths, pod: cached.pod, container: entry.identity?.container ?? '' };
          const result: ConditionResult = performance.now() >= deadline
            ? { matched: false, error: 'the decision\'s deadline passed before this when was evaluated', overBudget: true }
            : rule.when.evaluate(input);
          if (result.overBudget) {
            this.overBudget.set(answerKey(policy, rule), (this.overBudget.get(answerKey(policy, rule)) ?? 0) + 1);
            errors.push({ policy, rule, error: `${result.error}; failurePolicy ${rule.failurePolicy}: ${rule.failurePolicy === 'Fail' ? 'the rule answers' : 'the next rule decides'}` });
            if (rule.failurePolicy === 'Ignore') continue;
          } else {
            if (result.error) errors.push({ policy, rule, error: result.error });
            if (!result.matched) continue;
          }
        }
        const action = this.actionOf(rule.action, entry, n);
        if (!action) continue;
        const answer = { policy, rule, action };
        if (policy.mode === 'Audit') {
          audits.push(answer);
          break;
        }
        return { answer, audits, errors };
      }
    }
    return { answer: null, audits, errors };
  }

  /** The rules of every policy that applies to the container, in order, for the data plane. */
  nativeRules(entry: ContainerEntry): NativeRuleSpec[] {
    const cached = this.selectionFor(entry);
    if (!cached) return [];
    const out: NativeRuleSpec[] = [];
    for (const policy of cached.selection.policies) {
      for (const rule of policy.rules) {
        out.push({
          policy: { scope: policy.object.scope, namespace: policy.object.namespace, name: policy.object.name, generation: policy.generation },
          rule: { index: rule.index, name: rule.name },
          syscalls: [...rule.syscalls],
          action: rule.when ? { kind: 'ask' } : nativeAction(rule.action),
          audit: policy.mode === 'Audit',
        });
      }
    }
    return out;
  }

  private actionOf(action: RuleAction, entry: ContainerEntry, n: Notification | null): Action | null {
    switch (action.kind) {
      case 'allow':
      case 'log':
        return { $case: 'continue', continue: {} };
      case 'errno':
        return { $case: 'error', error: { errno: action.errno } };
      case 'kill':
        return { $case: 'kill', kill: { signal: 0 } };
      case 'freeze':
        return { $case: 'freeze', freeze: { errno: 0 } };
      case 'mkdir': {
        const identity = entry.identity;
        if (!n || !identity) return null;
        let suffix: string;
        try {
          suffix = renderMkdirTemplate(action.suffix, identity);
        } catch {
          // {{.Container}} not known yet, or an unsafe suffix: the rule does not answer.
          return null;
        }
        return mkdirDecision(n, Buffer.from(suffix, 'utf8'), this.forms);
      }
      case 'mount': {
        if (!n) return null;
        // As its compiled rule matches: the filesystem type, as bytes, is one the rule allows.
        const fstype = bytesOf(stringArg(n, MOUNT_ARGS.fstype));
        if (!action.filesystems.some((name) => fstype.equals(Buffer.from(name, 'utf8')))) return null;
        return mountDecision(n, action.requireCapSysAdmin);
      }
    }
  }

  private reportAudit(answer: RuleAnswer, entry: ContainerEntry, n: Notification, kind: 'audit' | 'log' = 'audit'): void {
    const namespace = entry.identity?.namespace ?? '';
    const policy = policyLabel(answer.policy.object);
    if (kind === 'audit') {
      const key = `${policy}\u0000${answer.rule.name}\u0000${namespace}`;
      this.audits.set(key, (this.audits.get(key) ?? 0) + 1);
    }
    // At most one line per rule and container a second; the next line says how many it left out.
    const logKey = `${policyKey(answer.policy.object)}\u0000${answer.rule.name}\u0000${entry.containerId}`;
    const now = Date.now();
    const last = this.lastLogged.get(logKey);
    if (last && now - last.at < 1000) {
      last.suppressed++;
      return;
    }
    if (this.lastLogged.size > 4096) this.lastLogged.clear();
    this.lastLogged.set(logKey, { at: now, suppressed: 0 });
    const would = describeAction(answer.action);
    this.log.info(
      {
        policy: policyRef(answer.policy.object),
        rule: answer.rule.name,
        mode: kind === 'audit' ? 'Audit' : 'Enforce',
        namespace,
        pod: entry.identity?.pod,
        container: entry.containerId,
        syscall: n.syscall,
        id: String(n.id),
        would,
        suppressed: last?.suppressed ?? 0,
      },
      kind === 'audit'
        ? `audit: ${policyRef(answer.policy.object)} rule ${answer.rule.name} would answer ${n.syscall} of container ${entry.containerId} with ${would}; it continues`
        : `log: ${policyRef(answer.policy.object)} rule ${answer.rule.name} let ${n.syscall} of container ${entry.containerId} continue`,
    );
  }

  private countError(policy: CompiledPolicy, rule: CompiledRule, error: string, entry: ContainerEntry): void {
    const key = `${policyLabel(policy.object)}\u0000${rule.name}`;
    const count = (this.evalErrors.get(key) ?? 0) + 1;
    this.evalErrors.set(key, count);
    if (count === 1 || count % 1000 === 0) {
      this.log.debug({ policy: policyRef(policy.object), rule: rule.name, container: entry.containerId, error, count }, `${policyRef(policy.object)} rule ${rule.name}: when did not evaluate (${error}); the rule does not match`);
    }
  }
}

/** The answers map's key of a rule, made once per compiled rule (the notification path only looks it up). */
const ANSWER_KEYS = new WeakMap<CompiledRule, string>();
function answerKey(policy: CompiledPolicy, rule: CompiledRule): string {
  let key = ANSWER_KEYS.get(rule);
  if (key === undefined) {
    key = `${policyLabel(policy.object)}\u0000${rule.name}\u0000${rule.action.kind}`;
    ANSWER_KEYS.set(rule, key);
  }
  return key;
}

/** A rule's verdict as the API carries it (Decision.findings, Answer.findings). */
function findingOf(answer: RuleAnswer, mode: 'Audit' | 'Log'): PolicyFinding {
  const action = answer.action;
  return {
    policy: policyRef(answer.policy.object),
    rule: answer.rule.name,
    mode,
    action: describeAction(action),
    kind: answerKindOf(action.$case),
    errno: action.$case === 'error' ? action.error.errno : 0,
  };
}

function nativeAction(action: RuleAction): NativeRuleSpec['action'] {
  switch (action.kind) {
    case 'errno':
      return { kind: 'errno', errno: action.errno, name: action.name };
    case 'mkdir':
      return { kind: 'mkdir', suffix: action.suffix.source };
    case 'mount':
      return { kind: 'mount', filesystems: action.filesystems, requireCapSysAdmin: action.requireCapSysAdmin };
    default:
      return { kind: action.kind };
  }
}

/** The paths the data plane read, by argument index (the one place that reads stringArgs for CEL). */
export function pathsOf(n: Notification): ReadonlyMap<number, string> {
  const paths = new Map<number, string>();
  for (const s of n.stringArgs) paths.set(s.index, s.value);
  return paths;
}
