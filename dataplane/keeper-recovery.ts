// After seccomp-keeper is lost: start a keeper again, the way the first one was started (its
// executable, options, command and cwd, read from /proc while it lived), with
// SECCOMP_AGENT_TAKEOVER=true. Its data plane takes every container over from this one by the
// planned handoff (handoff.ts) and stores each fd in the new keeper; this one then exits. Nothing
// new to trust: the handoff socket is root's, and the new keeper is this process's own child.
// While no successor has taken over, the attempt is ended and retried with back-off.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import type { Logger } from '../common/logger';

/** How a keeper was started: `executable keeperArgs... -- command...` in `cwd`. */
export interface KeeperCommandLine {
  executable: string;
  keeperArgs: string[];
  command: string[];
  cwd: string;
}

/** How long a new keeper's data plane may take to start and take over before the attempt ends. */
const TAKEOVER_TIMEOUT_MS = 30_000;
const FIRST_RETRY_MS = 1_000;
const MAX_RETRY_MS = 60_000;

/** The command line of keeper `pid`, or why it cannot be read. Call while the keeper lives. */
export function readKeeperCommandLine(pid: number): KeeperCommandLine | { error: string } {
  try {
    const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    if (argv[argv.length - 1] === '') argv.pop();
    const dashes = argv.indexOf('--');
    if (dashes < 1 || dashes === argv.length - 1) return { error: `pid ${pid} is not "seccomp-keeper [OPTIONS] -- COMMAND"` };
    // The binary it runs, even if started by a relative name or through PATH.
    const executable = fs.readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, '');
    return { executable, keeperArgs: argv.slice(1, dashes), command: argv.slice(dashes + 1), cwd: fs.readlinkSync(`/proc/${pid}/cwd`) };
  } catch (err) {
    return { error: `cannot read the command line of seccomp-keeper (pid ${pid}): ${(err as Error).message}` };
  }
}

export class KeeperRecovery {
  private child: ChildProcess | null = null;
  private attempts = 0;
  private timer: NodeJS.Timeout | null = null;
  private cancelled = false;
  /** Told of each attempt, for the status. */
  onProgress: ((detail: string) => void) | null = null;

  constructor(private readonly commandLine: KeeperCommandLine, private readonly log: Logger) {}

  /** The first attempt, now; returns what the data plane does (a clause for the loss's log line). */
  begin(): string {
    const pid = this.attempt();
    return pid > 0
      ? `started a new seccomp-keeper (pid ${pid}) with the first one's command line; its data plane takes every container over from this one by handoff and stores each fd in it, then this one exits`
      : `could not start a new seccomp-keeper (${this.commandLine.executable}); retrying in ${FIRST_RETRY_MS / 1000} s`;
  }

  /** Ends the attempt in progress (this data plane is stopping) and any retry. */
  cancel(): void {
    this.cancelled = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.child?.kill('SIGTERM');
  }

  /** Starts one keeper; returns its pid (0 when spawn failed; a retry is scheduled). */
  private attempt(): number {
    this.attempts++;
    const { executable, keeperArgs, command, cwd } = this.commandLine;
    let child: ChildProcess;
    try {
      child = spawn(executable, [...keeperArgs, '--', ...command], {
        cwd,
        stdio: 'inherit',
        env: { ...process.env, SECCOMP_AGENT_TAKEOVER: 'true' },
      });
    } catch (err) {
      this.log.error({ err, attempt: this.attempts }, `cannot start seccomp-keeper ${executable}: ${(err as Error).message}`);
      this.retry();
      return 0;
    }
    // Not waited for: this process exits once the new keeper's data plane took over.
    child.unref();
    this.child = child;
    const pid = child.pid ?? 0;
    child.on('error', (err) => {
      this.log.error({ err, attempt: this.attempts }, `seccomp-keeper ${executable} failed: ${err.message}`);
      // A spawn that failed (ENOENT, EACCES) may never say 'exit'.
      if (this.child === child && pid === 0) {
        this.child = null;
        if (!this.cancelled) this.retry();
      }
    });
    child.on('exit', (code, signal) => {
      if (this.child !== child) return;
      this.child = null;
      if (this.cancelled) return;
      this.log.warn({ keeper: pid, code, signal, attempt: this.attempts }, `the new seccomp-keeper (pid ${pid}) exited (${signal ?? code}) before its data plane took over`);
      this.retry();
    });
    this.clearTimer();
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.child !== child) return;
      this.child = null;
      this.log.warn({ keeper: pid, attempt: this.attempts }, `the data plane of the new seccomp-keeper (pid ${pid}) did not take over within ${TAKEOVER_TIMEOUT_MS / 1000} s; stopping that keeper`);
      child.kill('SIGTERM');
      this.retry();
    }, TAKEOVER_TIMEOUT_MS);
    this.timer.unref();
    if (pid > 0) this.onProgress?.(`the fd store is gone (seccomp-keeper exited); a crash now would give ENOSYS to every container's notified syscalls; new seccomp-keeper pid ${pid} (attempt ${this.attempts}) is starting a data plane that takes over by handoff`);
    return pid;
  }

  private retry(): void {
    if (this.cancelled) return;
    this.clearTimer();
    const delay = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** Math.min(this.attempts - 1, 10));
    this.onProgress?.(`the fd store is gone (seccomp-keeper exited); a crash now would give ENOSYS to every container's notified syscalls; attempt ${this.attempts} to start a new keeper failed, next in ${delay / 1000} s`);
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.cancelled) this.attempt();
    }, delay);
    this.timer.unref();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
