// What every scenario file shares when it runs as its own process: parameters from argv, a
// temp dir for its sockets, the set of children it must kill, and one JSON result line on stdout.
//   node dist/bench/<scenario>.js '{"threads":8,"seconds":2,"warmupMs":300,"syscall":"getppid"}'
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Children } from './children';
import type { BenchSyscall } from './tools';

export interface ScenarioParams {
  threads: number;
  seconds: number;
  warmupMs: number;
  syscall: BenchSyscall;
  /** Live idle containers beside the measured one (handoff), and where the containers scenario reads RSS. */
  containers: number;
  /** containers: the most live containers, where its latency beside them is measured (at least `containers`). */
  scale: number;
  /** (c): decisions travel on the native decision channel (true) or over gRPC only (false). */
  channel: boolean;
  /** emulated-mkdir: one helper process per call instead of one kept per mount namespace. */
  spawnPerCall?: boolean;
  /** noisy-neighbour: who answers the flooding neighbour (and the victim beside it); `syscall` and `threads` are the neighbour's. */
  neighbourPath?: NeighbourPath;
  /** noisy-neighbour: the victim on a bare C responder of its own while the neighbour floods the agent. */
  victimOwnResponder?: boolean;
  /** noisy-neighbour, bare: threads busy-polling beside the neighbour's responder, as the agent's do while decisions are in flight (context). */
  neighbourPollingThreads?: number;
  /** reference: sleeping threads beside the bare C responder's one (a multi-threaded process, as Node is). */
  idleThreads?: number;
  /** reference: the answering thread of a multi-threaded responder with a file table of its own (unshare(CLONE_FILES)). */
  ownFdTable?: boolean;
  /** reference: SYNC_WAKE_UP left off (callers woken where the scheduler likes, as a spread container's). */
  spreadWakeUps?: boolean;
  /** runtime-start: the engine that starts the containers (containerd's CRI plugin by default). */
  engine?: 'containerd' | 'podman';
  /** Temp dir for sockets and logs; made (and removed) by the scenario when absent. */
  dir?: string;
}

/** noisy-neighbour: the bare C pair, or the agent's path the neighbour floods (bench/noisy-neighbour.ts). */
export type NeighbourPath = 'bare' | 'bare-shared' | 'default' | 'fast-path' | 'control-plane' | 'emulated-mkdir';

/** A scenario's figures: flat numbers, so run.ts can take medians of each. */
export type Metrics = Record<string, number>;

export interface ScenarioContext {
  params: ScenarioParams;
  dir: string;
  children: Children;
}

const DEFAULTS: ScenarioParams = { threads: 1, seconds: 2, warmupMs: 300, syscall: 'getppid', containers: 1000, scale: 10_000, channel: true };

/** Runs `body` as this process's scenario: prints {"metrics":…} or {"error":…}, exits 0 or 1. */
export function runScenario(body: (context: ScenarioContext) => Promise<Metrics>): void {
  const params: ScenarioParams = { ...DEFAULTS, ...(process.argv[2] ? (JSON.parse(process.argv[2]) as Partial<ScenarioParams>) : {}) };
  const ownDir = params.dir === undefined;
  const dir = params.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'seccomp-bench-'));
  fs.mkdirSync(dir, { recursive: true });
  const children = new Children();
  void (async () => {
    let exitCode = 0;
    try {
      const metrics = await body({ params, dir, children });
      process.stdout.write(`${JSON.stringify({ metrics })}\n`);
    } catch (err) {
      process.stdout.write(`${JSON.stringify({ error: (err as Error).message })}\n`);
      exitCode = 1;
    } finally {
      await children.stopAll();
      if (ownDir) fs.rmSync(dir, { recursive: true, force: true });
    }
    process.exit(exitCode);
  })();
}
