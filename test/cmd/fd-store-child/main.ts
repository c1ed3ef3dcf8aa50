// The keeper tests' child (see README.md). Usage: main.js DIR (plan in $FD_STORE_CHILD_PLAN), or
// main.js foreign DIR. Everything it learns goes to DIR/runs.jsonl, one JSON line per run.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadNative } from '../../../dataplane/native';

/** One step of a run; the plan lists the steps of each run in order. */
export type Step =
  /** A new file holding "marker-<name>", unlinked once open, stored under `name`. */
  | { storeFile: string }
  /** A FIFO (read end, write end) holding "pipe-<name>" unread, unlinked, both stored under `name`. */
  | { storePipe: string }
  | { remove: string }
  /** sdNotify(message) with one fd of a new file "raw-<n>" (or none). */
  | { raw: string; withFd: boolean }
  | 'ready'
  | 'stopping'
  | { exit: number };

/** What a run found at start (and did), as written to runs.jsonl. */
export interface RunRecord {
  run: number;
  pid: number;
  notifySocket: string | null;
  /** LISTEN_* as seen after takeListenFds (all null: it unset them). */
  envAfterTake: Array<string | null>;
  received: Array<{ fd: number; name: string; cloexec: boolean; content: string | null; error: string | null }>;
  results: unknown[];
}

const native = loadNative();
const O_CLOEXEC = 0o2000000;

function describe(fd: number, name: string): RunRecord['received'][number] {
  const flags = /flags:\s*([0-7]+)/.exec(fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'));
  const cloexec = flags !== null && (parseInt(flags[1], 8) & O_CLOEXEC) !== 0;
  const buffer = Buffer.alloc(256);
  try {
    // Position 0 for a file (pread: the offset does not matter); the current one for a pipe.
    const n = fs.readSync(fd, buffer, 0, buffer.length, fs.fstatSync(fd).isFIFO() ? null : 0);
    return { fd, name, cloexec, content: buffer.subarray(0, n).toString(), error: null };
  } catch (err) {
    return { fd, name, cloexec, content: null, error: (err as NodeJS.ErrnoException).code ?? String(err) };
  }
}

function openFile(dir: string, name: string, content: string): number {
  const file = path.join(dir, `${name}-${process.pid}.txt`);
  fs.writeFileSync(file, content);
  const fd = fs.openSync(file, 'r+');
  fs.unlinkSync(file); // only the open fd reaches it now
  return fd;
}

function openPipe(dir: string, name: string): [number, number] {
  const fifo = path.join(dir, `${name}-${process.pid}.fifo`);
  execFileSync('mkfifo', [fifo]);
  const read = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  const write = fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
  fs.unlinkSync(fifo);
  fs.writeSync(write, `pipe-${name}`);
  return [read, write];
}

function runStep(dir: string, step: Step): unknown {
  if (step === 'ready') return native.sdNotify('READY=1');
  if (step === 'stopping') return native.sdNotify('STOPPING=1');
  if ('storeFile' in step) return native.fdStoreStore(step.storeFile, [openFile(dir, step.storeFile, `marker-${step.storeFile}`)]);
  if ('storePipe' in step) return native.fdStoreStore(step.storePipe, openPipe(dir, step.storePipe));
  if ('remove' in step) return native.fdStoreRemove(step.remove);
  if ('raw' in step) {
    try {
      return native.sdNotify(step.raw, step.withFd ? [openFile(dir, 'raw', 'raw')] : []);
    } catch (err) {
      return `threw: ${(err as Error).message}`;
    }
  }
  return null; // exit: handled by the caller once the record is written
}

function main(): void {
  if (process.argv[2] === 'foreign') {
    const dir = process.argv[3];
    const sent = native.fdStoreStore('foreign', [openFile(dir, 'foreign', 'marker-foreign')]);
    process.stdout.write(`foreign sent=${sent} pid=${process.pid}\n`);
    return;
  }
  const dir = process.argv[2];
  const runs = path.join(dir, 'runs.jsonl');
  const run = fs.existsSync(runs) ? fs.readFileSync(runs, 'utf8').split('\n').filter(Boolean).length : 0;
  const plan = JSON.parse(process.env.FD_STORE_CHILD_PLAN ?? '[]') as Step[][];
  const steps = plan[run] ?? [];
  const received = native.takeListenFds().map(({ fd, name }) => describe(fd, name));
  const record: RunRecord = {
    run,
    pid: process.pid,
    notifySocket: process.env.NOTIFY_SOCKET ?? null,
    envAfterTake: ['LISTEN_PID', 'LISTEN_FDS', 'LISTEN_FDNAMES'].map((k) => process.env[k] ?? null),
    received,
    results: steps.map((step) => runStep(dir, step)),
  };
  // A SIGTERM forwarded by the keeper shows up as exit code 7.
  process.on('SIGTERM', () => process.exit(7));
  fs.appendFileSync(runs, JSON.stringify(record) + '\n');
  const exit = steps.find((s): s is { exit: number } => typeof s === 'object' && 'exit' in s);
  if (exit) process.exit(exit.exit);
  setInterval(() => undefined, 1 << 30);
}

main();
