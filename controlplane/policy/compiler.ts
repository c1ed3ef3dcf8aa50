// Compiles a container's policy (today: every listenerMetadata key, with the container's pod
// identity) into the rules the data plane answers from natively (proto/seccompagent/v1/
// policy.proto). The data plane keeps them with the container, so the answer a container gets no
// longer depends on whether this process is up. Pure: same entry, same rules, same version.
import { createHash } from 'node:crypto';
import type { FallbackAction } from '../../common/default-action';
import { emulationNamed } from '../../common/emulations';
import { ContainerPolicy, type Rule, type RuleAction } from '../../proto/gen/seccompagent/v1/policy';
import { handleToProto } from '../../common/container-handle';
import type { ContainerEntry } from '../container-registry';
import { sidecarDelayApplies } from './listener-metadata/exec-hold';
import { parseMkdirTemplate, renderMkdirTemplate } from '../../common/profile/mkdir-template';
import { policyRef } from './resources/objects';
import type { NativeRuleSpec } from './resources/decision';
import { MOUNT_ARGS } from './rule-matcher';

/** Label keys the control plane writes (opaque to the data plane). */
export const LABEL = {
  namespace: 'namespace',
  pod: 'pod',
  container: 'container',
  podUid: 'pod-uid',
  resolution: 'resolution',
} as const;

/** The syscalls the mkdir emulation answers (common/emulations.ts, the native table's twin). */
const MKDIR_SYSCALLS = [...emulationNamed('mkdir')!.syscalls];

function rule(syscalls: string[], action: RuleAction['action'], origin: string, paths: Rule['paths'] = []): Rule {
  return { syscalls, args: [], paths, action: { action }, origin };
}

function unresolvedAction(action: FallbackAction): RuleAction['action'] {
  return action.kind === 'continue' ? { $case: 'continue', continue: {} } : { $case: 'error', error: { errno: action.errno } };
}

/** One mount rule per filesystem type (the type is argument 2, compared as bytes). */
function mountRules(filesystems: readonly string[], requireCapSysAdmin: boolean, origin: (fstype: string) => string): Rule[] {
  return filesystems.map((fstype) =>
    rule(['mount'], { $case: 'mount', mount: { requireCapSysAdmin } }, origin(fstype), [
      { index: MOUNT_ARGS.fstype, op: 1 /* PATH_OP_EQUAL */, value: Buffer.from(fstype) },
    ]),
  );
}

const ASK: RuleAction['action'] = { $case: 'ask', ask: {} };
/** Rule.origin is at most 256 bytes. */
const ORIGIN_MAX = 256;

function originOf(spec: NativeRuleSpec, how: string): string {
  const text = `${policyRef(spec.policy)} rule ${spec.rule.name}${how}`;
  return Buffer.byteLength(text) <= ORIGIN_MAX ? text : Buffer.from(text).subarray(0, ORIGIN_MAX - 3).toString('utf8').replace(/\uFFFD*$/, '') + '...';
}

/**
 * The policy resources' rules for one container, in precedence order (resources/set.ts: namespaced
 * policies, then cluster-scoped ones; first rule first), placed before its listenerMetadata rules.
 * A rule without `when` in an Enforce policy compiles to the data plane's own rule: it answers
 * natively, also while no control plane is attached. What needs the control plane stays an ask
 * rule in its place (so every later rule for that syscall is decided there too):
 *   - a rule with `when` (CEL is evaluated in the control plane);
 *   - every rule of an Audit policy, and `log` rules: what Enforce would have done is reported
 *     (Watch event, seccompagent_policy_audit_total), which a native answer cannot do; the
 *     syscall continues either way, so while no control plane is attached the default (continue)
 *     gives the same answer and only the report is missing (docs/policy.md);
 *   - a mkdir suffix that cannot be rendered for this container yet (its name is not known).
 */
export function resourceRules(specs: readonly NativeRuleSpec[], entry: ContainerEntry): Rule[] {
  const rules: Rule[] = [];
  for (const spec of specs) {
    const syscalls = [...spec.syscalls];
    const action = spec.action;
    if (spec.audit || action.kind === 'ask' || action.kind === 'log') {
      const why = spec.audit ? ' (Audit)' : action.kind === 'log' ? ' (log)' : ' (when)';
      rules.push(rule(syscalls, ASK, originOf(spec, `${why}: decided by the control plane`)));
      continue;
    }
    switch (action.kind) {
      case 'allow':
        rules.push(rule(syscalls, { $case: 'continue', continue: {} }, originOf(spec, '')));
        break;
      case 'errno':
        rules.push(rule(syscalls, { $case: 'error', error: { errno: action.errno } }, originOf(spec, '')));
        break;
      case 'kill':
        rules.push(rule(syscalls, { $case: 'kill', kill: {} }, originOf(spec, '')));
        break;
      case 'freeze':
        rules.push(rule(syscalls, { $case: 'freeze', freeze: { errno: 0 } }, originOf(spec, '')));
        break;
      case 'mkdir': {
        let suffix: string | null = null;
        try {
          if (entry.identity) suffix = renderMkdirTemplate(parseMkdirTemplate(action.suffix), entry.identity);
        } catch {
          suffix = null; // {{.Container}} not known yet: the control plane decides, as it does for this rule
        }
        rules.push(suffix === null ? rule(syscalls, ASK, originOf(spec, ' (mkdir suffix not known yet): decided by the control plane')) : rule(syscalls, { $case: 'mkdir', mkdir: { suffix: Buffer.from(suffix) } }, originOf(spec, '')));
        break;
      }
      case 'mount':
        rules.push(...mountRules(action.filesystems, action.requireCapSysAdmin, (fstype) => originOf(spec, ` mount of ${fstype}`)));
        break;
    }
  }
  return rules;
}

