// A data plane that goes (SIGKILLed under the keeper, or handing over to a --takeover successor)
// while the helper of a mount namespace carries a rule's mkdir, at each point of it: before the
// mkdir, between the mkdir and its NOTIF_SEND, after the answer (before the pool has the
// helper's reply). The helper finishes what it carries, and the successor, which finds the
// notification in the journal marked as with a helper, waits for it instead of making the
// directory a second time (EEXIST for a mkdir that worked) or answering it itself; and when that
// helper dies held before its mkdir, the successor decides the call anew (its path read again, on a
// thread of its own: native/addon/engine_read_watch.cpp) and makes the directory once. Nothing here
// depends on which process is quicker: strace holds the helper at that point for as long as the
// test wants, the successor is up and has taken the journal before the helper is let go (strace
// detached), and the target's answer is checked only then.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { startControlPlane } from '../support/controlplane';
import { keeperChild, startDataPlane, type RunningDataPlane } from '../support/dataplane';
import { containerd } from '../support/policy';
import { helperIdle, requireStrace, start, stop } from '../support/processes';
import { scratchDir } from '../support/scratch';
import { startUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';

/** Child pids of every thread of `pid` (a helper is the child of the thread that spawned it). */
function children(pid: number): number[] {
  return fs.readdirSync(`/proc/${pid}/task`).flatMap((tid) => fs.readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number));
}

/** Where strace holds the helper: the syscall it delays (the n-th one from attach) and the line that says it is there. */
interface HoldPoint {
  name: string;
  trace: string;
  inject: string;
  /** strace prints this once the helper is on its way to the held syscall (the one before it returned). */
  held: RegExp;
  /** The held syscall's x86_64 number: /proc/<helper>/syscall shows it once the helper is stopped there. */
  nr: number;
  /** Whether the target has its answer while the helper is held. */
  answered: boolean;
}

const HOLD_POINTS: HoldPoint[] = [
  // The request received; its first NOTIF_ID_VALID waits: nothing done yet.
  { name: 'before its mkdir', trace: 'recvmsg,ioctl', inject: 'ioctl:delay_enter=100000000:when=1', held: /recvmsg\(3, .*\)\s+= [1-9]\d*/, nr: 16, answered: false },
  // NOTIF_ID_VALID twice, mkdirat, then the answer (NOTIF_ADDFD, nshelper_answer.hpp) waits: the directory made, not answered.
  { name: 'between its mkdir and its answer', trace: 'mkdirat,ioctl', inject: 'ioctl:delay_enter=100000000:when=3', held: /mkdirat\(.*second-shop-web-1.*\)\s+= 0/, nr: 16, answered: false },
  // Answered; its reply to the pool waits: the journal still has the notification.
  { name: 'after its answer', trace: 'ioctl,sendto', inject: 'sendto:delay_enter=100000000:when=1', held: /SECCOMP_IOCTL_NOTIF_(SEND|ADDFD).*= 0/, nr: 44, answered: true },
];

/** The data plane's helper (a child of one of its threads). */
function helperOf(dataplane: number): number {
  const helper = children(dataplane).find((pid) => fs.readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('seccomp-nshelp'));
  assert.ok(helper, `no helper among the data plane's children ${children(dataplane)}`);
  return helper;
}

