// Where the kernel wakes a container's answered callers (native/addon/wake_mode.hpp): on the engine
// thread's CPU (SYNC_WAKE_UP) while one or two threads call, wherever the scheduler likes once many
// call at once. Real filters, real notify fds, real threads of getppid.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as os from 'node:os';
import * as path from 'node:path';

import type { HandoffEvent } from '../../dataplane/native';
import { EngineHarness as Harness } from '../support/engine-harness';
import { BENCH_WORKLOAD, ROOT } from '../support/paths';
import { allThreadsStopped } from '../support/processes';
import { waitUntil } from '../support/wait';

/** WakeModeAdvisor::SpreadAt: distinct callers in a window of 32 from which a container is spread (0: never). */
const CPUS = os.availableParallelism();
const SPREAD_AT = 2 * CPUS <= 32 ? 2 * CPUS : 0;

function getppidWorkload(h: Harness, threads: number, seconds: number) {
  return h.run(['--syscalls', 'getppid'], [
    BENCH_WORKLOAD, '--threads', String(threads), '--seconds', String(seconds), '--warmup-ms', '0',
    '--syscall', 'getppid', '--path-prefix', path.join(h.dir, 'w'),
  ]);
}

test('wake mode: one caller stays sync; many callers at once are spread, counted while their container lives', async (t) => {
  const h = new Harness(t);
  h.engine.setDetailedEvents(false);
  const lone = getppidWorkload(h, 1, 1);
  const loneExit = await lone.exit;
  assert.equal(loneExit.code, 0, loneExit.stderr);
  const afterLone = h.engine.stats();
  assert.equal(afterLone.syncWakeUp, true, 'a kernel with SYNC_WAKE_UP (6.6+)');
  assert.deepEqual({ spread: afterLone.spreadWakeContainers, switches: afterLone.wakeModeSwitches }, { spread: 0, switches: 0 },
    'a second of one thread calling as fast as it can never left sync');

  const threads = Math.max(8, SPREAD_AT + 2);
  const many = getppidWorkload(h, threads, 60);
  if (SPREAD_AT === 0) {
    // More than 16 CPUs: no window of 32 notifications can say so; the container stays sync.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    assert.equal(h.engine.stats().wakeModeSwitches, 0);
  } else {
    await waitUntil(() => h.engine.stats().spreadWakeContainers === 1, 20_000,
      `the ${threads}-thread container spread (${CPUS} CPUs: from ${SPREAD_AT} callers at once)`);
  }
  many.child.kill('SIGKILL');
  await many.exit;
  await waitUntil(() => h.engine.stats().containers === 0, 10_000, 'both containers removed');
  const end = h.engine.stats();
  assert.equal(end.spreadWakeContainers, 0, 'a spread container leaves the count with its removal');
  if (SPREAD_AT === 0) assert.equal(end.wakeModeSwitches, 0);
  else assert.ok(end.wakeModeSwitches >= 1, `switches: ${end.wakeModeSwitches}`);
});

