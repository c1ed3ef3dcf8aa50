// The control plane's side of Attach: connects to the data plane, says hello, hands containers
// and notifications to the policy, sends decisions back in batches, and reconnects with capped
// exponential backoff. Stateless across reconnects: everything comes from the snapshot.
import * as grpc from '@grpc/grpc-js';
import { EventEmitter } from 'node:events';
import { handleFromProto, type ContainerHandle } from '../../common/container-handle';
import { CHANNEL_FEATURE, ChannelDecisionKind, encodeDecisions, type ChannelDecision } from '../../common/decision-channel';
import { createDataPlaneClient } from '../../common/dataplane-client';
import { durationFromMs } from '../../common/duration';
import { HOLD_FEATURE } from '../../common/hold-feature';
import type { Logger } from '../../common/logger';
import { VERSION } from '../../common/version';
import { performance } from 'node:perf_hooks';
import { ChannelConnection, loadChannelIo } from './channel-connection';
import { FairQueue } from './fair-queue';
import type {
  AttachRequest,
  AttachResponse,
  Container,
  ContainerRemoved,
  DataPlaneClient,
  Decision,
  Notification,
  Welcome,
} from '../../proto/gen/seccompagent/v1/dataplane';
import type { ContainerPolicy, PolicyAck } from '../../proto/gen/seccompagent/v1/policy';

export interface PolicyHandlers {
  /** True when the container of this handle is known (its container_added arrived). */
  knows(handle: ContainerHandle): boolean;
  /** Every container the data plane serves when the session starts (replaces what was known). */
  onSnapshot(containers: Container[]): void;
  onContainerAdded(container: Container): void;
  onContainerRemoved(removed: ContainerRemoved): void;
  /**
   * Decides one notification; returns null to let the deadline's default answer it. `deadline`
   * (performance.now() ms): past it, a rule's `when` is not evaluated and its failurePolicy answers.
   */
  decide(notification: Notification, deadline?: number): Decision | null | Promise<Decision | null>;
  /** The source whose notifications are queued together (a namespace); sources are served round robin. */
  sourceOf?(notification: Notification): string;
  /** The data plane's answers to pushPolicies(). */
  onPolicyAcks?(acks: PolicyAck[]): void;
}

export interface DataPlaneLinkOptions {
  /** The observer socket: GetStatus while handed over (resumeGraceMs). */
  grpcSocket: string;
  /** The control socket: Attach. */
  controlSocket: string;
  name: string;
  features: string[];
  /** Cap of the reconnect backoff, in ms. */
  reconnectMaxMs: number;
  /** Planned handover: replace the control plane attached now. */
  takeover?: boolean;
  /** Use the native decision channel when the data plane offers it (default true). */
  channel?: boolean;
  /** After channel traffic, keep the event loop polling this long instead of sleeping (0/absent: off). */
  busyPollMs?: number;
  /**
   * After a handover, how long to watch for the successor going away; attach again (no takeover)
   * when no control plane is attached within it. 0/absent: idle at once ('idle' event).
   */
  resumeGraceMs?: number;
  /** Per notification, from its arrival: past it, `when` conditions give way to their failurePolicy (default 1000). */
  decisionBudgetMs?: number;
  /** Work per turn of the event loop before the rest waits for the next turn (default 5 ms; FairQueue). */
  decisionSliceMs?: number;
}

interface Received {
  readonly notification: Notification;
  readonly viaChannel: boolean;
  readonly deadline: number;
}

/** How long a notification for a container not announced yet waits for its container_added. */
const UNKNOWN_HANDLE_WAIT_MS = 500;
/** Default of decisionBudgetMs: half the data plane's default --decision-timeout (2 s). */
export const DEFAULT_DECISION_BUDGET_MS = 1000;
/** Work per turn of the event loop before other sources' new notifications may join the rotation. */
const DECISION_SLICE_MS = 5;
const MAX_QUEUED_PER_SOURCE = 4096;
/** First retry after a lost data plane: a data plane handoff or restart rebinds its socket within tens of ms. */
const INITIAL_BACKOFF_MS = 10;
/**
 * After a session that was attached ends (a data plane handoff or restart), retries stay this
 * quick for QUICK_RETRY_WINDOW_MS before the backoff grows: the data plane holds new notifications
 * for a control plane only for its --control-plane-grace (1 s by default), and a backoff doubling
 * from 10 ms while a loaded successor comes up would wait past it (six failed tries: 640 ms to the
 * next one), leaving those notifications to the default action.
 */
