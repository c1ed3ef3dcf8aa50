// The control plane's end of the decision channel's socket: connects, says hello, reads frames,
// writes decisions, and keeps this process awake while decisions flow (the busy poll).
//
// While it polls, the socket is read and written with one nonblocking syscall each through a
// small addon (native/channel), not through libuv's stream: each read of a net.Socket enters
// JavaScript through a callback scope (async context, microtask checkpoint, tick queue) and each
// write builds a write request and a tick, which cost more per decision than the decision itself
// (docs/decision-channel.md). Asleep (no traffic for busyPollMs), libuv reads it as any socket, so
// an idle control plane wakes on the next notification. Without the addon, libuv does both.
import * as net from 'node:net';
import { loadBuiltAddon } from '../../common/built-addon';
import { encodeHello, FrameReader, MAX_FRAME, type ChannelFrame } from '../../common/decision-channel';

/** native/channel/socket_io.cpp: a nonblocking recv and send; -errno, never an exception, when they fail. */
export interface ChannelIo {
  recv(fd: number, into: Uint8Array): number;
  send(fd: number, bytes: Uint8Array): number;
}

const EAGAIN = 11;

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
  /** Closed, for whatever reason (called once). */
  onClosed(reason: string): void;
}

export interface ChannelConnectionOptions {
  socketPath: string;
  token: Uint8Array;
  /** After channel traffic, keep polling this long instead of sleeping (0: off). */
  busyPollMs: number;
  /** null: libuv reads and writes (the addon is missing, or a test wants that path). */
  io: ChannelIo | null;
}

export class ChannelConnection {
  private readonly socket: net.Socket;
  private readonly reader = new FrameReader();
  private readonly buffer = Buffer.allocUnsafe(MAX_FRAME);
  private readonly busyPollNs: bigint;
  /** hrtime (ns) until which the event loop keeps polling. */
  private busyUntil = 0n;
  private polling = false;
  /** The busy poll reads the socket itself (libuv's reading is stopped meanwhile). */
  private readingDirectly = false;
  private closed = false;
  private reportedClose = false;

  constructor(
    private readonly options: ChannelConnectionOptions,
    private readonly handlers: ChannelHandlers,
  ) {
    this.busyPollNs = BigInt(Math.round(Math.max(0, options.busyPollMs) * 1e6));
    // onread: libuv's reads land in our buffer and reach us without a Buffer or a 'data' event each.
    this.socket = net.connect({ path: options.socketPath, onread: { buffer: this.buffer, callback: (n) => this.onLibuvRead(n) } });
    this.socket.on('connect', () => this.socket.write(encodeHello(options.token)));
    this.socket.on('error', (err) => this.close(err.message));
    this.socket.on('close', () => this.close('closed'));
  }

  /** Writes encoded decision frames: at once when nothing waits before them, else after what does. */
  write(bytes: Buffer): void {
    if (this.closed) return;
    const fd = this.fd();
    if (this.options.io === null || fd < 0 || this.socket.writableLength > 0) {
      this.socket.write(bytes);
      return;
    }
    const n = this.options.io.send(fd, bytes);
    if (n === bytes.length) return;
    if (n >= 0) this.socket.write(bytes.subarray(n));
    else if (n === -EAGAIN) this.socket.write(bytes);
    else this.fail(`write: errno ${-n}`);
  }

  destroy(): void {
    this.closed = true;
    this.socket.destroy();
  }

  private onLibuvRead(n: number): boolean {
    if (!this.consume(n)) return false;
    this.keepPolling();
    return true;
  }

  /** The frames in buffer[0, n): false once the connection is closed for a bad frame. */
  private consume(n: number): boolean {
    let frames: ChannelFrame[];
    try {
      frames = this.reader.push(this.buffer.subarray(0, n));
    } catch (err) {
      this.handlers.onBadFrame(err as Error);
      this.destroy();
      this.close('bad frame');
      return false;
    }
    for (const frame of frames) this.handlers.onFrame(frame);
    this.handlers.onReadEnd();
    return true;
  }

  /**
   * While setImmediate callbacks are queued, libuv polls with a zero timeout instead of sleeping,
   * and each turn reads the socket once: the next notification is read without a wake-up of this
   * process, which on a VM costs more than the decision itself (docs/benchmarks.md).
   */
  private keepPolling(): void {
    if (this.busyPollNs === 0n || this.closed) return;
    this.busyUntil = process.hrtime.bigint() + this.busyPollNs;
    if (this.options.io !== null && !this.readingDirectly && this.fd() >= 0) {
      this.readingDirectly = true;
      this.socket.pause();
    }
    if (this.polling) return;
    this.polling = true;
    setImmediate(() => this.poll());
  }

  private poll(): void {
    if (this.closed) {
      this.polling = false;
      return;
    }
    if (this.readingDirectly) {
      const n = this.options.io!.recv(this.fd(), this.buffer);
      if (n > 0) {
        if (!this.consume(n)) return;
        this.busyUntil = process.hrtime.bigint() + this.busyPollNs;
      } else if (n === 0) {
        this.destroy();
        this.close('closed');
        return;
      } else if (n !== -EAGAIN) {
        this.fail(`read: errno ${-n}`);
        return;
      }
    }
    if (process.hrtime.bigint() < this.busyUntil) {
      setImmediate(() => this.poll());
      return;
    }
    this.polling = false;
    if (this.readingDirectly) {
      // Asleep from here: libuv reads again, and wakes us on the next frame.
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
    this.handlers.onClosed(reason);
  }
}