/** The labels that say who the container is, kept by the data plane across restarts. */
export function labelsOf(entry: ContainerEntry): Record<string, string> {
  const labels: Record<string, string> = { [LABEL.resolution]: entry.resolution };
  const id = entry.identity;
  if (id) {
    labels[LABEL.namespace] = id.namespace;
    labels[LABEL.pod] = id.pod;
    if (id.container !== null) labels[LABEL.container] = id.container;
    if (id.podUid !== null) labels[LABEL.podUid] = id.podUid;
  }
  return labels;
}

const UNRESOLVED_MKDIR = new WeakSet<Rule>();

/** The rule stands for a MKDIR_TMPL not applied (identity unknown, or refused): its answers are counted apart ("unresolved"). */
export function answersUnresolvedMkdir(rule: Rule): boolean {
  return UNRESOLVED_MKDIR.has(rule);
}

/** The rules of one container's listenerMetadata, in the order they are tried. */
export function listenerMetadataRules(entry: ContainerEntry, unresolved: FallbackAction): Rule[] {
  const rules: Rule[] = [];
  // EXEC_PATTERN, SIDECARS: the execves that may wait are asked (the control plane holds them with
  // a timer, listener-metadata/exec-hold.ts); every other execve continues natively, as kinvolk's handler lets it.
  const { exec, sidecars } = entry.policy;
  if (exec && exec.durationMs > 0) {
    rules.push(rule(['execve'], ASK, 'listenerMetadata EXEC_PATTERN: held EXEC_DURATION by the control plane', [
      { index: 0, op: 1 /* PATH_OP_EQUAL */, value: Buffer.from(exec.pattern) },
    ]));
  }
  if (sidecarDelayApplies(entry)) rules.push(rule(['execve'], ASK, 'listenerMetadata SIDECARS: the init\'s execve waits SIDECARS_DELAY (control plane)'));
  if (exec || sidecars) rules.push(rule(['execve'], { $case: 'continue', continue: {} }, 'listenerMetadata EXEC_PATTERN/SIDECARS: other execve continue'));
  const plan = entry.mkdir;
  if (plan.kind === 'suffix') {
    rules.push(rule(MKDIR_SYSCALLS, { $case: 'mkdir', mkdir: { suffix: Buffer.from(plan.suffix) } }, 'listenerMetadata MKDIR_TMPL'));
  } else if (plan.kind === 'unresolved' || plan.kind === 'refused') {
    const notApplied = rule(MKDIR_SYSCALLS, unresolvedAction(unresolved), `listenerMetadata MKDIR_TMPL, not applied (${plan.kind}): --unresolved-action`);
    UNRESOLVED_MKDIR.add(notApplied);
    rules.push(notApplied);
  }
  const mount = entry.policy.mount;
  if (mount) rules.push(...mountRules(mount.filesystems, mount.needCapAdmin, (fstype) => `listenerMetadata mount of ${fstype}`));
  // Every other notified syscall: DEFAULT_ACTION, else continue. Ending with a rule for every
  // syscall keeps such a container off the control plane's path altogether.
  switch (entry.policy.defaultAction) {
    case 'kill-container':
      rules.push(rule([], { $case: 'kill', kill: {} }, 'listenerMetadata DEFAULT_ACTION=kill-container'));
      break;
    case 'freeze-container':
      rules.push(rule([], { $case: 'freeze', freeze: { errno: 0 } }, 'listenerMetadata DEFAULT_ACTION=freeze-container'));
      break;
    default:
      rules.push(rule([], { $case: 'continue', continue: {} }, 'no rule of its own: continue'));
  }
  return rules;
}

/** Equal rules and labels give an equal version, so an unchanged policy is never pushed again. */
export function policyVersion(rules: Rule[], labels: Record<string, string>): string {
  const bytes = ContainerPolicy.encode({ handle: 0n, version: '', rules, labels, sequence: 0n }).finish();
  return createHash('sha256').update(bytes).digest('hex').slice(0, 16);
}

export function compileContainerPolicy(entry: ContainerEntry, unresolved: FallbackAction, before: Rule[] = []): ContainerPolicy {
  const rules = [...before, ...listenerMetadataRules(entry, unresolved)];
  const labels = labelsOf(entry);
  return { handle: handleToProto(entry.handle), version: policyVersion(rules, labels), rules, labels, sequence: 0n };
}
