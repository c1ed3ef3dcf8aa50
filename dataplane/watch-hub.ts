// Fans events out to Watch streams without letting a slow, stuck or vanished watcher cost the
// notification path anything (docs/operators.md, "Watch"). Each event is encoded once into a
// shared ring; every stream reads the ring with its own cursor and writes only while its HTTP/2
// stream takes more, so publishing costs the same whatever the number of watchers, a stream that
// stops reading holds at most what its writable buffered before it said "full", and a watcher that
// goes frees nothing but its cursor. A stream the ring's tail overtakes has lost events: it is
// ended with RESOURCE_EXHAUSTED and the count (no silent gap), and may reconnect.
import type { ServerWritableStream } from '@grpc/grpc-js';
import { Metadata, status } from '@grpc/grpc-js';
import type { Logger } from '../common/logger';
import { Event, type WatchRequest } from '../proto/gen/seccompagent/v1/dataplane';

/** An event before its sequence number and time are stamped; filters look at these fields. */
export type EventBody = NonNullable<Event['event']>;

export interface EventTags {
  containerId: string;
  syscall: string;
}

/** The Watch call as the hub writes it: pre-encoded Event bytes (grpc-server.ts passes them through). */
type WatchCall = ServerWritableStream<WatchRequest, Event>;

export interface WatchLimits {
  /** Watch streams served at once in total. */
  maxWatchers: number;
  /** Watch streams served at once on one client connection (HTTP/2 session). */
  maxPerConnection: number;
  /** Events the ring keeps (the furthest a stream may fall behind). */
  ringEvents?: number;
  /** Bytes the ring keeps, whichever bound comes first. */
  ringBytes?: number;
}

interface RingEntry {
  bytes: Buffer;
  /** null: every watcher gets it (control plane and ingest events). */
  tags: EventTags | null;
}

interface Watcher {
  id: number;
  call: WatchCall;
  connection: object;
  containerIds: Set<string>;
  syscalls: Set<string>;
  /** Absolute ring index of the next event this stream has not looked at. */
  cursor: number;
  /** Its stream said "full": nothing is written until it drains. */
  blocked: boolean;
}

/** Writes one pump may make before it yields the event loop to everything else (ingest first). */
const PUMP_BUDGET = 2048;

/**
 * The HTTP/2 session a server call arrived on. grpc-js exposes no connection id; its call keeps
 * the http2 stream (and so the session) one level down. Without it (another grpc-js layout) each
 * call counts as its own connection and only the total cap applies: the Watch caps test catches that.
 */
function connectionOf(call: WatchCall): object {
  const session = (call as unknown as { call?: { stream?: { session?: object } } }).call?.stream?.session;
  return session ?? call;
}

export class WatchHub {
  private readonly watchers = new Map<number, Watcher>();
  /** Watchers with room in their stream and events left to look at. */
  private readonly ready = new Set<Watcher>();
  private readonly perConnection = new Map<object, number>();
  private readonly ring: Array<RingEntry | undefined>;
  private readonly ringBytes: number;
  /** Absolute index of the next event published, and of the oldest one the ring still holds. */
  private head = 0;
  private tail = 0;
  private bytes = 0;
  private pumpScheduled = false;
  private nextId = 1;
  private seq = 0n;
  dropped = 0;
  refused = 0;
  /** Called when the hub goes from no watcher to some, or back. */
  onActiveChange: ((active: boolean) => void) | null = null;

  constructor(
    private readonly log: Logger,
    private readonly limits: WatchLimits,
  ) {
    this.ring = new Array(limits.ringEvents ?? 8192);
    this.ringBytes = limits.ringBytes ?? 8 * 1024 * 1024;
  }

  get size(): number {
    return this.watchers.size;
  }

  /** True when anyone watches: callers skip building events otherwise. */
  get active(): boolean {
    return this.watchers.size > 0;
  }

  add(call: WatchCall): void {
    const connection = connectionOf(call);
    const onConnection = this.perConnection.get(connection) ?? 0;
    const refusal =
      this.watchers.size >= this.limits.maxWatchers
        ? `${this.watchers.size} Watch streams are served already, the most this data plane serves at once (--max-watchers ${this.limits.maxWatchers}); end one or try later`
        : onConnection >= this.limits.maxPerConnection
          ? `this connection has ${onConnection} Watch streams already, the most one connection may have (--max-watchers-per-connection ${this.limits.maxPerConnection})`
          : null;
    if (refusal !== null) {
      this.refused++;
      if (this.refused === 1 || this.refused % 1000 === 0) this.log.warn({ refused: this.refused }, `Watch refused: ${refusal}`);
      call.on('error', () => undefined);
      call.emit('error', { code: status.RESOURCE_EXHAUSTED, details: `Watch refused: ${refusal}` });
      return;
    }
    const watcher: Watcher = {
      id: this.nextId++,
      call,
      connection,
      containerIds: new Set(call.request.containerIds),
      syscalls: new Set(call.request.syscalls),
      cursor: this.head,
      blocked: false,
    };
    this.watchers.set(watcher.id, watcher);
    this.ready.add(watcher);
    this.perConnection.set(connection, onConnection + 1);
    if (this.watchers.size === 1) this.onActiveChange?.(true);
    // The response headers now, not with the first event: a client that waits for them knows
    // every event from here on reaches it (a script or test that starts a workload after).
    call.sendMetadata(new Metadata());
    const remove = () => this.forget(watcher);
    call.on('cancelled', remove);
    call.on('close', remove);
    call.on('error', remove);
    call.on('drain', () => {
      if (!this.watchers.has(watcher.id)) return;
      watcher.blocked = false;
      this.ready.add(watcher);
      this.schedulePump();
    });
    this.log.info({ watcher: watcher.id, filter: call.request }, 'watcher attached');
  }

