// One generation of a policy resource compiled: its selectors as functions, each rule's syscalls
// as a set, its `when` as a compiled CEL condition, its action checked. Compiled once per
// generation (never on the notification path); an error names the rule, so the status can say
// which one, and the policy's previous generation stays in force (set.ts).
import { AgentError, ERRNO_BY_NAME } from '../../../common/errors';
import { compileCondition, type CompiledCondition } from './cel-condition';
import { parseMkdirTemplate, type MkdirTemplate } from '../../../common/profile/mkdir-template';
import type { PolicyObject } from './objects';

export type PolicyMode = 'Enforce' | 'Audit';

export type RuleAction =
  | { readonly kind: 'allow' }
  | { readonly kind: 'errno'; readonly name: string; readonly errno: number }
  | { readonly kind: 'kill' }
  | { readonly kind: 'freeze' }
  | { readonly kind: 'mkdir'; readonly suffix: MkdirTemplate }
  | { readonly kind: 'mount'; readonly filesystems: readonly string[]; readonly requireCapSysAdmin: boolean }
  | { readonly kind: 'log' };

export const ACTIONS = ['allow', 'errno', 'kill', 'freeze', 'mkdir', 'mount', 'log'] as const;

/**
 * What a rule does when its `when` cannot be evaluated in time (over its evaluation budget, or the
 * decision's deadline passed), as ValidatingAdmissionPolicy's failurePolicy: Fail answers with the
 * rule's action (fail closed), Ignore lets the next rule decide.
 */
export type FailurePolicy = 'Fail' | 'Ignore';

/** The default: fail closed for the rules that deny (errno, kill, freeze), ignore for the others. */
export function defaultFailurePolicy(action: RuleAction): FailurePolicy {
  return action.kind === 'errno' || action.kind === 'kill' || action.kind === 'freeze' ? 'Fail' : 'Ignore';
}

export interface CompiledRule {
  readonly index: number;
  /** spec.rules[i].name, or "rules[i]". */
  readonly name: string;
  readonly syscalls: ReadonlySet<string>;
  readonly when: CompiledCondition | null;
  readonly action: RuleAction;
  /** spec.rules[i].failurePolicy, else defaultFailurePolicy(action). */
  readonly failurePolicy: FailurePolicy;
}

export type LabelMatcher = (labels: Readonly<Record<string, string>>) => boolean;