const QUICK_RETRY_MS = 25;
const QUICK_RETRY_WINDOW_MS = 3000;

/** A simple decision travels on the channel; emulations, and decisions with findings, go over gRPC. */
function channelForm(decision: Decision): ChannelDecision | null {
  if (decision.findings.length > 0) return null;
  const action = decision.action;
  const base = { handle: handleFromProto(decision.handle), id: decision.id, errno: 0, value: 0n };
  switch (action?.$case) {
    case 'continue':
      return { ...base, kind: ChannelDecisionKind.Continue };
    case 'error':
      return { ...base, kind: ChannelDecisionKind.Error, errno: action.error.errno };
    case 'value':
      return { ...base, kind: ChannelDecisionKind.Value, value: action.value.value };
    default:
      return null;
  }
}

/**
 * 'drained': a successor took over (planned handover); this one answers what it holds.
 * 'handed-over': the session ended after that; within --resume-grace it attaches again if the
 * successor goes away, after it it emits 'idle' and attaches no more.
 */
export type LinkState = 'connecting' | 'attached' | 'disconnected' | 'drained' | 'handed-over' | 'stopped';

/** How often a handed-over link asks the observer socket whether a control plane is attached. */
const SUCCESSOR_POLL_MS = 250;

/** Emits 'state' (LinkState), 'welcome' (Welcome), 'handed-over', 'resumed' and 'idle'. */
export class DataPlaneLink extends EventEmitter {
  state: LinkState = 'connecting';
  sessionId = '';
  private client: DataPlaneClient | null = null;
  /** Observer socket client, while handed over. */
  private observer: DataPlaneClient | null = null;
  private successorTimer: NodeJS.Timeout | null = null;
  /** Hello.takeover of the next attach: the option at first, never after a resume. */
  private takeover: boolean;
  /** Attaching again after the successor went away: a refusal returns to watching. */
  private resuming = false;
  /** While handed over: ms epoch until which a vanished successor is replaced; 0 otherwise. */
  resumeUntil = 0;
  /** Who took over last ("name version"), for logs and health. */
  successor = '';
  /** Times this link attached again after a successor went away. */
  resumed = 0;
  /** Handed over for good (the resume grace passed): it attaches no more. */
  idle = false;
  private call: grpc.ClientDuplexStream<AttachRequest, AttachResponse> | null = null;
  private backoffMs = INITIAL_BACKOFF_MS;
  private quickRetryUntil = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private lastError = '';
  private channel: ChannelConnection | null = null;
  /** Notifications that arrived before their container was announced, by handle. */
  private readonly parked = new Map<ContainerHandle, { notifications: Notification[]; timer: NodeJS.Timeout }>();
  /** Notifications to decide, one queue per source, served round robin (fair-queue.ts). */
  private readonly pending: FairQueue<Received>;
  private grpcQueue: Decision[] = [];
  private channelQueue: ChannelDecision[] = [];
  private flushScheduled = false;
  /** Frames of one channel read are being received: their decisions go in one write at its end. */
  private inChannelRead = false;
  /** For benchmarks and metrics: decisions sent, writes that carried them, and rejected ones. */
  decisionsSent = 0;
  batchesSent = 0;
  decisionsRejected = 0;
  /** The attached data plane takes holds (its Welcome lists hold.v1). */
  private takesHolds = false;

  constructor(
    private readonly options: DataPlaneLinkOptions,
    private readonly policy: PolicyHandlers,
    private readonly log: Logger,
  ) {
    super();
    this.takeover = options.takeover ?? false;
    // A full queue drops its oldest: the data plane's deadline answers it (counted there).
    this.pending = new FairQueue<Received>((r) => this.decideOne(r), options.decisionSliceMs ?? DECISION_SLICE_MS, MAX_QUEUED_PER_SOURCE);
  }

  start(): void {
    this.client = createDataPlaneClient(this.options.controlSocket);
    this.connect();
  }

