// The gRPC side of MIDDLEWARE=falco, in a worker thread (falco-publisher.ts starts it): connecting,
// sending and reading the plugin's answers happen here, never on the event loop that decides
// notifications. A plugin's answer is bounded in size (PublishEventResponse is empty: a larger one
// is refused by grpc-js from its length prefix, without reading it), each call in time, and the
// calls in flight in number. What happened is told back in tallies, not per event.
import * as grpc from '@grpc/grpc-js';
import { parentPort, workerData } from 'node:worker_threads';
import { SeccompAgentFalcoClient, type PublishEventRequest } from '../../../proto/gen/seccompagentfalco/seccomp-agent';
import type { FalcoPublisherLimits } from './falco-publisher';

/** The worker's report: events the plugin took, and events it failed (with the first reason). */
export interface FalcoTally {
  published: number;
  failed: number;
  why?: string;
}

/** Bytes of a plugin answer, at most (its message is empty; this leaves room for a newer plugin). */
export const FALCO_MAX_ANSWER_BYTES = 4096;
/** Bytes of one event, at most (ids, a syscall name and a workload's names fit many times over). */
export const FALCO_MAX_EVENT_BYTES = 16 * 1024;
/** How often tallies go back while events flow. */
const TALLY_MS = 20;

const { socketPath, limits } = workerData as { socketPath: string; limits: FalcoPublisherLimits };
const port = parentPort!;
const queue: PublishEventRequest[] = [];
let inFlight = 0;
let client: SeccompAgentFalcoClient | null = null;
let tally: FalcoTally = { published: 0, failed: 0 };
let tallyTimer: NodeJS.Timeout | null = null;

function report(): void {
  tallyTimer = null;
  port.postMessage(tally);
  tally = { published: 0, failed: 0 };
}

function count(err: grpc.ServiceError | null): void {
  if (err) {
    tally.failed++;
    tally.why ??= `PublishEvent to the Falco plugin at ${socketPath} failed: ${err.details || err.message}`;
  } else {
    tally.published++;
  }
  tallyTimer ??= setTimeout(report, TALLY_MS);
}

function pump(): void {
  while (inFlight < limits.inFlight && queue.length > 0) {
    const event = queue.shift()!;
    client ??= new SeccompAgentFalcoClient(`unix://${socketPath}`, grpc.credentials.createInsecure(), {
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 2000,
      'grpc.max_receive_message_length': FALCO_MAX_ANSWER_BYTES,
      'grpc.max_send_message_length': FALCO_MAX_EVENT_BYTES,
    });
    inFlight++;
    client.publishEvent(event, new grpc.Metadata(), { deadline: Date.now() + limits.timeoutMs }, (err) => {
      inFlight--;
      count(err);
      pump();
    });
  }
}

port.on('message', (event: PublishEventRequest) => {
  queue.push(event);
  pump();
});
