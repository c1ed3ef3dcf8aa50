// The data plane's core: turns the native engine's events into containers, notifications for the
// attached control plane and events for watchers, and applies the control plane's decisions.
// Mechanism only: it knows nothing of Kubernetes or of policy.
import { randomBytes } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { answeredByLabel } from '../common/answer-labels';
import { handleFromProto, handleToProto, type ContainerHandle } from '../common/container-handle';
import { CHANNEL_FEATURE } from '../common/decision-channel';
import { defaultActionToProto, formatDefaultAction } from '../common/default-action';
import { durationFromMs, durationFromNs, durationToMs } from '../common/duration';
import { isEmulationName } from '../common/emulations';
import { AgentError, errnoName } from '../common/errors';
import { HOLD_FEATURE, MAX_HOLD_MS } from '../common/hold-feature';
import type { Logger } from '../common/logger';
import { parseAbi, syscallNameIn, syscallNumberIn, type SyscallTables } from '../common/syscall-abi';
import { VERSION } from '../common/version';
import {
  AnswerKind,
  AnsweredBy,
  type Container,
  type Counters,
  type Decision,
  type ExplainRuleRequest,
  type ExplainRuleResponse,
  type GetStatusResponse,
  type Hold,
  type Notification,
  type PolicyFinding,
} from '../proto/gen/seccompagent/v1/dataplane';
import { ContainerPolicy, type PolicyAck } from '../proto/gen/seccompagent/v1/policy';
import { AttachSession } from './attach-session';
import { DATAPLANE_FEATURES, outcomeOf, toNativeDecision, type AnswerOutcome } from './decisions';
import { ContainerTable } from './container-table';
import { decodeContainerRecord, encodeContainerRecord } from './container-record';
import type {
  AnsweredEvent,
  ConnectionEvent,
  HandOffResult,
  NamedFd,
  NativeAddon,
  NativeDefaultAction,
  NativeEngine,
  NativeEvent,
  NativeStats,
  NotificationEvent,
  RespondResult,
  RestoreResult,
  TallyEvent,
} from './native';
import { FdStoreWatch } from './fd-store-watch';
import { parseRuntimeMessage } from './runtime-message';
import { WatchHub } from './watch-hub';

export interface DataPlaneConfig {
  /** The runtime listener sockets to serve (profiles' listenerPath), at least one. */
  listenerSockets: readonly string[];
  /** The decision channel's socket (docs/decision-channel.md). */
  channelSocket: string;
  /** Mode of the listener socket. */
  socketMode: number;
  /** Mode of the decision channel: the control socket's (only control planes use it). */
  channelSocketMode: number;
  /** Watch streams served at once, in total and per client connection (watch-hub.ts). */
  maxWatchers: number;
  maxWatchersPerConnection: number;
  defaultAction: NativeDefaultAction;
  decisionTimeoutMs: number;
  /** See --busy-poll; 0: off. */
  busyPollMs: number;
  /**
   * See --control-plane-grace: after a handoff or restart from a data plane that had a control
   * plane, how long new notifications wait for one (a short pause instead of a gap in policy); 0: off.
   */
  controlPlaneGraceMs: number;
}

const inFlightKey = (handle: ContainerHandle, id: bigint) => `${handle}:${id}`;



/** How a data plane got its containers: none yet, from the fd store (restart), or by handoff. */
export type DataPlaneOrigin = 'fresh' | 'fd-store' | 'handoff';

type MutableCounters = { -readonly [K in keyof Counters]: number };

/** Where answer latencies go (the metrics' histogram): one answer, or a native tally's buckets. */
export interface AnswerLatencySink {
  observe(by: AnsweredBy, latencyNs: bigint): void;
  add(by: AnsweredBy, buckets: readonly number[], sumNs: bigint, count: number): void;
}

const NATIVE_ANSWERED_BY: Record<AnsweredEvent['by'], AnsweredBy> = {
  'no-control-plane': AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE,
  deadline: AnsweredBy.ANSWERED_BY_DEFAULT_DEADLINE,
  detached: AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED,
  'control-plane': AnsweredBy.ANSWERED_BY_CONTROL_PLANE,
  recovered: AnsweredBy.ANSWERED_BY_DEFAULT_RECOVERED,
  'fast-path': AnsweredBy.ANSWERED_BY_FAST_PATH,
};