  /** Stamps, encodes once and appends one event; streams pick it up in the next pump. */
  publish(body: EventBody, tags: EventTags | null): void {
    if (this.watchers.size === 0) return;
    const encoded = Event.encode({ seq: ++this.seq, time: new Date(), event: body }).finish();
    const bytes = Buffer.from(encoded.buffer, encoded.byteOffset, encoded.byteLength);
    const capacity = this.ring.length;
    if (this.head - this.tail === capacity) this.evictOldest();
    this.ring[this.head % capacity] = { bytes, tags };
    this.head++;
    this.bytes += bytes.length;
    while (this.bytes > this.ringBytes && this.tail < this.head - 1) this.evictOldest();
    // Once a quarter of the ring: end the blocked streams the tail has overtaken (a never-reading
    // stream is not kept forever). Amortised, it costs a fraction of a step per event.
    if (this.head % Math.max(1, capacity >> 2) === 0) this.endOvertaken();
    this.schedulePump();
  }

  private evictOldest(): void {
    const slot = this.tail % this.ring.length;
    this.bytes -= this.ring[slot]!.bytes.length;
    this.ring[slot] = undefined;
    this.tail++;
  }

  private schedulePump(): void {
    if (this.pumpScheduled || this.ready.size === 0) return;
    this.pumpScheduled = true;
    // setImmediate, not a microtask: engine events (new runtime connections) already queued run first.
    setImmediate(() => this.pump());
  }

  /** Serves ready streams, at most PUMP_BUDGET writes, then yields and comes back. */
  private pump(): void {
    this.pumpScheduled = false;
    let budget = PUMP_BUDGET;
    for (const watcher of this.ready) {
      budget = this.serve(watcher, budget);
      if (budget <= 0) break;
    }
    if (budget <= 0) this.schedulePump();
  }

  /** Writes what this watcher has not seen, until its stream is full or the budget is spent. */
  private serve(watcher: Watcher, budget: number): number {
    if (watcher.cursor < this.tail) {
      this.drop(watcher);
      return budget;
    }
    const capacity = this.ring.length;
    while (watcher.cursor < this.head && budget > 0) {
      const entry = this.ring[watcher.cursor % capacity]!;
      watcher.cursor++;
      if (!this.matches(watcher, entry.tags)) continue;
      budget--;
      if (!watcher.call.write(entry.bytes as unknown as Event)) {
        watcher.blocked = true;
        this.ready.delete(watcher);
        return budget;
      }
    }
    // Caught up: it stays ready for the next event.
    return budget;
  }

  private matches(watcher: Watcher, tags: EventTags | null): boolean {
    if (tags === null) return true;
    if (watcher.containerIds.size > 0 && !watcher.containerIds.has(tags.containerId)) return false;
    if (watcher.syscalls.size > 0 && tags.syscall !== '' && !watcher.syscalls.has(tags.syscall)) return false;
    return true;
  }

  private endOvertaken(): void {
    for (const watcher of this.watchers.values()) if (watcher.blocked && watcher.cursor < this.tail) this.drop(watcher);
  }

  private forget(watcher: Watcher): void {
    if (!this.watchers.delete(watcher.id)) return;
    this.ready.delete(watcher);
    const left = (this.perConnection.get(watcher.connection) ?? 1) - 1;
    if (left > 0) this.perConnection.set(watcher.connection, left);
    else this.perConnection.delete(watcher.connection);
    if (this.watchers.size === 0) {
      // Nobody reads the ring any more: let its events go now.
      this.ring.fill(undefined);
      this.tail = this.head;
      this.bytes = 0;
      this.onActiveChange?.(false);
    }
  }

  private drop(watcher: Watcher): void {
    const missed = this.tail - watcher.cursor;
    this.forget(watcher);
    this.dropped++;
    const details = `watcher too slow: it fell ${missed} event(s) behind what the data plane keeps (${this.ring.length} events or ${this.ringBytes} bytes); ended so it cannot slow the notification path, reconnect to resume`;
    this.log.warn({ watcher: watcher.id, missed }, details);
    watcher.call.emit('error', { code: status.RESOURCE_EXHAUSTED, details });
  }

  /** Ends every watch stream (shutdown). */
  close(): void {
    const all = [...this.watchers.values()];
    for (const watcher of all) this.forget(watcher);
    for (const watcher of all) watcher.call.end();
  }
}
