// The control plane's side of Attach: connects to the data plane, says hello, hands containers
// and notifications to the policy, sends decisions back in batches, and reconnects with capped
// exponential backoff. Stateless across reconnects: everything comes from the snapshot.
import * as grpc from '@grpc/grpc-js';
import { EventEmitter } from 'node:events';
import { createDataPlaneClient } from '../common/dataplane-client';
import type { Logger } from '../common/logger';
import { VERSION } from '../common/version';
import type {
  AttachRequest,
  AttachResponse,
  Container,
  ContainerRemoved,
  DataPlaneClient,
  Decision,
  Notification,
  Welcome,
} from '../proto/gen/seccompagent/v1/dataplane';

export interface PolicyHandlers {
  /** Every container the data plane serves when the session starts (replaces what was known). */
  onSnapshot(containers: Container[]): void;
  onContainerAdded(container: Container): void;
  onContainerRemoved(removed: ContainerRemoved): void;
  /** Decides one notification; returns null to let the deadline's default answer it. */
  decide(notification: Notification): Decision | null | Promise<Decision | null>;
}

export interface DataPlaneLinkOptions {
  grpcSocket: string;
  name: string;
  features: string[];
  /** Cap of the reconnect backoff, in ms. */
  reconnectMaxMs: number;
  /** Planned handover: replace the control plane attached now. */
  takeover?: boolean;
}

/** 'drained': a successor took over (planned handover); this one does not attach again. */
export type LinkState = 'connecting' | 'attached' | 'disconnected' | 'drained' | 'stopped';

/** Emits 'state' (LinkState) and 'welcome' (Welcome). */
export class DataPlaneLink extends EventEmitter {
  state: LinkState = 'connecting';
  sessionId = '';
  private client: DataPlaneClient | null = null;
  private call: grpc.ClientDuplexStream<AttachRequest, AttachResponse> | null = null;
  private backoffMs = 100;
  private retryTimer: NodeJS.Timeout | null = null;
  private lastError = '';
  decisionsSent = 0;

  constructor(
    private readonly options: DataPlaneLinkOptions,
    private readonly policy: PolicyHandlers,
    private readonly log: Logger,
  ) {
    super();
  }

  start(): void {
    this.client = createDataPlaneClient(this.options.grpcSocket);
    this.connect();
  }

  stop(): void {
    this.setState('stopped', 'stopping');
    if (this.retryTimer) clearTimeout(this.retryTimer);
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
    else if (state === 'attached') this.log.info({ session: this.sessionId, socket: this.options.grpcSocket }, `attached to the data plane: deciding notifications (${detail})`);
    else if (state === 'disconnected') {
      this.log.warn(
        { socket: this.options.grpcSocket, previous },
        `data plane unreachable or session ended (${detail}); its default action answers meanwhile; reconnecting with backoff up to ${this.options.reconnectMaxMs} ms`,
      );
    }
  }

  private connect(): void {
    if (this.state === 'stopped' || !this.client) return;
    const call = this.client.attach();
    this.call = call;
    let pendingDecisions: Decision[] = [];
    let flushScheduled = false;
    const flush = () => {
      flushScheduled = false;
      if (pendingDecisions.length === 0 || this.call !== call) return;
      const decisions = pendingDecisions;
      pendingDecisions = [];
      this.decisionsSent += decisions.length;
      call.write({ message: { $case: 'decisions', decisions: { decisions } } });
    };
    const queue = (decision: Decision | null) => {
      if (!decision) return;
      pendingDecisions.push(decision);
      if (!flushScheduled) {
        flushScheduled = true;
        queueMicrotask(flush);
      }
    };
    call.on('data', (response: AttachResponse) => {
      const message = response.message;
      switch (message?.$case) {
        case 'welcome':
          this.onWelcome(message.welcome);
          break;
        case 'snapshot':
          this.policy.onSnapshot(message.snapshot.containers);
          break;
        case 'containerAdded':
          this.policy.onContainerAdded(message.containerAdded);
          break;
        case 'containerRemoved':
          this.policy.onContainerRemoved(message.containerRemoved);
          break;
        case 'notifications':
          for (const notification of message.notifications.notifications) {
            let decided: Decision | null | Promise<Decision | null>;
            try {
              decided = this.policy.decide(notification);
            } catch (err) {
              this.log.error({ err, container: notification.containerId, syscall: notification.syscall, id: String(notification.id) }, 'policy failed on a notification; the data plane\'s default answers it at the deadline');
              continue;
            }
            if (decided instanceof Promise) {
              decided.then(queue, (err: unknown) =>
                this.log.error({ err, container: notification.containerId, syscall: notification.syscall, id: String(notification.id) }, 'policy failed on a notification; the data plane\'s default answers it at the deadline'));
            } else queue(decided);
          }
          break;
        case 'drain':
          this.setState('drained', `${message.drain.successor} (session ${message.drain.successorSessionId}) took over`);
          break;
        case 'decisionRejected': {
          const r = message.decisionRejected;
          this.log.warn({ id: String(r.id), handle: Number(r.handle), reason: r.reason }, `the data plane did not apply a decision: ${r.detail}`);
          break;
        }
        default:
          break;
      }
    });
    call.on('error', (err: grpc.ServiceError) => this.onBroken(call, err.details || err.message));
    call.on('end', () => this.onBroken(call, 'the data plane ended the session'));
    call.write({ message: { $case: 'hello', hello: { name: this.options.name, version: VERSION, features: this.options.features, takeover: this.options.takeover ?? false } } });
  }

  private onWelcome(welcome: Welcome): void {
    this.sessionId = welcome.sessionId;
    this.backoffMs = 100;
    this.lastError = '';
    this.setState('attached', `data plane ${welcome.dataplaneVersion}, session ${welcome.sessionId}`);
    this.emit('welcome', welcome);
  }

  private onBroken(call: grpc.ClientDuplexStream<AttachRequest, AttachResponse>, reason: string): void {
    if (this.call !== call) return;
    this.call = null;
    if (this.state === 'stopped') return;
    if (this.state === 'drained') {
      this.log.info({ session: this.sessionId }, 'handover complete: the data plane ended this session');
      this.emit('handed-over');
      return;
    }
    if (reason !== this.lastError && this.state === 'disconnected') this.log.debug({ reason }, 'data plane still unreachable');
    this.lastError = reason;
    this.setState('disconnected', reason);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.connect();
    }, this.backoffMs);
    this.backoffMs = Math.min(this.backoffMs * 2, this.options.reconnectMaxMs);
  }
}