export class DataPlane {
  readonly containers = new ContainerTable();
  readonly hub: WatchHub;
  readonly counters: MutableCounters = {
    notifications: 0, answeredControlPlane: 0, answeredDefaultNoControlPlane: 0, answeredDefaultDeadline: 0,
    answeredDefaultDetached: 0, answeredFastPath: 0, targetGone: 0, decisionsLate: 0, decisionsUnknown: 0,
    decisionsInvalid: 0, ingestRejected: 0, watchersDropped: 0, containersAdded: 0, containersRemoved: 0,
    eventsDropped: 0, answeredDefaultRecovered: 0, policiesAccepted: 0, policiesRefused: 0,
    emulationHelpersDied: 0, emulationsRetried: 0,
  };
  private readonly engine: NativeEngine;
  private readonly syscallTables: SyscallTables;
  /** The kernel's seccomp features, probed once at start (the engine learns them only from a first fd). */
  private readonly kernel: { syncWakeUp: boolean; detail: string };
  /** Syscall names of notifications in flight, for the answers Watch shows (only while watched). */
  private readonly inFlightSyscalls = new Map<string, string>();
  /** Findings of control-plane decisions being emulated (mkdir, mount...), for their answer event. */
  private readonly emulatedFindings = new Map<string, PolicyFinding[]>();
  /** Attached sessions by engine session number: the active one and any still draining. */
  private readonly sessions = new Map<number, AttachSession>();
  private nextSessionNumber = 1;
  /** The last push applied per handle, by session (ContainerPolicy.sequence): older ones are refused. */
  private readonly policySequences = new Map<ContainerHandle, { session: number; sequence: bigint }>();
  private active: AttachSession | null = null;
  private readonly startedAt = Date.now();
  /** Wall-clock ns minus monotonic ns: turns the engine's CLOCK_MONOTONIC stamps into dates. */
  private readonly wallOffsetNs = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();
  private stopped = false;
  /** Notifications received by syscall name, for metrics. */
  readonly notificationsBySyscall = new Map<string, number>();
  /** Takes every answer's latency, one by one or a native tally's buckets at once (metrics). */
  latency: AnswerLatencySink | null = null;
  /** The bounds (ns) a native tally buckets latencies by: the latency histogram must use them. */
  get latencyBucketsNs(): readonly number[] {
    return this.addon.latencyBucketsNs;
  }
  /** Called when a successor connects to the handoff socket (see handoff.ts). */
  onHandoffRequest: ((conn: number, peerPid: number) => void) | null = null;
  private origin: DataPlaneOrigin = 'fresh';
  /** How this process got its containers: fresh, fd-store (a restart) or handoff. */
  get startOrigin(): DataPlaneOrigin {
    return this.origin;
  }
  /** Listener sockets a predecessor handed over (or the fd store gave back), by path. */
  private restoredListeners: string[] = [];
  /** The fd store's holder, watched (start() arms it): status, health and metrics read it. */
  readonly fdStore: FdStoreWatch;

  constructor(
    private readonly config: DataPlaneConfig,
    private readonly log: Logger,
    private readonly addon: NativeAddon,
    helperPath: string,
  ) {
    this.hub = new WatchHub(log, { maxWatchers: config.maxWatchers, maxPerConnection: config.maxWatchersPerConnection });
    this.syscallTables = addon.syscallTables();
    this.kernel = addon.probeKernel();
    this.engine = new addon.Engine({
      helperPath,
      onEvents: (events) => this.onEngineEvents(events),
      defaultAction: config.defaultAction,
      decisionTimeoutMs: config.decisionTimeoutMs,
      // Events that need no reaction (answers given natively) reach JS at most every 20 ms:
      // each JS wake-up costs the notification path CPU on a small machine (docs/benchmarks.md).
      batchDelayUs: 20_000,
      busyPollUs: config.busyPollMs * 1000,
    });
    this.fdStore = new FdStoreWatch(addon, log, this.engine.stats().fdStore);
    // Per-notification events only while someone watches them.
    this.engine.setDetailedEvents(false);
    this.hub.onActiveChange = (active) => this.engine.setDetailedEvents(active);
  }

