// The policy resources in force: for each SeccompNotifyPolicy and ClusterSeccompNotifyPolicy, the
// last generation that compiled (a generation that does not compile is reported and the previous
// one stays in force), and which of them apply to a container, in precedence order:
//   1. the SeccompNotifyPolicies of the pod's namespace, by name;
//   2. the ClusterSeccompNotifyPolicies, by name;
//   3. (outside this module) the profile's listenerMetadata.
// Two Enforce policies of the same level that apply to one container and both name a syscall
// conflict: the first by name answers, every time, and both report it (policy-status.ts).
import { EventEmitter } from 'node:events';
import type { AgentError } from '../common/errors';
import type { Logger } from '../common/logger';
import { compilePolicy, type CompiledPolicy } from './resource-compiler';
import { policyKey, policyRef, type PolicyObject } from './policy-objects';

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

const byName = (a: CompiledPolicy, b: CompiledPolicy) => (a.object.name < b.object.name ? -1 : a.object.name > b.object.name ? 1 : 0);

export class PolicySet extends EventEmitter<PolicySetEvents> {
  private readonly entries = new Map<string, PolicyEntry>();
  /** Bumped on every change: selections cached under an older version are stale. */
  version = 0;
  private ordered: { namespaced: Map<string, CompiledPolicy[]>; cluster: CompiledPolicy[] } | null = null;

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
    this.ordered = { namespaced, cluster };
    return this.ordered;
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