/** release: strace lets the held helper go; kill: it dies held (SIGKILL), having done nothing. */
async function heldHelperCase(t: TestContext, point: HoldPoint, transition: 'SIGKILL' | 'handoff', end: 'release' | 'kill' = 'release') {
  requireStrace();
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, ['--log-level', 'info'], dir, transition === 'SIGKILL');
  await startControlPlane(t, dp);
  const work = path.join(dir, 'work');
  fs.mkdirSync(work);
  const go = path.join(dir, 'go');
  // It lives on after its answer (the container stays, so its notification is still the successor's).
  const script = `mkdir ${work}/first; while [ ! -e ${go} ]; do sleep 0.05; done; mkdir ${work}/second; echo rc=$?; sleep 60`;
  const workload = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id: 'helper-crash', metadata: 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', annotations: containerd('shop', 'web-1', 'app') }, ['/bin/sh', '-c', script]);
  await waitUntil(() => fs.existsSync(path.join(work, 'first-shop-web-1')), 15_000, 'the first mkdir (the helper starts)');
  const dataplane = transition === 'SIGKILL' ? keeperChild(dp.proc.child.pid!) : dp.proc.child.pid!;
  const helper = helperOf(dataplane);
  // strace's `when=` counts from its attach: the first mkdir's doorbell (rung when the helper goes
  // idle) must be behind us, or it is the sendto held.
  await helperIdle(helper);
  const trace = start(t, 'strace', ['-p', String(helper), '-e', `trace=${point.trace}`, '-e', `inject=${point.inject}`]);
  await trace.waitFor(/attached/i, 10_000);
  fs.writeFileSync(go, '');
  await trace.waitFor(point.held, 10_000);
  // Stopped in the held syscall (not on its way there, where the data plane's death could still
  // take it before it has switched its death signal off).
  await waitUntil(() => fs.readFileSync(`/proc/${helper}/syscall`, 'utf8').startsWith(`${point.nr} `), 10_000, `the helper to stop in syscall ${point.nr}`);
  let successor: RunningDataPlane = dp;
  if (transition === 'SIGKILL') {
    process.kill(dataplane, 'SIGKILL');
    const keeper = dp.proc.child.pid!;
    await waitUntil(async () => { const pid = keeperChild(keeper); return pid !== 0 && pid !== dataplane && (await dp.status().catch(() => null))?.pid === pid; }, 20_000, () => `the keeper to restart the data plane; output:\n${dp.proc.output().slice(-3000)}`);
  } else {
    successor = await startDataPlane(t, ['--log-level', 'info', '--takeover'], dir);
  }
  // The successor serves, with the journal's notification waiting for the held helper.
  await waitUntil(() => /1 were with its emulation helpers/.test(successor.proc.output()), 10_000, () => `the successor to find the notification with the helper; output:\n${successor.proc.output().slice(-3000)}`);
  if (!point.answered) assert.equal(/rc=/.test(workload.output()), false, `the target was answered while its helper was held: ${workload.output()}; the successor:\n${successor.proc.output().slice(-4000)}`);
  if (end === 'kill') {
    // No helper of the predecessor is left to do it: the successor decides it anew (its path read
    // again, on a thread of its own, engine_read_watch.cpp) and its own helper makes the directory.
    // Killed before strace lets go of it, so it never runs its held syscall (strace holds a tracee
    // that dies at its exit stop until it detaches).
    process.kill(helper, 'SIGKILL');
    await stop(trace.child);
  } else {
    // Let the helper go: it does and answers what it carries.
    await stop(trace.child);
  }
  const out = await workload.waitFor(/rc=\d+/, 20_000);
  assert.equal(out, 'rc=0', `the target's mkdir: ${workload.output()}`);
  assert.ok(fs.existsSync(path.join(work, 'second-shop-web-1')));
  assert.equal(fs.existsSync(path.join(work, 'second')), false, 'the successor let the kernel make it (continue)');
  // The successor still serves the container: its next emulation works, through its own helper.
  await waitUntil(async () => (await successor.status().catch(() => null))?.pid !== undefined, 10_000, 'the successor to answer');
}

test('nshelper: a data plane SIGKILLed while its helper is held before its mkdir, the helper then killed too: the successor decides it anew; the target gets 0 and one suffixed directory', { timeout: 120_000 }, async (t) => {
  await heldHelperCase(t, HOLD_POINTS[0], 'SIGKILL', 'kill');
});

for (const point of HOLD_POINTS) {
  for (const transition of ['SIGKILL', 'handoff'] as const) {
    test(`nshelper: a data plane ${transition === 'SIGKILL' ? 'SIGKILLed' : 'handing over (--takeover)'} while its helper is held ${point.name}: the successor waits for the helper; the target gets 0 and one suffixed directory, not EEXIST`, { timeout: 120_000 }, async (t) => {
      await heldHelperCase(t, point, transition);
    });
  }
}
