// The policy resources in force: for each SeccompNotifyPolicy and ClusterSeccompNotifyPolicy, the
// last generation that compiled (a generation that does not compile is reported and the previous
// one stays in force), and which of them apply to a container, in precedence order:
//   1. the SeccompNotifyPolicies of the pod's namespace, by name;
//   2. the ClusterSeccompNotifyPolicies, by name;
//   3. (outside this module) the profile's listenerMetadata.
// Two Enforce policies of the same level that apply to one container and both name a syscall
// conflict: the first by name answers, every time, and both report it (status.ts).
import { EventEmitter } from 'node:events';
import { AgentError } from '../../../common/errors';
import type { Logger } from '../../../common/logger';
import { compilePolicy, type CompiledPolicy } from './compiler';
import { policyKey, policyRef, type PolicyObject } from './objects';

/** Who a container is, as the selectors see it. */
export interface PolicySubject {
  readonly namespace: string;
  readonly pod: string;
  /** null while the pod status does not name it yet: only policies without `containers` apply. */
  readonly container: string | null;
  readonly labels: Readonly<Record<string, string>>;
  /** null when the namespace is not known (a namespaceSelector then does not match). */
  readonly namespaceLabels: Readonly<Record<string, string>> | null;
}

export interface PolicyEntry {
  readonly key: string;
  /** The latest object seen. */
  readonly object: PolicyObject;
  /** The generation in force; null when none ever compiled. */
  readonly inForce: CompiledPolicy | null;
  /** Why the latest generation is not in force; null when it is. */
  readonly error: AgentError | null;
}

export interface PolicyConflict {
  readonly winner: string;
  readonly loser: string;
  readonly syscalls: readonly string[];
}

export interface Selection {
  readonly policies: readonly CompiledPolicy[];
  readonly conflicts: readonly PolicyConflict[];
}

export interface PolicySetEvents {
  /** Something in force changed (a policy compiled, went away, or failed). */
  changed: [];
}

/**
 * The most rules the data plane takes in one container's policy (native/addon/policy_wire.hpp,
 * kPolicyMaxRules; more is NACKed and every syscall of the container goes to the control plane).
 * A container's policy is its namespace's rules, then the cluster policies', then its
 * listenerMetadata's: each level gets a share, so no namespace can write more than it takes.
 */
export const DATAPLANE_MAX_RULES = 1024;
export const MAX_RULES_PER_NAMESPACE = 768;
export const MAX_CLUSTER_RULES = 192;
/** What is left for listenerMetadata's rules (MKDIR_TMPL, MOUNT_*, DEFAULT_ACTION, ...). */
export const METADATA_RULES_RESERVE = DATAPLANE_MAX_RULES - MAX_RULES_PER_NAMESPACE - MAX_CLUSTER_RULES;

/** Rules a compiled policy becomes in the data plane (a mount rule is one per filesystem type). */
export function nativeRuleCount(policy: CompiledPolicy): number {
  return policy.rules.reduce((n, r) => n + (r.action.kind === 'mount' ? r.action.filesystems.length : 1), 0);
}

const byName = (a: CompiledPolicy, b: CompiledPolicy) => (a.object.name < b.object.name ? -1 : a.object.name > b.object.name ? 1 : 0);

export class PolicySet extends EventEmitter<PolicySetEvents> {
  private readonly entries = new Map<string, PolicyEntry>();
  /** Bumped on every change: selections cached under an older version are stale. */
  version = 0;
  private ordered: { namespaced: Map<string, CompiledPolicy[]>; cluster: CompiledPolicy[] } | null = null;
  /** Policies left out because their level's rules would pass its cap (by key), with why. */
  private capped = new Map<string, AgentError>();

  constructor(
    private readonly costLimit: number,
    private readonly log: Logger,
  ) {
    super();
  }

  get size(): number {
    return this.entries.size;
  }

  values(): IterableIterator<PolicyEntry> {
    return this.entries.values();
  }

  get(key: string): PolicyEntry | undefined {
    return this.entries.get(key);
  }

