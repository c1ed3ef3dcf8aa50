// A data plane SIGKILLed while the helper of a mount namespace is between a rule's mkdir and its
// NOTIF_SEND: the helper still answers the target (the mkdir it made), and the successor, which
// finds the notification in the journal marked as with a helper, waits for it instead of making
// the directory a second time (EEXIST for a mkdir that worked). Nothing here depends on which
// process is quicker: strace holds the helper's answer (its third ioctl: NOTIF_ID_VALID twice,
// then NOTIF_SEND) for as long as the test wants, the successor is up and has taken the journal
// before the helper is let go (strace detached), and only then may the target get its answer.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { startControlPlane } from '../support/controlplane';
import { keeperChild, startDataPlane } from '../support/dataplane';
import { containerd } from '../support/policy';
import { start, stop } from '../support/processes';
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

test('nshelper: a data plane SIGKILLed between a fast-path mkdir and its answer: the successor waits for the helper; the target gets 0 and one suffixed directory, not EEXIST', { timeout: 120_000 }, async (t) => {
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
  const keeper = dp.proc.child.pid!;
  const dataplane = keeperChild(keeper);
  const helper = children(dataplane).find((pid) => fs.readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('seccomp-nshelp'));
  assert.ok(helper, `no helper among the data plane's children ${children(dataplane)}`);
  // The helper's third ioctl from now (the NOTIF_SEND of the next request) waits 100 s: held
  // until strace lets go of it, long after its mkdirat made the directory.
  const trace = start(t, 'strace', ['-p', String(helper), '-e', 'trace=mkdirat,ioctl', '-e', 'inject=ioctl:delay_enter=100000000:when=3']);
  await trace.waitFor(/attached/i, 10_000);
  fs.writeFileSync(go, '');
  await trace.waitFor(/mkdirat\(.*second-shop-web-1.*\)\s+= 0/, 10_000);
  process.kill(dataplane, 'SIGKILL');
  // The successor serves, with the journal's notification waiting for the held helper.
  await waitUntil(async () => { const pid = keeperChild(keeper); return pid !== 0 && pid !== dataplane && (await dp.status().catch(() => null))?.pid === pid; }, 20_000, `the keeper to restart the data plane; output:\n${dp.proc.output().slice(-3000)}`);
  await waitUntil(() => /1 were with its emulation helpers/.test(dp.proc.output()), 10_000, `the successor to find the notification with the helper; output:\n${dp.proc.output()}`);
  assert.equal(/rc=/.test(workload.output()), false, `the target was answered while its helper was held: ${workload.output()}`);
  // Let the helper go: it sends the answer it had.
  await stop(trace.child);
  const out = await workload.waitFor(/rc=\d+/, 20_000);
  assert.equal(out, 'rc=0', `the target's mkdir: ${workload.output()}`);
  assert.ok(fs.existsSync(path.join(work, 'second-shop-web-1')));
  assert.equal(fs.existsSync(path.join(work, 'second')), false);
});
