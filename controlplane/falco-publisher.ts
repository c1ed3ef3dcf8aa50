// MIDDLEWARE=falco: each notification of such a container is published to kinvolk's Falco plugin
// (seccompagentfalco.SeccompAgentFalco/PublishEvent on its Unix socket, proto/seccompagentfalco),
// off the notification path: publish() only enqueues. The queue is bounded and so are the calls in
// flight (each with a deadline): a plugin that is slow, never answers or is absent costs a bounded
// amount of memory, delays no answer, and what cannot be sent is dropped and counted (metric
// seccompagent_falco_events_dropped_total{reason}; one log line per burst of drops).
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../common/logger';
import { SeccompAgentFalcoClient, type PublishEventRequest } from '../proto/gen/seccompagentfalco/seccomp-agent';

export interface FalcoPublisherLimits {
  /** Events waiting to be sent, at most. */
  queue: number;
  /** PublishEvent calls in flight, at most. */
  inFlight: number;
  /** Deadline of one call. */
  timeoutMs: number;
}

export const FALCO_LIMITS: FalcoPublisherLimits = Object.freeze({ queue: 1024, inFlight: 16, timeoutMs: 1000 });

export type FalcoDropReason = 'queue-full' | 'failed';

export class FalcoPublisher {
  published = 0;
  readonly dropped = new Map<FalcoDropReason, number>([['queue-full', 0], ['failed', 0]]);
  private client: SeccompAgentFalcoClient | null = null;
  private readonly queue: PublishEventRequest[] = [];
  private inFlight = 0;
  /** In a burst of drops: logged at its start, over at the next event the plugin takes. */
  private dropping = false;

  constructor(
    private readonly socketPath: string,
    private readonly log: Logger,
    private readonly limits: FalcoPublisherLimits = FALCO_LIMITS,
  ) {}

  /** Enqueues one event; never blocks, never throws. */
  publish(event: PublishEventRequest): void {
    if (this.queue.length >= this.limits.queue) {
      this.drop('queue-full', `the Falco plugin at ${this.socketPath} is not keeping up (${this.limits.queue} events queued, ${this.inFlight} in flight)`);
      return;
    }
    this.queue.push(event);
    this.pump();
  }

  private pump(): void {
    while (this.inFlight < this.limits.inFlight && this.queue.length > 0) {
      const event = this.queue.shift()!;
      this.client ??= new SeccompAgentFalcoClient(`unix://${this.socketPath}`, grpc.credentials.createInsecure(), {
        'grpc.initial_reconnect_backoff_ms': 100,
        'grpc.max_reconnect_backoff_ms': 2000,
      });
      this.inFlight++;
      this.client.publishEvent(event, new grpc.Metadata(), { deadline: Date.now() + this.limits.timeoutMs }, (err) => {
        this.inFlight--;
        if (err) this.drop('failed', `PublishEvent to the Falco plugin at ${this.socketPath} failed: ${err.details || err.message}`);
        else {
          this.published++;
          this.dropping = false;
        }
        this.pump();
      });
    }
  }

  private drop(reason: FalcoDropReason, why: string): void {
    this.dropped.set(reason, (this.dropped.get(reason) ?? 0) + 1);
    if (this.dropping) return;
    this.dropping = true;
    this.log.warn({ socket: this.socketPath, reason }, `${why}: dropping MIDDLEWARE=falco events (counted in seccompagent_falco_events_dropped_total) until it takes one again; answers are not delayed`);
  }

  close(): void {
    this.queue.length = 0;
    this.client?.close();
    this.client = null;
  }
}
