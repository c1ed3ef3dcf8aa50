// The decision applier: puts a control plane's decisions and holds into the engine, and answers for those it cannot apply.
import { handleFromProto, handleToProto, type ContainerHandle } from '../common/container-handle';
import { durationToMs } from '../common/duration';
import { MAX_HOLD_MS } from '../common/hold-feature';
import type { Logger } from '../common/logger';
import { AnsweredBy, type Decision, type Hold } from '../proto/gen/seccompagent/v1/dataplane';
import type { AnswerLedger } from './answer-ledger';
import type { AttachSession } from './attach-session';
import type { ContainerTable } from './container-table';
import type { MutableCounters } from './counters';
import type { DataPlaneConfig } from './dataplane';
import { outcomeOf, toNativeDecision } from './decisions';
import type { NativeEngine, RespondResult, SuffixedPath } from './native';
import type { SessionRegistry } from './session-registry';
import type { WatchHub } from './watch-hub';

type DecisionEngine = Pick<NativeEngine, 'respond' | 'extendDeadline'>;

export class DecisionApplier {
  constructor(
    private readonly config: DataPlaneConfig,
    private readonly log: Logger,
    private readonly engine: DecisionEngine,
    private readonly containers: ContainerTable,
    private readonly counters: MutableCounters,
    private readonly ledger: AnswerLedger,
    private readonly sessions: SessionRegistry,
    private readonly hub: WatchHub,
    /** The addon's suffixedPath: builds a mkdir decision's path from its suffix (MKDIR_SUFFIX_FEATURE). */
    private readonly suffixedPath: SuffixedPath,
  ) {}

  onDecisions(session: AttachSession, decisions: Decision[]): void {
    for (const decision of decisions) {
      try {
        this.applyDecision(session, decision);
      } catch (err) {
        this.log.error({ err, session: session.id }, 'internal error while applying a decision; the default action answers at the deadline');
      }
    }
  }

  /** Holds (hold.v1): each named notification waits past its usual deadline for the decision that follows. */
  onHolds(session: AttachSession, holds: Hold[]): void {
    for (const hold of holds) {
      const handle = handleFromProto(hold.handle);
      const ms = Math.min(MAX_HOLD_MS, Math.max(0, durationToMs(hold.duration)));
      const result = this.engine.extendDeadline(handle, hold.id, ms, session.number);
      if (result === 'ok') {
        this.log.debug({ session: session.id, container: this.containers.containerIdOf(handle), handle, id: String(hold.id), holdMs: ms }, `control plane holds notification ${hold.id} for ${ms} ms: its deadline moves to then plus ${this.config.decisionTimeoutMs} ms`);
        continue;
      }
      this.counters.decisionsUnknown++;
      this.log.debug({ session: session.id, handle, id: String(hold.id), reason: result }, 'hold ignored: no such notification is pending for this session');
    }
  }

  /** A decision the engine did not apply (from the decision channel, or for another session's notification). */
  onDropped(sessionNumber: number, handle: ContainerHandle, id: bigint, reason: string): void {
    const session = this.sessions.get(sessionNumber);
    const late = reason === 'late';
    if (late) this.counters.decisionsLate++;
    else if (reason === 'invalid') this.counters.decisionsInvalid++;
    else this.counters.decisionsUnknown++;
    const detail = late ? 'late: the deadline passed and the default action answered'
      : reason === 'invalid' ? 'invalid decision on the decision channel; the default action answered'
      : reason === 'wrong-session' ? 'the notification belongs to another control plane session'
      : 'no such notification is pending (never sent, or already answered)';
    this.log.warn({ session: session?.id, handle, id: String(id), reason }, `decision ignored: ${detail}`);
    session?.sendDecisionRejected({ handle: handleToProto(handle), id, reason: reason === 'invalid' ? 'invalid' : 'unknown-id', detail });
    this.hub.publish({ $case: 'decisionDropped', decisionDropped: { handle: handleToProto(handle), id, sessionId: session?.id ?? '', reason } }, null);
  }

  /** Answers a notification with the default action now, for whichever session holds it. */
  answerWithDefault(handle: ContainerHandle, id: bigint, containerId: string, syscall: string, by: AnsweredBy): void {
    const result = this.engine.respond(handle, id, this.config.defaultAction, 0);
    if (result.status === 'unknown' || result.status === 'late') return; // the engine answered it already and reported so
    this.ledger.record(handle, id, containerId, syscall, by, outcomeOf(this.config.defaultAction, result.status === 'gone'), result.latencyNs);
  }

  private applyDecision(session: AttachSession, decision: Decision): void {
    const handle = handleFromProto(decision.handle);
    const containerId = this.containers.containerIdOf(handle);
    const syscall = this.ledger.syscallOf(handle, decision.id);
    const nativeDecision = toNativeDecision(decision, this.containers.initPidOf(handle), this.suffixedPath);
    if (typeof nativeDecision === 'string') {
      // Answer with the default now (only if this session owns it) rather than leave it to the deadline.
      const result = this.engine.respond(handle, decision.id, this.config.defaultAction, session.number);
      if (result.status === 'unknown' || result.status === 'late') return this.rejectUnknown(session, decision, result.status === 'late');
      this.counters.decisionsInvalid++;
      this.reject(session, decision, 'invalid', `${nativeDecision}; the default action answered`);
      this.ledger.record(handle, decision.id, containerId, syscall, AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED, outcomeOf(this.config.defaultAction, result.status === 'gone'), result.latencyNs);
      return;
    }
    let result: RespondResult;
    try {
      result = this.engine.respond(handle, decision.id, nativeDecision, session.number);
    } catch (err) {
      // The engine refused its arguments (e.g. a mkdir decision for a mount): the notification is still pending.
      this.counters.decisionsInvalid++;
      this.reject(session, decision, 'invalid', `${(err as Error).message}; the default action answers`);
      this.answerWithDefault(handle, decision.id, containerId, syscall, AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED);
      return;
    }
    if (result.status === 'unknown' || result.status === 'late') return this.rejectUnknown(session, decision, result.status === 'late');
    if (result.status === 'accepted') {
      // Emulating: its answered event follows, with these findings.
      this.ledger.rememberFindings(handle, decision.id, decision.findings);
      return;
    }
    this.ledger.takeSyscall(handle, decision.id);
    this.ledger.record(handle, decision.id, containerId, syscall, AnsweredBy.ANSWERED_BY_CONTROL_PLANE, outcomeOf(nativeDecision, result.status === 'gone'), result.latencyNs, -1, decision.findings);
  }

  private rejectUnknown(session: AttachSession, decision: Decision, late: boolean): void {
    if (late) {
      this.counters.decisionsLate++;
      this.reject(session, decision, 'unknown-id', 'late: the deadline passed and the default action answered');
    } else {
      this.counters.decisionsUnknown++;
      this.reject(session, decision, 'unknown-id', 'no such notification is pending for this session (never sent, already answered, or another session\'s)');
    }
  }

  private reject(session: AttachSession, decision: Decision, reason: string, detail: string): void {
    const { handle, id } = decision;
    this.log.warn({ session: session.id, handle: Number(handle), id: String(id), reason }, `decision ignored: ${detail}`);
    session.sendDecisionRejected({ handle, id, reason, detail });
    this.hub.publish({ $case: 'decisionDropped', decisionDropped: { handle, id, sessionId: session.id, reason } }, null);
  }
}