export interface CompiledPolicy {
  readonly object: PolicyObject;
  readonly generation: number;
  readonly mode: PolicyMode;
  readonly podSelector: LabelMatcher;
  /** Cluster kind only; null: every namespace. */
  readonly namespaceSelector: LabelMatcher | null;
  /** null: every container of a selected pod. */
  readonly containers: ReadonlySet<string> | null;
  readonly rules: readonly CompiledRule[];
  /** Syscalls any rule names. */
  readonly syscalls: ReadonlySet<string>;
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

function invalid(where: string, what: string): AgentError {
  return new AgentError('EPOLICY_INVALID', `${where}: ${what}`);
}

function stringList(value: unknown, where: string, nonEmpty: boolean): string[] {
  if (value === undefined || value === null) {
    if (nonEmpty) throw invalid(where, 'is required');
    return [];
  }
  if (!Array.isArray(value) || value.some((s) => typeof s !== 'string' || s === '')) throw invalid(where, 'must be a list of non-empty strings');
  if (nonEmpty && value.length === 0) throw invalid(where, 'must not be empty');
  return value as string[];
}

/** A metav1.LabelSelector as a function; absent or empty selects everything. */
export function compileLabelSelector(selector: unknown, where: string): LabelMatcher {
  if (selector === undefined || selector === null) return () => true;
  if (!isObject(selector)) throw invalid(where, 'must be a LabelSelector');
  const tests: LabelMatcher[] = [];
  const matchLabels = selector.matchLabels ?? {};
  if (!isObject(matchLabels)) throw invalid(`${where}.matchLabels`, 'must be a map of strings');
  for (const [key, value] of Object.entries(matchLabels)) {
    if (typeof value !== 'string') throw invalid(`${where}.matchLabels.${key}`, 'must be a string');
    tests.push((labels) => labels[key] === value);
  }
  const expressions = selector.matchExpressions ?? [];
  if (!Array.isArray(expressions)) throw invalid(`${where}.matchExpressions`, 'must be a list');
  expressions.forEach((e: unknown, i) => {
    const at = `${where}.matchExpressions[${i}]`;
    if (!isObject(e) || typeof e.key !== 'string' || e.key === '') throw invalid(at, 'needs a key');
    const key = e.key;
    const values = stringList(e.values, `${at}.values`, false);
    switch (e.operator) {
      case 'In':
      case 'NotIn': {
        if (values.length === 0) throw invalid(at, `${e.operator} needs values`);
        const set = new Set(values);
        tests.push(e.operator === 'In' ? (l) => key in l && set.has(l[key]) : (l) => !(key in l) || !set.has(l[key]));
        break;
      }
      case 'Exists':
      case 'DoesNotExist':
        if (values.length > 0) throw invalid(at, `${e.operator} takes no values`);
        tests.push(e.operator === 'Exists' ? (l) => key in l : (l) => !(key in l));
        break;
      default:
        throw invalid(at, `operator ${JSON.stringify(e.operator)} is not In, NotIn, Exists or DoesNotExist`);
    }
  });
  return (labels) => tests.every((t) => t(labels));
}

function compileAction(rule: Json, where: string): RuleAction {
  const present = ACTIONS.filter((a) => rule[a] !== undefined && rule[a] !== null);
  if (present.length !== 1) throw invalid(where, `needs exactly one action (allow, errno, kill, freeze, mkdir, mount or log), has ${present.length === 0 ? 'none' : present.join(', ')}`);
  const kind = present[0];
  const value = rule[kind];
  switch (kind) {
    case 'errno': {
      const errno = typeof value === 'string' ? ERRNO_BY_NAME[value] : undefined;
      if (errno === undefined) throw invalid(`${where}.errno`, `${JSON.stringify(value)} is not an errno name such as EPERM`);
      return { kind, name: value as string, errno };
    }
    case 'mkdir': {
      if (!isObject(value) || typeof value.suffix !== 'string') throw invalid(`${where}.mkdir`, 'needs a suffix template');
      try {
        return { kind, suffix: parseMkdirTemplate(value.suffix) };
      } catch (err) {
        throw invalid(`${where}.mkdir.suffix`, (err as Error).message);
      }
    }
    case 'mount': {
      if (!isObject(value)) throw invalid(`${where}.mount`, 'needs filesystems');
      const filesystems = stringList(value.filesystems, `${where}.mount.filesystems`, true);
      return { kind, filesystems: Object.freeze([...new Set(filesystems)]), requireCapSysAdmin: value.requireCapSysAdmin === true };
    }
    default:
      if (!isObject(value) || Object.keys(value).length > 0) throw invalid(`${where}.${kind}`, 'takes no fields ({})');
      return { kind };
  }
}

/**
 * Compiles one generation. Throws AgentError EPOLICY_INVALID, ECEL_COMPILE or ECEL_COST with a
 * message that starts with the rule it is about ("rules[1] (deny-etc).when: ...").
 */
export function compilePolicy(object: PolicyObject, costLimit: number): CompiledPolicy {
  const spec = object.spec;
  if (!isObject(spec)) throw invalid('spec', 'is missing');
  const mode = spec.mode ?? 'Enforce';
  if (mode !== 'Enforce' && mode !== 'Audit') throw invalid('spec.mode', `${JSON.stringify(mode)} is not Enforce or Audit`);
  const selector = spec.selector ?? {};
  if (!isObject(selector)) throw invalid('spec.selector', 'must be an object');
  if (object.scope === 'namespaced' && selector.namespaceSelector !== undefined) {
    throw invalid('spec.selector.namespaceSelector', 'is only for ClusterSeccompNotifyPolicy; a SeccompNotifyPolicy applies to its own namespace');
  }
  const containers = stringList(spec.containers, 'spec.containers', false);
  if (!Array.isArray(spec.rules) || spec.rules.length === 0) throw invalid('spec.rules', 'needs at least one rule');
  const syscalls = new Set<string>();
  const rules = spec.rules.map((raw: unknown, index: number): CompiledRule => {
    const named = isObject(raw) && typeof raw.name === 'string' && raw.name !== '' ? raw.name : null;
    const name = named ?? `rules[${index}]`;
    const where = named ? `rules[${index}] (${named})` : `rules[${index}]`;
    if (!isObject(raw)) throw invalid(where, 'must be an object');
    const names = stringList(raw.syscalls, `${where}.syscalls`, true);
    const action = compileAction(raw, where);
    if (action.kind === 'mkdir' && names.some((s) => s !== 'mkdir' && s !== 'mkdirat')) throw invalid(where, 'the mkdir action only answers mkdir and mkdirat');
    if (action.kind === 'mount' && names.some((s) => s !== 'mount')) throw invalid(where, 'the mount action only answers mount');
    let when: CompiledCondition | null = null;
    if (raw.when !== undefined && raw.when !== null) {
      if (typeof raw.when !== 'string' || raw.when.trim() === '') throw invalid(`${where}.when`, 'must be a CEL expression');
      try {
        when = compileCondition(raw.when, costLimit);
      } catch (err) {
        const e = err as AgentError;
        throw new AgentError(e.code ?? 'ECEL_COMPILE', `${where}.when: ${e.message}`, { cause: err });
      }
    }
    const failurePolicy = raw.failurePolicy ?? defaultFailurePolicy(action);
    if (failurePolicy !== 'Fail' && failurePolicy !== 'Ignore') throw invalid(`${where}.failurePolicy`, `${JSON.stringify(failurePolicy)} is not Fail or Ignore`);
    for (const s of names) syscalls.add(s);
    return Object.freeze({ index, name, syscalls: new Set(names), when, action: Object.freeze(action), failurePolicy });
  });
  return Object.freeze({
    object,
    generation: object.generation,
    mode,
    podSelector: compileLabelSelector(selector.podSelector, 'spec.selector.podSelector'),
    namespaceSelector: object.scope === 'cluster' && selector.namespaceSelector !== undefined ? compileLabelSelector(selector.namespaceSelector, 'spec.selector.namespaceSelector') : null,
    containers: containers.length === 0 ? null : new Set(containers),
    rules: Object.freeze(rules),
    syscalls,
  });
}
