// An emulation helper that dies (SIGKILL here; OOM or an operator's kill in life) while it carries
// a rule's mkdir or mount, at each point of it: before the act, right after it (before the helper
// marks it acted in the replay book), in its NOTIF_SEND, after its answer. The pool gives the
// request once to a fresh helper, which finds in the replay book what the dead one did and gives
// the program what a kernel would: 0 and one directory or mount, never EPERM, EEXIST or a second
// mount (docs/emulation.md, "Exactly once"); or, when the dead one had posted its response in its
// reply ring, takes that response and gives it to nobody else. Nothing depends on which process is quicker: strace
// holds the helper in the syscall the case needs, /proc/<helper>/syscall and the effect on disk
// say it is there, and only then is it killed.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { agent } from '../support/conformance';
import { containerd } from '../support/policy';
import { emulationHelperOf, helperIdle, requireStrace, start, stop } from '../support/processes';
import { scratchDir } from '../support/scratch';
import { startUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';

const SUFFIX = '-shop-web-1';
const METADATA = 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}\nMOUNT_OTHER_FS_LIST=tmpfs';
const HOLD = '100000000'; // µs: the helper waits there until it is killed

/** Where strace holds the helper, and what the test checks before it kills it there. */
interface HoldPoint {
  name: string;
  op: 'mkdir' | 'mount';
  trace: string;
  inject: string;
  /** The held syscall's x86_64 number, as /proc/<helper>/syscall shows it once the helper is there. */
  nr: number;
  /** Whether the mkdir or mount has happened when the helper is held (checked before the kill). */
  acted: boolean;
  /** How the data plane's log says the fresh helper served it: acted, gave the dead one's outcome, or found it answered; or that no fresh one was needed (the response was in the ring). */
  served: 'acted' | 'replayed' | 'answered' | 'taken';
}

const HOLD_POINTS: HoldPoint[] = [
  // Its intent noted, the mkdirat not entered: the fresh helper makes the directory.
  { name: 'before its mkdirat', op: 'mkdir', trace: 'mkdirat', inject: `mkdirat:delay_enter=${HOLD}:when=1`, nr: 258, acted: false, served: 'acted' },
  // The directory made, the intent not yet marked acted: the fresh helper's mkdirat says EEXIST for
  // a directory born after the intent, which is the dead helper's.
  { name: 'at the exit of its mkdirat (intent only)', op: 'mkdir', trace: 'mkdirat', inject: `mkdirat:delay_exit=${HOLD}:when=1`, nr: 258, acted: true, served: 'replayed' },
  // Marked acted, not answered (two NOTIF_ID_VALIDs, then the answer, NOTIF_ADDFD, waits): replayed.
  { name: 'in its NOTIF_SEND (acted)', op: 'mkdir', trace: 'ioctl', inject: `ioctl:delay_enter=${HOLD}:when=3`, nr: 16, acted: true, served: 'replayed' },
  // Marked acted and answered (its NOTIF_ADDFD, the third ioctl) and held on the way back: the
  // fresh helper finds the notification answered and does nothing.
  { name: 'at the exit of its answer', op: 'mkdir', trace: 'ioctl', inject: `ioctl:delay_exit=${HOLD}:when=3`, nr: 16, acted: true, served: 'answered' },
  // Answered and its response posted in the ring; held in its doorbell: the pool takes the response
  // from the dead helper's ring, and no fresh helper is asked.
  { name: 'in the doorbell after its answer', op: 'mkdir', trace: 'sendto', inject: `sendto:delay_enter=${HOLD}:when=1`, nr: 44, acted: true, served: 'taken' },
  // Its intent noted (the target's mount id), the mount's child not forked: the fresh helper mounts.
  { name: 'before its mount child', op: 'mount', trace: 'clone', inject: `clone:delay_enter=${HOLD}:when=1`, nr: 56, acted: false, served: 'acted' },
  // The child mounted and exited, the intent not yet marked acted: the fresh helper finds another
  // mount on the target than the intent's and answers 0 without a second one.
  { name: 'waiting for its mount child, the mount made (intent only)', op: 'mount', trace: 'wait4', inject: `wait4:delay_exit=${HOLD}:when=1`, nr: 61, acted: true, served: 'replayed' },
];

/** Mounts at `mountPoint` in the mount namespace of `pid`. */
function mountsAt(pid: number, mountPoint: string): number {
  return fs.readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n').filter((l) => l.split(' ')[4] === mountPoint).length;
}

