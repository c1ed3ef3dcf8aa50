// Whether a crash of this data plane would lose containers: the process that holds the fd store,
// watched. Under seccomp-keeper the store is our parent (SECCOMP_KEEPER_PID); its pidfd sits in the
// event loop, so its death is noticed the moment it happens, not at the next store call. systemd
// is not watched: when it goes, the host goes. Status, health and the metric all read this state.
import type { Logger } from '../common/logger';
import { FdStoreState, type FdStoreStatus } from '../proto/gen/seccompagent/v1/dataplane';
import type { NativeAddon } from './native';

/** The grpc.health.v1 service name that says whether the fd store is up (docs/operators.md). */
export const FD_STORE_HEALTH_SERVICE = 'fd-store';

export class FdStoreWatch {
  private state: FdStoreState;
  readonly holder: string;
  /** The watched keeper, 0 when none is watched. */
  readonly holderPid: number;
  private detail: string;
  private since = new Date();
  private watchId: number | null = null;
  /**
   * Called once when the keeper is lost; returns what the data plane does about it (a clause for
   * the log line and the status). Must not throw.
   */
  onLost: (() => string) | null = null;
  /** Called on every change of state (health follows it). */
  onChange: ((state: FdStoreState) => void) | null = null;

  /** `stored`: the engine keeps every fd in a store ($NOTIFY_SOCKET). Reads and unsets SECCOMP_KEEPER_PID. */
  constructor(private readonly addon: NativeAddon, private readonly log: Logger, stored: boolean, env: NodeJS.ProcessEnv = process.env) {
    const keeperPid = Number(env.SECCOMP_KEEPER_PID ?? '');
    delete env.SECCOMP_KEEPER_PID; // not for the emulation helpers, nor for a keeper started again
    if (!stored) {
      this.state = FdStoreState.FD_STORE_STATE_NONE;
      this.holder = '';
      this.holderPid = 0;
      this.detail = 'a crash gives ENOSYS to every notified syscall: no fd store ($NOTIFY_SOCKET unset); run the data plane under seccomp-keeper or the systemd unit';
    } else if (Number.isInteger(keeperPid) && keeperPid > 0) {
      this.state = FdStoreState.FD_STORE_STATE_UP;
      this.holder = 'seccomp-keeper';
      this.holderPid = keeperPid;
      this.detail = `a crash loses no container: seccomp-keeper (pid ${keeperPid}) keeps every fd`;
    } else {
      this.state = FdStoreState.FD_STORE_STATE_UP;
      this.holder = 'systemd';
      this.holderPid = 0;
      this.detail = 'a crash loses no container: systemd ($NOTIFY_SOCKET) keeps every fd';
    }
  }

  get up(): boolean {
    return this.state === FdStoreState.FD_STORE_STATE_UP;
  }

  get lost(): boolean {
    return this.state === FdStoreState.FD_STORE_STATE_LOST;
  }

  /**
   * Arms the watch. The keeper must still be our parent once its pidfd is open: otherwise it died
   * before (we were reparented), and the pidfd may name a process that reused its pid.
   */
  start(): void {
    if (this.holderPid === 0 || this.watchId !== null || this.lost) return;
    const pid = this.holderPid;
    this.watchId = this.addon.watchProcessExit(pid, () => {
      this.watchId = null;
      this.markLost(`seccomp-keeper (pid ${pid}) exited`);
    });
    if (this.watchId === null || process.ppid !== pid) {
      this.stop();
      this.markLost(`seccomp-keeper (pid ${pid}) was gone before the data plane could watch it`);
    }
  }

  stop(): void {
    if (this.watchId !== null) this.addon.unwatchProcess(this.watchId);
    this.watchId = null;
  }

  /** A later clause of the same story (a recovery attempt), for the status. */
  update(detail: string): void {
    if (this.lost) this.detail = detail;
  }

  status(): FdStoreStatus {
    return { state: this.state, holder: this.holder, holderPid: this.holderPid, detail: this.detail, since: this.since };
  }

  private markLost(what: string): void {
    if (this.lost) return;
    this.state = FdStoreState.FD_STORE_STATE_LOST;
    this.since = new Date();
    let now = 'nothing restarts it';
    try {
      now = this.onLost?.() ?? now;
    } catch (err) {
      now = `cannot recover (${(err as Error).message})`;
    }
    this.detail = `the fd store is gone: ${what}; this data plane serves on, but a crash now would give ENOSYS to every container's notified syscalls; ${now}`;
    this.log.error({ fdStore: this.holder, keeper: this.holderPid }, this.detail);
    try {
      this.onChange?.(this.state);
    } catch (err) {
      this.log.error({ err }, 'internal error while reporting the fd store state; the data plane goes on');
    }
  }
}