  /**
   * Before start(): takes back what a predecessor left (the fd store after a restart, or a
   * handoff): its containers with their handles and records, its listener, and its ids in flight,
   * which get the default action now (nobody else ever will answer them).
   */
  restore(fds: NamedFd[], origin: 'fd-store' | 'handoff'): RestoreResult {
    const result = this.engine.restore(fds, origin === 'handoff', this.config.controlPlaneGraceMs > 0);
    for (const { handle, record, policy } of result.containers) {
      const restored = decodeContainerRecord(record, handle);
      this.containers.add(handle, restored.state, restored.peer, restored.registeredAt);
      this.engine.nameContainer(handle, restored.state.containerId);
      if (policy) this.containers.setPolicy(handle, policy.version, policy.rules, policy.labels);
    }
    for (const problem of result.problems) this.log.warn({ origin }, `restore: ${problem}`);
    this.origin = origin;
    this.restoredListeners = result.listenerPaths;
    const graceMs = this.config.controlPlaneGraceMs;
    if (result.controlPlaneAttached && graceMs > 0) {
      this.engine.holdForControlPlane(graceMs);
      this.log.info({ graceMs }, `the previous data plane had a control plane attached: for ${graceMs} ms new notifications wait for one to attach (each at most ${this.config.decisionTimeoutMs} ms) instead of getting the default action`);
    }
    this.log.info(
      { origin, containers: result.containers.length, listeners: result.listenerPaths, journal: result.journal, inFlightAnswered: result.inFlightAnswered, inFlightByRules: result.inFlightByRules, inFlightHeld: result.inFlightHeld, lostAnswered: result.lostAnswered, inFlightWithHelper: result.inFlightWithHelper },
      `took back ${result.containers.length} container(s) from ${origin === 'handoff' ? 'the data plane that handed over' : 'the fd store'}; of the notifications it had left unanswered, ${result.inFlightByRules} were answered by their container's rules, ${result.inFlightHeld} wait for the next control plane and ${result.inFlightAnswered + result.lostAnswered} got the default action (${formatDefaultAction(this.config.defaultAction)})` +
        (result.inFlightWithHelper > 0 ? `; ${result.inFlightWithHelper} were with its emulation helpers, which answer them (waited for; done anew only if no helper of it lives)` : ''),
    );
    return result;
  }

  /** The configured listener sockets restore() did not bring back: start() creates them. */
  listenersToCreate(): string[] {
    return this.config.listenerSockets.filter((p) => !this.restoredListeners.includes(p));
  }

  /** Every listener socket served now, as bound (restored ones first). */
  listenerSockets(): string[] {
    return this.engine.listenerPaths();
  }

  /** Starts the engine thread and the listener sockets (those restore() did not bring back). */
  start(): void {
    this.fdStore.start();
    this.engine.start();
    for (const socket of this.listenersToCreate()) this.engine.listen(socket, this.config.socketMode);
    const kept = this.restoredListeners.filter((p) => !this.config.listenerSockets.includes(p));
    if (kept.length > 0) {
      this.log.warn({ kept, configured: this.config.listenerSockets }, `still serving listener socket(s) ${kept.join(', ')} taken over from the ${this.origin === 'handoff' ? 'data plane that handed over' : 'fd store'} though --listener-socket does not name them: runtimes may still connect there; a start without a predecessor serves only the configured ones`);
    }
    const stats = this.engine.stats();
    this.log.info(
      { listeners: this.listenerSockets(), defaultAction: formatDefaultAction(this.config.defaultAction), decisionTimeoutMs: this.config.decisionTimeoutMs, syncWakeUp: this.kernel.syncWakeUp || stats.syncWakeUp, syncWakeUpProbe: this.kernel.detail, fdStore: stats.fdStore, fdStoreHolder: this.fdStore.holder, keeper: this.fdStore.holderPid || undefined, origin: this.origin },
      stats.fdStore
        ? 'data plane serving the runtime listener socket, every fd kept in the fd store; no control plane attached: the default action answers'
        : 'data plane serving the runtime listener socket (no fd store: a crash would give ENOSYS to every container); no control plane attached: the default action answers',
    );
  }