for (const lanes of [1, 2]) {
  test(`wake mode: many callers stay sync while another container calls (${lanes === 1 ? 'the same engine thread' : 'another engine thread'}), and are spread once it has been quiet for a second`, async (t) => {
    const h = new Harness(t, { lanes });
    h.engine.setDetailedEvents(false);
    const other = getppidWorkload(h, 1, 60);
    await waitUntil(() => h.engine.stats().lanes.some((lane) => lane.received > 0), 10_000, 'the other container calling');
    const threads = Math.max(8, SPREAD_AT + 4);
    const many = getppidWorkload(h, threads, 60);
    await waitUntil(() => h.engine.stats().lanes.reduce((sum, lane) => sum + lane.containers, 0) === 2, 10_000, 'both containers served');
    assert.deepEqual(h.engine.stats().lanes.map((lane) => lane.containers), lanes === 1 ? [2] : [1, 1]);
    // A second and a half of both calling as fast as they can: thousands of windows, none spread.
    const until = Date.now() + 1500;
    while (Date.now() < until) {
      assert.equal(h.engine.stats().wakeModeSwitches, 0, 'no switch while another container calls');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    other.child.kill('SIGKILL');
    await other.exit;
    const quietSince = Date.now();
    if (SPREAD_AT === 0) {
      // More than 16 CPUs: nothing is ever spread, alone or not.
      await new Promise((resolve) => setTimeout(resolve, 2000));
      assert.equal(h.engine.stats().wakeModeSwitches, 0);
    } else {
      await waitUntil(() => h.engine.stats().spreadWakeContainers === 1, 20_000, `the ${threads}-thread container spread once alone`);
      // The other's last call came before quietSince: a second of quiet cannot have passed sooner.
      assert.ok(Date.now() - quietSince >= 500, `spread ${Date.now() - quietSince} ms after the other's exit`);
    }
    many.child.kill('SIGKILL');
    await many.exit;
  });
}

test('wake mode: a handoff that fails once the fds were sent leaves every container sync, looked at anew', async (t) => {
  const h = new Harness(t);
  h.engine.setDetailedEvents(false);
  const handoffSocket = path.join(h.dir, 'handoff.sock');
  h.engine.listenHandoff(handoffSocket, 0o600);
  const many = getppidWorkload(h, Math.max(8, SPREAD_AT + 2), 60);
  // More than 16 CPUs: nothing is ever spread; the handoff's failure then changes nothing either.
  const spreads = SPREAD_AT === 0 ? 0 : 1;
  if (spreads === 0) await waitUntil(() => h.engine.stats().lanes[0].received > 10_000, 20_000, 'the container calling');
  else await waitUntil(() => h.engine.stats().spreadWakeContainers === 1, 20_000, 'the container spread');
  // Held still: no window can count until the test lets it go on.
  process.kill(many.child.pid!, 'SIGSTOP');
  t.after(() => many.child.kill('SIGKILL'));
  await waitUntil(() => allThreadsStopped(many.child.pid!), 10_000, 'every thread of the workload stopped');
  const received = h.engine.stats().lanes[0].received;
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(h.engine.stats().lanes[0].received, received, 'the workload is stopped');
  const before = h.engine.stats();
  assert.equal(before.spreadWakeContainers, spreads);

  // A successor that takes every fd and goes without its ack (as one that restored them, setting
  // each sync, and then died would).
  const successor = spawn(process.execPath, ['-e', `
    const native = require(${JSON.stringify(path.join(ROOT, 'dist', 'dataplane', 'native.js'))}).loadNative();
    const conn = native.handoffConnect(${JSON.stringify(handoffSocket)});
    const { fds } = native.handoffReceive(conn, 10000);
    process.stdout.write(fds.map((f) => f.name).join(','));
  `], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => successor.kill('SIGKILL'));
  const closed = once(successor, 'close');
  let output = '';
  successor.stdout.on('data', (chunk: Buffer) => { output += chunk.toString(); });
  successor.stderr.on('data', (chunk: Buffer) => { output += chunk.toString(); });
  const asked = await h.waitFor((e): e is HandoffEvent => e.type === 'handoff', 'the successor connecting', 10_000);
  const result = h.engine.handOff(asked.conn, 10_000);
  assert.equal(result.ok, false, 'no ack: the handoff failed');
  await closed;
  assert.match(output, /(^|,)n\d+(,|$)/, `the successor received the notify fd: ${output}`);

  const after = h.engine.stats();
  assert.deepEqual({ spread: after.spreadWakeContainers, switches: after.wakeModeSwitches },
    { spread: 0, switches: before.wakeModeSwitches + spreads }, 'sync again, as a successor sets every fd it takes');
  process.kill(many.child.pid!, 'SIGCONT');
  const calls = h.engine.stats().lanes[0].received;
  await waitUntil(() => h.engine.stats().lanes[0].received > calls + 10_000, 20_000, 'served on after the failed handoff');
  if (spreads === 1) await waitUntil(() => h.engine.stats().spreadWakeContainers === 1, 20_000, 'spread again after windows of its own');
  many.child.kill('SIGKILL');
  await many.exit;
});
