// The data plane's core: turns the native engine's events into containers, notifications for the
// attached control plane and events for watchers, and applies the control plane's decisions.
// Mechanism only: it knows nothing of Kubernetes or of policy.
import { status } from '@grpc/grpc-js';
import { durationFromMs, durationFromNs } from '../common/duration';
import { errnoName } from '../common/errors';
import type { Logger } from '../common/logger';
import { VERSION } from '../common/version';
import {
  AnswerKind,
  AnsweredBy,
  type Container,
  type Counters,
  type Decision,
  type DefaultAction,
  type GetStatusResponse,
  type Notification,
} from '../proto/gen/seccompagent/v1/dataplane';
import { AttachSession } from './attach-session';
import { DATAPLANE_FEATURES, outcomeOf, toNativeDecision, type AnswerOutcome } from './decisions';
import { ContainerTable } from './container-table';
import type {
  AnsweredEvent,
  ConnectionEvent,
  NativeAddon,
  NativeDecision,
  NativeDefaultAction,
  NativeEngine,
  NativeEvent,
  NotificationEvent,
  RespondResult,
} from './native';
import { PendingTable } from './pending-table';
import { parseRuntimeMessage } from './runtime-message';
import { WatchHub } from './watch-hub';

export interface DataPlaneConfig {
  listenerSocket: string;
  socketMode: number;
  defaultAction: NativeDefaultAction;
  decisionTimeoutMs: number;
}

const emulationKey = (handle: number, id: bigint) => `${handle}:${id}`;

type MutableCounters = { -readonly [K in keyof Counters]: number };

const NATIVE_ANSWERED_BY: Record<AnsweredEvent['by'], AnsweredBy> = {
  'no-control-plane': AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE,
  deadline: AnsweredBy.ANSWERED_BY_DEFAULT_DEADLINE,
  detached: AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED,
  'control-plane': AnsweredBy.ANSWERED_BY_CONTROL_PLANE,
};

const COUNTER_BY_ANSWER: Partial<Record<AnsweredBy, keyof Counters>> = {
  [AnsweredBy.ANSWERED_BY_CONTROL_PLANE]: 'answeredControlPlane',
  [AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE]: 'answeredDefaultNoControlPlane',
  [AnsweredBy.ANSWERED_BY_DEFAULT_DEADLINE]: 'answeredDefaultDeadline',
  [AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED]: 'answeredDefaultDetached',
  [AnsweredBy.ANSWERED_BY_FAST_PATH]: 'answeredFastPath',
};

export function defaultActionToProto(action: NativeDefaultAction): DefaultAction {
  return action.kind === 'continue'
    ? { action: { $case: 'continue', continue: {} } }
    : { action: { $case: 'error', error: { errno: action.errno } } };
}

function describeAction(action: NativeDefaultAction): string {
  return action.kind === 'continue' ? 'continue' : `errno:${errnoName(action.errno)}`;
}

export class DataPlane {
  readonly containers = new ContainerTable();
  readonly hub: WatchHub;
  readonly counters: MutableCounters = {
    notifications: 0, answeredControlPlane: 0, answeredDefaultNoControlPlane: 0, answeredDefaultDeadline: 0,
    answeredDefaultDetached: 0, answeredFastPath: 0, targetGone: 0, decisionsLate: 0, decisionsUnknown: 0,
    decisionsInvalid: 0, ingestRejected: 0, watchersDropped: 0, containersAdded: 0, containersRemoved: 0,
    eventsDropped: 0,
  };
  private readonly engine: NativeEngine;
  private readonly syscallNames: string[];
  private readonly pending = new PendingTable<AttachSession>();
  /** Decisions the engine is emulating (mkdir, mount, kill, freeze), until their answer. */
  private readonly emulating = new Map<string, { containerId: string; syscall: string }>();
  private active: AttachSession | null = null;
  private readonly startedAt = Date.now();
  /** Wall-clock ns minus monotonic ns: turns the engine's CLOCK_MONOTONIC stamps into dates. */
  private readonly wallOffsetNs = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();
  private stopped = false;
  /** Notifications received by syscall name, for metrics. */
  readonly notificationsBySyscall = new Map<string, number>();
  /** Called with every answer's latency (metrics). */
  observeLatency: ((by: AnsweredBy, latencyNs: bigint) => void) | null = null;

