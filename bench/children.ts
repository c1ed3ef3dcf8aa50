// Every process a bench scenario starts, so that all of them die with it, even on failure.
// run.ts also starts each scenario in its own process group and kills the group afterwards:
// this file is the polite first line (SIGTERM, then SIGKILL), the group kill is the backstop.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import * as fs from 'node:fs';

export interface Child {
  readonly name: string;
  readonly process: ChildProcess;
  readonly pid: number;
  /** Resolves with the exit code (or 128 + signal number) once the process is gone. */
  readonly exited: Promise<number>;
  /** Everything written to stdout so far (only when stdout is piped). */
  stdout(): string;
  /** Everything written to stderr so far, or the log file's tail when redirected to a file. */
  stderr(): string;
  alive(): boolean;
}

/** BENCH_NODE_ARGS: Node options every Node child gets first, to find where a path's microseconds
 * go: `--perf-basic-prof` for `perf record -g -p PID` to name JavaScript frames, or `--cpu-prof
 * --cpu-prof-dir=DIR` for a profile of each child that exits by itself. Split at spaces. */
function nodeArgs(command: string): string[] {
  const extra = process.env.BENCH_NODE_ARGS;
  return extra && command === process.execPath ? extra.split(' ').filter((a) => a !== '') : [];
}

const SIGNAL_NUMBERS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };

export class Children {
  private readonly live = new Set<Child>();

  constructor() {
    // Last resort when the scenario itself dies: synchronous kills, by pid, of what it started.
    process.on('exit', () => this.killAllNow());
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
      process.on(signal, () => {
        this.killAllNow();
        process.exit(128 + SIGNAL_NUMBERS[signal]);
      });
    }
  }

  /**
   * Starts `command`. stdout is captured unless `quiet`; stderr goes to `logFile` when given
   * (read back on failure), else is captured.
   */
  start(name: string, command: string, args: string[], options: { logFile?: string; quiet?: boolean; env?: NodeJS.ProcessEnv } = {}): Child {
    let errFd: number | 'pipe' = 'pipe';
    if (options.logFile) errFd = fs.openSync(options.logFile, 'a');
    const spawnOptions: SpawnOptions = {
      stdio: ['ignore', options.quiet ? 'ignore' : 'pipe', errFd],
      env: options.env ?? process.env,
    };
    const proc = spawn(command, [...nodeArgs(command), ...args], spawnOptions);
    if (typeof errFd === 'number') fs.closeSync(errFd);
    let out = '';
    let err = '';
    proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => { out += chunk; });
    proc.stderr?.setEncoding('utf8').on('data', (chunk: string) => { err += chunk; });
    let running = true;
    const exited = new Promise<number>((resolve) => {
      proc.on('error', (error) => {
        err += `\ncould not start ${command}: ${error.message}`;
        running = false;
        resolve(127);
      });
      proc.on('close', (code, signal) => {
        running = false;
        this.live.delete(child);
        resolve(code ?? 128 + (signal ? (SIGNAL_NUMBERS[signal] ?? 0) : 0));
      });
    });
    const child: Child = {
      name,
      process: proc,
      pid: proc.pid ?? -1,
      exited,
      stdout: () => out,
      stderr: () => (options.logFile ? tail(options.logFile) : err),
      alive: () => running,
    };
    if (proc.pid !== undefined) this.live.add(child);
    return child;
  }

  /** SIGTERM, then SIGKILL after `graceMs` for whatever is still there. */
  async stop(child: Child, graceMs = 2000): Promise<number> {
    if (child.alive()) signal(child.pid, 'SIGTERM');
    const timer = setTimeout(() => { if (child.alive()) signal(child.pid, 'SIGKILL'); }, graceMs);
    try {
      return await child.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops every child still running (many at once: the 1,000 idle containers). */
  async stopAll(graceMs = 2000): Promise<void> {
    await Promise.all([...this.live].map((child) => this.stop(child, graceMs)));
  }

  private killAllNow(): void {
    for (const child of this.live) signal(child.pid, 'SIGKILL');
    this.live.clear();
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // ESRCH: it is already gone, which is what we wanted.
  }
}

function tail(file: string, bytes = 4000): string {
  try {
    const text = fs.readFileSync(file, 'utf8');
    return text.slice(-bytes);
  } catch {
    return '';
  }
}
