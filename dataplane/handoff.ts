// Planned data plane upgrade, both sides (the wire is native: native/addon/handoff.hpp).
// Serving side: a successor connects to the handoff socket; stop accepting runtime connections,
// let the ones accepted finish, hand every fd over (the engine stops answering only for that
// moment), then exit without closing anything by hand (no socket path is unlinked). Successor side
// (--takeover): receive, answer at once, ack, and take the socket paths right away.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../common/logger';
import type { DataPlane } from './dataplane';
import type { NativeAddon, NamedFd } from './native';

/** How long accepted runtime connections may take to finish before a handoff goes ahead anyway. */
const DRAIN_CONNECTIONS_MS = 2_000;
/** Hello, transfer and ack, each. */
const HANDOFF_TIMEOUT_MS = 10_000;
/** How long a successor watches for the old data plane to exit after the handoff. */
const RELEASE_TIMEOUT_MS = 10_000;

export class HandoffServer {
  private busy = false;

  constructor(
    private readonly dataplane: DataPlane,
    private readonly addon: NativeAddon,
    private readonly log: Logger,
    /** Ends the process; the successor serves everything now. */
    private readonly onHandedOver: () => Promise<void>,
  ) {}

  async handle(conn: number, successorPid: number): Promise<void> {
    if (this.busy) {
      this.addon.closeFd(conn);
      this.log.warn({ successor: successorPid }, 'a second successor asked to take over during a handoff; refused it');
      return;
    }
    this.busy = true;
    this.log.info({ successor: successorPid }, `data plane ${successorPid} asks to take over: new runtime connections wait in the backlog until it has everything`);
    this.dataplane.setAccepting(false);
    const drainUntil = Date.now() + DRAIN_CONNECTIONS_MS;
    while (this.dataplane.pendingConnections > 0 && Date.now() < drainUntil) await sleep(2);
    const left = this.dataplane.pendingConnections;
    if (left > 0) this.log.warn({ connections: left }, `${left} runtime connection(s) did not finish within ${DRAIN_CONNECTIONS_MS} ms; they are dropped (their runtime reports the failure)`);
    const result = this.dataplane.handOff(conn, HANDOFF_TIMEOUT_MS);
    if (!result.ok) {
      this.dataplane.setAccepting(true);
      this.busy = false;
      this.log.error({ successor: successorPid }, `handoff to data plane ${successorPid} failed: ${result.error}; this data plane goes on serving every container`);
      return;
    }
    const pauseMs = result.pausedMs;
    this.log.info({ successor: successorPid, pauseMs, summary: JSON.parse(result.summary) as unknown }, `handed every container over to data plane ${successorPid}: nothing was answered for ${pauseMs.toFixed(1)} ms; releasing the sockets and exiting`);
    await this.onHandedOver();
  }
}

export interface TakenOver {
  conn: number;
  fds: NamedFd[];
  /** The old data plane's pid, container and in-flight counts (JSON from it). */
  summary: { pid?: number; containers?: number; inFlight?: number };
}

/** Successor side: everything the serving data plane hands over, or null when none serves. */
export function receiveHandoff(addon: NativeAddon, handoffSocket: string): TakenOver | null {
  const conn = addon.handoffConnect(handoffSocket);
  if (conn === null) return null;
  try {
    const received = addon.handoffReceive(conn, HANDOFF_TIMEOUT_MS);
    return { conn, fds: received.fds, summary: JSON.parse(received.summary) as TakenOver['summary'] };
  } catch (err) {
    addon.closeFd(conn);
    throw err;
  }
}

/**
 * Successor side, once it answers: the ack. From then on the old one only exits, closing nothing by
 * hand (so it never unlinks a socket path): the successor may take the paths at once.
 */
export function acknowledgeHandoff(addon: NativeAddon, taken: TakenOver): void {
  addon.handoffAck(taken.conn);
}

/** Successor side, in the background: logs a predecessor that does not exit after handing over. */
export async function watchPredecessorExit(addon: NativeAddon, taken: TakenOver, log: Logger): Promise<void> {
  const until = Date.now() + RELEASE_TIMEOUT_MS;
  while (!addon.handoffWaitClosed(taken.conn, 1)) {
    if (Date.now() > until) {
      addon.closeFd(taken.conn);
      log.warn({ predecessor: taken.summary.pid }, `data plane ${taken.summary.pid} handed over ${RELEASE_TIMEOUT_MS} ms ago and has not exited; it answers nothing any more, stop it`);
      return;
    }
    await sleep(20);
  }
}
