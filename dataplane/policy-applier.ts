// The policy applier: puts the attached control plane's container policies into the engine, in order, and ACKs or NACKs each.
import { handleFromProto, type ContainerHandle } from '../common/container-handle';
import type { Logger } from '../common/logger';
import { ContainerPolicy, type PolicyAck } from '../proto/gen/seccompagent/v1/policy';
import type { AttachSession } from './attach-session';
import type { ContainerTable } from './container-table';
import type { MutableCounters } from './counters';
import type { NativeEngine } from './native';
import type { SessionRegistry } from './session-registry';

export class PolicyApplier {
  /** The last push applied per handle, by session (ContainerPolicy.sequence): older ones are refused. */
  private readonly sequences = new Map<ContainerHandle, { session: number; sequence: bigint }>();

  constructor(
    private readonly log: Logger,
    private readonly engine: Pick<NativeEngine, 'applyPolicy'>,
    private readonly containers: ContainerTable,
    private readonly counters: MutableCounters,
    private readonly sessions: SessionRegistry,
  ) {}

  /**
   * Pushes apply only from the attached session: one replaced by a takeover and still draining
   * answers what it holds, nothing more (its policies were computed by the control plane that is
   * going away). Within a session, a push whose sequence is not above the last applied for its
   * handle is a late one and would roll the container back: refused too.
   */
  onPolicies(session: AttachSession, policies: ContainerPolicy[]): void {
    const acks: PolicyAck[] = [];
    for (const policy of policies) {
      const handle = handleFromProto(policy.handle);
      const active = this.sessions.active;
      if (session !== active) {
        acks.push(this.refuse(session, policy, 'not-active-session',
          `session ${session.id} (${session.name || 'unnamed'}) was replaced by ${active ? `session ${active.id} (${active.name || 'unnamed'})` : 'none'} and is draining: only the attached control plane's pushes apply`));
        continue;
      }
      const last = this.sequences.get(handle);
      if (policy.sequence > 0n && last && last.session === session.number && policy.sequence <= last.sequence) {
        acks.push(this.refuse(session, policy, 'stale-version',
          `push ${policy.sequence} of this session arrived after push ${last.sequence} (version ${this.containers.get(handle)?.policyVersion || 'none'}) was applied: a rollback`));
        continue;
      }
      const ack = this.apply(session, policy);
      if (ack.accepted && policy.sequence > 0n) this.sequences.set(handle, { session: session.number, sequence: policy.sequence });
      acks.push(ack);
    }
    session.sendPolicyAcks(acks);
  }

  /** Its container is gone: no push for it will apply again, so its sequence need not be kept. */
  forgetContainer(handle: ContainerHandle): void {
    this.sequences.delete(handle);
  }

  private refuse(session: AttachSession, policy: ContainerPolicy, reason: string, detail: string): PolicyAck {
    const handle = handleFromProto(policy.handle);
    const inForce = this.containers.get(handle)?.policyVersion ?? '';
    this.counters.policiesRefused++;
    this.log.warn(
      { session: session.id, container: this.containers.containerIdOf(handle), handle, version: policy.version, reason },
      `policy ${policy.version} of container ${this.containers.containerIdOf(handle) || handle} refused (${reason}: ${detail}); ${inForce ? `version ${inForce} stays in force` : 'it has no policy in force'}`,
    );
    return { handle: policy.handle, version: inForce, accepted: false, refusedVersion: policy.version, ruleIndex: -1, reason, detail };
  }

  private apply(session: AttachSession, policy: ContainerPolicy): PolicyAck {
    const handle = handleFromProto(policy.handle);
    const containerId = this.containers.containerIdOf(handle);
    const verdict = this.engine.applyPolicy(handle, ContainerPolicy.encode(policy).finish(), this.containers.get(handle)?.pid ?? 0);
    const ack: PolicyAck = {
      handle: policy.handle, version: verdict.version, accepted: verdict.accepted, refusedVersion: verdict.accepted ? '' : policy.version,
      ruleIndex: verdict.ruleIndex, reason: verdict.reason, detail: verdict.detail,
    };
    if (verdict.accepted) {
      this.counters.policiesAccepted++;
      this.containers.setPolicy(handle, policy.version, policy.rules.length, policy.labels);
      this.log.info(
        { session: session.id, container: containerId, handle, version: policy.version, rules: policy.rules.length },
        `container ${containerId} policy ${policy.version} in force (${policy.rules.length} rules): answered natively from now on, whether a control plane is attached or not`,
      );
    } else if (verdict.reason === 'unknown-handle') {
      this.log.info(
        { session: session.id, handle, version: policy.version, reason: verdict.reason },
        `policy ${policy.version} for handle ${handle} arrived after its container exited (its notify fd is closed); nothing to apply`,
      );
    } else {
      this.counters.policiesRefused++;
      this.log.warn(
        { session: session.id, container: containerId, handle, version: policy.version, rule: verdict.ruleIndex, reason: verdict.reason },
        `policy ${policy.version} of container ${containerId || handle} refused (${verdict.reason}${verdict.ruleIndex >= 0 ? `, rule ${verdict.ruleIndex}` : ''}: ${verdict.detail}); ${verdict.version ? `version ${verdict.version} stays in force` : 'it has no policy in force'}`,
      );
    }
    return ack;
  }
}
