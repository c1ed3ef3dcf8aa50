// Fans events out to Watch streams. A watcher that falls behind is dropped with a reason instead
// of slowing anyone: the notification path only pays for building events while someone watches.
import type { ServerWritableStream } from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import type { Logger } from '../common/logger';
import type { Event, WatchRequest } from '../proto/gen/seccompagent/v1/dataplane';

/** An event before its sequence number and time are stamped; filters look at these fields. */
export type EventBody = NonNullable<Event['event']>;

export interface EventTags {
  containerId: string;
  syscall: string;
}

interface Watcher {
  id: number;
  call: ServerWritableStream<WatchRequest, Event>;
  containerIds: Set<string>;
  syscalls: Set<string>;
  /** Events written while the stream reported backpressure. */
  backlog: number;
}

export class WatchHub {
  private readonly watchers = new Map<number, Watcher>();
  private nextId = 1;
  private seq = 0n;
  dropped = 0;
  /** Called when the hub goes from no watcher to some, or back. */
  onActiveChange: ((active: boolean) => void) | null = null;

  constructor(
    private readonly log: Logger,
    /** Events a watcher may be behind before it is dropped. */
    private readonly maxBacklog = 10_000,
  ) {}

  get size(): number {
    return this.watchers.size;
  }

  /** True when anyone watches: callers skip building events otherwise. */
  get active(): boolean {
    return this.watchers.size > 0;
  }

  add(call: ServerWritableStream<WatchRequest, Event>): void {
    const watcher: Watcher = {
      id: this.nextId++,
      call,
      containerIds: new Set(call.request.containerIds),
      syscalls: new Set(call.request.syscalls),
      backlog: 0,
    };
    this.watchers.set(watcher.id, watcher);
    if (this.watchers.size === 1) this.onActiveChange?.(true);
    const remove = () => this.forget(watcher.id);
    call.on('cancelled', remove);
    call.on('close', remove);
    call.on('error', remove);
    call.on('drain', () => {
      watcher.backlog = 0;
    });
    this.log.info({ watcher: watcher.id, filter: call.request }, 'watcher attached');
  }

  /** Stamps and sends one event to every watcher whose filter matches. */
  publish(body: EventBody, tags: EventTags | null): void {
    if (this.watchers.size === 0) return;
    const event: Event = { seq: ++this.seq, time: new Date(), event: body };
    for (const watcher of this.watchers.values()) {
      if (tags !== null) {
        if (watcher.containerIds.size > 0 && !watcher.containerIds.has(tags.containerId)) continue;
        if (watcher.syscalls.size > 0 && tags.syscall !== '' && !watcher.syscalls.has(tags.syscall)) continue;
      }
      if (!watcher.call.write(event)) {
        watcher.backlog++;
        if (watcher.backlog > this.maxBacklog) this.drop(watcher);
      }
    }
  }

  private forget(id: number): void {
    if (this.watchers.delete(id) && this.watchers.size === 0) this.onActiveChange?.(false);
  }

  private drop(watcher: Watcher): void {
    this.forget(watcher.id);
    this.dropped++;
    const details = `watcher too slow: more than ${this.maxBacklog} events behind; dropped so it cannot slow the notification path, reconnect to resume`;
    this.log.warn({ watcher: watcher.id, backlog: watcher.backlog }, details);
    watcher.call.emit('error', { code: status.RESOURCE_EXHAUSTED, details });
  }

  /** Ends every watch stream (shutdown). */
  close(): void {
    for (const watcher of this.watchers.values()) watcher.call.end();
    const had = this.watchers.size > 0;
    this.watchers.clear();
    if (had) this.onActiveChange?.(false);
  }
}