  constructor(
    private readonly config: DataPlaneConfig,
    private readonly log: Logger,
    private readonly addon: NativeAddon,
    helperPath: string,
  ) {
    this.hub = new WatchHub(log);
    this.syscallNames = addon.syscallNames();
    this.engine = new addon.Engine({
      helperPath,
      onEvents: (events) => this.onEngineEvents(events),
      defaultAction: config.defaultAction,
      decisionTimeoutMs: config.decisionTimeoutMs,
    });
  }

  /** Starts the engine thread and the listener socket. */
  start(listenerFd?: number): void {
    this.engine.start();
    if (listenerFd !== undefined) this.engine.listenFd(listenerFd);
    else this.engine.listen(this.config.listenerSocket, this.config.socketMode);
    this.log.info(
      { listener: this.config.listenerSocket, defaultAction: describeAction(this.config.defaultAction), decisionTimeoutMs: this.config.decisionTimeoutMs, syncWakeUp: this.engine.stats().syncWakeUp },
      'data plane serving the runtime listener socket; no control plane attached: the default action answers',
    );
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.active?.fail(status.UNAVAILABLE, 'the data plane is shutting down', 'shutdown');
    this.hub.close();
    this.engine.stop();
  }

  syscallName(nr: number, arch: number): string {
    return arch === this.addon.AUDIT_ARCH_X86_64 ? (this.syscallNames[nr] ?? '') : '';
  }

