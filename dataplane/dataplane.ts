// The data plane: builds its parts around the native engine, runs its life (restore, start, handoff, stop) and answers queries; mechanism only, it knows nothing of Kubernetes or of policy.
import { handleFromProto } from '../common/container-handle';
import { defaultActionToProto, formatDefaultAction } from '../common/default-action';
import { durationFromMs } from '../common/duration';
import { AgentError } from '../common/errors';
import type { Logger } from '../common/logger';
import { parseAbi, syscallNameIn, syscallNumberIn, type SyscallTables } from '../common/syscall-abi';
import { VERSION } from '../common/version';
import type {
  Container,
  ExplainRuleRequest,
  ExplainRuleResponse,
  GetStatusResponse,
} from '../proto/gen/seccompagent/v1/dataplane';
import { ContainerPolicy } from '../proto/gen/seccompagent/v1/policy';
import { AnswerLedger } from './answer-ledger';
import type { AttachSession, AttachSessionHooks } from './attach-session';
import { ContainerTable } from './container-table';
import { decodeContainerRecord } from './container-record';
import { countersToProto, zeroCounters } from './counters';
import { DecisionApplier } from './decision-applier';
import { EngineEvents } from './engine-events';
import { makeEventDecoder } from './event-decoder';
import { FdStoreWatch } from './fd-store-watch';
import type {
  HandOffResult,
  NamedFd,
  NativeAddon,
  NativeDefaultAction,
  NativeEngine,
  NativeStats,
  RestoreResult,
} from './native';
import { PolicyApplier } from './policy-applier';
import { SessionRegistry } from './session-registry';
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
  /** See --engine-threads: threads that receive and answer, each serving some containers. */
  engineThreads: number;
  /**
   * See --control-plane-grace: after a handoff or restart from a data plane that had a control
   * plane, how long new notifications wait for one (a short pause instead of a gap in policy); 0: off.
   */
  controlPlaneGraceMs: number;
}

/** How a data plane got its containers: none yet, from the fd store (restart), or by handoff. */
export type DataPlaneOrigin = 'fresh' | 'fd-store' | 'handoff';

