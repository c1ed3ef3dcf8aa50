// One control plane's Attach stream: the hello handshake, writes to it, decisions from it, and
// exactly one "ended" callback however the stream stops (end, error, cancel, replaced).
import { randomUUID } from 'node:crypto';
import { status, type ServerDuplexStream } from '@grpc/grpc-js';
import type {
  AttachRequest,
  AttachResponse,
  Container,
  ContainerRemoved,
  Decision,
  DecisionRejected,
  Hello,
  Hold,
  Notification,
  Welcome,
} from '../proto/gen/seccompagent/v1/dataplane';
import type { ContainerPolicy, PolicyAck } from '../proto/gen/seccompagent/v1/policy';

export interface AttachSessionHooks {
  /** The hello arrived; return null to accept or an error text to refuse the session. */
  onHello(session: AttachSession): { code: status; details: string } | null;
  onDecisions(session: AttachSession, decisions: Decision[]): void;
  /** Container policies pushed (policy.v1); the answers go back with sendPolicyAcks. */
  onPolicies(session: AttachSession, policies: ContainerPolicy[]): void;
  /** Notifications the control plane answers later on purpose (hold.v1). */
  onHolds?(session: AttachSession, holds: Hold[]): void;
  /** Called once when the stream ends, for whatever reason. */
  onEnded(session: AttachSession, reason: string): void;
}

const HELLO_TIMEOUT_MS = 10_000;
/** Bounds of Hello's fields: they are logged, kept per session and shown in status and Watch. */
export const HELLO_LIMITS = { textBytes: 256, features: 64 } as const;

/** Why a Hello is out of bounds, or null when it is within them. */
export function helloOutOfBounds(hello: Hello): string | null {
  const { textBytes, features } = HELLO_LIMITS;
  for (const [field, value] of [['name', hello.name], ['version', hello.version]] as const) {
    const size = Buffer.byteLength(value);
    if (size > textBytes) return `Hello.${field} is ${size} bytes; at most ${textBytes} are accepted`;
  }
  if (hello.features.length > features) return `Hello.features has ${hello.features.length} entries; at most ${features} are accepted`;
  const long = hello.features.findIndex((f) => Buffer.byteLength(f) > textBytes);
  if (long >= 0) return `Hello.features[${long}] is ${Buffer.byteLength(hello.features[long])} bytes; at most ${textBytes} are accepted`;
  return null;
}

export class AttachSession {
  readonly id = randomUUID();
  /** The engine's number for this session, set when its Hello is accepted (0 before). */
  number = 0;
  hello: Hello | null = null;
  private ended = false;
  private helloTimer: NodeJS.Timeout | null;

  constructor(
    private readonly call: ServerDuplexStream<AttachRequest, AttachResponse>,
    private readonly hooks: AttachSessionHooks,
  ) {
    this.helloTimer = setTimeout(
      () => this.fail(status.DEADLINE_EXCEEDED, `no Hello within ${HELLO_TIMEOUT_MS / 1000} s of Attach`, 'no-hello'),
      HELLO_TIMEOUT_MS,
    );
    call.on('data', (request: AttachRequest) => this.receive(request));
    call.on('end', () => {
      this.finish('stream-ended');
      call.end();
    });
    call.on('error', () => this.finish('stream-error'));
    call.on('cancelled', () => this.finish('stream-cancelled'));
    call.on('close', () => this.finish('stream-closed'));
  }

  get name(): string {
    return this.hello?.name ?? '';
  }

  get isOpen(): boolean {
    return !this.ended;
  }

  private receive(request: AttachRequest): void {
    if (this.ended) return;
    const message = request.message;
    if (this.hello === null) {
      if (message?.$case !== 'hello') {
        this.fail(status.INVALID_ARGUMENT, 'the first message of Attach must be Hello', 'no-hello');
        return;
      }
      if (this.helloTimer) clearTimeout(this.helloTimer);
      this.helloTimer = null;
      const outOfBounds = helloOutOfBounds(message.hello);
      if (outOfBounds !== null) {
        this.fail(status.INVALID_ARGUMENT, `${outOfBounds}; session refused, nothing changed`, 'refused');
        return;
      }
      this.hello = message.hello;
      const refusal = this.hooks.onHello(this);
      if (refusal) this.fail(refusal.code, refusal.details, 'refused');
      return;
    }
    if (message?.$case === 'decisions') this.hooks.onDecisions(this, message.decisions.decisions);
    else if (message?.$case === 'policies') this.hooks.onPolicies(this, message.policies.policies);
    else if (message?.$case === 'holds') this.hooks.onHolds?.(this, message.holds.holds);
    else if (message?.$case === 'hello') this.fail(status.INVALID_ARGUMENT, 'Hello sent twice in one Attach', 'protocol-error');
  }

  private write(response: AttachResponse): void {
    if (!this.ended) this.call.write(response);
  }

  sendWelcome(welcome: Welcome): void {
    this.write({ message: { $case: 'welcome', welcome } });
  }

  sendSnapshot(containers: Container[]): void {
    this.write({ message: { $case: 'snapshot', snapshot: { containers } } });
  }

  sendContainerAdded(container: Container): void {
    this.write({ message: { $case: 'containerAdded', containerAdded: container } });
  }

  sendContainerRemoved(removed: ContainerRemoved): void {
    this.write({ message: { $case: 'containerRemoved', containerRemoved: removed } });
  }

  sendNotifications(notifications: Notification[]): void {
    this.write({ message: { $case: 'notifications', notifications: { notifications } } });
  }

  sendDrain(successor: AttachSession): void {
    this.write({ message: { $case: 'drain', drain: { successorSessionId: successor.id, successor: `${successor.name} ${successor.hello?.version ?? ''}`.trim() } } });
  }

  sendPolicyAcks(acks: PolicyAck[]): void {
    this.write({ message: { $case: 'policyAcks', policyAcks: { acks } } });
  }

  sendDecisionRejected(rejected: DecisionRejected): void {
    this.write({ message: { $case: 'decisionRejected', decisionRejected: rejected } });
  }

  /** Ends the stream with a status, e.g. when the data plane shuts down or refuses the session. */
  fail(code: status, details: string, reason: string): void {
    if (this.ended) return;
    this.finish(reason);
    this.call.emit('error', { code, details });
  }

  /** Ends the stream cleanly (OK status). */
  close(reason: string): void {
    if (this.ended) return;
    this.finish(reason);
    this.call.end();
  }

  private finish(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    if (this.helloTimer) clearTimeout(this.helloTimer);
    this.helloTimer = null;
    this.hooks.onEnded(this, reason);
  }
}