  get attached(): AttachSession | null {
    return this.active;
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  // ---- engine events (JS thread) --------------------------------------------------------------

  private onEngineEvents(events: NativeEvent[]): void {
    let forSession: Notification[] | null = null;
    for (const event of events) {
      try {
        switch (event.type) {
          case 'notification': {
            const notification = this.onNotification(event);
            if (notification) (forSession ??= []).push(notification);
            break;
          }
          case 'answered':
            this.onNativeAnswer(event);
            break;
          case 'connection':
            this.onConnection(event);
            break;
          case 'ingest-error':
            this.counters.ingestRejected++;
            this.log.warn({ peer: event.peer, code: event.code }, `runtime connection refused: ${event.message}`);
            this.hub.publish({ $case: 'ingestRejected', ingestRejected: { reason: event.message, peer: event.peer } }, null);
            break;
          case 'removed':
            this.onRemoved(event.handle);
            break;
          case 'error':
            this.log.error(`native engine: ${event.message}`);
            break;
        }
      } catch (err) {
        this.log.error({ err, event: event.type }, 'internal error while handling an engine event; the data plane goes on');
      }
    }
    if (forSession && this.active) this.active.sendNotifications(forSession);
  }

  private onConnection(event: ConnectionEvent): void {
    let state;
    try {
      state = parseRuntimeMessage(event.json, event.fds);
    } catch (err) {
      this.engine.reject(event.conn);
      this.counters.ingestRejected++;
      const reason = (err as Error).message;
      this.log.warn({ peer: event.peer, fds: event.fds.length }, `runtime message refused: ${reason}; every fd it sent was closed`);
      this.hub.publish({ $case: 'ingestRejected', ingestRejected: { reason, peer: event.peer } }, null);
      return;
    }
    const handle = this.engine.adopt(event.conn, state.seccompFdIndex);
    const container = this.containers.add(handle, state, event.peer);
    this.counters.containersAdded++;
    this.log.info(
      { container: state.containerId, handle, status: state.status, pid: state.pid, peer: event.peer },
      `container ${state.containerId} registered (${state.status === 'running' ? 'exec' : 'init'})`,
    );
    this.hub.publish({ $case: 'containerAdded', containerAdded: container }, { containerId: state.containerId, syscall: '' });
    this.active?.sendContainerAdded(container);
  }

  private onRemoved(handle: number): void {
    this.pending.dropHandle(handle);
    for (const key of this.emulating.keys()) if (key.startsWith(`${handle}:`)) this.emulating.delete(key);
    const container = this.containers.remove(handle);
    const containerId = container?.containerId ?? '';
    this.counters.containersRemoved++;
    this.log.info({ container: containerId, handle }, `container ${containerId} gone: no task left in its filter, notify fd closed`);
    const removed = { handle: BigInt(handle), containerId, reason: 'exited' };
    this.hub.publish({ $case: 'containerRemoved', containerRemoved: removed }, { containerId, syscall: '' });
    this.active?.sendContainerRemoved(removed);
  }

  private toNotification(event: NotificationEvent, containerId: string, syscall: string): Notification {
    return {
      handle: BigInt(event.handle),
      id: event.id,
      pid: event.pid,
      syscallNr: event.nr,
      syscall,
      arch: event.arch,
      instructionPointer: event.ip,
      args: event.args,
      stringArgs: event.strings,
      containerId,
      receivedAt: new Date(Number((event.receivedNs + this.wallOffsetNs) / 1_000_000n)),
    };
  }

  /** Returns the notification to send to the attached control plane, if it goes there. */
  private onNotification(event: NotificationEvent): Notification | null {
    this.counters.notifications++;
    const containerId = this.containers.containerIdOf(event.handle);
    const syscall = this.syscallName(event.nr, event.arch);
    this.notificationsBySyscall.set(syscall, (this.notificationsBySyscall.get(syscall) ?? 0) + 1);
    const session = event.forwarded ? this.active : null;
    const needed = session !== null || this.hub.active;
    const notification = needed ? this.toNotification(event, containerId, syscall) : null;
    if (notification && this.hub.active) this.hub.publish({ $case: 'notification', notification }, { containerId, syscall });
    if (!event.forwarded) return null;
    if (session === null) {
      // Forwarded while a session was ending: the default answers now rather than at the deadline.
      this.answerWithDefault(event.handle, event.id, containerId, syscall, AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED);
      return null;
    }
    this.pending.add(event.handle, event.id, { session, syscall, containerId });
    return notification;
  }

  private onNativeAnswer(event: AnsweredEvent): void {
    const by = NATIVE_ANSWERED_BY[event.by];
    let entry;
    if (event.by === 'control-plane') {
      entry = this.emulating.get(emulationKey(event.handle, event.id));
      this.emulating.delete(emulationKey(event.handle, event.id));
      if (entry && 'errno' in event.action && event.action.errno !== 0) {
        this.log.info(
          { container: entry.containerId, syscall: entry.syscall, id: String(event.id), handle: event.handle, errno: errnoName(event.action.errno) },
          `emulated ${event.action.kind} returned ${errnoName(event.action.errno)} to the container`,
        );
      }
    } else if (event.by === 'deadline') {
      entry = this.pending.expire(event.handle, event.id);
      this.log.warn(
        { container: entry?.containerId, syscall: entry?.syscall, id: String(event.id), handle: event.handle, session: entry?.session.id },
        `control plane missed the ${this.config.decisionTimeoutMs} ms decision deadline: answered with the default action (${describeAction(this.config.defaultAction)})`,
      );
    } else {
      entry = this.pending.take(event.handle, event.id);
    }
    const containerId = entry?.containerId ?? this.containers.containerIdOf(event.handle);
    const syscall = entry?.syscall ?? '';
    this.recordAnswer(event.handle, event.id, containerId, syscall, by, outcomeOf(event.action, event.gone), event.latencyNs);
  }

  private recordAnswer(
    handle: number, id: bigint, containerId: string, syscall: string, by: AnsweredBy, outcome: AnswerOutcome, latencyNs: bigint,
  ): void {
    if (outcome.kind === AnswerKind.ANSWER_KIND_TARGET_GONE) this.counters.targetGone++;
    else this.counters[COUNTER_BY_ANSWER[by]!]++;
    this.observeLatency?.(by, latencyNs);
    if (!this.hub.active) return;
    this.hub.publish({
      $case: 'answer',
      answer: { handle: BigInt(handle), id, containerId, syscall, answeredBy: by, ...outcome, latency: durationFromNs(latencyNs) },
    }, { containerId, syscall });
  }

  private answerWithDefault(handle: number, id: bigint, containerId: string, syscall: string, by: AnsweredBy): void {
    const result = this.engine.respond(handle, id, this.config.defaultAction);
    if (result.status === 'unknown') return; // the engine answered it already and reported so
    this.recordAnswer(handle, id, containerId, syscall, by, outcomeOf(this.config.defaultAction, result.status === 'gone'), result.latencyNs);
  }

  // ---- Attach sessions (JS thread) ------------------------------------------------------------

  onHello(session: AttachSession): { code: status; details: string } | null {
    const hello = session.hello!;
    if (this.stopped) return { code: status.UNAVAILABLE, details: 'the data plane is shutting down' };
    if (this.active && this.active.isOpen && !hello.takeover) {
      const current = this.active.hello!;
      this.log.warn({ session: session.id, name: hello.name }, `second control plane refused: ${current.name} ${current.version} is attached (session ${this.active.id})`);
      return {
        code: status.FAILED_PRECONDITION,
        details: `a control plane is attached already (${current.name} ${current.version}, session ${this.active.id}); set Hello.takeover to replace it`,
      };
    }
    const previous = this.active;
    this.active = session;
    session.sendWelcome({
      sessionId: session.id,
      dataplaneVersion: VERSION,
      decisionTimeout: durationFromMs(this.config.decisionTimeoutMs),
      defaultAction: defaultActionToProto(this.config.defaultAction),
      features: DATAPLANE_FEATURES,
    });
    session.sendSnapshot(this.containers.list());
    this.engine.setForwarding(true);
    this.log.info(
      { session: session.id, name: hello.name, version: hello.version, features: hello.features, containers: this.containers.size },
      `control plane ${hello.name} ${hello.version} attached: it decides from now on`,
    );
    this.hub.publish({
      $case: 'controlPlaneAttached',
      controlPlaneAttached: { sessionId: session.id, name: hello.name, version: hello.version, features: hello.features },
    }, null);
    if (previous?.isOpen) {
      // Takeover: the previous session keeps what it holds and ends once it has answered it all.
      this.log.info({ session: previous.id, successor: session.id, held: this.pending.countSession(previous) }, `control plane ${previous.name} replaced by takeover; it finishes the notifications it holds, new ones go to ${hello.name}`);
      previous.sendDrain(session);
      this.closeIfDrained(previous);
    }
    return null;
  }

  private closeIfDrained(session: AttachSession): void {
    if (session !== this.active && session.isOpen && this.pending.countSession(session) === 0) session.close('replaced');
  }

  onDecisions(session: AttachSession, decisions: Decision[]): void {
    for (const decision of decisions) {
      try {
        this.applyDecision(session, decision);
      } catch (err) {
        this.log.error({ err, session: session.id }, 'internal error while applying a decision; the default action answers at the deadline');
      }
    }
    if (session !== this.active) this.closeIfDrained(session);
  }

  private rejectDecision(session: AttachSession, handle: bigint, id: bigint, reason: string, detail: string): void {
    this.log.warn({ session: session.id, handle: Number(handle), id: String(id), reason }, `decision ignored: ${detail}`);
    session.sendDecisionRejected({ handle, id, reason, detail });
    this.hub.publish({ $case: 'decisionDropped', decisionDropped: { handle, id, sessionId: session.id, reason } }, null);
  }

  private applyDecision(session: AttachSession, decision: Decision): void {
    const handle = Number(decision.handle);
    const entry = this.pending.get(handle, decision.id);
    if (!entry) {
      if (this.pending.wasExpired(handle, decision.id)) {
        this.counters.decisionsLate++;
        this.rejectDecision(session, decision.handle, decision.id, 'unknown-id', 'late: the deadline passed and the default action answered');
      } else {
        this.counters.decisionsUnknown++;
        this.rejectDecision(session, decision.handle, decision.id, 'unknown-id', 'no such notification is pending (never sent, or already answered)');
      }
      return;
    }
    if (entry.session !== session) {
      this.counters.decisionsUnknown++;
      this.rejectDecision(session, decision.handle, decision.id, 'unknown-id', 'the notification belongs to another control plane session');
      return;
    }
    const nativeDecision = toNativeDecision(decision, this.containers.get(handle)?.pid ?? 0);
    this.pending.take(handle, decision.id);
    if (typeof nativeDecision === 'string') {
      this.counters.decisionsInvalid++;
      this.rejectDecision(session, decision.handle, decision.id, 'invalid', `${nativeDecision}; the default action answers`);
      this.answerWithDefault(handle, decision.id, entry.containerId, entry.syscall, AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED);
      return;
    }
    const result: RespondResult = this.engine.respond(handle, decision.id, nativeDecision);
    if (result.status === 'unknown') {
      this.counters.decisionsLate++;
      this.rejectDecision(session, decision.handle, decision.id, 'unknown-id', 'late: the deadline passed and the default action answered');
      return;
    }
    if (result.status === 'accepted') {
      this.emulating.set(emulationKey(handle, decision.id), { containerId: entry.containerId, syscall: entry.syscall });
      return;
    }
    this.recordAnswer(handle, decision.id, entry.containerId, entry.syscall, AnsweredBy.ANSWERED_BY_CONTROL_PLANE, outcomeOf(nativeDecision, result.status === 'gone'), result.latencyNs);
  }

  onSessionEnded(session: AttachSession, reason: string): void {
    const held = this.pending.takeSession(session);
    for (const { handle, id, entry } of held) {
      this.answerWithDefault(handle, id, entry.containerId, entry.syscall, AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED);
    }
    if (session.hello === null) return; // never attached
    const wasActive = this.active === session;
    if (wasActive) {
      this.active = null;
      if (!this.stopped) this.engine.setForwarding(false);
    }
    const message = wasActive
      ? `control plane ${session.name} detached (${reason}): ${held.length} notification(s) it held answered by the default action; the default action (${describeAction(this.config.defaultAction)}) answers until one attaches`
      : `control plane ${session.name} detached (${reason}) after handing over`;
    (wasActive ? this.log.warn : this.log.info).call(this.log, { session: session.id, reason, answeredByDefault: held.length }, message);
    this.hub.publish({
      $case: 'controlPlaneDetached',
      controlPlaneDetached: { sessionId: session.id, reason, answeredByDefault: held.length },
    }, null);
  }

  // ---- queries --------------------------------------------------------------------------------

  listContainers(): Container[] {
    return this.containers.list();
  }

  status(): GetStatusResponse {
    const stats = this.engine.stats();
    this.counters.eventsDropped = stats.eventsDropped;
    this.counters.watchersDropped = this.hub.dropped;
    const counters = Object.fromEntries(Object.entries(this.counters).map(([k, v]) => [k, BigInt(v)])) as unknown as Counters;
    const uptimeMs = Date.now() - this.startedAt;
    const active = this.active;
    return {
      version: VERSION,
      uptime: durationFromMs(uptimeMs),
      listenerSocket: this.config.listenerSocket,
      defaultAction: defaultActionToProto(this.config.defaultAction),
      decisionTimeout: durationFromMs(this.config.decisionTimeoutMs),
      controlPlane: active?.hello
        ? { sessionId: active.id, name: active.hello.name, version: active.hello.version, features: active.hello.features }
        : undefined,
      containers: this.containers.size,
      pending: this.pending.size,
      counters,
      syncWakeUp: stats.syncWakeUp,
      watchers: this.hub.size,
    };
  }

  openFdCount(): number {
    return this.addon.openFdCount();
  }
}
