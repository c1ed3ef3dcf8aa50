// The native programs the bench drives (built by node-gyp into build/Release) and how to run
// them: the workload under seccomp-run, idle containers, the bare C responder.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Child, Children } from './children';

export const REPO_ROOT = path.resolve(__dirname, '..', '..');
const RELEASE = path.join(REPO_ROOT, 'build', 'Release');

export const TOOLS = {
  seccompRun: path.join(RELEASE, 'seccomp-run'),
  workload: path.join(RELEASE, 'seccomp-bench-workload'),
  responder: path.join(RELEASE, 'seccomp-bench-responder'),
  dataplaneMain: path.join(REPO_ROOT, 'dist', 'dataplane', 'main.js'),
  continueControlPlane: path.join(REPO_ROOT, 'dist', 'bench', 'continue-control-plane.js'),
  controlplaneMain: path.join(REPO_ROOT, 'dist', 'controlplane', 'main.js'),
  nshelper: path.join(RELEASE, 'seccomp-nshelper'),
} as const;

export type BenchSyscall = 'getppid' | 'mkdir';

/** One line of seccomp-bench-workload output. */
export interface WorkloadResult {
  syscall: BenchSyscall;
  threads: number;
  calls: number;
  seconds: number;
  callsPerSec: number;
  p50Us: number;
  p90Us: number;
  p99Us: number;
  maxUs: number;
  errors: number;
  firstErrno: number;
}

export interface WorkloadOptions {
  listenerSocket: string;
  threads: number;
  seconds: number;
  warmupMs: number;
  syscall: BenchSyscall;
  /** Where the mkdir variant creates its per-thread directories. */
  workDir: string;
  id: string;
  /** More seccomp-run flags (listenerMetadata, OCI annotations), placed before its `--`. */
  runArgs?: string[];
  /** Alive this long after its line (no more calls), or until stopped: its container outlives its measured seconds. */
  lingerMs?: number;
}

/** A workload running as a seccomp-run'd container; `result` settles once it has exited. */
export interface RunningWorkload {
  child: Child;
  result: Promise<WorkloadResult>;
  /** Resolves once its line is printed (its measured seconds are over), or it exited. */
  printed: Promise<void>;
}

/**
 * Starts one measured workload as a seccomp-run'd container of `listenerSocket`. SIGTERM to
 * `child` (seccomp-run execs the workload) ends its measured seconds early, its line printed.
 */
export function startWorkload(children: Children, options: WorkloadOptions): RunningWorkload {
  const child = children.start(`workload ${options.id}`, TOOLS.seccompRun, [
    '--socket', options.listenerSocket, '--syscalls', options.syscall, '--id', options.id,
    ...(options.runArgs ?? []), '--', TOOLS.workload, '--threads', String(options.threads), '--seconds', String(options.seconds),
    '--warmup-ms', String(options.warmupMs), '--syscall', options.syscall,
    '--path-prefix', path.join(options.workDir, `mkdir-${options.id}`),
    ...(options.lingerMs ? ['--linger-ms', String(options.lingerMs)] : []),
  ]);
  const printed = new Promise<void>((resolve) => {
    const check = () => {
      if (child.stdout().includes('\n')) resolve();
    };
    child.process.stdout?.on('data', check);
    void child.exited.then(() => resolve());
  });
  const result = child.exited.then((code) => {
    const line = child.stdout().trim().split('\n').pop() ?? '';
    let parsed: WorkloadResult | undefined;
    try {
      parsed = JSON.parse(line) as WorkloadResult;
    } catch {
      parsed = undefined;
    }
    if (code !== 0 || parsed === undefined || parsed.errors > 0 || parsed.calls <= 0) {
      throw new Error(`workload ${options.id} under seccomp-run failed (exit ${code}): ${line || '(no output)'} ${child.stderr().trim()}`);
    }
    return parsed;
  });
  return { child, result, printed };
}