  stop(): void {
    this.setState('stopped', 'stopping');
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.successorTimer) clearTimeout(this.successorTimer);
    this.successorTimer = null;
    this.observer?.close();
    this.observer = null;
    this.channel?.destroy();
    this.channel = null;
    this.call?.end();
    this.call = null;
    this.client?.close();
  }

  private setState(state: LinkState, detail: string): void {
    if (this.state === state) return;
    const previous = this.state;
    this.state = state;
    this.emit('state', state);
    if (state === 'drained') this.log.info({ session: this.sessionId }, `handing over: ${detail}; answering what this control plane holds, then detaching`);
    else if (state === 'attached') this.log.info({ session: this.sessionId, socket: this.options.controlSocket }, `attached to the data plane: deciding notifications (${detail})`);
    else if (state === 'disconnected') {
      this.log.warn(
        { socket: this.options.controlSocket, previous },
        `data plane unreachable or session ended (${detail}); its default action answers meanwhile; reconnecting with backoff up to ${this.options.reconnectMaxMs} ms`,
      );
    }
  }

  private connect(): void {
    if (this.state === 'stopped' || !this.client) return;
    const call = this.client.attach();
    this.call = call;
    call.on('data', (response: AttachResponse) => {
      const message = response.message;
      switch (message?.$case) {
        case 'welcome':
          this.onWelcome(message.welcome);
          break;
        case 'snapshot':
          this.policy.onSnapshot(message.snapshot.containers);
          for (const container of message.snapshot.containers) this.unpark(handleFromProto(container.handle));
          break;
        case 'containerAdded':
          this.policy.onContainerAdded(message.containerAdded);
          this.unpark(handleFromProto(message.containerAdded.handle));
          break;
        case 'containerRemoved':
          this.policy.onContainerRemoved(message.containerRemoved);
          this.unpark(handleFromProto(message.containerRemoved.handle));
          break;
        case 'notifications':
          for (const notification of message.notifications.notifications) this.receive(notification, false);
          break;
        case 'drain':
          this.successor = message.drain.successor;
          this.setState('drained', `${message.drain.successor} (session ${message.drain.successorSessionId}) took over`);
          break;
        case 'policyAcks':
          this.policy.onPolicyAcks?.(message.policyAcks.acks);
          break;
        case 'decisionRejected': {
          const r = message.decisionRejected;
          this.decisionsRejected++;
          this.log.warn({ id: String(r.id), handle: Number(r.handle), reason: r.reason }, `the data plane did not apply a decision: ${r.detail}`);
          break;
        }
        default:
          break;
      }
    });
    call.on('error', (err: grpc.ServiceError) => this.onBroken(call, err.details || err.message, err.code));
    call.on('end', () => this.onBroken(call, 'the data plane ended the session', grpc.status.OK));
    const features = this.options.channel === false ? this.options.features : [...this.options.features, CHANNEL_FEATURE];
    call.write({ message: { $case: 'hello', hello: { name: this.options.name, version: VERSION, features, takeover: this.takeover } } });
  }

  /**
   * Tells the data plane that the decision for `n` comes in about `ms` on purpose (hold.v1), so its
   * deadline does not answer it first. False when it cannot (not attached, or a data plane without holds).
   */
  hold(n: Notification, ms: number): boolean {
    if (!this.call || this.state !== 'attached' || !this.takesHolds) return false;
    this.call.write({ message: { $case: 'holds', holds: { holds: [{ handle: n.handle, id: n.id, duration: durationFromMs(ms) }] } } });
    return true;
  }

  /** Sends container policies on the attached session; false when none is attached. */
  pushPolicies(policies: ContainerPolicy[]): boolean {
    if (!this.call || this.state !== 'attached') return false;
    this.call.write({ message: { $case: 'policies', policies: { policies } } });
    return true;
  }

  /** One notification, from gRPC or the channel: decided now, or parked until its container is known. */
  private receive(notification: Notification, viaChannel: boolean, waited = false): void {
    const handle = handleFromProto(notification.handle);
    if (!waited && !this.policy.knows(handle)) {
      let parked = this.parked.get(handle);
      if (!parked) {
        parked = { notifications: [], timer: setTimeout(() => this.unpark(handle), UNKNOWN_HANDLE_WAIT_MS) };
        this.parked.set(handle, parked);
      }
      (notification as Notification & { viaChannel?: boolean }).viaChannel = viaChannel;
      parked.notifications.push(notification);
      return;
    }
    const deadline = performance.now() + (this.options.decisionBudgetMs ?? DEFAULT_DECISION_BUDGET_MS);
    let source = '';
    try {
      source = this.policy.sourceOf?.(notification) ?? '';
    } catch {
      // an unknown source shares the default queue
    }
    this.pending.push(source, { notification, viaChannel, deadline });
  }

  /** Decides one queued notification (FairQueue's turn). */
  private decideOne({ notification, viaChannel, deadline }: Received): void {
    let decided: Decision | null | Promise<Decision | null>;
    const fail = (err: unknown) =>
      this.log.error({ err, container: notification.containerId, syscall: notification.syscall, id: String(notification.id) }, 'policy failed on a notification; the data plane\'s default answers it at the deadline');
    try {
      decided = this.policy.decide(notification, deadline);
    } catch (err) {
      fail(err);
      return;
    }
    if (decided instanceof Promise) decided.then((d) => this.queue(d, viaChannel), fail);
    else this.queue(decided, viaChannel);
  }

  private unpark(handle: ContainerHandle): void {
    const parked = this.parked.get(handle);
    if (!parked) return;
    this.parked.delete(handle);
    clearTimeout(parked.timer);
    for (const n of parked.notifications) this.receive(n, (n as Notification & { viaChannel?: boolean }).viaChannel ?? false, true);
  }

  private queue(decision: Decision | null, viaChannel: boolean): void {
    if (!decision) return;
    const simple = viaChannel && this.channel ? channelForm(decision) : null;
    if (simple) this.channelQueue.push(simple);
    else this.grpcQueue.push(decision);
    if (!this.flushScheduled && !this.inChannelRead) {
      this.flushScheduled = true;
      queueMicrotask(() => this.flush());
    }
  }

  /** One write per path for everything decided in this turn of the event loop. */
  private flush(): void {
    this.flushScheduled = false;
    if (this.channelQueue.length > 0) {
      const batch = this.channelQueue;
      this.channelQueue = [];
      this.decisionsSent += batch.length;
      this.batchesSent++;
      this.channel?.write(encodeDecisions(batch));
    }
    if (this.grpcQueue.length > 0 && this.call) {
      const decisions = this.grpcQueue;
      this.grpcQueue = [];
      this.decisionsSent += decisions.length;
      this.batchesSent++;
      this.call.write({ message: { $case: 'decisions', decisions: { decisions } } });
    }
  }

  private openChannel(socketPath: string, token: Uint8Array): void {
    const channel: ChannelConnection = new ChannelConnection(
      { socketPath, token, busyPollMs: this.options.busyPollMs ?? 0, io: loadChannelIo() },
      {
        onFrame: (frame) => {
          if (frame.type === 'ready') {
            const way = channel.usesRings ? 'in shared-memory rings' : 'on its socket';
            this.log.info({ session: this.sessionId, socket: socketPath, rings: channel.usesRings }, `decision channel ready: notifications and simple decisions travel natively, ${way}`);
            return;
          }
          this.inChannelRead = true;
          this.receive(frame.notification, true);
        },
        onReadEnd: () => {
          if (!this.inChannelRead) return;
          this.inChannelRead = false;
          this.flush();
        },
        onBadFrame: (err) => this.log.error({ err }, 'decision channel sent a bad frame; closing it (notifications then come over gRPC)'),
        onRingRefused: (reason) => this.log.warn({ session: this.sessionId, reason }, `decision channel: the data plane's shared-memory rings could not be mapped (${reason}); frames travel on the socket`),
        onClosed: (why) => {
          if (this.channel !== channel) return;
          this.channel = null;
          if (this.state === 'attached') this.log.warn({ session: this.sessionId, reason: why }, 'decision channel closed; notifications come over gRPC until the next attach');
        },
      },
    );
    this.channel = channel;
  }

  private onWelcome(welcome: Welcome): void {
    this.sessionId = welcome.sessionId;
    this.takesHolds = welcome.features.includes(HOLD_FEATURE);
    this.resuming = false;
    this.resumeUntil = 0;
    if (welcome.decisionChannel && this.options.channel !== false) this.openChannel(welcome.decisionChannel.socketPath, welcome.decisionChannel.token);
    this.backoffMs = INITIAL_BACKOFF_MS;
    this.lastError = '';
    this.setState('attached', `data plane ${welcome.dataplaneVersion}, session ${welcome.sessionId}`);
    this.emit('welcome', welcome);
  }

  private onBroken(call: grpc.ClientDuplexStream<AttachRequest, AttachResponse>, reason: string, code: grpc.status): void {
    if (this.call !== call) return;
    this.call = null;
    if (this.state === 'attached') this.quickRetryUntil = Date.now() + QUICK_RETRY_WINDOW_MS;
    this.channel?.destroy();
    this.channel = null;
    for (const handle of [...this.parked.keys()]) clearTimeout(this.parked.get(handle)!.timer);
    this.parked.clear();
    this.grpcQueue = [];
    this.channelQueue = [];
    if (this.state === 'stopped') return;
    if (this.state === 'drained') {
      this.log.info({ session: this.sessionId }, 'handover complete: the data plane ended this session');
      this.setState('handed-over', this.successor);
      this.emit('handed-over');
      this.watchSuccessor(Date.now() + (this.options.resumeGraceMs ?? 0));
      return;
    }
    if (this.resuming && code === grpc.status.FAILED_PRECONDITION) {
      // Another control plane attached between the check and this attach: it decides; watch it.
      this.resuming = false;
      this.log.info({ reason }, 'another control plane attached first; watching it for the rest of the resume grace');
      this.setState('handed-over', 'another control plane attached first');
      this.watchSuccessor(this.resumeUntil);
      return;
    }
    if (reason !== this.lastError && this.state === 'disconnected') this.log.debug({ reason }, 'data plane still unreachable');
    this.lastError = reason;
    this.setState('disconnected', reason);
    const quick = Date.now() < this.quickRetryUntil;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.connect();
    }, quick ? Math.min(this.backoffMs, QUICK_RETRY_MS) : this.backoffMs);
    if (!quick) this.backoffMs = Math.min(this.backoffMs * 2, this.options.reconnectMaxMs);
  }

  /**
   * Handed over: until `until`, asks the observer socket every SUCCESSOR_POLL_MS whether a control
   * plane is attached. None (the successor went away: crashed, or a client that took over and
   * left): attach again, without takeover, and decide. Past `until`: 'idle', for good.
   */
  private watchSuccessor(until: number): void {
    this.resumeUntil = until;
    if (until <= Date.now()) {
      this.resumeUntil = 0;
      this.idle = true;
      this.emit('idle');
      return;
    }
    this.observer ??= createDataPlaneClient(this.options.grpcSocket);
    const observer = this.observer;
    const check = () => {
      this.successorTimer = null;
      if (this.state !== 'handed-over') return;
      if (Date.now() >= this.resumeUntil) {
        this.log.info({ successor: this.successor }, `the successor kept the session for the whole resume grace (${this.options.resumeGraceMs} ms): idle from now on`);
        this.resumeUntil = 0;
        this.observer?.close();
        this.observer = null;
        this.idle = true;
        this.emit('idle');
        return;
      }
      observer.getStatus({}, new grpc.Metadata(), { deadline: new Date(Date.now() + 1000) }, (err, status) => {
        if (this.state !== 'handed-over') return;
        if (!err && !status.controlPlane) return this.resume();
        this.successorTimer = setTimeout(check, SUCCESSOR_POLL_MS);
      });
    };
    this.successorTimer = setTimeout(check, SUCCESSOR_POLL_MS);
  }

  private resume(): void {
    this.resumed++;
    this.resuming = true;
    this.takeover = false;
    this.observer?.close();
    this.observer = null;
    this.log.warn(
      { successor: this.successor, graceLeftMs: this.resumeUntil - Date.now() },
      `the control plane that took over (${this.successor || 'unnamed'}) went away within the resume grace and none is attached: attaching again to decide`,
    );
    this.backoffMs = INITIAL_BACKOFF_MS;
    this.setState('connecting', 'resuming');
    this.emit('resumed');
    this.connect();
  }
}