  /** Serves the decision channel and the handoff socket (after a predecessor let go of them). */
  listenLocalSockets(handoffSocket: string): void {
    this.engine.listenChannel(this.config.channelSocket, this.config.channelSocketMode);
    this.engine.listenHandoff(handoffSocket, 0o600);
  }

  /** Stops or resumes accepting runtime connections (a handoff drains the ones accepted). */
  setAccepting(accepting: boolean): void {
    this.engine.setAccepting(accepting);
  }

  /** Runtime connections the ingest closed to stay within its limits (metrics). */
  get ingestDropped(): NativeStats['ingestDropped'] {
    return this.engine.stats().ingestDropped;
  }

  get pendingConnections(): number {
    return this.engine.stats().pendingConnections;
  }

  /** See NativeEngine.handOff: blocks until the successor acked or failed. */
  handOff(conn: number, timeoutMs: number): HandOffResult {
    return this.engine.handOff(conn, timeoutMs);
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.fdStore.stop();
    for (const session of [...this.sessions.values()]) session.fail(status.UNAVAILABLE, 'the data plane is shutting down', 'shutdown');
    this.hub.close();
    this.engine.stop();
  }

  /** The syscall's name in its own ABI (x86_64, i386, x32); '' when unknown. */
  syscallName(nr: number, arch: number): string {
    return syscallNameIn(this.syscallTables, arch, nr);
  }

  get attached(): AttachSession | null {
    return this.active;
  }

  get pendingCount(): number {
    return this.engine.stats().pending;
  }

  // ---- engine events (JS thread) --------------------------------------------------------------

