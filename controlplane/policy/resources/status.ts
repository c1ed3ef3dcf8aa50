// The status of each policy resource, written without fighting other nodes' agents:
//   - status.observedGeneration, status.rules and the Ready condition are the same on every node
//     (they depend only on the spec), applied with field manager "seccomp-agent": every node's
//     apply carries the same values, so only the first changes anything; lastTransitionTime is
//     kept from the object while Ready's status stays the same, so no node rewrites another's;
//   - status.nodes[] (a list-map keyed by node) holds what only this node knows: how many of its
//     containers the policy applies to and its conflicts, applied with field manager
//     "seccomp-agent/NODE", so server-side apply gives each node its own entry and never lets one
//     node's write drop another's. A node with nothing to say removes its entry, so the list
//     grows with the nodes where the policy matters, not with the cluster.
// Writes are server-side apply PATCHes of the status subresource (RBAC: patch only), off the
// notification path, skipped when nothing changed since the last write.
import type { Logger } from '../../../common/logger';
import type { ContainerEntry } from '../../container-registry';
import { DebouncedTask } from '../../debounced-task';
import { describeKubeError, type KubeConnection } from '../../kube/informer';
import { POLICY_GROUP, POLICY_KINDS, POLICY_VERSION, policyKey, policyRef, type PolicyObject } from './objects';
import type { PolicyEntry, PolicySet } from './set';
import type { ResourcePolicy } from './decision';

export const FIELD_MANAGER = 'seccomp-agent';

/** The reason of Ready=False by error code. */
const REASONS: Record<string, string> = { ECEL_COMPILE: 'CELCompileError', ECEL_COST: 'CELCostExceeded', EPOLICY_INVALID: 'InvalidSpec' };

/** What this node reports for one policy. */
export interface NodeReport {
  containers: number;
  conflicts: string[];
}

/** Ready for one entry: status, reason and a message naming the rule. */
export function readyOf(entry: PolicyEntry, set?: Pick<PolicySet, 'cappedBy'>): { status: 'True' | 'False'; reason: string; message: string } {
  const capped = entry.inForce ? set?.cappedBy(entry.key) : null;
  if (capped) return { status: 'False', reason: 'TooManyRules', message: capped.message };
  if (!entry.error && entry.inForce) {
    const asked = entry.inForce.rules.filter((r) => r.when).length;
    return { status: 'True', reason: 'Compiled', message: `${entry.inForce.rules.length} rules in force (${asked} with when, decided in the control plane)` };
  }
  const kept = entry.inForce ? `generation ${entry.inForce.generation} stays in force` : 'no generation of this policy is in force';
  return { status: 'False', reason: REASONS[entry.error?.code ?? ''] ?? 'InvalidSpec', message: `${entry.error?.message ?? 'not compiled'}; ${kept}` };
}

/** This node's reports for every policy: containers (distinct ids) it applies to, conflicts. */
export function nodeReports(set: PolicySet, containers: Iterable<ContainerEntry>, resources: ResourcePolicy): Map<string, NodeReport> {
  const reports = new Map<string, NodeReport>();
  const report = (key: string) => {
    let r = reports.get(key);
    if (!r) reports.set(key, (r = { containers: 0, conflicts: [] }));
    return r;
  };
  const seen = new Set<string>();
  for (const entry of containers) {
    if (seen.has(entry.containerId)) continue;
    seen.add(entry.containerId);
    const selection = resources.selectionFor(entry)?.selection;
    if (!selection) continue;
    for (const policy of selection.policies) report(policyKey(policy.object)).containers++;
    for (const c of selection.conflicts) {
      const winner = set.get(c.winner)?.object;
      const loser = set.get(c.loser)?.object;
      if (!winner || !loser) continue;
      const text = `${policyRef(winner)} and ${policyRef(loser)} both answer ${c.syscalls.join(', ')}: ${policyRef(winner)} answers (first by name)`;
      for (const key of [c.winner, c.loser]) if (!report(key).conflicts.includes(text)) report(key).conflicts.push(text);
    }
  }
  for (const r of reports.values()) r.conflicts = r.conflicts.sort().slice(0, 16);
  return reports;
}

