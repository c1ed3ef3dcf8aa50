// Keeps the data plane's copy of every container's compiled policy current: compiles each
// registry entry, pushes only what the data plane does not hold already (by version: its
// snapshot says what it holds, ACKs say what it took), and says what a NACK refused. Whatever is
// pushed, the data plane answers from it natively and keeps it when this process goes away.
import type { ContainerHandle } from '../../common/container-handle';
import { handleFromProto } from '../../common/container-handle';
import type { FallbackAction } from '../../common/default-action';
import type { Logger } from '../../common/logger';
import type { Container } from '../../proto/gen/seccompagent/v1/dataplane';
import type { ContainerPolicy, PolicyAck, Rule } from '../../proto/gen/seccompagent/v1/policy';
import type { ContainerEntry, ContainerRegistry } from '../container-registry';
import { compileContainerPolicy } from './compiler';

export interface PolicyPusherOptions {
  registry: Pick<ContainerRegistry, 'get' | 'values'>;
  unresolvedAction: FallbackAction;
  /** Sends one PolicyPush on the attached session (false: none attached now). */
  send: (policies: ContainerPolicy[]) => boolean;
  log: Logger;
  /** Rules placed before the listenerMetadata ones (Kubernetes policy resources). */
  rulesBefore?: (entry: ContainerEntry) => Rule[];
}

export class PolicyPusher {
  /** The version the data plane holds for each handle ('' none). */
  private readonly inForce = new Map<ContainerHandle, string>();
  /** Versions pushed and not acked yet. */
  private readonly inFlight = new Map<ContainerHandle, string>();
  private readonly dirty = new Set<ContainerHandle>();
  private flushScheduled = false;
  pushed = 0;
  refused = 0;
  /** ContainerPolicy.sequence of the last push. */
  private sequence = 0n;
  /** Pushes for containers that had exited by the time they arrived (not refusals). */
  gone = 0;
  /** The attached data plane speaks POLICY_FEATURE (its Welcome said so). */
  enabled = false;

  constructor(private readonly options: PolicyPusherOptions) {}

  /** The data plane's containers when a session starts: what it holds replaces what was known. */
  onSnapshot(containers: readonly Container[]): void {
    this.inForce.clear();
    this.inFlight.clear();
    for (const c of containers) this.inForce.set(handleFromProto(c.handle), c.policyVersion);
    for (const c of containers) this.markDirty(handleFromProto(c.handle));
  }

  onContainerAdded(container: Container): void {
    const handle = handleFromProto(container.handle);
    this.inForce.set(handle, container.policyVersion);
    this.markDirty(handle);
  }

  onContainerRemoved(handle: ContainerHandle): void {
    this.inForce.delete(handle);
    this.inFlight.delete(handle);
    this.dirty.delete(handle);
  }

  /** An entry's policy may have changed (its identity resolved, a policy resource changed). */
  markDirty(handle: ContainerHandle): void {
    this.dirty.add(handle);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => this.flush());
  }

  /** Every known container again (a policy resource changed). */
  markAllDirty(): void {
    for (const entry of this.options.registry.values()) this.markDirty(entry.handle);
  }

  /** The policy this control plane would push for an entry now (seccompctl explain, tests). */
  compile(entry: ContainerEntry): ContainerPolicy {
    return compileContainerPolicy(entry, this.options.unresolvedAction, this.options.rulesBefore?.(entry) ?? []);
  }

  /** Version the data plane holds for a handle ('' none, undefined unknown handle). */
  versionInForce(handle: ContainerHandle): string | undefined {
    return this.inForce.get(handle);
  }

  private flush(): void {
    this.flushScheduled = false;
    const batch: ContainerPolicy[] = [];
    for (const handle of this.dirty) {
      const entry = this.options.registry.get(handle);
      if (!entry || !this.inForce.has(handle)) continue;
      const policy = this.compile(entry);
      if (policy.version === this.inForce.get(handle) || policy.version === this.inFlight.get(handle)) continue;
      batch.push(policy);
    }
    this.dirty.clear();
    if (batch.length === 0 || !this.enabled) return;
    // Ordered within the session: the data plane refuses a push older than one it applied.
    for (const p of batch) p.sequence = ++this.sequence;
    if (!this.options.send(batch)) return; // not attached: the next snapshot starts over
    for (const p of batch) this.inFlight.set(handleFromProto(p.handle), p.version);
    this.pushed += batch.length;
  }

  onAcks(acks: readonly PolicyAck[]): void {
    for (const ack of acks) {
      const handle = handleFromProto(ack.handle);
      this.inFlight.delete(handle);
      if (this.inForce.has(handle)) this.inForce.set(handle, ack.version);
      if (ack.accepted) continue;
      const entry = this.options.registry.get(handle);
      if (ack.reason === 'unknown-handle') {
        // The container exited (its notify fd closed) between its container_added and this push:
        // nothing is wrong and nothing is left to apply. Its container_removed follows.
        this.gone++;
        this.options.log.info(
          { container: entry?.containerId, handle, version: ack.refusedVersion, reason: ack.reason },
          `container ${entry?.containerId ?? handle} exited before its policy ${ack.refusedVersion} reached the data plane; nothing to apply`,
        );
        this.inForce.delete(handle);
        continue;
      }
      this.refused++;
      this.options.log.error(
        { container: entry?.containerId, handle, version: ack.refusedVersion, rule: ack.ruleIndex, reason: ack.reason },
        `the data plane refused policy ${ack.refusedVersion} of container ${entry?.containerId ?? handle}` +
          `${ack.ruleIndex >= 0 ? ` (rule ${ack.ruleIndex})` : ''}: ${ack.reason}: ${ack.detail}; ` +
          (ack.version ? `version ${ack.version} stays in force` : 'it answers that container as one without policy'),
      );
    }
  }
}
