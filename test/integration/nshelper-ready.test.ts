// The helper pool's direct hand-off (native/addon/nshelper_pool.hpp): a kept helper stays ready for
// its namespace's next request while the pool thread reads its answers. A target answered by its
// helper calls again at once; had the helper been taken off the ready list for that read, its next
// call would have waited on the pool thread (a wake-up on every serial emulated call's path). And
// an answer to a request sent meanwhile, read in the same pass, is matched to it (never taken for
// a broken helper). Nothing depends on which thread is quicker: strace holds the pool thread in the
// middle of its read, after the doorbell it woke for, and releases it only once the test has seen
// what it needs.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { agent, MKDIR_TMPL_METADATA, SUFFIX } from '../support/conformance';
import { containerd } from '../support/policy';
import { emulationHelperOf, helperIdle, requireStrace, start, stop } from '../support/processes';
import { scratchDir } from '../support/scratch';
import { startUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';

const HOLD = '100000000'; // µs: the pool thread waits there until strace is killed

test('nshelper pool: a helper stays ready while its answers are read; a request sent meanwhile goes straight to it, and its answer read in that pass is its own', { timeout: 120_000 }, async (t) => {
  requireStrace();
  const dir = scratchDir(t);
  const dp = await agent(t);
  const work = path.join(dir, 'work');
  fs.mkdirSync(work);
  const gate = (name: string) => `while [ ! -e ${path.join(dir, name)} ]; do sleep 0.05; done`;
  const workload = startUnderFilter(t, {
    socket: dp.listenerSocket,
    syscalls: ['mkdir', 'mkdirat'],
    id: 'helper-ready',
    metadata: MKDIR_TMPL_METADATA,
    annotations: containerd('shop', 'web-1', 'app'),
  }, ['/bin/sh', '-c', [
    `mkdir ${work}/first`, gate('go'),
    `mkdir ${work}/second; echo second=$?`, gate('go2'),
    `mkdir ${work}/third; echo third=$?`, gate('go3'),
    `mkdir ${work}/fourth; echo fourth=$?`, 'sleep 60',
  ].join('; ')]);
  const made = (name: string) => fs.existsSync(path.join(work, `${name}${SUFFIX}`));
  await waitUntil(() => made('first'), 15_000, () => `the first mkdir (the helper starts); workload:\n${workload.output()}\ndata plane:\n${dp.proc.output().slice(-3000)}`);
  const { helper, poolThread } = emulationHelperOf(dp.proc.child.pid!);
  // The first call's doorbell read and done with before strace counts the pool thread's reads.
  await helperIdle(helper);
  await waitUntil(() => fs.readFileSync(`/proc/${dp.proc.child.pid!}/task/${poolThread}/syscall`, 'utf8').startsWith('232 '), 10_000, 'the pool thread to wait in epoll_wait');
  // The pool thread reads a helper's doorbells until the socket says EAGAIN, then the responses in
  // its ring: two recvfrom for a doorbell read alone. The second, entered after the doorbell is in
  // hand, is held.
  const trace = start(t, 'strace', ['-p', String(poolThread), '-e', 'trace=recvfrom', '-e', `inject=recvfrom:delay_enter=${HOLD}:when=2`]);
  t.after(() => stop(trace.child));
  await trace.waitFor(/attached/i, 10_000);
  fs.writeFileSync(path.join(dir, 'go'), '');
  assert.equal(await workload.waitFor(/second=\d+/, 15_000), 'second=0');
  // The helper rang for `second`'s response after the target had its answer: the pool thread is
  // held reading the doorbell (its second recvfrom), the helper ready all the while.
  await waitUntil(() => fs.readFileSync(`/proc/${dp.proc.child.pid!}/task/${poolThread}/syscall`, 'utf8').startsWith('45 '), 10_000, () => `the pool thread to stop in recvfrom; strace:\n${trace.output()}`);
  fs.writeFileSync(path.join(dir, 'go2'), '');
  // Served with the pool thread held: `third` went straight to the ready helper, which answered it.
  assert.equal(await workload.waitFor(/third=\d+/, 15_000), 'third=0', `the third mkdir waited for the held pool thread; data plane:\n${dp.proc.output().slice(-3000)}`);
  assert.ok(made('third'));
  // Released, the pass reads the responses to `second` and `third` (sent after the pass began)
  // from the ring: each matched to its request, not taken for a helper out of step (which would be
  // killed and its requests failed).
  trace.child.kill('SIGKILL');
  await trace.exited;
  fs.writeFileSync(path.join(dir, 'go3'), '');
  assert.equal(await workload.waitFor(/fourth=\d+/, 15_000), 'fourth=0');
  assert.deepEqual(fs.readdirSync(work).sort(), ['first', 'fourth', 'second', 'third'].map((n) => `${n}${SUFFIX}`));
  assert.equal(emulationHelperOf(dp.proc.child.pid!).helper, helper, 'the same helper served all four');
  assert.equal((await dp.status()).counters!.emulationHelpersDied, 0n);
  assert.doesNotMatch(dp.proc.output(), /EPROTO|protocol error|failed at stage|could not be answered/i, 'no helper taken for broken');
});
