// Child processes of a test: started with their output captured, killed when the test ends.
import { execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import * as fs from 'node:fs';
import type { TestContext } from 'node:test';
import { waitUntil } from './wait';

export interface Started {
  child: ChildProcess;
  /** stdout + stderr so far. */
  output(): string;
  /** Resolves with the exit code (or signal name) when the process ends and its output is read. */
  exited: Promise<number | string>;
  /** Resolves once a line matching `pattern` was printed. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
}

export function start(t: TestContext | null, command: string, args: string[], options: SpawnOptions = {}): Started {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  let output = '';
  const waiters: Array<() => void> = [];
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    for (const w of waiters.splice(0)) w();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  // Ended: exited, with its output read to the end. 'exit' can come before the last of stdout has
  // been read ('close' comes after both), so a check of the output right after 'exit' could find it
  // empty; a grandchild that keeps the pipes open must not hold the test either: 250 ms at most.
  let ended = false;
  const exited = new Promise<number | string>((resolve) => {
    let status: number | string = -1;
    const end = () => {
      if (ended) return;
      ended = true;
      resolve(status);
      for (const w of waiters.splice(0)) w();
    };
    child.on('exit', (code, signal) => {
      status = code ?? signal ?? -1;
      setTimeout(end, 250).unref();
    });
    child.on('close', end);
  });
  child.on('error', (err) => {
    output += `\nspawn error: ${err.message}\n`;
  });
  t?.after(() => stop(child));
  const waitFor = (pattern: RegExp, timeoutMs = 10_000) =>
    new Promise<string>((resolve, reject) => {
      const deadline = setTimeout(() => reject(new Error(`timed out waiting for ${pattern} from ${command}; output:\n${output}`)), timeoutMs);
      const check = () => {
        const match = pattern.exec(output);
        if (match) {
          clearTimeout(deadline);
          resolve(match[0]);
        } else if (ended) {
          clearTimeout(deadline);
          reject(new Error(`${command} exited (${child.exitCode ?? child.signalCode}) before printing ${pattern}; output:\n${output}`));
        } else waiters.push(check);
      };
      check();
    });
  return { child, output: () => output, exited, waitFor };
}

/** The base URL of the Prometheus endpoint a plane says it serves (`--metrics-addr 127.0.0.1:0`). */
export async function metricsUrl(proc: Started): Promise<string> {
  const line = await proc.waitFor(/"address":"[^"]+","msg":"Prometheus metrics serving/);
  return `http://${/"address":"([^"]+)"/.exec(line)![1]}`;
}

/** Every live descendant of `pid` (children of each of its threads, recursively). */
export function descendants(pid: number): number[] {
  const found: number[] = [];
  const visit = (p: number) => {
    let tasks: string[] = [];
    try {
      tasks = fs.readdirSync(`/proc/${p}/task`);
    } catch {
      return;  // gone
    }
    for (const tid of tasks) {
      let text = '';
      try {
        text = fs.readFileSync(`/proc/${p}/task/${tid}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const child of text.trim().split(' ').filter(Boolean).map(Number)) {
        found.push(child);
        visit(child);
      }
    }
  };
  visit(pid);
  return found;
}

/**
 * The emulation helper among the data plane `dataplane`'s children, and the data plane's thread
 * that started it (the helper pool's thread: a child is listed under the thread that spawned it).
 */
export function emulationHelperOf(dataplane: number): { helper: number; poolThread: number } {
  for (const tid of fs.readdirSync(`/proc/${dataplane}/task`)) {
    const kids = fs.readFileSync(`/proc/${dataplane}/task/${tid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number);
    const helper = kids.find((pid) => fs.readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('seccomp-nshelp'));
    if (helper !== undefined) return { helper, poolThread: Number(tid) };
  }
  throw new Error(`no emulation helper among the children of data plane ${dataplane}'s threads`);
}

/** The name the engine gives engine thread `index` (native/addon: lane 0 runs ThreadMain, the others LaneMain). */
export function engineThreadName(index: number): string {
  return index === 0 ? 'seccomp-engine' : `seccomp-lane-${index}`;
}

/** The tid of the thread of `pid` named `name` (its comm), or undefined. */
export function threadNamed(pid: number, name: string): number | undefined {
  return fs.readdirSync(`/proc/${pid}/task`).map(Number).find((tid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim() === name;
    } catch {
      return false;  // ended since the listing
    }
  });
}

/** The state letter of task `tid` of `pid` (/proc's stat: R, S, D, T, Z ...). */
export function taskState(pid: number, tid = pid): string {
  const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
  return stat.charAt(stat.lastIndexOf(')') + 2);
}

/** Every thread of `pid` stopped (SIGSTOP reaches each thread in its own time). */
export function allThreadsStopped(pid: number): boolean {
  return fs.readdirSync(`/proc/${pid}/task`).every((tid) => taskState(pid, Number(tid)) === 'T');
}

/**
 * Resolves once emulation helper `helper` is idle: asleep in its blocking receive, its busy poll
 * over and its doorbell for what it answered rung (native/tools/nshelper.cpp). A test that counts
 * the helper's syscalls from here (strace's `when=`) counts only those of the requests it makes
 * next, however late a loaded machine let the helper's poll end. A polling helper is never asleep.
 */
export async function helperIdle(helper: number, timeoutMs = 10_000): Promise<void> {
  const asleepInRecvmsg = () => {
    return taskState(helper) === 'S' && fs.readFileSync(`/proc/${helper}/syscall`, 'utf8').startsWith('47 ');
  };
  await waitUntil(asleepInRecvmsg, timeoutMs, `emulation helper ${helper} to go idle (asleep in recvmsg)`);
}

/** How long stop() waits for a process after its SIGKILL before it gives up on it (a test never hangs). */
const AFTER_KILL_MS = 2000;

/**
 * SIGTERM, then SIGKILL after a grace period, to the process and to whatever it started that
 * still lives then (a keeper's data plane, a data plane's helpers: nothing a test started may
 * outlive it); resolves when the process is gone, or AFTER_KILL_MS after the SIGKILL whatever
 * happens (a process stuck in the kernel must not hold the suite).
 */
export async function stop(child: ChildProcess, graceMs = 3000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const tree = descendants(child.pid);
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const killed = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      child.kill('SIGKILL');
      for (const pid of [...tree, ...descendants(child.pid!)]) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
      setTimeout(resolve, AFTER_KILL_MS).unref();
    }, graceMs);
  });
  await Promise.race([gone, killed]);
  clearTimeout(timer);
  // What it started and left behind when it exited by itself (orphans of a keeper or a data plane).
  for (const pid of tree) {
    try {
      process.kill(pid, 0);
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}

/** Runs a command to completion; returns code and output. */
export function run(command: string, args: string[], options: SpawnOptions = {}): Promise<{ code: number | string; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', (err) => (stderr += err.message));
    child.on('close', (code, signal) => resolve({ code: code ?? signal ?? -1, stdout, stderr }));
  });
}

/** Fails (never skips) without strace, which holds a process at a syscall: test/ensure-deps.sh installs it. */
export function requireStrace(): void {
  try {
    execFileSync('sh', ['-c', 'command -v strace'], { stdio: 'ignore' });
  } catch {
    throw new Error('strace is not installed: run "bash test/ensure-deps.sh" (npm test does)');
  }
}
