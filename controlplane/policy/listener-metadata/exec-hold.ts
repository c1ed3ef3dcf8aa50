// listenerMetadata EXEC_PATTERN + EXEC_DURATION and SIDECARS + SIDECARS_DELAY, with the semantics of
// kinvolk/seccompagent: an execve of exactly EXEC_PATTERN (the path the data plane read from the
// caller, re-validated with NOTIF_ID_VALID) waits EXEC_DURATION, then continues; the execve of a
// container's init process (its init fd, the notification's pid is the container's init pid), in
// a container whose name SIDECARS does not list, waits until the process's start plus
// SIDECARS_DELAY, then continues. Every other execve of such a container continues at once.
//
// kinvolk sleeps in its handler. Here a wait is a timer: the decision is sent when it fires, and
// nothing else (the same container's other notifications, other containers) waits behind it. So
// that the data plane's decision deadline does not answer the held execve early with the default,
// the control plane first sends a Hold (hold.v1): the data plane moves that one notification's
// deadline to the end of the wait plus its usual timeout. If this process dies meanwhile, its
// session's notifications get the default at once (docs/policy.md: "Holds").
import { readFile } from 'node:fs/promises';
import type { Logger } from '../../../common/logger';
import type { Decision, Notification } from '../../../proto/gen/seccompagent/v1/dataplane';
import type { ContainerEntry } from '../../container-registry';

type Action = NonNullable<Decision['action']>;

/** Sends a Hold for a notification; false when the data plane does not take holds (or none is attached). */
export type HoldSink = (n: Notification, ms: number) => boolean;

/** How a hold ended: its time elapsed (or stop()), or its caller died. */
type HoldEnd = 'elapsed' | 'died';

/** Held execves at once, at most: each is a task blocked in the kernel; past it, they continue at once. */
export const MAX_HELD = 4096;
/**
 * Held execves of one container at once, at most: one container cannot take the node's holds from
 * another (a sixteenth of MAX_HELD). Past it, that container's execves continue at once.
 */
export const MAX_HELD_PER_CONTAINER = 256;
/** How often a hold checks that its caller still lives; a dead caller's hold is released. */
export const HOLD_LIVENESS_MS = 500;
const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ on every Linux architecture this agent runs on
const CONTINUE: Action = Object.freeze({ $case: 'continue', continue: {} }) as Action;

/** SIDECARS applies to this fd: its container's init fd, in a container SIDECARS does not name. */
export function sidecarDelayApplies(entry: ContainerEntry): boolean {
  const sidecars = entry.policy.sidecars;
  if (!sidecars || sidecars.delayMs <= 0 || !entry.initFd) return false;
  // A container whose name is not known (no pod identity) is not in the list.
  return !sidecars.names.includes(entry.identity?.container ?? '');
}

/** The execve's path (argument 0, as read) is exactly EXEC_PATTERN (bytes; a truncated read never matches). */
export function execPatternMatches(entry: ContainerEntry, n: Notification): boolean {
  const pattern = entry.policy.exec?.pattern;
  const arg = n.stringArgs.find((s) => s.index === 0);
  if (pattern === undefined || !arg || arg.truncated) return false;
  return Buffer.from(arg.raw ?? Buffer.from(arg.value, 'utf8')).equals(Buffer.from(pattern, 'utf8'));
}

/** Process (or thread) `pid`'s start time in clock ticks since boot (/proc/<pid>/stat field 22); rejects when it is gone. */
export async function processStartTicks(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[22 - 3]);
}

/** How long ago process `pid` started, in ms: its start time in /proc/<pid>/stat against /proc/uptime (both since boot). */
export async function msSinceStart(pid: number): Promise<number> {
  const [stat, uptime] = await Promise.all([readFile(`/proc/${pid}/stat`, 'utf8'), readFile('/proc/uptime', 'utf8')]);
  // Field 22 (starttime); the command name (field 2) may hold spaces and ")": count from the last ")".
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const startTicks = Number(fields[22 - 3]);
  return Number(uptime.split(' ')[0]) * 1000 - (startTicks / CLOCK_TICKS_PER_SECOND) * 1000;
}

export class ExecHolds {
  /** Execves held now. */
  active = 0;
  /** Execves held so far, and ones that continued at once because a hold could not be had. */
  held = 0;
  refused = 0;
  /** Holds released early because the process that made the call died. */
  released = 0;
  /** Ends each hold running now (stop()). */
  private readonly running = new Set<(end: HoldEnd) => void>();
  /** Held now, by container id. */
  private readonly perContainer = new Map<string, number>();
  /**
   * The hold of each calling thread: a thread has one call in flight, so a new execve notification
   * from it means its earlier one is gone (a signal took it out of its wait, and the call came back:
   * Go's runtime does so every few ms with SIGURG). That hold ends, and counts no more.
   */
  private readonly byThread = new Map<number, () => void>();
  private warnedAt = 0;

