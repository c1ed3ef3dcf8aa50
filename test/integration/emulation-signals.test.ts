// Conformance of the emulated syscalls under signals (docs/emulation.md, "Exactly once"): a program
// whose timer keeps interrupting it, as Go's runtime does with SIGURG, must see what a kernel
// without the agent gives it: every fresh mkdir 0 (never EEXIST for a directory the agent made on
// an abandoned notification), one directory each; every tmpfs mount 0, one mount each (never a
// second one stacked on the first). Each case runs the same workload bare and under the agent
// (real filters from seccomp-run, the real data and control planes), thousands of calls, and
// reports its counts.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { NotificationWait } from '../../proto/gen/seccompagent/v1/dataplane';
import { agent, finished, MKDIR_TMPL_METADATA, runBare, SUFFIX, underAgent as startUnderAgent, UNSHARE_MOUNT_NS } from '../support/conformance';
import { keeperChild, type RunningDataPlane } from '../support/dataplane';
import { SIGNAL_WORKLOAD } from '../support/paths';
import { scratchDir } from '../support/scratch';
import { sleep, waitUntil } from '../support/wait';

interface Counts {
  op: string;
  calls: number;
  ok: number;
  eexist: number;
  eintr: number;
  other: number;
  firstErrno: number;
  firstFailed: number;
  signals: number;
  handlerCalls: number;
  handlerOk: number;
  handlerEexist: number;
  mounts: number;
  stacked: number;
  repeats: number;
  repeatEexist: number;
}

const METADATA = `${MKDIR_TMPL_METADATA}\nMOUNT_OTHER_FS_LIST=tmpfs`;
const CALLS = 3000;

function parse(output: string): Counts {
  const line = output.split('\n').find((l) => l.startsWith('{"op"'));
  assert.ok(line, `the workload printed no result:\n${output}`);
  return JSON.parse(line) as Counts;
}

/** The workload without any filter: what the kernel itself gives. */
async function bare(t: TestContext, args: string[], unshare = false): Promise<{ counts: Counts; dir: string }> {
  const dir = fs.mkdtempSync(path.join(scratchDir(t), 'bare-'));
  return { counts: parse(await runBare(SIGNAL_WORKLOAD, dir, args, unshare ? UNSHARE_MOUNT_NS : [])), dir };
}

/** The workload under a filter that notifies its calls (mkdir and mkdirat, or mount), sent to `dp`. */
function underAgent(t: TestContext, dp: RunningDataPlane, dir: string, args: string[], options: { waitKillable?: boolean; unshare?: boolean } = {}) {
  return startUnderAgent(t, dp, SIGNAL_WORKLOAD, dir, args, {
    // A mount workload makes its mount points first: only its mounts go to the agent.
    syscalls: args.includes('mount') ? ['mount'] : ['mkdir', 'mkdirat'],
    metadata: METADATA,
    name: 'signals',
    waitKillable: options.waitKillable,
    // Its own mount namespace: the mounts it makes (through the agent) never touch the host's.
    launcher: options.unshare ? UNSHARE_MOUNT_NS : undefined,
  });
}

async function result(started: ReturnType<typeof underAgent>): Promise<Counts> {
  return parse(await finished(started));
}

/** Directories the workload's mkdirs left: suffixed by MKDIR_TMPL, or not. */
function directories(dir: string, prefix: string): { suffixed: number; plain: number; names: Set<string> } {
  let suffixed = 0;
  let plain = 0;
  const names = new Set<string>();
  for (const name of fs.readdirSync(dir)) {
    if (!name.startsWith(prefix)) continue;
    if (name.endsWith(SUFFIX)) {
      suffixed++;
      names.add(name.slice(0, -SUFFIX.length));
    } else {
      plain++;
      names.add(name);
    }
  }
  return { suffixed, plain, names };
}

