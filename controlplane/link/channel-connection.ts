// The control plane's end of the decision channel's socket: connects, says hello, reads frames,
// writes decisions, and keeps this process awake while decisions flow (the busy poll).
//
// With the addon (native/channel) and a busy poll, it asks the engine for the shared-memory rings
// (native/common/decision_ring.h): notifications and decisions then cross in memory, with no
// syscall while both sides poll; the socket carries the handshake, the wake-up of a side that
// slept, and what a full ring did not take, and libuv reads it as any socket. An engine that
// predates the rings answers without them; then, while it polls, this reads and writes the socket
// with one nonblocking syscall each through the addon rather than through libuv's stream (each
// read of a net.Socket enters JavaScript through a callback scope, each write builds a write
// request and a tick: more than the decision costs; docs/decision-channel.md). Without the addon,
// libuv does all of it.
import * as net from 'node:net';
import { loadBuiltAddon } from '../../common/built-addon';
import { encodeHello, FrameReader, MAX_FRAME, RING_TO_ENGINE_BYTES, type ChannelFrame } from '../../common/decision-channel';

declare const ringBrand: unique symbol;
/** A mapping of the rings' memfd (an addon external). */
export type Ring = { readonly [ringBrand]: true };

/** native/channel: nonblocking socket calls and the rings; -errno, never an exception, when a syscall fails. */
export interface ChannelIo {
  recv(fd: number, into: Uint8Array): number;
  send(fd: number, bytes: Uint8Array): number;
  /** [bytes read or -errno, the fd that came with them or -1]. */
  recvWithFd(fd: number, into: Uint8Array): [number, number];
  /** Maps the memfd (and closes it); a string says why it could not. */
  ringOpen(memfd: number, socketFd: number): Ring | string;
  /** Bytes of notification frames copied (0: none), or -1: the engine's index is impossible. */
  ringTake(ring: Ring, into: Uint8Array): number;
  /** 1: put (the engine woken if it slept); 0: no room; -1: the engine's index is impossible. */
  ringPut(ring: Ring, bytes: Uint8Array): number;
  /** Announces sleep; false when notifications came meanwhile (poll on). */
  ringMaySleep(ring: Ring): boolean;
  ringAwake(ring: Ring): void;
  ringClose(ring: Ring): void;
  /** sched_yield: a task runnable on this CPU goes first. */
  yieldCpu(): void;
}

const EAGAIN = 11;
/** The engine answers a Hello at once; a Ready this late means it is not serving. */
const HANDSHAKE_MS = 5000;
/**
 * Looks at the notifications ring per turn of the busy poll (docs/benchmarks.md, stop 31: 0.5–0.7 µs
 * off a decision), the CPU yielded after each empty one: a look costs ~60 ns, a yield a syscall,
 * and a poller that looks for a while before it yields keeps another container's woken thread
 * waiting that long (stop 43).
 */
const RING_LOOKS_PER_TURN = 16;
/** The handshake's reads spin this long, then look every millisecond. */
const HANDSHAKE_SPIN_MS = 10;

let loaded: ChannelIo | null | undefined;