  constructor(
    private readonly sendHold: HoldSink,
    private readonly log: Logger,
    private readonly sinceStart: (pid: number) => Promise<number> = msSinceStart,
    /** The caller's identity over time (pid + start time, so a reused pid is not the caller). */
    private readonly startOf: (pid: number) => Promise<number> = processStartTicks,
    private readonly livenessMs = HOLD_LIVENESS_MS,
  ) {}

  /** Ends every hold now: each held execve continues (shutdown, tests). */
  stop(): void {
    for (const end of [...this.running]) end('elapsed');
  }

  /** Execves of `containerId` held now. */
  heldFor(containerId: string): number {
    return this.perContainer.get(containerId) ?? 0;
  }

  /**
   * For an execve of a container with EXEC_PATTERN or SIDECARS: the answer (continue), at once or
   * after the wait. null: neither key is set, the rest of the policy decides.
   */
  decide(entry: ContainerEntry, n: Notification): Action | Promise<Action> | null {
    if (n.syscall !== 'execve' || (entry.policy.exec === null && entry.policy.sidecars === null)) return null;
    const execMs = entry.policy.exec && entry.policy.exec.durationMs > 0 && execPatternMatches(entry, n) ? entry.policy.exec.durationMs : 0;
    const sidecar = sidecarDelayApplies(entry) && n.pid === entry.pid;
    if (execMs === 0 && !sidecar) return CONTINUE;
    return this.wait(entry, n, execMs, sidecar);
  }

  private async wait(entry: ContainerEntry, n: Notification, execMs: number, sidecar: boolean): Promise<Action> {
    this.byThread.get(n.pid)?.();
    let ms = execMs;
    if (sidecar) {
      try {
        ms = Math.max(ms, entry.policy.sidecars!.delayMs - (await this.sinceStart(n.pid)));
      } catch {
        // The process is gone (its notification with it): nothing to wait for.
      }
    }
    ms = Math.ceil(ms);
    if (ms <= 0) return CONTINUE;
    // The caller as it is now: a hold ends when it dies (its notification died with it).
    let started: number;
    try {
      started = await this.startOf(n.pid);
    } catch {
      return CONTINUE;
    }
    const container = entry.containerId;
    const ofContainer = this.heldFor(container);
    const full = this.active >= MAX_HELD ? 'node' : ofContainer >= MAX_HELD_PER_CONTAINER ? 'container' : null;
    if (full || !this.sendHold(n, ms)) {
      this.refused++;
      const now = Date.now();
      if (now - this.warnedAt > 10_000) {
        this.warnedAt = now;
        this.log.warn(
          { container, syscall: n.syscall, id: String(n.id), held: this.active, heldByContainer: ofContainer },
          full === 'node'
            ? `${MAX_HELD} execves are held already: this one of container ${container} continues at once (EXEC_DURATION / SIDECARS_DELAY not applied)`
            : full === 'container'
              ? `container ${container} holds ${MAX_HELD_PER_CONTAINER} execves already (the most one container may): this one continues at once (EXEC_DURATION / SIDECARS_DELAY not applied)`
              : `the data plane takes no holds (hold.v1): the execve of container ${container} continues at once instead of waiting ${ms} ms`,
        );
      }
      return CONTINUE;
    }
    this.active++;
    this.held++;
    this.perContainer.set(container, ofContainer + 1);
    // Counted until it ends, or until its thread's call comes back as a new notification: the
    // hold then runs out unseen (its answer finds the notification gone) and counts no more.
    let counted = true;
    const uncount = () => {
      if (!counted) return;
      counted = false;
      this.active--;
      const left = this.heldFor(container) - 1;
      if (left > 0) this.perContainer.set(container, left);
      else this.perContainer.delete(container);
    };
    this.byThread.set(n.pid, uncount);
    this.log.debug({ container, syscall: n.syscall, id: String(n.id), pid: n.pid, holdMs: ms, reason: execMs > 0 ? 'EXEC_PATTERN' : 'SIDECARS' }, `execve of container ${container} held ${ms} ms, then continues`);
    try {
      const end = await this.holdWhileAlive(n.pid, started, ms);
      if (end === 'died') {
        this.released++;
        this.log.debug({ container, id: String(n.id), pid: n.pid }, `the process whose execve container ${container} held is gone: hold released`);
      }
    } finally {
      uncount();
      if (this.byThread.get(n.pid) === uncount) this.byThread.delete(n.pid);
    }
    return CONTINUE;
  }

  /** Waits `ms`, or until process `pid` (started at `started`) is gone, or its next call supersedes this one. */
  private holdWhileAlive(pid: number, started: number, ms: number): Promise<HoldEnd> {
    return new Promise<HoldEnd>((resolve) => {
      let checking = false;
      const end = (how: HoldEnd) => {
        clearTimeout(timer);
        clearInterval(check);
        this.running.delete(end);
        resolve(how);
      };
      this.running.add(end);
      const timer = setTimeout(() => end('elapsed'), ms);
      const check = setInterval(() => {
        if (checking) return;
        checking = true;
        this.startOf(pid).then((now) => now === started, () => false).then((alive) => {
          checking = false;
          if (!alive) end('died');
        });
      }, this.livenessMs);
    });
  }
}
