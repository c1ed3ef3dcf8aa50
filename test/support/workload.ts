// Workloads under a real seccomp filter, made with the native seccomp-run.
import * as fs from 'node:fs';
import type { TestContext } from 'node:test';
import { SECCOMP_RUN } from './paths';
import { run, start, type Started } from './processes';

export interface WorkloadOptions {
  socket: string;
  syscalls: string[];
  id?: string;
  metadata?: string;
  annotations?: Record<string, string>;
  /** Extra seccomp-run flags (test-only message shapes, --wait-killable). */
  extra?: string[];
  /** A command seccomp-run itself runs under (e.g. unshare -m ... --): the filter's process is then in its namespaces. */
  launcher?: string[];
}

function seccompRunArgs(options: WorkloadOptions, command: string[]): string[] {
  const args = ['--socket', options.socket, '--syscalls', options.syscalls.join(',')];
  if (options.id) args.push('--id', options.id);
  if (options.metadata !== undefined) args.push('--metadata', options.metadata);
  for (const [k, v] of Object.entries(options.annotations ?? {})) args.push('--annotation', `${k}=${v}`);
  args.push(...(options.extra ?? []), '--', ...command);
  return args;
}

/** Runs a command under seccomp-run to completion. */
export function runUnderFilter(options: WorkloadOptions, command: string[]) {
  if (!fs.existsSync(SECCOMP_RUN)) throw new Error(`${SECCOMP_RUN} is missing: run npm ci (node-gyp builds it)`);
  return run(SECCOMP_RUN, seccompRunArgs(options, command));
}

/** Starts a command under seccomp-run; killed when the test ends. */
export function startUnderFilter(t: TestContext, options: WorkloadOptions, command: string[]): Started {
  if (!fs.existsSync(SECCOMP_RUN)) throw new Error(`${SECCOMP_RUN} is missing: run npm ci (node-gyp builds it)`);
  const [launcher, ...launcherArgs] = options.launcher ?? [];
  return launcher === undefined
    ? start(t, SECCOMP_RUN, seccompRunArgs(options, command))
    : start(t, launcher, [...launcherArgs, SECCOMP_RUN, ...seccompRunArgs(options, command)]);
}

/** Number of fds a process holds. */
export function fdCount(pid: number): number {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}