/** Whether `pid` holds a write lock (its partition's) through a descriptor of its own on the replay book. */
function holdsBookLock(pid: number): boolean {
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    let target = '';
    try {
      target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    if (!target.startsWith('/memfd:seccomp-agent-replays')) continue;
    if (/^lock:.*OFDLCK\s+ADVISORY\s+WRITE/m.test(fs.readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8'))) return true;
  }
  return false;
}

async function killedHelperCase(t: TestContext, point: HoldPoint) {
  requireStrace();
  const dir = scratchDir(t);
  const dp = await agent(t);
  const work = path.join(dir, 'work');
  fs.mkdirSync(work);
  const go = path.join(dir, 'go');
  const wait = `while [ ! -e ${go} ]; do sleep 0.05; done`;
  // The first call starts the helper; the second is the one whose helper dies. The workload lives
  // on after it (its container stays).
  const script = point.op === 'mkdir'
    ? `mkdir ${work}/first; ${wait}; mkdir ${work}/second; echo rc=$?; sleep 60`
    : `mkdir ${work}/first ${work}/second; mount -t tmpfs none ${work}/first; ${wait}; mount -t tmpfs none ${work}/second; echo rc=$?; sleep 60`;
  const workload = startUnderFilter(t, {
    socket: dp.listenerSocket,
    syscalls: point.op === 'mkdir' ? ['mkdir', 'mkdirat'] : ['mount'],
    id: 'helper-death',
    metadata: METADATA,
    annotations: containerd('shop', 'web-1', 'app'),
    // Its own mount namespace: what the agent mounts for it never touches the host's.
    launcher: point.op === 'mount' ? ['unshare', '-m', '--propagation', 'private', '--'] : undefined,
  }, ['/bin/sh', '-c', script]);
  const target = workload.child.pid!;
  const second = path.join(work, 'second');
  const acted = point.op === 'mkdir' ? () => fs.existsSync(`${second}${SUFFIX}`) : () => mountsAt(target, second) > 0;
  await waitUntil(() => (point.op === 'mkdir' ? fs.existsSync(path.join(work, `first${SUFFIX}`)) : mountsAt(target, path.join(work, 'first')) === 1), 15_000, () => `the first ${point.op} (the helper starts); workload:\n${workload.output()}\ndata plane:\n${dp.proc.output().slice(-3000)}`);
  const { helper } = emulationHelperOf(dp.proc.child.pid!);
  // strace's `when=` counts from its attach: the first call's doorbell (rung when the helper goes
  // idle) must be behind us, or it is the sendto held.
  await helperIdle(helper);
  const trace = start(t, 'strace', ['-p', String(helper), '-e', `trace=${point.trace}`, '-e', `inject=${point.inject}`]);
  t.after(() => stop(trace.child));
  await trace.waitFor(/attached/i, 10_000);
  fs.writeFileSync(go, '');
  // Held in that syscall, the act done or not as the case says (before the act the effect is
  // absent, after it present: either way the helper is where the case needs it).
  await waitUntil(() => fs.readFileSync(`/proc/${helper}/syscall`, 'utf8').startsWith(`${point.nr} `) && acted() === point.acted, 10_000, () => `the helper to stop in syscall ${point.nr}; strace:\n${trace.output()}`).catch((err: Error) => {
    // strace 6.1 sometimes gives up on a tracee it is delaying (seen once in ~20 whole runs, under
    // load) and lets it go on: the hold the case needs never happened, nothing was asserted.
    if (/delayed wait data set already/.test(trace.output())) throw new StraceLostHold(err.message);
    throw err;
  });
  // Between its requests' receipt and its going idle, a helper holds its partition of the book: a
  // fresh one waits for what the dead one noted there (nshelper_replay.hpp).
  assert.ok(holdsBookLock(helper), 'the helper holds its partition\'s lock while it serves');
  // The kill first: a SIGKILLed tracee never runs the held syscall on (the kernel skips a syscall
  // whose entry stop ends with a fatal signal pending). Then strace, whose pending delay would
  // otherwise hold the dying helper at its exit stop, its fds (its lock on the book) still open.
  process.kill(helper, 'SIGKILL');
  trace.child.kill('SIGKILL');
  await trace.exited;
  const out = await workload.waitFor(/rc=\d+/, 20_000);
  assert.equal(out, 'rc=0', `the target's ${point.op}: ${workload.output()}\ndata plane:\n${dp.proc.output().slice(-3000)}`);
  if (point.op === 'mkdir') {
    assert.deepEqual(fs.readdirSync(work).filter((f) => f.startsWith('second')), [`second${SUFFIX}`], 'one suffixed directory, made once');
  } else {
    assert.equal(mountsAt(target, second), 1, 'one tmpfs on the target, none stacked on it');
  }
  // The data plane says what happened: the helper died, its request was served again, or its
  // response taken from the ring.
  await waitUntil(async () => (await dp.status()).counters!.emulationHelpersDied === 1n, 10_000, 'the death to be counted');
  if (point.served === 'taken') {
    assert.equal((await dp.status()).counters!.emulationsRetried, 0n, 'its response was in the ring: nothing to serve again');
    assert.doesNotMatch(dp.proc.output(), /died with it in hand|could not be answered|failed at stage/, 'no retry, no failure reported');
    return;
  }
  await waitUntil(async () => (await dp.status()).counters!.emulationsRetried === 1n, 10_000, 'the retry to be counted');
  const served = { acted: /served it; its syscall got Success/, replayed: /served it with what the dead one had done; its syscall got Success/, answered: /served it and found it answered already/ }[point.served];
  await waitUntil(() => /its emulation helper died with it in hand; a fresh helper served it/.test(dp.proc.output()), 10_000, () => `the retry to be logged; output:\n${dp.proc.output().slice(-3000)}`);
  assert.match(dp.proc.output(), served, 'the fresh helper served it as the case says');
  assert.doesNotMatch(dp.proc.output(), /could not be answered|failed at stage/, 'no failure reported');
}

class StraceLostHold extends Error {}

for (const point of HOLD_POINTS) {
  const served = point.served === 'taken' ? 'its response is taken from its ring' : 'a fresh helper serves it once';
  test(`nshelper death: a helper SIGKILLed ${point.name} of a rule's ${point.op}: ${served}; the target gets 0 and one ${point.op === 'mkdir' ? 'suffixed directory' : 'mount'}, not EPERM`, { timeout: 120_000 }, async (t) => {
    try {
      await killedHelperCase(t, point);
    } catch (err) {
      if (!(err instanceof StraceLostHold)) throw err;
      // Only the tool failed, before the case began: once more from the start (new planes, dir).
      t.diagnostic(`strace let the helper go before the hold (${err.message.split('\n')[0]}); the case runs again`);
      await killedHelperCase(t, point);
    }
  });
}