/** Runs one measured workload as a seccomp-run'd container of `listenerSocket` and parses its line. */
export function runWorkload(children: Children, options: WorkloadOptions): Promise<WorkloadResult> {
  return startWorkload(children, options).result;
}

/** A live container that never calls: holds its notify fd until stopped. */
export function startIdleContainer(children: Children, listenerSocket: string, id: string): Child {
  return children.start(`idle ${id}`, TOOLS.seccompRun, [
    '--socket', listenerSocket, '--syscalls', 'getppid', '--id', id, '--', TOOLS.workload, '--idle',
  ], { quiet: true });
}

/** How the bare C responder runs beside its one working thread (bench_responder.cpp's options). */
export interface ResponderShape {
  /** Sleeping threads: a multi-threaded process. */
  idleThreads?: number;
  /** Threads that busy-poll the whole run (a look, then sched_yield), as the agent's pollers do. */
  pollingThreads?: number;
  /** The answering thread with a file table of its own (unshare(CLONE_FILES)), beside its idle threads. */
  ownFdTable?: boolean;
  /** SYNC_WAKE_UP left off: answered callers woken where the scheduler likes. */
  spreadWakeUps?: boolean;
}

/** The bare C reference agent, listening on `listenerSocket` once this resolves. */
export async function startResponder(children: Children, listenerSocket: string, name = 'responder', shape: ResponderShape = {}): Promise<Child> {
  const child = children.start(name, TOOLS.responder, [
    listenerSocket,
    ...(shape.idleThreads ? ['--idle-threads', String(shape.idleThreads)] : []),
    ...(shape.pollingThreads ? ['--polling-threads', String(shape.pollingThreads)] : []),
    ...(shape.ownFdTable ? ['--own-fd-table'] : []),
    ...(shape.spreadWakeUps ? ['--no-sync-wake-up'] : []),
  ]);
  const deadline = Date.now() + 10_000;
  while (!child.stdout().includes('"listening"')) {
    if (!child.alive() || Date.now() > deadline) {
      throw new Error(`seccomp-bench-responder did not start listening: ${child.stderr().trim() || 'no output'}`);
    }
    await sleep(5);
  }
  return child;
}

/**
 * True once a Unix socket bound to `socketPath` is listening. Read from /proc/net/unix rather
 * than by connecting: a probe connection would be an empty runtime message to the data plane.
 */
export function isListening(socketPath: string): boolean {
  let table: string;
  try {
    table = fs.readFileSync('/proc/net/unix', 'utf8');
  } catch {
    return false;
  }
  for (const line of table.split('\n')) {
    const fields = line.trim().split(/\s+/);
    // Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 is __SO_ACCEPTCON (listen()).
    if (fields.length >= 8 && fields[7] === socketPath && (parseInt(fields[3], 16) & 0x10000) !== 0) return true;
  }
  return false;
}

/** VmRSS of a process, in MiB. */
export function rssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  if (!match) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(match[1]) / 1024;
}

/**
 * How many seccomp notify fds `pid` holds: the kernel's count of the containers it serves, true
 * even when the process's own bookkeeping lags behind or drops an event.
 */
export function notifyFdCount(pid: number): number {
  let count = 0;
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === 'anon_inode:seccomp notify') count++;
    } catch {
      // closed while we looked
    }
  }
  return count;
}

/** Fails with a clear message when a tool is missing or still the placeholder. */
export function checkTools(names: Array<keyof typeof TOOLS>): void {
  for (const name of names) {
    if (!fs.existsSync(TOOLS[name])) {
      const how = TOOLS[name].endsWith('.js') ? 'npm run build' : 'npx node-gyp build';
      throw new Error(`${TOOLS[name]} is missing: run \`${how}\` first`);
    }
  }
}

/** The figures of a workload line the tables show. */
export function workloadMetrics(result: WorkloadResult): Record<string, number> {
  const { calls, callsPerSec, p50Us, p90Us, p99Us, maxUs } = result;
  return { calls, callsPerSec, p50Us, p90Us, p99Us, maxUs };
}