function report(t: TestContext, what: string, c: Counts): void {
  t.diagnostic(`${what}: ${c.calls} ${c.op} calls, ${c.ok} returned 0, ${c.eexist} EEXIST, ${c.other} other errors (first errno ${c.firstErrno} at call ${c.firstFailed}), ${c.eintr} EINTR retried; ${c.signals} signals; handler mkdirs ${c.handlerOk}/${c.handlerCalls} (EEXIST ${c.handlerEexist})${c.repeats > 0 ? `; the same mkdir again: ${c.repeatEexist}/${c.repeats} EEXIST` : ''}${c.op === 'mount' ? `; ${c.mounts} mounts, ${c.stacked} stacked` : ''}`);
}

async function containerWaits(dp: RunningDataPlane): Promise<NotificationWait[]> {
  const listed = await new Promise<{ notificationWait: NotificationWait }[]>((resolve, reject) =>
    dp.client.listContainers({}, (err, r) => (err ? reject(err) : resolve(r!.containers))));
  return listed.map((c) => c.notificationWait);
}

/** A mkdir case: bare and under the agent, the same results and one directory per call. */
async function mkdirCase(t: TestContext, args: string[], options: { waitKillable?: boolean } = {}) {
  const reference = await bare(t, args);
  report(t, 'without the agent', reference.counts);
  assert.equal(reference.counts.ok, CALLS);
  const dp = await agent(t);
  const dir = fs.mkdtempSync(path.join(scratchDir(t), 'agent-'));
  const workload = underAgent(t, dp, dir, args, options);
  // How its tasks wait, as the data plane reports it while the container lives.
  let wait = NotificationWait.NOTIFICATION_WAIT_UNSPECIFIED;
  let running = true;
  const watching = (async () => {
    while (running && wait === NotificationWait.NOTIFICATION_WAIT_UNSPECIFIED) {
      wait = (await containerWaits(dp))[0] ?? wait;
      await sleep(20);
    }
  })();
  const counts = await result(workload).finally(() => { running = false; });
  await watching;
  report(t, 'under the agent', counts);
  const stats = await dp.status();
  t.diagnostic(`data plane: ${stats.counters?.answeredFastPath} fast-path answers`);
  // What the program saw: as without the agent.
  assert.equal(counts.eexist, 0, 'EEXIST for a fresh name: a directory made twice');
  assert.equal(counts.other, 0, `other errors (first errno ${counts.firstErrno})`);
  assert.equal(counts.ok, reference.counts.ok);
  assert.equal(counts.handlerEexist, 0);
  assert.equal(counts.handlerOk, counts.handlerCalls);
  assert.equal(counts.repeats, reference.counts.repeats);
  assert.equal(counts.repeatEexist, counts.repeats, 'the same mkdir again returned 0: the first call\'s outcome given for the program\'s own second call');
  // What it left: one directory per call, every one through the agent (suffixed).
  const made = directories(dir, 'd');
  assert.equal(made.plain, 0, 'a mkdir that bypassed the agent');
  assert.equal(made.suffixed, CALLS);
  assert.deepEqual(made.names, directories(reference.dir, 'd').names);
  const handler = directories(dir, 'h');
  assert.equal(handler.suffixed, counts.handlerCalls);
  return { counts, wait };
}

test('emulated mkdir under signals: a 200 µs SA_RESTART timer, 3,000 fresh mkdirs all return 0, one suffixed directory each, as without the agent', { timeout: 120_000 }, async (t) => {
  const { counts, wait } = await mkdirCase(t, ['--count', String(CALLS), '--timer-us', '200']);
  assert.ok(counts.signals > 0, 'the timer interrupted nothing');
  // The filter has no WAIT_KILLABLE_RECV: a signal can abandon a notification, and it says so.
  assert.equal(wait, NotificationWait.NOTIFICATION_WAIT_INTERRUPTIBLE);
});

test('emulated mkdir: the same mkdir made again by the program gets EEXIST, as without the agent (its own second call, not a restart of the first)', { timeout: 120_000 }, async (t) => {
  const { counts } = await mkdirCase(t, ['--count', String(CALLS), '--repeat']);
  assert.equal(counts.repeats, CALLS);
});