  /** A new or changed object: compiled when its generation is new. */
  update(object: PolicyObject): void {
    const key = policyKey(object);
    const previous = this.entries.get(key);
    if (previous && previous.object.uid === object.uid && previous.object.generation === object.generation && (previous.inForce || previous.error)) {
      this.entries.set(key, { ...previous, object });
      return;
    }
    const kept = previous && previous.object.uid === object.uid ? previous.inForce : null;
    let entry: PolicyEntry;
    try {
      const compiled = compilePolicy(object, this.costLimit);
      entry = { key, object, inForce: compiled, error: null };
      this.log.info(
        { policy: policyRef(object), generation: object.generation, rules: compiled.rules.length, mode: compiled.mode },
        `${policyRef(object)} generation ${object.generation} in force: ${compiled.rules.length} rules, mode ${compiled.mode}`,
      );
    } catch (err) {
      const error = err as AgentError;
      entry = { key, object, inForce: kept, error };
      this.log.warn(
        { policy: policyRef(object), generation: object.generation, code: error.code },
        `${policyRef(object)} generation ${object.generation} not applied: ${error.message}; ` +
          (kept ? `generation ${kept.generation} stays in force` : 'no generation of it is in force'),
      );
    }
    this.entries.set(key, entry);
    this.touch();
  }

  remove(object: PolicyObject): void {
    const key = policyKey(object);
    if (!this.entries.delete(key)) return;
    this.log.info({ policy: policyRef(object) }, `${policyRef(object)} deleted: it no longer applies`);
    this.touch();
  }

  private touch(): void {
    this.version++;
    this.ordered = null;
    this.emit('changed');
  }

  private order(): NonNullable<PolicySet['ordered']> {
    if (this.ordered) return this.ordered;
    const namespaced = new Map<string, CompiledPolicy[]>();
    const cluster: CompiledPolicy[] = [];
    for (const entry of this.entries.values()) {
      const p = entry.inForce;
      if (!p) continue;
      if (p.object.scope === 'cluster') cluster.push(p);
      else {
        let list = namespaced.get(p.object.namespace);
        if (!list) namespaced.set(p.object.namespace, (list = []));
        list.push(p);
      }
    }
    for (const list of namespaced.values()) list.sort(byName);
    cluster.sort(byName);
    // In order of name, so every node keeps the same policies and refuses the same ones.
    this.capped = new Map();
    const within = (list: CompiledPolicy[], cap: number, level: string): CompiledPolicy[] => {
      let total = 0;
      return list.filter((p) => {
        const count = nativeRuleCount(p);
        if (total + count <= cap) {
          total += count;
          return true;
        }
        this.capped.set(policyKey(p.object), new AgentError('EPOLICY_TOO_MANY_RULES',
          `${level} has ${total} rules in policies before this one by name, and this one's ${count} would pass the ${cap} ${level} may have (what the data plane takes in one container's policy, ${DATAPLANE_MAX_RULES}, shared by the namespace, the cluster policies and listenerMetadata); generation ${p.generation} is not applied`));
        return false;
      });
    };
    for (const [namespace, list] of namespaced) namespaced.set(namespace, within(list, MAX_RULES_PER_NAMESPACE, `namespace ${namespace}`));
    this.ordered = { namespaced, cluster: within(cluster, MAX_CLUSTER_RULES, 'the cluster policies') };
    if (this.capped.size > 0) this.log.warn({ policies: [...this.capped.keys()] }, `${this.capped.size} policies not applied: their namespace (or the cluster policies) would have more rules than the data plane takes; see their status`);
    return this.ordered;
  }

  /** Why the policy at `key` is left out for its level's rule cap (its status says so), or null. */
  cappedBy(key: string): AgentError | null {
    this.order();
    return this.capped.get(key) ?? null;
  }

  /** The policies that apply to a container, in precedence order, and the conflicts among them. */
  select(subject: PolicySubject): Selection {
    const { namespaced, cluster } = this.order();
    const applies = (p: CompiledPolicy) =>
      p.podSelector(subject.labels) &&
      (p.containers === null || (subject.container !== null && p.containers.has(subject.container))) &&
      (p.namespaceSelector === null || (subject.namespaceLabels !== null && p.namespaceSelector(subject.namespaceLabels)));
    const levels = [(namespaced.get(subject.namespace) ?? []).filter(applies), cluster.filter(applies)];
    const conflicts: PolicyConflict[] = [];
    for (const level of levels) {
      const enforcing = level.filter((p) => p.mode === 'Enforce');
      for (let i = 0; i < enforcing.length; i++) {
        for (let j = i + 1; j < enforcing.length; j++) {
          const shared = [...enforcing[i].syscalls].filter((s) => enforcing[j].syscalls.has(s));
          if (shared.length > 0) conflicts.push({ winner: policyKey(enforcing[i].object), loser: policyKey(enforcing[j].object), syscalls: shared.sort() });
        }
      }
    }
    return { policies: [...levels[0], ...levels[1]], conflicts };
  }
}
