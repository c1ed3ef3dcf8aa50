// Conformance of the emulated syscalls (docs/emulation.md): a workload run without any filter (what
// the kernel itself gives) and under the agent (a real filter from seccomp-run, the real data and
// control planes, its calls emulated through the pod's MKDIR_TMPL metadata), whose results a test
// compares. Shared by test/integration/emulation-signals.test.ts and emulation-threads.test.ts.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { startControlPlane } from './controlplane';
import { startDataPlane, type RunningDataPlane } from './dataplane';
import { containerd } from './policy';
import { run, type Started } from './processes';
import { scratchDir } from './scratch';
import { startUnderFilter } from './workload';

/** What MKDIR_TMPL below appends to every directory the agent makes for the pod shop/web-1. */
export const SUFFIX = '-shop-web-1';
export const MKDIR_TMPL_METADATA = 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}';
export const UNSHARE_MOUNT_NS = ['unshare', '-m', '--propagation', 'private', '--'];

export function requireBuilt(program: string): void {
  if (!fs.existsSync(program)) throw new Error(`${program} is missing: run npm ci (node-gyp builds it)`);
}

/** `program --dir DIR ...args` without any filter (under `launcher`, if any): its stdout; exit 0 asserted. */
export async function runBare(program: string, dir: string, args: string[], launcher: string[] = []): Promise<string> {
  requireBuilt(program);
  const command = [...launcher, program];
  const r = await run(command[0], [...command.slice(1), '--dir', dir, ...args]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout;
}

/** Both planes; the workload's policy (its metadata: MKDIR_TMPL, ...) answered on the fast path. */
export async function agent(t: TestContext, underKeeper = false): Promise<RunningDataPlane> {
  const dp = await startDataPlane(t, ['--log-level', 'info'], scratchDir(t), underKeeper);
  await startControlPlane(t, dp);
  return dp;
}

export interface UnderAgentOptions {
  /** The calls the filter notifies (to `dp`); every other one runs as it would. */
  syscalls: string[];
  /** The pod's seccomp metadata (MKDIR_TMPL_METADATA, and more). */
  metadata: string;
  /** The container's id is `${name}-${basename(dir)}`. */
  name: string;
  /** seccomp-run --wait-killable: a filter with WAIT_KILLABLE_RECV. */
  waitKillable?: boolean;
  /** A command seccomp-run itself runs under (UNSHARE_MOUNT_NS): the filter's process is then in its namespaces. */
  launcher?: string[];
}

/** `program --dir DIR ...args` under a filter that sends its calls to `dp`, as pod shop/web-1; killed when the test ends. */
export function underAgent(t: TestContext, dp: RunningDataPlane, program: string, dir: string, args: string[], options: UnderAgentOptions): Started {
  requireBuilt(program);
  return startUnderFilter(t, {
    socket: dp.listenerSocket,
    syscalls: options.syscalls,
    id: `${options.name}-${path.basename(dir)}`,
    metadata: options.metadata,
    annotations: containerd('shop', 'web-1', 'app'),
    extra: options.waitKillable ? ['--wait-killable'] : [],
    launcher: options.launcher,
  }, [program, '--dir', dir, ...args]);
}

/** The output of a workload started under the agent, once it exited 0 (asserted). */
export async function finished(started: Started): Promise<string> {
  const code = await started.exited;
  assert.equal(code, 0, started.output());
  return started.output();
}
