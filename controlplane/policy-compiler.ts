// Compiles a container's policy (today: every listenerMetadata key, with the container's pod
// identity) into the rules the data plane answers from natively (proto/seccompagent/v1/
// policy.proto). The data plane keeps them with the container, so the answer a container gets no
// longer depends on whether this process is up. Pure: same entry, same rules, same version.
import { createHash } from 'node:crypto';
import type { FallbackAction } from '../common/default-action';
import { ContainerPolicy, type Rule, type RuleAction } from '../proto/gen/seccompagent/v1/policy';
import { handleToProto } from '../common/container-handle';
import type { ContainerEntry } from './container-registry';

/** Label keys the control plane writes (opaque to the data plane). */
export const LABEL = {
  namespace: 'namespace',
  pod: 'pod',
  container: 'container',
  podUid: 'pod-uid',
  resolution: 'resolution',
} as const;

const MKDIR_SYSCALLS = ['mkdir', 'mkdirat'];
/** mount(source, target, fstype, ...): the filesystem type is argument 2. */
const MOUNT_FSTYPE_ARG = 2;

function rule(syscalls: string[], action: RuleAction['action'], origin: string, paths: Rule['paths'] = []): Rule {
  return { syscalls, args: [], paths, action: { action }, origin };
}

function unresolvedAction(action: FallbackAction): RuleAction['action'] {
  return action.kind === 'continue' ? { $case: 'continue', continue: {} } : { $case: 'error', error: { errno: action.errno } };
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

/** The rules of one container's listenerMetadata, in the order they are tried. */
export function listenerMetadataRules(entry: ContainerEntry, unresolved: FallbackAction): Rule[] {
  const rules: Rule[] = [];
  const plan = entry.mkdir;
  if (plan.kind === 'suffix') {
    rules.push(rule(MKDIR_SYSCALLS, { $case: 'mkdir', mkdir: { suffix: Buffer.from(plan.suffix) } }, 'listenerMetadata MKDIR_TMPL'));
  } else if (plan.kind === 'unresolved' || plan.kind === 'refused') {
    rules.push(rule(MKDIR_SYSCALLS, unresolvedAction(unresolved), `listenerMetadata MKDIR_TMPL, not applied (${plan.kind}): --unresolved-action`));
  }
  const mount = entry.policy.mount;
  for (const fstype of mount?.filesystems ?? []) {
    rules.push(
      rule(['mount'], { $case: 'mount', mount: { requireCapSysAdmin: mount!.needCapAdmin } }, `listenerMetadata mount of ${fstype}`, [
        { index: MOUNT_FSTYPE_ARG, op: 1 /* PATH_OP_EQUAL */, value: Buffer.from(fstype) },
      ]),
    );
  }
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
  const bytes = ContainerPolicy.encode({ handle: 0n, version: '', rules, labels }).finish();
  return createHash('sha256').update(bytes).digest('hex').slice(0, 16);
}

export function compileContainerPolicy(entry: ContainerEntry, unresolved: FallbackAction, before: Rule[] = []): ContainerPolicy {
  const rules = [...before, ...listenerMetadataRules(entry, unresolved)];
  const labels = labelsOf(entry);
  return { handle: handleToProto(entry.handle), version: policyVersion(rules, labels), rules, labels };
}
