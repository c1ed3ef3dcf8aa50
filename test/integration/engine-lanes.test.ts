// The engine's lanes (native/addon/engine_lanes.cpp): containers spread over threads that each
// receive and answer their own; what only the engine thread decides (a control plane's decision, a
// hold for one, a removal) handed to it in order. Real filters, real notify fds, real syscalls.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';

import type { NativeEvent, NotificationEvent } from '../../dataplane/native';
import { AnsweredBy } from '../../proto/gen/seccompagent/v1/dataplane';
import { EngineHarness as Harness, fdCountBackTo, native } from '../support/engine-harness';
import { waitUntil } from '../support/wait';

const MKDIR_SYSCALLS = ['--syscalls', 'mkdir,mkdirat'];

function isMkdirOf(dir: string) {
  return (e: NativeEvent): e is NotificationEvent => e.type === 'notification' && e.strings.some((s) => s.value === dir);
}

/** A container that makes `dir` and then sleeps until it is killed (it stays on its lane); resolves once `dir` exists. */
async function stayingContainer(h: Harness, dir: string) {
  const run = h.run(MKDIR_SYSCALLS, ['/bin/sh', '-c', `mkdir "${dir}" && exec sleep 60`]);
  await waitUntil(() => fs.existsSync(dir), 5000, `${dir} made by its container`);
  return run;
}

test('engine lanes: two containers go to two lanes, each answered there by the default; a lane\'s removal reaches JS after its counts', async (t) => {
  const h = new Harness(t, { lanes: 2 });
  h.engine.setDetailedEvents(false);
  const a = await stayingContainer(h, path.join(h.dir, 'a'));
  const b = await stayingContainer(h, path.join(h.dir, 'b'));
  const lanes = h.engine.stats().lanes;
  assert.deepEqual(lanes.map((l) => l.containers), [1, 1], 'one container per lane');
  assert.ok(lanes.every((l) => l.received >= 1), `each lane received its container's mkdir: ${JSON.stringify(lanes)}`);
  // Unwatched, each answer is a tally count; lane 1's counts must precede its container's 'removed'.
  b.child.kill('SIGKILL');
  a.child.kill('SIGKILL');
  await Promise.all([a.exit, b.exit]);
  await h.until(() => (h.events.filter((e) => e.type === 'removed').length === 2 ? true : undefined), 'both removed');
  for (const removed of h.events.filter((e) => e.type === 'removed')) {
    const at = h.events.indexOf(removed);
    const counted = h.events.slice(0, at).filter((e) => e.type === 'tally' && e.handle === removed.handle);
    assert.ok(counted.length > 0, `container ${removed.handle}'s tally before its 'removed'`);
    for (const tally of counted) assert.equal(tally.type === 'tally' && tally.by, AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE);
  }
  assert.deepEqual(h.engine.stats().lanes.map((l) => l.containers), [0, 0]);
  assert.equal(h.engine.stats().containers, 0);
});

test('engine lanes: a container of lane 1 is decided by the control plane (moved to the engine thread), and held for one while one is awaited', async (t) => {
  // A held notification waits at most the decision timeout: long enough here that a slow machine
  // still finds it held, however long its workload takes to start.
  const h = new Harness(t, { lanes: 2, decisionTimeoutMs: 30_000 });
  // Lane 1 serves with a file table of its own: of two lanes as loaded, it takes a new container.
  h.attach(1);
  const decided = path.join(h.dir, 'decided');
  const run = h.mkdir(decided);
  const n = await h.waitFor(isMkdirOf(decided), 'the forwarded mkdir of lane 1\'s container');
  assert.equal(n.forwarded, true);
  assert.equal(n.session, 1);
  assert.equal(h.engine.stats().lanes[1].containers, 1, 'its container is on lane 1');
  assert.equal(h.engine.respond(n.handle, n.id, { kind: 'error', errno: 13 }, 1).status, 'ok');
  const result = await run.exit;
  assert.match(result.stderr, /Permission denied/);
  assert.equal(fs.existsSync(decided), false);

  // No control plane, one awaited: lane 1's notification waits (held by the engine thread) and is
  // forwarded to the session that attaches.
  h.engine.closeSession(1);
  h.engine.holdForControlPlane(30_000);
  const held = path.join(h.dir, 'held');
  const heldRun = h.mkdir(held);
  await waitUntil(() => h.engine.stats().pending === 1, 10_000, 'the held notification');
  assert.equal(h.notifications().some(isMkdirOf(held)), false, 'a held notification is not reported before a control plane attaches');
  h.attach(2);
  const forwarded = await h.waitFor(isMkdirOf(held), 'the held mkdir, forwarded to session 2');
  assert.equal(forwarded.session, 2);
  assert.equal(h.engine.respond(forwarded.handle, forwarded.id, { kind: 'continue' }, 2).status, 'ok');
  assert.equal((await heldRun.exit).code, 0);
  assert.ok(fs.statSync(held).isDirectory());
});

test('engine lanes: a visitor of the engine thread goes home after 32 answers in a row without asking', async (t) => {
  const h = new Harness(t, { lanes: 2 });
  h.attach(1);
  const dirs = path.join(h.dir, 'many');
  fs.mkdirSync(dirs);
  // One container (one filter) whose mkdirs come one after another: each asked one blocks it.
  const run = h.run(MKDIR_SYSCALLS, ['/bin/sh', '-c', `cd "${dirs}" && for i in $(seq 1 100); do mkdir d$i; done`]);
  const asked = await h.waitFor((e): e is NotificationEvent => e.type === 'notification' && e.forwarded, 'its first mkdir, asked');
  assert.equal(h.engine.stats().lanes[1].containers, 1, 'its home is lane 1');
  assert.equal(h.engine.stats().lanes[1].received, 1, 'received on its home lane, then moved to lane 0 with it');
  assert.equal(h.engine.respond(asked.handle, asked.id, { kind: 'continue' }, 1).status, 'ok');
  // No control plane from here: lane 0 answers the visitor by default, 32 times, then it goes home.
  h.engine.closeSession(1);
  const result = await run.exit;
  assert.equal(result.code, 0, result.stderr);
  assert.equal(fs.readdirSync(dirs).length, 100);
  const lanes = h.engine.stats().lanes;
  assert.ok(lanes[1].received >= 100 - 2 - 32, `home again, lane 1 received the rest: ${JSON.stringify(lanes)}`);
});

test('engine lanes: stop answers what a lane handed the engine thread and what is pending; every fd closed', async (t) => {
  const baseline = native.openFdCount();
  const h = new Harness(t, { lanes: 3 });
  h.attach(1);
  const runs = [0, 1, 2].map((i) => h.mkdir(path.join(h.dir, `m${i}`)));
  await h.until(() => (h.notifications().length === 3 ? true : undefined), 'three forwarded mkdirs');
  // The first two go to lanes 1 and 2 (tables of their own first); the third to whichever of the
  // three serves the fewest then (lane 0 counts the visitors it decides for).
  const placed = h.engine.stats().lanes.map((l) => l.containers);
  assert.equal(placed.reduce((sum, c) => sum + c, 0), 3, `three containers: ${JSON.stringify(placed)}`);
  assert.ok(placed[1] >= 1 && placed[2] >= 1, `lanes 1 and 2 took the first two: ${JSON.stringify(placed)}`);
  h.engine.stop();
  for (const run of runs) {
    const result = await run.exit;
    // The default (continue) answered each when the engine stopped: never ENOSYS.
    assert.equal(result.code, 0, result.stderr);
  }
  assert.equal(await fdCountBackTo(baseline), baseline, 'every lane\'s epoll set, eventfd and timerfd closed');
});