  private onEngineEvents(events: NativeEvent[]): void {
    let forSession: Notification[] | null = null;
    // Runtime connections first: a runtime waits on its adoption (and its container's start with
    // it), while nothing waits on the events before it in the batch (Watch, counters).
    const ordered = events.some((e) => e.type === 'connection')
      ? [...events.filter((e) => e.type === 'connection'), ...events.filter((e) => e.type !== 'connection')]
      : events;
    for (const event of ordered) {
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
          case 'tally':
            this.onTally(event);
            break;
          case 'connection':
            this.onConnection(event);
            break;
          case 'ingest-error':
            // One aggregated line for many connections (counted natively: stats().ingestDropped).
            if (event.code === 'dropped') {
              this.log.warn({ peer: event.peer, code: event.code }, event.message);
              break;
            }
            this.counters.ingestRejected++;
            this.log.warn({ peer: event.peer, code: event.code }, `runtime connection refused: ${event.message}`);
            this.hub.publish({ $case: 'ingestRejected', ingestRejected: { reason: event.message, peer: event.peer } }, null);
            break;
          case 'removed':
            this.onRemoved(event.handle);
            break;
          case 'decision-dropped':
            this.onDecisionDropped(event.session, event.handle, event.id, event.reason);
            break;
          case 'session-drained':
            this.sessions.get(event.session)?.close('replaced');
            break;
          case 'channel':
            this.log.info({ session: this.sessions.get(event.session)?.id, state: event.state, reason: event.reason || undefined }, `decision channel ${event.state}${event.reason ? `: ${event.reason}` : ''}`);
            break;
          case 'handoff':
            if (this.onHandoffRequest) this.onHandoffRequest(event.conn, event.peer.pid);
            else this.addon.closeFd(event.conn);
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
    const registeredAt = new Date();
    const handle = this.engine.adopt(event.conn, state.seccompFdIndex, encodeContainerRecord(state, event.peer, registeredAt), state.containerId);
    const container = this.containers.add(handle, state, event.peer, registeredAt);
    // An exec answers as its container's first fd does from its first notification on.
    const inherited = this.engine.policyOf(handle);
    if (inherited) this.containers.setPolicy(handle, inherited.version, inherited.rules, inherited.labels);
    this.counters.containersAdded++;
    this.log.info(
      { container: state.containerId, handle, status: state.status, pid: state.pid, peer: event.peer },
      `container ${state.containerId} registered (${state.status === 'running' ? 'exec' : 'init'})`,
    );
    this.hub.publish({ $case: 'containerAdded', containerAdded: container }, { containerId: state.containerId, syscall: '' });
    this.active?.sendContainerAdded(container);
  }

  private onRemoved(handle: ContainerHandle): void {
    // Later, not now: an emulation's result may still be on its way (its helper answered the
    // target, which then exited); what the kernel failed with the fd is forgotten then.
    setTimeout(() => {
      for (const key of this.inFlightSyscalls.keys()) if (key.startsWith(`${handle}:`)) this.inFlightSyscalls.delete(key);
      for (const key of this.emulatedFindings.keys()) if (key.startsWith(`${handle}:`)) this.emulatedFindings.delete(key);
    }, 2000).unref();
    const container = this.containers.remove(handle);
    this.policySequences.delete(handle);
    const containerId = container?.containerId ?? '';
    this.counters.containersRemoved++;
    this.log.info({ container: containerId, handle }, `container ${containerId} gone: no task left in its filter, notify fd closed`);
    const removed = { handle: handleToProto(handle), containerId, reason: 'exited' };
    this.hub.publish({ $case: 'containerRemoved', containerRemoved: removed }, { containerId, syscall: '' });
    this.active?.sendContainerRemoved(removed);
  }

  private toNotification(event: NotificationEvent, containerId: string, syscall: string): Notification {
    return {
      handle: handleToProto(event.handle),
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

  private countNotification(syscall: string, count = 1): void {
    this.counters.notifications += count;
    this.notificationsBySyscall.set(syscall, (this.notificationsBySyscall.get(syscall) ?? 0) + count);
  }

  /** `count` notifications the engine answered by itself while nobody watched: as many answered events. */
  private onTally(event: TallyEvent): void {
    this.countNotification(this.syscallName(event.nr, event.arch), event.count);
    const by = NATIVE_ANSWERED_BY[event.by];
    this.countAnswers(event.handle, by, event.gone, event.count);
    this.latency?.add(by, event.latencyBuckets, event.latencySumNs, event.count);
  }

  private countAnswers(handle: ContainerHandle, by: AnsweredBy, gone: boolean, count: number): void {
    if (gone) {
      this.counters.targetGone += count;
      return;
    }
    const label = answeredByLabel(by)!;
    this.counters[label.counter] += count;
    if (label.defaultReason !== '') this.containers.countAnswer(handle, 'default', count);
    else if (by === AnsweredBy.ANSWERED_BY_FAST_PATH) this.containers.countAnswer(handle, 'fast-path', count);
  }

  /** Returns the notification to send to its session over gRPC, if it goes there. */
  private onNotification(event: NotificationEvent): Notification | null {
    const containerId = this.containers.containerIdOf(event.handle);
    const syscall = this.syscallName(event.nr, event.arch);
    this.countNotification(syscall);
    const session = event.forwarded && !event.viaChannel ? this.sessions.get(event.session) : undefined;
    if (event.forwarded && !event.viaChannel && session === undefined) {
      // Its session ended while the event was on its way: the default answers it now.
      this.answerWithDefault(event.handle, event.id, containerId, syscall, AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED);
    }
    if (!this.hub.active && session === undefined) return null;
    const notification = this.toNotification(event, containerId, syscall);
    if (this.hub.active) {
      this.inFlightSyscalls.set(inFlightKey(event.handle, event.id), syscall);
      this.hub.publish({ $case: 'notification', notification }, { containerId, syscall });
    }
    return session ? notification : null;
  }

  private onNativeAnswer(event: AnsweredEvent): void {
    if (event.notified) this.countNotification(this.syscallName(event.notified.nr, event.notified.arch));
    const by = NATIVE_ANSWERED_BY[event.by];
    const containerId = this.containers.containerIdOf(event.handle);
    const key = inFlightKey(event.handle, event.id);
    const syscall = this.inFlightSyscalls.get(key) ?? '';
    this.inFlightSyscalls.delete(key);
    if (event.by === 'deadline') {
      this.log.warn(
        { container: containerId, syscall, id: String(event.id), handle: event.handle },
        `control plane missed the ${this.config.decisionTimeoutMs} ms decision deadline: answered with the default action (${formatDefaultAction(this.config.defaultAction)})`,
      );
    } else if (event.by === 'control-plane' && 'errno' in event.action && event.action.errno !== 0 && isEmulationName(event.action.kind)) {
      this.log.info(
        { container: containerId, syscall, id: String(event.id), handle: event.handle, errno: errnoName(event.action.errno) },
        `emulated ${event.action.kind} returned ${errnoName(event.action.errno)}`,
      );
    }
    const findings = this.emulatedFindings.get(key);
    if (findings) this.emulatedFindings.delete(key);
    this.recordAnswer(event.handle, event.id, containerId, syscall, by, outcomeOf(event.action, event.gone), event.latencyNs, event.rule, findings);
  }

  private recordAnswer(
    handle: ContainerHandle, id: bigint, containerId: string, syscall: string, by: AnsweredBy, outcome: AnswerOutcome, latencyNs: bigint,
    rule = -1,
    findings: PolicyFinding[] = [],
  ): void {
    this.countAnswers(handle, by, outcome.kind === AnswerKind.ANSWER_KIND_TARGET_GONE, 1);
    this.latency?.observe(by, latencyNs);
    if (!this.hub.active) return;
    this.hub.publish({
      $case: 'answer',
      answer: { handle: handleToProto(handle), id, containerId, syscall, answeredBy: by, ...outcome, latency: durationFromNs(latencyNs),
        ruleIndex: rule >= 0 ? rule : 0, policyVersion: rule >= 0 ? (this.containers.recent(handle)?.policyVersion ?? '') : '', findings },
    }, { containerId, syscall });
  }

  private answerWithDefault(handle: ContainerHandle, id: bigint, containerId: string, syscall: string, by: AnsweredBy): void {
    const result = this.engine.respond(handle, id, this.config.defaultAction, 0);
    if (result.status === 'unknown' || result.status === 'late') return; // the engine answered it already and reported so
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
    session.number = this.nextSessionNumber++;
    const token = randomBytes(16);
    this.engine.openSession(session.number, token);
    this.sessions.set(session.number, session);
    this.active = session;
    const channel = hello.features.includes(CHANNEL_FEATURE);
    session.sendWelcome({
      sessionId: session.id,
      dataplaneVersion: VERSION,
      decisionTimeout: durationFromMs(this.config.decisionTimeoutMs),
      defaultAction: defaultActionToProto(this.config.defaultAction),
      features: [...DATAPLANE_FEATURES, CHANNEL_FEATURE, HOLD_FEATURE],
      decisionChannel: channel ? { socketPath: this.config.channelSocket, token } : undefined,
    });
    session.sendSnapshot(this.containers.list());
    this.engine.setActiveSession(session.number);
    this.log.info(
      { session: session.id, name: hello.name, version: hello.version, features: hello.features, containers: this.containers.size, channel },
      `control plane ${hello.name} ${hello.version} attached: it decides from now on`,
    );
    this.hub.publish({
      $case: 'controlPlaneAttached',
      controlPlaneAttached: { sessionId: session.id, name: hello.name, version: hello.version, features: hello.features },
    }, null);
    if (previous?.isOpen) {
      // Takeover: the previous session keeps what it holds and ends once it has answered it all
      // (the engine says so with session-drained).
      const held = this.engine.sessionPending(previous.number);
      this.log.info({ session: previous.id, successor: session.id, held }, `control plane ${previous.name} replaced by takeover; it finishes the ${held} notification(s) it holds, new ones go to ${hello.name}`);
      previous.sendDrain(session);
      if (held === 0) previous.close('replaced');
    }
    return null;
  }

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
      if (session !== this.active) {
        acks.push(this.refusePolicy(session, policy, 'not-active-session',
          `session ${session.id} (${session.name || 'unnamed'}) was replaced by ${this.active ? `session ${this.active.id} (${this.active.name || 'unnamed'})` : 'none'} and is draining: only the attached control plane's pushes apply`));
        continue;
      }
      const last = this.policySequences.get(handle);
      if (policy.sequence > 0n && last && last.session === session.number && policy.sequence <= last.sequence) {
        acks.push(this.refusePolicy(session, policy, 'stale-version',
          `push ${policy.sequence} of this session arrived after push ${last.sequence} (version ${this.containers.get(handle)?.policyVersion || 'none'}) was applied: a rollback`));
        continue;
      }
      const ack = this.applyPolicy(session, policy);
      if (ack.accepted && policy.sequence > 0n) this.policySequences.set(handle, { session: session.number, sequence: policy.sequence });
      acks.push(ack);
    }
    session.sendPolicyAcks(acks);
  }

  private refusePolicy(session: AttachSession, policy: ContainerPolicy, reason: string, detail: string): PolicyAck {
    const handle = handleFromProto(policy.handle);
    const inForce = this.containers.get(handle)?.policyVersion ?? '';
    this.counters.policiesRefused++;
    this.log.warn(
      { session: session.id, container: this.containers.containerIdOf(handle), handle, version: policy.version, reason },
      `policy ${policy.version} of container ${this.containers.containerIdOf(handle) || handle} refused (${reason}: ${detail}); ${inForce ? `version ${inForce} stays in force` : 'it has no policy in force'}`,
    );
    return { handle: policy.handle, version: inForce, accepted: false, refusedVersion: policy.version, ruleIndex: -1, reason, detail };
  }

  private applyPolicy(session: AttachSession, policy: ContainerPolicy): PolicyAck {
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

  private onDecisionDropped(sessionNumber: number, handle: ContainerHandle, id: bigint, reason: string): void {
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

  private rejectDecision(session: AttachSession, handle: bigint, id: bigint, reason: string, detail: string): void {
    this.log.warn({ session: session.id, handle: Number(handle), id: String(id), reason }, `decision ignored: ${detail}`);
    session.sendDecisionRejected({ handle, id, reason, detail });
    this.hub.publish({ $case: 'decisionDropped', decisionDropped: { handle, id, sessionId: session.id, reason } }, null);
  }

  private applyDecision(session: AttachSession, decision: Decision): void {
    const handle = handleFromProto(decision.handle);
    const containerId = this.containers.containerIdOf(handle);
    const syscall = this.inFlightSyscalls.get(inFlightKey(handle, decision.id)) ?? '';
    const nativeDecision = toNativeDecision(decision, this.containers.initPidOf(handle));
    if (typeof nativeDecision === 'string') {
      // Answer with the default now (only if this session owns it) rather than leave it to the deadline.
      const result = this.engine.respond(handle, decision.id, this.config.defaultAction, session.number);
      if (result.status === 'unknown' || result.status === 'late') return this.rejectUnknown(session, decision, result.status === 'late');
      this.counters.decisionsInvalid++;
      this.rejectDecision(session, decision.handle, decision.id, 'invalid', `${nativeDecision}; the default action answered`);
      this.recordAnswer(handle, decision.id, containerId, syscall, AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED, outcomeOf(this.config.defaultAction, result.status === 'gone'), result.latencyNs);
      return;
    }
    let result: RespondResult;
    try {
      result = this.engine.respond(handle, decision.id, nativeDecision, session.number);
    } catch (err) {
      // The engine refused its arguments (e.g. a mkdir decision for a mount): the notification is still pending.
      this.counters.decisionsInvalid++;
      this.rejectDecision(session, decision.handle, decision.id, 'invalid', `${(err as Error).message}; the default action answers`);
      this.answerWithDefault(handle, decision.id, containerId, syscall, AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED);
      return;
    }
    if (result.status === 'unknown' || result.status === 'late') return this.rejectUnknown(session, decision, result.status === 'late');
    if (result.status === 'accepted') {
      // Emulating: its answered event follows, with these findings.
      if (decision.findings.length > 0 && this.hub.active) this.emulatedFindings.set(inFlightKey(handle, decision.id), decision.findings);
      return;
    }
    this.inFlightSyscalls.delete(inFlightKey(handle, decision.id));
    this.recordAnswer(handle, decision.id, containerId, syscall, AnsweredBy.ANSWERED_BY_CONTROL_PLANE, outcomeOf(nativeDecision, result.status === 'gone'), result.latencyNs, -1, decision.findings);
  }

  private rejectUnknown(session: AttachSession, decision: Decision, late: boolean): void {
    if (late) {
      this.counters.decisionsLate++;
      this.rejectDecision(session, decision.handle, decision.id, 'unknown-id', 'late: the deadline passed and the default action answered');
    } else {
      this.counters.decisionsUnknown++;
      this.rejectDecision(session, decision.handle, decision.id, 'unknown-id', 'no such notification is pending for this session (never sent, already answered, or another session\'s)');
    }
  }

  onSessionEnded(session: AttachSession, reason: string): void {
    if (session.hello === null || session.number === 0) return; // never attached
    const wasActive = this.active === session;
    if (wasActive) {
      this.active = null;
      if (!this.stopped) this.engine.setActiveSession(0);
    }
    // The engine answers what the session held with the default action (answered events follow).
    const held = this.stopped ? 0 : this.engine.closeSession(session.number);
    this.sessions.delete(session.number);
    const message = wasActive
      ? `control plane ${session.name} detached (${reason}): ${held} notification(s) it held answered by the default action; the default action (${formatDefaultAction(this.config.defaultAction)}) answers until one attaches`
      : `control plane ${session.name} detached (${reason}) after handing over`;
    (wasActive ? this.log.warn : this.log.info).call(this.log, { session: session.id, reason, answeredByDefault: held }, message);
    this.hub.publish({
      $case: 'controlPlaneDetached',
      controlPlaneDetached: { sessionId: session.id, reason, answeredByDefault: held },
    }, null);
  }

  // ---- queries --------------------------------------------------------------------------------

  listContainers(): Container[] {
    return this.containers.list(this.engine.targetWaits());
  }

  /** ExplainRule: the rule the engine itself would answer this call with. Throws AgentError EBAD_REQUEST. */
  explainRule(request: ExplainRuleRequest): ExplainRuleResponse {
    const handle = handleFromProto(request.handle);
    if (!this.containers.get(handle)) throw new AgentError('EBAD_REQUEST', `no container with handle ${request.handle} is served here`);
    const abi = parseAbi(request.arch);
    if (abi === null) throw new AgentError('EBAD_REQUEST', `"${request.arch}" is not an ABI this data plane decides (x86_64, i386, x32)`);
    const call = syscallNumberIn(this.syscallTables, abi, request.syscall);
    if (call === null) throw new AgentError('EBAD_REQUEST', `"${request.syscall}" is not an ${abi} syscall name`);
    if (request.args.length > 6 || request.stringArgs.length > 6) throw new AgentError('EBAD_REQUEST', 'a syscall has at most six arguments');
    const paths = request.stringArgs.map((a) => ({ index: a.index, bytes: a.raw && a.raw.length > 0 ? a.raw : Buffer.from(a.value) }));
    const found = this.engine.explainRule(handle, call.nr, request.args, paths, call.arch);
    if (!found) return { version: '', ruleIndex: -1, rules: [], labels: {} };
    const policy = ContainerPolicy.decode(found.wire);
    return { version: found.version, ruleIndex: found.index, rules: policy.rules, labels: policy.labels };
  }

  status(): GetStatusResponse {
    const stats = this.engine.stats();
    this.counters.eventsDropped = stats.eventsDropped;
    this.counters.watchersDropped = this.hub.dropped;
    this.counters.emulationHelpersDied = stats.emulationHelpersDied;
    this.counters.emulationsRetried = stats.emulationsRetried;
    const counters = Object.fromEntries(Object.entries(this.counters).map(([k, v]) => [k, BigInt(v)])) as unknown as Counters;
    const uptimeMs = Date.now() - this.startedAt;
    const active = this.active;
    return {
      version: VERSION,
      uptime: durationFromMs(uptimeMs),
      listenerSocket: this.listenerSockets()[0] ?? '',
      listenerSockets: this.listenerSockets(),
      defaultAction: defaultActionToProto(this.config.defaultAction),
      decisionTimeout: durationFromMs(this.config.decisionTimeoutMs),
      controlPlane: active?.hello
        ? { sessionId: active.id, name: active.hello.name, version: active.hello.version, features: active.hello.features }
        : undefined,
      containers: this.containers.size,
      pending: stats.pending,
      counters,
      syncWakeUp: this.kernel.syncWakeUp || stats.syncWakeUp,
      watchers: this.hub.size,
      // A store whose holder died keeps nothing for the next crash.
      fdStore: stats.fdStore && !this.fdStore.lost,
      origin: this.origin,
      pid: process.pid,
      fdStoreStatus: this.fdStore.status(),
    };
  }

  openFdCount(): number {
    return this.addon.openFdCount();
  }
}