export class PolicyStatusWriter {
  private readonly written = new Map<string, string>();
  private readonly task = new DebouncedTask(() => this.flush(), 200);
  private periodic: NodeJS.Timeout | null = null;

  constructor(
    private readonly connection: KubeConnection,
    private readonly set: PolicySet,
    private readonly nodeName: string,
    private readonly reports: () => Map<string, NodeReport>,
    private readonly log: Logger,
    private readonly periodMs: number,
  ) {
    set.on('changed', () => this.schedule());
  }

  start(): void {
    this.periodic = setInterval(() => this.schedule(), this.periodMs);
    this.periodic.unref();
    this.schedule();
  }

  stop(): void {
    void this.task.stop();
    if (this.periodic) clearInterval(this.periodic);
  }

  /** Writes soon (debounced): after a policy change, and every periodMs for the container counts. */
  schedule(): void {
    this.task.schedule();
  }

  private async flush(): Promise<void> {
    const reports = this.reports();
    for (const entry of [...this.set.values()]) {
      if (this.task.isStopped) return;
      const object = entry.object;
      const ready = readyOf(entry, this.set);
      const previous = object.ready;
      const lastTransitionTime = previous && previous.status === ready.status && previous.lastTransitionTime ? previous.lastTransitionTime : new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      const shared = {
        observedGeneration: object.generation,
        rules: entry.inForce?.rules.length ?? 0,
        conditions: [{ type: 'Ready', ...ready, observedGeneration: object.generation, lastTransitionTime }],
      };
      const report = reports.get(entry.key);
      const mine = report && (report.containers > 0 || report.conflicts.length > 0)
        ? { nodes: [{ node: this.nodeName, observedGeneration: object.generation, containers: report.containers, ...(report.conflicts.length ? { conflicts: report.conflicts } : {}) }] }
        : { nodes: [] };
      await this.apply(object, FIELD_MANAGER, shared, previous !== null && previous.status === ready.status && previous.reason === ready.reason && previous.message === ready.message && previous.observedGeneration === object.generation);
      await this.apply(object, `${FIELD_MANAGER}/${this.nodeName}`, mine, false);
    }
    for (const key of [...this.written.keys()]) if (!this.set.get(key.split('\u0000')[0])) this.written.delete(key);
  }

  /** One server-side apply of the status subresource, skipped when it would change nothing. */
  private async apply(object: PolicyObject, manager: string, status: Record<string, unknown>, alreadyThere: boolean): Promise<void> {
    const key = `${policyKey(object)}\u0000${manager}`;
    const body = { apiVersion: `${POLICY_GROUP}/${POLICY_VERSION}`, kind: POLICY_KINDS[object.scope].kind, metadata: { name: object.name, ...(object.scope === 'namespaced' ? { namespace: object.namespace } : {}) }, status };
    const text = JSON.stringify(body);
    // The shared part already shows what this node would write (another node wrote it, or this
    // one before a restart): no write, so N nodes do not send N identical applies.
    if (this.written.get(key) === text || alreadyThere) return;
    const { kube, custom } = this.connection;
    const options = kube.setHeaderOptions('Content-Type', kube.PatchStrategy.ServerSideApply);
    const common = { group: POLICY_GROUP, version: POLICY_VERSION, plural: POLICY_KINDS[object.scope].plural, name: object.name, body, fieldManager: manager, force: true };
    try {
      if (object.scope === 'namespaced') await custom.patchNamespacedCustomObjectStatus({ ...common, namespace: object.namespace }, options);
      else await custom.patchClusterCustomObjectStatus(common, options);
      this.written.set(key, text);
    } catch (err) {
      this.log.debug({ policy: policyRef(object), reason: describeKubeError(err) }, `status of ${policyRef(object)} not written (${describeKubeError(err)}); retrying later`);
    }
  }
}
