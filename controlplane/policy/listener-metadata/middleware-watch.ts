// listenerMetadata MIDDLEWARE (falco, prometheus) without slowing answers: the control plane
// follows the data plane's Watch stream (the one seccompctl watch reads) while some container asks
// for a middleware, and feeds it from there. A container's notifications may all be answered
// natively (fast path) and never reach this process as questions; the Watch stream still shows
// each one (notification) and its answer (who, errno, latency), after the fact. Compiling such
// containers' rules to ask rules instead would put a round trip through this process on every one
// of their syscalls, the cost MIDDLEWARE is meant to observe, not add (docs/policy.md).
import type * as grpc from '@grpc/grpc-js';
import { Histogram } from 'prom-client';
import { handleFromProto, type ContainerHandle } from '../../../common/container-handle';
import { createDataPlaneClient } from '../../../common/dataplane-client';
import { durationToMs } from '../../../common/duration';
import type { Logger } from '../../../common/logger';
import type { DataPlaneClient, Event } from '../../../proto/gen/seccompagent/v1/dataplane';
import type { ContainerEntry } from '../../container-registry';
import type { FalcoPublisher } from './falco-publisher';

/** kinvolk/seccompagent's MIDDLEWARE=prometheus histogram (its name, labels and buckets). */
export function requestDurationHistogram(): Histogram<'namespace' | 'syscall' | 'status'> {
  return new Histogram({
    name: 'seccompagent_request_duration_seconds',
    help: 'Seccomp notifications of MIDDLEWARE=prometheus containers, from receipt to answer, by namespace, syscall and status (the errno returned, "0" for success)',
    labelNames: ['namespace', 'syscall', 'status'],
    buckets: [0.05, 0.2, 1],
    registers: [],
  });
}

const RETRY_MIN_MS = 200;
const RETRY_MAX_MS = 5000;
/**
 * The Watch stream and the Attach session are two streams: a new container's first events may come
 * here before its container_added reaches the registry. They wait this long (at most PARKED_MAX
 * of them) for it, then are dropped.
 */
const PARK_MS = 1000;
const PARKED_MAX = 4096;
/** A removed container's last events may come after its container_removed: it is kept this long. */
const LINGER_MS = 3000;

export class MiddlewareWatch {
  private client: DataPlaneClient | null = null;
  private call: grpc.ClientReadableStream<Event> | null = null;
  private retry: NodeJS.Timeout | null = null;
  private backoffMs = RETRY_MIN_MS;
  private stopped = false;
  private readonly parked = new Map<ContainerHandle, Event[]>();
  /** The containers that ask for a middleware, by handle (removed ones linger for LINGER_MS). */
  private readonly entries = new Map<ContainerHandle, ContainerEntry>();
  /** Handles known to ask for none (their events are dropped at once). */
  private readonly plain = new Set<ContainerHandle>();
  private parkedCount = 0;

  constructor(
    private readonly grpcSocket: string,
    private readonly falco: Pick<FalcoPublisher, 'publish'>,
    readonly histogram: Histogram<'namespace' | 'syscall' | 'status'>,
    private readonly log: Logger,
  ) {}

  /** Every container the data plane serves (a new session's snapshot). */
  reset(entries: Iterable<ContainerEntry>): void {
    this.entries.clear();
    this.plain.clear();
    for (const entry of entries) this.added(entry, false);
    this.follow();
  }

  /** A container the registry admitted. */
  added(entry: ContainerEntry, follow = true): void {
    if (entry.policy.middleware.falco || entry.policy.middleware.prometheus) this.entries.set(entry.handle, entry);
    else this.plain.add(entry.handle);
    const events = this.parked.get(entry.handle);
    if (events) {
      this.parked.delete(entry.handle);
      this.parkedCount -= events.length;
      for (const event of events) this.onEvent(event);
    }
    if (follow) this.follow();
  }

  /** A container the data plane closed: its last events may still be on the Watch stream. */
  removed(handle: ContainerHandle): void {
    this.plain.delete(handle);
    const entry = this.entries.get(handle);
    if (!entry) return;
    setTimeout(() => {
      if (this.entries.get(handle) !== entry) return;
      this.entries.delete(handle);
      this.follow();
    }, LINGER_MS).unref();
  }

  /** Follow the Watch stream while some container asks for a middleware. */
  private follow(): void {
    if (this.stopped) return;
    const wanted = this.entries.size > 0;
    if (wanted && !this.call && !this.retry) this.open();
    else if (!wanted) this.close();
  }

  /** An event of a handle not announced yet: kept for PARK_MS. */
  private park(handle: ContainerHandle, event: Event): void {
    if (this.parkedCount >= PARKED_MAX) return;
    let events = this.parked.get(handle);
    if (!events) {
      events = [];
      this.parked.set(handle, events);
      setTimeout(() => {
        const gone = this.parked.get(handle);
        if (gone === undefined || gone !== events) return;
        this.parked.delete(handle);
        this.parkedCount -= gone.length;
      }, PARK_MS).unref();
    }
    events.push(event);
    this.parkedCount++;
  }

  stop(): void {
    this.stopped = true;
    this.close();
    this.client?.close();
  }

  private open(): void {
    this.client ??= createDataPlaneClient(this.grpcSocket);
    const call = this.client.watch({ containerIds: [], syscalls: [] });
    this.call = call;
    this.log.info({ socket: this.grpcSocket }, 'following the data plane\'s Watch stream for listenerMetadata MIDDLEWARE (falco, prometheus)');
    call.on('data', (event: Event) => {
      this.backoffMs = RETRY_MIN_MS;
      this.onEvent(event);
    });
    const ended = (why: string) => {
      if (this.call !== call) return;
      this.call = null;
      if (this.stopped) return;
      this.log.warn({ reason: why }, `the data plane's Watch stream ended (${why}): MIDDLEWARE events are missed until it is followed again in ${this.backoffMs} ms`);
      this.retry = setTimeout(() => {
        this.retry = null;
        this.follow();
      }, this.backoffMs);
      this.backoffMs = Math.min(this.backoffMs * 2, RETRY_MAX_MS);
    };
    call.on('error', (err: grpc.ServiceError) => ended(err.details || err.message));
    call.on('end', () => ended('ended by the data plane'));
  }

  private close(): void {
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    const call = this.call;
    this.call = null;
    call?.cancel();
  }

  private onEvent(event: Event): void {
    const e = event.event;
    if (e?.$case !== 'notification' && e?.$case !== 'answer') return;
    const handle = handleFromProto(e.$case === 'notification' ? e.notification.handle : e.answer.handle);
    const entry = this.entries.get(handle);
    if (!entry) {
      if (!this.plain.has(handle)) this.park(handle, event);
      return;
    }
    if (e.$case === 'notification') {
      const n = e.notification;
      if (!entry.policy.middleware.falco) return;
      this.falco.publish({ id: n.id, pid: BigInt(n.pid), syscall: n.syscall, k8s: workloadOf(entry) });
    } else {
      const a = e.answer;
      if (!entry.policy.middleware.prometheus) return;
      this.histogram.observe({ namespace: entry.identity?.namespace ?? '', syscall: a.syscall, status: String(a.errno) }, durationToMs(a.latency) / 1000);
    }
  }
}

/** kinvolk's KubernetesWorkload: pid is the container's init, pid_filter the process that attached the filter. */
function workloadOf(entry: ContainerEntry) {
  const id = entry.identity;
  return { namespace: id?.namespace ?? '', pod: id?.pod ?? '', container: id?.container ?? '', pid: BigInt(entry.pid), pidFilter: BigInt(entry.filterPid || entry.pid) };
}