export class DataPlane {
  readonly containers = new ContainerTable();
  readonly hub: WatchHub;
  readonly counters = zeroCounters();
  /** Counts notifications and answers; metrics read it and give it their latency histogram. */
  readonly ledger: AnswerLedger;
  /** What an Attach stream calls: its Hello, decisions, holds, policies and end. */
  readonly attachHooks: AttachSessionHooks;
  private readonly sessions: SessionRegistry;
  private readonly events: EngineEvents;
  private readonly engine: NativeEngine;
  private readonly syscallTables: SyscallTables;
  /** The kernel's seccomp features, probed once at start (the engine learns them only from a first fd). */
  private readonly kernel: { syncWakeUp: boolean; detail: string };
  private readonly startedAt = Date.now();
  private stopped = false;
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
  /** restore() took containers back that adoptRestored() has not put in the table yet. */
  private adoptionPending = false;
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
      onBatch: makeEventDecoder(addon.eventLayout, (events) => this.events.onEvents(events)),
      defaultAction: config.defaultAction,
      decisionTimeoutMs: config.decisionTimeoutMs,
      // Events that need no reaction (answers given natively) reach JS at most every 20 ms:
      // each JS wake-up costs the notification path CPU on a small machine (docs/benchmarks.md).
      batchDelayUs: 20_000,
      busyPollUs: config.busyPollMs * 1000,
      lanes: config.engineThreads,
    });
    const { containers, counters, hub, engine } = this;
    const ledger = (this.ledger = new AnswerLedger(counters, containers, hub));
    const sessions = (this.sessions = new SessionRegistry(config, log, engine, containers, hub));
    const decisions = new DecisionApplier(config, log, engine, containers, counters, ledger, sessions, hub, addon.suffixedPath);
    const policies = new PolicyApplier(log, engine, containers, counters, sessions);
    this.events = new EngineEvents({
      config, log, engine, containers, counters, hub, ledger, sessions, decisions, policies,
      syscallName: (nr, arch) => this.syscallName(nr, arch),
      onHandoff: (conn, peerPid) => {
        if (this.onHandoffRequest) this.onHandoffRequest(conn, peerPid);
        else addon.closeFd(conn);
      },
    });
    this.attachHooks = {
      onHello: (session) => sessions.onHello(session),
      onDecisions: (session, list) => decisions.onDecisions(session, list),
      onPolicies: (session, list) => policies.onPolicies(session, list),
      onHolds: (session, holds) => decisions.onHolds(session, holds),
      onEnded: (session, reason) => sessions.onSessionEnded(session, reason),
    };
    this.fdStore = new FdStoreWatch(addon, log, this.engine.stats().fdStore);
    // Per-notification events only while someone watches them.
    this.engine.setDetailedEvents(false);
    this.hub.onActiveChange = (active) => this.engine.setDetailedEvents(active);
  }

  /**
   * Before start(): takes back what a predecessor left (the fd store after a restart, or a
   * handoff): its containers with their handles and records, its listener, and its ids in flight,
   * which get the default action now (nobody else ever will answer them). The engine serves them
   * from start() on; adoptRestored() then gives them to the container table.
   */
  restore(fds: NamedFd[], origin: 'fd-store' | 'handoff'): RestoreResult {
    // No runtime connection is taken until adoptRestored() has named every container: a new fd of
    // one of them (an exec) finds its siblings by id, to answer by their policy from its first call.
    this.engine.setAccepting(false);
    const result = this.engine.restore(fds, origin === 'handoff', this.config.controlPlaneGraceMs > 0);
    this.adoptionPending = true;
    for (const problem of result.problems) this.log.warn({ origin }, `restore: ${problem}`);
    this.origin = origin;
    this.restoredListeners = result.listenerPaths;
    const graceMs = this.config.controlPlaneGraceMs;
    if (result.controlPlaneAttached && graceMs > 0) {
      this.engine.holdForControlPlane(graceMs);
      this.log.info({ graceMs }, `the previous data plane had a control plane attached: for ${graceMs} ms new notifications wait for one to attach (each at most ${this.config.decisionTimeoutMs} ms) instead of getting the default action`);
    }
    this.log.info(
      { origin, containers: result.containerCount, listeners: result.listenerPaths, journal: result.journal, inFlightAnswered: result.inFlightAnswered, inFlightByRules: result.inFlightByRules, inFlightHeld: result.inFlightHeld, lostAnswered: result.lostAnswered, inFlightWithHelper: result.inFlightWithHelper },
      `took back ${result.containerCount} container(s) from ${origin === 'handoff' ? 'the data plane that handed over' : 'the fd store'}; of the notifications it had left unanswered, ${result.inFlightByRules} were answered by their container's rules, ${result.inFlightHeld} wait for the next control plane and ${result.inFlightAnswered + result.lostAnswered} got the default action (${formatDefaultAction(this.config.defaultAction)})` +
        (result.inFlightWithHelper > 0 ? `; ${result.inFlightWithHelper} were with its emulation helpers, which answer them (waited for; done anew only if no helper of it lives)` : ''),
    );
    return result;
  }

  /**
   * After restore() and start() (a successor: after its ack, so that this is not part of the
   * handoff's pause), in the same turn of the event loop, before any event of theirs is read: the
   * restored containers into the container table, each named in the engine; then runtime
   * connections are accepted again. Nothing to do without a restore.
   */
  adoptRestored(): void {
    if (!this.adoptionPending) return;
    this.adoptionPending = false;
    for (const { handle, record, recordError, policy } of this.engine.takeRestoredContainers()) {
      if (recordError !== undefined) this.log.warn({ origin: this.origin, handle }, `restore: the record of container handle ${handle}: ${recordError}; it is served under the name unknown-${handle}`);
      const restored = decodeContainerRecord(record, handle);
      this.containers.add(handle, restored.state, restored.peer, restored.registeredAt);
      // (One that left since start() is not named: its 'removed' event, read after this, drops it.)
      this.engine.nameContainer(handle, restored.state.containerId);
      if (policy) this.containers.setPolicy(handle, policy.version, policy.rules, policy.labels);
    }
    this.engine.setAccepting(true);
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

  /** Reads of a task's memory that outlived the read watch (metrics: read when scraped). */
  get readStalls(): number {
    return this.engine.stats().readStalls;
  }

  /** Containers whose callers are now woken where the scheduler likes, and how often one changed mode. */
  get wakeModes(): { spread: number; switches: number } {
    const stats = this.engine.stats();
    return { spread: stats.spreadWakeContainers, switches: stats.wakeModeSwitches };
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
    this.sessions.stop();
    this.hub.close();
    this.engine.stop();
  }

  // ---- queries --------------------------------------------------------------------------------

  /** The syscall's name in its own ABI (x86_64, i386, x32); '' when unknown. */
  syscallName(nr: number, arch: number): string {
    return syscallNameIn(this.syscallTables, arch, nr);
  }

  get attached(): AttachSession | null {
    return this.sessions.active;
  }

  get pendingCount(): number {
    return this.engine.stats().pending;
  }

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
    this.counters.readStalls = stats.readStalls;
    this.counters.wakeModeSwitches = stats.wakeModeSwitches;
    const counters = countersToProto(this.counters);
    const uptimeMs = Date.now() - this.startedAt;
    const active = this.sessions.active;
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
      engineThreads: stats.lanes.map((lane) => ({ containers: lane.containers, received: BigInt(lane.received) })),
      spreadWakeContainers: stats.spreadWakeContainers,
    };
  }

  openFdCount(): number {
    return this.addon.openFdCount();
  }
}
