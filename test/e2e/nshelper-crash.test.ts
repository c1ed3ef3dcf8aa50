// A data plane SIGKILLed while the helper of a mount namespace is between a rule's mkdir and its
// NOTIF_SEND: the helper still answers the target (the mkdir it made), so the successor, which
// replays what its predecessor had in flight, finds the notification answered instead of making
// the directory a second time (EEXIST for a mkdir that worked). The helper is held in that window
// by strace's syscall delay (ptrace) for less time than the keeper takes to restart the data plane.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { startControlPlane } from '../support/controlplane';
import { keeperChild, startDataPlane } from '../support/dataplane';
import { containerd } from '../support/policy';
import { start } from '../support/processes';
import { scratchDir } from '../support/scratch';
import { startUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';
import { execFileSync } from 'node:child_process';

/** Fails (never skips) without strace: test/ensure-deps.sh installs it. */
function requireStrace(): void {
  try {
    execFileSync('sh', ['-c', 'command -v strace'], { stdio: 'ignore' });
  } catch {
    throw new Error('strace is not installed: run "bash test/ensure-deps.sh" (npm test does)');
  }
}

/** Child pids of every thread of `pid` (a helper is the child of the thread that spawned it). */
function children(pid: number): number[] {
  return fs.readdirSync(`/proc/${pid}/task`).flatMap((tid) => fs.readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number));
}

test('nshelper: a data plane SIGKILLed between a fast-path mkdir and its answer: the target gets 0 and one suffixed directory, not EEXIST', { timeout: 120_000 }, async (t) => {
  requireStrace();
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, ['--log-level', 'info'], dir, true);
  await startControlPlane(t, dp);
  const work = path.join(dir, 'work');
  fs.mkdirSync(work);
  const go = path.join(dir, 'go');
  const script = `mkdir ${work}/first; while [ ! -e ${go} ]; do sleep 0.05; done; mkdir ${work}/second; echo rc=$?`;
  const workload = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id: 'helper-crash', metadata: 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', annotations: containerd('shop', 'web-1', 'app') }, ['/bin/sh', '-c', script]);
  await waitUntil(() => fs.existsSync(path.join(work, 'first-shop-web-1')), 15_000, 'the first mkdir (the helper starts)');
  const dataplane = keeperChild(dp.proc.child.pid!);
  const helper = children(dataplane).find((pid) => fs.readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('seccomp-nshelp'));
  assert.ok(helper, `no helper among the data plane's children ${children(dataplane)}`);
  // Each of its ioctls (NOTIF_ID_VALID, then the NOTIF_SEND that answers) starts 300 ms late:
  // once its mkdirat returned, the directory is made and the answer not yet sent.
  const trace = start(t, 'strace', ['-p', String(helper), '-e', 'trace=mkdirat,ioctl', '-e', 'inject=ioctl:delay_enter=300000']);
  await trace.waitFor(/attached/i, 10_000);
  fs.writeFileSync(go, '');
  await trace.waitFor(/mkdirat\(.*second-shop-web-1.*\)\s+= 0/, 10_000);
  process.kill(dataplane, 'SIGKILL');
  const out = await workload.waitFor(/rc=\d+/, 20_000);
  assert.equal(out, 'rc=0', `the target's mkdir: ${workload.output()}`);
  assert.ok(fs.existsSync(path.join(work, 'second-shop-web-1')));
  assert.equal(fs.existsSync(path.join(work, 'second')), false);
  await waitUntil(async () => (await dp.status().catch(() => null))?.pid !== undefined, 15_000, 'the keeper to restart the data plane');
});
