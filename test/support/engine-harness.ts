// One native engine listening on a socket in its own temp dir, its events recorded, and
// workloads under seccomp-run: what the engine and decision-channel tests drive.
import { spawn, type ChildProcess } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import {
  loadNative,
  type NativeEngine,
  type NativeEngineOptions,
  type NativeEvent,
  type NotificationEvent,
} from '../../dataplane/native';
import { makeEventDecoder } from '../../dataplane/event-decoder';
import { NSHELPER, SECCOMP_RUN } from './paths';
import { waitUntil } from './wait';

export const native = loadNative();

/** This process's open fd count once it is back to `baseline` (the children's pipes closed, every hang-up seen), or what it is after `timeoutMs`. */
export async function fdCountBackTo(baseline: number, timeoutMs = 10_000): Promise<number> {
  await waitUntil(() => native.openFdCount() === baseline, timeoutMs, `the fd count to return to ${baseline}`).catch(() => undefined);
  return native.openFdCount();
}

/** Resolves once `check` returns something other than undefined; `waiters` are woken on news. */
export function until<T>(waiters: Set<() => void>, check: () => T | undefined, what: () => string, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const poll = (): void => {
      const found = check();
      if (found !== undefined) {
        clearTimeout(timer);
        waiters.delete(poll);
        resolve(found);
      }
    };
    const timer = setTimeout(() => {
      waiters.delete(poll);
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what()}`));
    }, timeoutMs);
    waiters.add(poll);
    poll();
  });
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  stdout: string;
}

/** One engine listening on a socket in its own temp dir, with its events recorded. */
/** The container id in a runtime message (seccomp-run: `seccomp-run-<pid>` unless --id), '' if none. */
export function containerIdOf(json: string): string {
  try {
    const id = (JSON.parse(json) as { state?: { id?: unknown } }).state?.id;
    return typeof id === 'string' ? id : '';
  } catch {
    return '';
  }
}

export class EngineHarness {
  readonly dir: string;
  readonly socket: string;
  readonly engine: NativeEngine;
  readonly events: NativeEvent[] = [];
  /** Adopt every connection that sent exactly one seccomp fd (what a runtime sends). */
  autoAdopt = true;
  /** Called for every event after it is recorded (and auto-adopted). */
  onEvent: (event: NativeEvent) => void = () => {};
  protected readonly waiters = new Set<() => void>();
  private readonly children: ChildProcess[] = [];

  constructor(t: TestContext, options: Partial<NativeEngineOptions> = {}, prefix = 'native-engine-') {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    this.socket = path.join(this.dir, 'agent.sock');
    this.engine = new native.Engine({
      helperPath: NSHELPER,
      defaultAction: { kind: 'continue' },
      decisionTimeoutMs: 2000,
      ...options,
      onBatch: makeEventDecoder(native.eventLayout, (batch) => this.receive(batch)),
    });
    t.after(() => {
      for (const child of this.children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      this.engine.stop();
      fs.rmSync(this.dir, { recursive: true, force: true });
    });
    this.engine.listen(this.socket, 0o600);
    this.engine.start();
  }

  private receive(batch: NativeEvent[]): void {
    for (const event of batch) {
      this.events.push(event);
      if (event.type === 'connection' && this.autoAdopt && event.fds.length === 1 && event.fds[0].seccomp) {
        this.engine.adopt(event.conn, 0, '{}', containerIdOf(event.json));
      }
      this.onEvent(event);
    }
    for (const wake of [...this.waiters]) wake();
  }

  /** Resolves with the first recorded event matching `pred` (past or future). */
  waitFor<T extends NativeEvent>(pred: (e: NativeEvent) => e is T, what: string, timeoutMs?: number): Promise<T>;
  waitFor(pred: (e: NativeEvent) => boolean, what: string, timeoutMs?: number): Promise<NativeEvent>;
  waitFor(pred: (e: NativeEvent) => boolean, what: string, timeoutMs = 5000): Promise<NativeEvent> {
    return this.until(() => this.events.find(pred), what, timeoutMs);
  }

  /** Resolves once `check` returns something other than undefined. */
  until<T>(check: () => T | undefined, what: string, timeoutMs = 5000): Promise<T> {
    return until(this.waiters, check, () => `${what}; events seen: ${this.events.map((e) => e.type).join(',')}`, timeoutMs);
  }

  /**
   * Runs `command` under seccomp-run with `flags`; resolves when it exits. `prefix`: shell
   * commands run first in the same process (to join a cgroup), which then execs seccomp-run.
   */
  run(flags: string[], command: string[], prefix?: string): { child: ChildProcess; exit: Promise<Exit> } {
    const argv = [SECCOMP_RUN, '--socket', this.socket, ...flags, '--', ...command];
    const child = prefix === undefined
      ? spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('/bin/sh', ['-c', `${prefix}exec "$@"`, 'sh', ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.children.push(child);
    let stderr = '';
    let stdout = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const exit = new Promise<Exit>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stderr, stdout })));
    return { child, exit };
  }

  /** Opens control-plane session `session` (no channel) and makes it the active one. */
  attach(session = 1): void {
    this.engine.openSession(session, crypto.randomBytes(16));
    this.engine.setActiveSession(session);
  }

  mkdir(target: string): { child: ChildProcess; exit: Promise<Exit> } {
    return this.run(['--syscalls', 'mkdir,mkdirat'], ['/bin/mkdir', target]);
  }

  notifications(): NotificationEvent[] {
    return this.events.filter((e): e is NotificationEvent => e.type === 'notification');
  }
}
