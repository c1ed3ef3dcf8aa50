// MIDDLEWARE=falco: each notification of such a container is published to kinvolk's Falco plugin
// (seccompagentfalco.SeccompAgentFalco/PublishEvent on its Unix socket, proto/seccompagentfalco),
// off the notification path: publish() only posts the event to a worker thread (falco-worker.ts),
// where the gRPC client runs, so a plugin that answers slowly, hugely or not at all costs the
// event loop that decides nothing but the post. The events not yet accounted for are bounded here
// (`queue` + `inFlight`), the calls in flight and each call's time and answer size in the worker:
// what cannot be sent is dropped and counted (metric seccompagent_falco_events_dropped_total
// {reason}; one log line per burst of drops).
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../../../common/logger';
import type { PublishEventRequest } from '../../../proto/gen/seccompagentfalco/seccomp-agent';
import type { FalcoTally } from './falco-worker';

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
  private worker: Worker | null = null;
  /** Posted to the worker and not yet in one of its tallies: queued there or in flight. */
  private outstanding = 0;
  /** In a burst of drops: logged at its start, over at the next event the plugin takes. */
  private dropping = false;

  constructor(
    private readonly socketPath: string,
    private readonly log: Logger,
    private readonly limits: FalcoPublisherLimits = FALCO_LIMITS,
  ) {}

  /** Posts one event to the worker; never blocks, never throws. */
  publish(event: PublishEventRequest): void {
    if (this.outstanding >= this.limits.queue + this.limits.inFlight) {
      this.drop('queue-full', `the Falco plugin at ${this.socketPath} is not keeping up (${this.outstanding} events queued or in flight)`);
      return;
    }
    this.outstanding++;
    (this.worker ??= this.startWorker()).postMessage(event);
  }

  private startWorker(): Worker {
    const worker = new Worker(path.join(__dirname, 'falco-worker.js'), { workerData: { socketPath: this.socketPath, limits: this.limits } });
    worker.on('message', (tally: FalcoTally) => {
      this.outstanding -= tally.published + tally.failed;
      this.published += tally.published;
      if (tally.published > 0) this.dropping = false;
      if (tally.failed > 0) this.drop('failed', tally.why ?? `PublishEvent to the Falco plugin at ${this.socketPath} failed`, tally.failed);
    });
    worker.on('error', (err) => {
      this.log.error({ err, socket: this.socketPath }, `the Falco publisher thread failed (${err.message}); MIDDLEWARE=falco events are dropped from now on, answers are not affected`);
      this.outstanding = Number.POSITIVE_INFINITY;
    });
    // It never keeps the control plane alive by itself.
    worker.unref();
    return worker;
  }

  private drop(reason: FalcoDropReason, why: string, events = 1): void {
    this.dropped.set(reason, (this.dropped.get(reason) ?? 0) + events);
    if (this.dropping) return;
    this.dropping = true;
    this.log.warn({ socket: this.socketPath, reason }, `${why}: dropping MIDDLEWARE=falco events (counted in seccompagent_falco_events_dropped_total) until it takes one again; answers are not delayed`);
  }

  close(): void {
    void this.worker?.terminate();
    this.worker = null;
  }
}