test('emulated mkdir under signals: a 200 µs SA_RESTART timer, each fresh mkdir made again at once: 0 then EEXIST, as without the agent', { timeout: 120_000 }, async (t) => {
  const { counts } = await mkdirCase(t, ['--count', String(CALLS), '--timer-us', '200', '--repeat']);
  assert.equal(counts.repeats, CALLS);
});

test('emulated mkdir under signals: a 50 µs SA_RESTART timer whose handler makes syscalls and mkdirs of its own', { timeout: 300_000 }, async (t) => {
  const { counts } = await mkdirCase(t, ['--count', String(CALLS), '--timer-us', '50', '--handler-mkdir']);
  assert.ok(counts.handlerCalls > 0, 'the handler made no mkdir');
});

test('emulated mkdir under signals: a handler without SA_RESTART: an interrupted mkdir returns EINTR, and the retry returns 0 (the directory made once)', { timeout: 120_000 }, async (t) => {
  await mkdirCase(t, ['--count', String(CALLS), '--timer-us', '200', '--no-restart']);
});

test('emulated mkdir under signals: a filter with WAIT_KILLABLE_RECV (seccomp-run --wait-killable) is reported killable, and gives the same results', { timeout: 120_000 }, async (t) => {
  const { wait } = await mkdirCase(t, ['--count', String(CALLS), '--timer-us', '50'], { waitKillable: true });
  assert.equal(wait, NotificationWait.NOTIFICATION_WAIT_KILLABLE);
});

test('emulated mkdir under signals: with two data plane SIGKILLs meanwhile (the keeper restarts it), still no EEXIST and one directory per call', { timeout: 180_000 }, async (t) => {
  const calls = 6000;
  const dp = await agent(t, true);
  const dir = fs.mkdtempSync(path.join(scratchDir(t), 'agent-'));
  const workload = underAgent(t, dp, dir, ['--count', String(calls), '--timer-us', '100']);
  const keeper = dp.proc.child.pid!;
  for (const progress of [1000, 3000]) {
    await waitUntil(() => fs.readdirSync(dir).length >= progress, 60_000, `${progress} directories`);
    const victim = keeperChild(keeper);
    process.kill(victim, 'SIGKILL');
    await waitUntil(async () => { const pid = keeperChild(keeper); return pid !== 0 && pid !== victim && (await dp.status().catch(() => null))?.pid === pid; }, 20_000, 'the keeper to restart the data plane');
  }
  const counts = await result(workload);
  report(t, 'under the agent, two data plane SIGKILLs', counts);
  assert.equal(counts.eexist, 0, 'EEXIST for a fresh name: a directory made twice');
  assert.equal(counts.other, 0, `other errors (first errno ${counts.firstErrno})`);
  assert.equal(counts.ok, calls);
  const made = directories(dir, 'd');
  assert.equal(made.plain, 0, 'a mkdir that bypassed the agent');
  assert.equal(made.suffixed, calls);
});

test('emulated mount under signals: a 200 µs SA_RESTART timer, 300 tmpfs mounts all return 0, one mount each, none stacked, as without the agent', { timeout: 120_000 }, async (t) => {
  const args = ['--op', 'mount', '--count', '300', '--timer-us', '200'];
  const reference = await bare(t, args, true);
  report(t, 'without the agent', reference.counts);
  assert.equal(reference.counts.ok, 300);
  assert.equal(reference.counts.stacked, 0);
  const dp = await agent(t);
  const dir = fs.mkdtempSync(path.join(scratchDir(t), 'agent-'));
  const counts = await result(underAgent(t, dp, dir, args, { unshare: true }));
  report(t, 'under the agent', counts);
  assert.equal(counts.ok, reference.counts.ok, `first errno ${counts.firstErrno}`);
  assert.equal(counts.stacked, 0, 'a mount stacked on the one the agent made for the abandoned notification');
  assert.equal(counts.mounts, reference.counts.mounts);
});