/** The addon, or null when it is not built here (a control plane run from elsewhere): libuv then does the I/O. */
export function loadChannelIo(): ChannelIo | null {
  if (loaded === undefined) {
    try {
      loaded = loadBuiltAddon('seccomp_channel_io.node') as ChannelIo;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}

export interface ChannelHandlers {
  /** Each frame of one read, in order; then onReadEnd once. */
  onFrame(frame: ChannelFrame): void;
  onReadEnd(): void;
  /** The peer sent bytes that are not frames; the connection is closed after this. */
  onBadFrame(err: Error): void;
  /** The engine sent the rings but they could not be mapped: frames travel on the socket. */
  onRingRefused(reason: string): void;
  /** Closed, for whatever reason (called once). */
  onClosed(reason: string): void;
}

export interface ChannelConnectionOptions {
  socketPath: string;
  token: Uint8Array;
  /** After channel traffic, keep polling this long instead of sleeping (0: off, and no rings). */
  busyPollMs: number;
  /** null: libuv reads and writes (the addon is missing, or a test wants that path). */
  io: ChannelIo | null;
}

export class ChannelConnection {
  private readonly socket: net.Socket;
  private readonly reader = new FrameReader();
  private readonly ringReader = new FrameReader();
  private readonly buffer = Buffer.allocUnsafe(MAX_FRAME);
  private readonly ringBuffer = Buffer.allocUnsafe(MAX_FRAME);
  private readonly busyPollNs: bigint;
  /** hrtime (ns) until which the event loop keeps polling. */
  private busyUntil = 0n;
  private polling = false;
  /** No rings: the busy poll reads the socket itself (libuv's reading is stopped meanwhile). */
  private readingDirectly = false;
  /** The Hello asked for rings: the Ready (and its memfd) is read by the addon, not libuv. */
  private handshaking: boolean;
  private ring: Ring | null = null;
  private closed = false;
  private reportedClose = false;
  /** Notification frames read, by way: for tests and benchmarks. */
  readonly framesRead = { ring: 0, socket: 0 };

  constructor(
    private readonly options: ChannelConnectionOptions,
    private readonly handlers: ChannelHandlers,
  ) {
    this.busyPollNs = BigInt(Math.round(Math.max(0, options.busyPollMs) * 1e6));
    this.handshaking = options.io !== null && this.busyPollNs > 0n;
    // onread: libuv's reads land in our buffer and reach us without a Buffer or a 'data' event each.
    this.socket = net.connect({ path: options.socketPath, onread: { buffer: this.buffer, callback: (n) => this.onLibuvRead(n) } });
    // Paused before it connects, libuv does not start reading (the Ready's memfd would be lost).
    if (this.handshaking) this.socket.pause();
    this.socket.on('connect', () => {
      this.socket.write(encodeHello(options.token, this.handshaking));
      if (this.handshaking) this.handshake(Date.now());
    });
    this.socket.on('error', (err) => this.close(err.message));
    this.socket.on('close', () => this.close('closed'));
  }

  /** Whether notifications and decisions cross in the shared-memory rings. */
  get usesRings(): boolean {
    return this.ring !== null;
  }

  /** Writes encoded decision frames: into the ring when it has room, else on the socket, after what waits there. */
  write(bytes: Buffer): void {
    if (this.closed) return;
    const io = this.options.io;
    if (this.ring !== null && bytes.length <= RING_TO_ENGINE_BYTES) {
      const put = io!.ringPut(this.ring, bytes);
      if (put === 1) return;
      if (put < 0) {
        this.fail('bad ring: the engine\'s index of the decisions ring is impossible');
        return;
      }
    }
    const fd = this.fd();
    if (io === null || fd < 0 || this.socket.writableLength > 0) {
      this.socket.write(bytes);
      return;
    }
    const n = io.send(fd, bytes);
    if (n === bytes.length) return;
    if (n >= 0) this.socket.write(bytes.subarray(n));
    else if (n === -EAGAIN) this.socket.write(bytes);
    else this.fail(`write: errno ${-n}`);
  }

  destroy(): void {
    this.closed = true;
    this.socket.destroy();
    if (this.ring !== null) this.options.io!.ringClose(this.ring);
  }

  /** Reads the Ready (with the rings' memfd, when the engine has them) itself, then lets libuv read. */
  private handshake(started: number): void {
    if (this.closed) return;
    const io = this.options.io!;
    const fd = this.fd();
    const [n, memfd] = io.recvWithFd(fd, this.buffer);
    if (memfd >= 0) {
      const ring = io.ringOpen(memfd, fd);
      if (typeof ring === 'string') this.handlers.onRingRefused(ring);
      else this.ring = ring;
    }
    if (n > 0) {
      this.handshaking = false;
      // With rings libuv reads the socket from now on; without, the busy poll goes on reading it
      // (it stays paused: resume() now would restart libuv's reading a tick later, under the poll).
      if (this.ring !== null) this.socket.resume();
      else this.readingDirectly = true;
      if (!this.consume(this.reader, this.buffer, n, 'socket')) return;
      this.keepPolling();
      return;
    }
    if (n === 0) return this.fail('closed');
    if (n !== -EAGAIN) return this.fail(`read: errno ${-n}`);
    const waited = Date.now() - started;
    if (waited > HANDSHAKE_MS) return this.fail(`no Ready within ${HANDSHAKE_MS / 1000} s`);
    if (waited < HANDSHAKE_SPIN_MS) setImmediate(() => this.handshake(started));
    else setTimeout(() => this.handshake(started), 1);
  }

  private onLibuvRead(n: number): boolean {
    if (!this.consume(this.reader, this.buffer, n, 'socket')) return false;
    this.keepPolling();
    return true;
  }

  /** The frames in buffer[0, n) of one stream: false once the connection is closed for a bad frame. */
  private consume(reader: FrameReader, buffer: Buffer, n: number, way: 'ring' | 'socket'): boolean {
    let frames: ChannelFrame[];
    try {
      frames = reader.push(buffer.subarray(0, n));
    } catch (err) {
      this.handlers.onBadFrame(err as Error);
      this.fail('bad frame');
      return false;
    }
    for (const frame of frames) {
      if (frame.type === 'notification') this.framesRead[way]++;
      this.handlers.onFrame(frame);
    }
    this.handlers.onReadEnd();
    return true;
  }

  /**
   * While setImmediate callbacks are queued, libuv polls with a zero timeout instead of sleeping,
   * and each turn looks at the ring (or reads the socket) once: the next notification is read
   * without a wake-up of this process, which on a VM costs more than the decision itself
   * (docs/benchmarks.md).
   */
  private keepPolling(): void {
    if (this.busyPollNs === 0n || this.closed || this.handshaking) return;
    this.busyUntil = process.hrtime.bigint() + this.busyPollNs;
    if (this.ring === null && this.options.io !== null && !this.readingDirectly && this.fd() >= 0) {
      this.readingDirectly = true;
      this.socket.pause();
    }
    if (this.polling) return;
    this.polling = true;
    if (this.ring !== null) this.options.io!.ringAwake(this.ring);
    setImmediate(() => this.poll());
  }

  private poll(): void {
    if (this.closed) {
      this.polling = false;
      return;
    }
    const io = this.options.io!;
    if (this.ring !== null) {
      // A turn of libuv is an epoll_pwait: several looks per turn, then libuv's (timers, gRPC, the
      // socket). Between two looks a task runnable on this CPU goes first. Spinning through the
      // slice starved the very workloads it waits for when the CPUs are taken (a neighbour with 2
      // threads on this path: 4,700–5,500 calls a second at a 465 µs p50 against 31,000–38,000 at
      // 47–50 µs with a yield a turn, docs/benchmarks.md, stop 36), and spinning between yields
      // delays other containers' wake-ups by as long (stop 43).
      let n = io.ringTake(this.ring, this.ringBuffer);
      for (let look = 1; n === 0 && look < RING_LOOKS_PER_TURN; look++) {
        io.yieldCpu();
        n = io.ringTake(this.ring, this.ringBuffer);
      }
      if (n > 0) {
        if (!this.consume(this.ringReader, this.ringBuffer, n, 'ring')) return;
        this.busyUntil = process.hrtime.bigint() + this.busyPollNs;
      } else if (n === 0) {
        io.yieldCpu();
      } else if (n < 0) {
        this.fail('bad ring: the engine\'s index of the notifications ring is impossible');
        return;
      }
    } else if (this.readingDirectly) {
      const fd = this.fd();
      if (fd < 0) {
        this.fail('closed');
        return;
      }
      const n = io.recv(fd, this.buffer);
      if (n > 0) {
        if (!this.consume(this.reader, this.buffer, n, 'socket')) return;
        this.busyUntil = process.hrtime.bigint() + this.busyPollNs;
      } else if (n === 0) {
        this.fail('closed');
        return;
      } else if (n !== -EAGAIN) {
        this.fail(`read: errno ${-n}`);
        return;
      }
    }
    // Asleep from here unless something came meanwhile: the engine wakes a ring's sleeper with a
    // kWake on the socket, which libuv reads; without rings libuv reads the socket again.
    if (process.hrtime.bigint() < this.busyUntil || (this.ring !== null && !io.ringMaySleep(this.ring))) {
      setImmediate(() => this.poll());
      return;
    }
    this.polling = false;
    if (this.readingDirectly) {
      this.readingDirectly = false;
      this.socket.resume();
    }
  }

  private fd(): number {
    const handle = (this.socket as unknown as { _handle?: { fd?: number } })._handle;
    return typeof handle?.fd === 'number' ? handle.fd : -1;
  }

  private fail(reason: string): void {
    this.destroy();
    this.close(reason);
  }

  /** Reports the end once, whichever of the socket's events, a bad frame or a failed syscall came first. */
  private close(reason: string): void {
    if (this.reportedClose) return;
    this.reportedClose = true;
    this.closed = true;
    if (this.ring !== null) this.options.io!.ringClose(this.ring);
    this.handlers.onClosed(reason);
  }
}
