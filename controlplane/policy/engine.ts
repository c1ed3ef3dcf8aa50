// Decides each notification the data plane asks about: the policy resources first
// (resources/decision.ts), then the container's listenerMetadata, by matching the rules compiled from
// it (compiler.ts), the very rules the data plane answers from natively (rule-matcher.ts):
// one meaning, whichever plane decides. What only the control plane can do stays here: pod
// identity (the registry), holds of EXEC_PATTERN and SIDECARS (listener-metadata/exec-hold.ts, the ask rules),
// counts and logging. Synchronous: a Map lookup, a rule walk and byte work only.
// Paths are bytes: decisions carry the exact bytes the container gave (`*_bytes` fields), and the
// string fields beside them only their lossy UTF-8 reading, for data planes older than those.
import { handleFromProto } from '../../common/container-handle';
import type { FallbackAction } from '../../common/default-action';
import type { Logger } from '../../common/logger';
import type { Decision, Notification, PolicyFinding } from '../../proto/gen/seccompagent/v1/dataplane';
import type { Rule } from '../../proto/gen/seccompagent/v1/policy';
import type { ContainerEntry, ContainerRegistry } from '../container-registry';
import type { ExecHolds } from './listener-metadata/exec-hold';
import { answersUnresolvedMkdir, listenerMetadataRules } from './compiler';
import { matchRule, OLDEST_FORMS, ruleDecision, type Action, type DataplaneForms } from './rule-matcher';

/** Decision counts by action, for metrics. */
export type DecisionKind = 'continue' | 'error' | 'value' | 'mkdir' | 'mount' | 'kill' | 'freeze' | 'unresolved';

/** An entry's listenerMetadata rules, compiled for its identity and mkdir plan as they were. */
interface CompiledFor {
  readonly identity: ContainerEntry['identity'];
  readonly mkdir: ContainerEntry['mkdir'];
  readonly rules: readonly Rule[];
}

export class PolicyEngine {
  readonly counts = new Map<DecisionKind, number>();

  constructor(
    private readonly registry: Pick<ContainerRegistry, 'get'>,
    private readonly unresolvedAction: FallbackAction,
    private readonly log: Logger,
    /** The policy resources (resources/decision.ts) answer first; null falls through to listenerMetadata. */
    private readonly resources?: { decide(entry: ContainerEntry, n: Notification, findings?: PolicyFinding[], deadline?: number): Decision['action'] | null },
    /** EXEC_PATTERN and SIDECARS (listener-metadata/exec-hold.ts): an execve that waits is answered later. */
    private readonly holds?: Pick<ExecHolds, 'decide'>,
    /** What the attached data plane takes (main.ts sets it from each Welcome; the resources share it). */
    private readonly forms: Readonly<DataplaneForms> = OLDEST_FORMS,
  ) {}

  /** Each entry's compiled listenerMetadata rules, until its identity or mkdir plan changes. */
  private readonly compiled = new WeakMap<ContainerEntry, CompiledFor>();

  private count(kind: DecisionKind): void {
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
  }

  /** The decision now (an execve that EXEC_PATTERN or SIDECARS would hold continues at once). */
  decide(n: Notification): Decision {
    return this.decideWith(n, false) as Decision;
  }

  /** For the data plane link: the decision, or a Promise of it for an execve that EXEC_PATTERN or SIDECARS holds. */
  answer(n: Notification, deadline?: number): Decision | Promise<Decision> {
    return this.decideWith(n, true, deadline);
  }

  private decideWith(n: Notification, holding: boolean, deadline?: number): Decision | Promise<Decision> {
    const entry = this.registry.get(handleFromProto(n.handle));
    const findings: PolicyFinding[] = [];
    if (!entry) return { handle: n.handle, id: n.id, action: this.continueUnknown(n), findings };
    const answered = this.resources?.decide(entry, n, findings, deadline);
    if (answered) return { handle: n.handle, id: n.id, action: answered, findings };
    const action = this.listenerMetadataAction(entry, n, holding);
    return action instanceof Promise ? action.then((a) => ({ handle: n.handle, id: n.id, action: a, findings })) : { handle: n.handle, id: n.id, action, findings };
  }

  /**
   * The first of the container's listenerMetadata rules that matches answers, as on the data
   * plane. Its ask rules (EXEC_PATTERN, SIDECARS) are the holds': answering, an execve may wait;
   * deciding now, or when no hold is taken, the next rule answers (the other execves continue).
   */
  private listenerMetadataAction(entry: ContainerEntry, n: Notification, holding: boolean): Action | Promise<Action> {
    const rules = this.rulesOf(entry);
    for (let index = matchRule(rules, n); index >= 0; index = matchRule(rules, n, index + 1)) {
      const rule = rules[index];
      if (rule.action?.action?.$case === 'ask') {
        const held = holding ? this.holds?.decide(entry, n) : null;
        if (!held) continue;
        this.count('continue');
        return held;
      }
      const action = ruleDecision(rule, n, this.forms);
      if (!action) continue;
      this.count(answersUnresolvedMkdir(rule) ? 'unresolved' : action.$case);
      return action;
    }
    // Not reached: compiled listenerMetadata ends with a rule for every syscall.
    this.count('continue');
    return { $case: 'continue', continue: {} };
  }

  private rulesOf(entry: ContainerEntry): readonly Rule[] {
    const cached = this.compiled.get(entry);
    if (cached && cached.identity === entry.identity && cached.mkdir === entry.mkdir) return cached.rules;
    const rules = listenerMetadataRules(entry, this.unresolvedAction);
    this.compiled.set(entry, { identity: entry.identity, mkdir: entry.mkdir, rules });
    return rules;
  }

  private continueUnknown(n: Notification): Decision['action'] {
    this.log.debug({ handle: Number(n.handle), id: String(n.id), syscall: n.syscall }, 'notification for a container the control plane does not know yet: continue');
    this.count('continue');
    return { $case: 'continue', continue: {} };
  }
}
