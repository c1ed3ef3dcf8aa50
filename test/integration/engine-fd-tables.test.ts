// Lanes with file tables of their own (native/addon/engine_fd_tables.cpp): lane 1's thread holds a
// copy of the notify fd of each container it serves, at the fd's own number, and nothing else of
// the process's table but what lives as long as the engine. Read from the kernel's view of that
// thread's table (/proc/self/task/TID/fd) as a container comes, visits the engine thread, goes
// home and goes. Real filters, real notify fds, real syscalls.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import type { NativeEvent, NotificationEvent } from '../../dataplane/native';
import { EngineHarness as Harness } from '../support/engine-harness';
import { engineThreadName, threadNamed } from '../support/processes';
import { waitUntil } from '../support/wait';

const MKDIR_SYSCALLS = ['--syscalls', 'mkdir,mkdirat'];
const NOTIFY_LINK = 'anon_inode:seccomp notify';

/** fd number -> what it is, in the table of /proc/self/fd or of /proc/self/task/TID/fd. */
function table(dir: string): Map<number, string> {
  const fds = new Map<number, string>();
  for (const entry of fs.readdirSync(dir)) {
    try {
      fds.set(Number(entry), fs.readlinkSync(path.join(dir, entry)));
    } catch {
      // closed between the listing and the link (the listing's own fd, or a pipe of a child)
    }
  }
  return fds;
}

const notifyFds = (fds: Map<number, string>) => [...fds].filter(([, link]) => link === NOTIFY_LINK).map(([fd]) => fd).sort();

function isMkdirOf(dir: string) {
  return (e: NativeEvent): e is NotificationEvent => e.type === 'notification' && e.strings.some((s) => s.value === dir);
}

test('engine fd tables: lane 1 holds its container\'s notify fd at the same number while it serves it, and nothing but the engine\'s long-lived fds besides', async (t) => {
  const h = new Harness(t, { lanes: 2 });
  // Lane 1's thread takes its table as it starts, after start() returned.
  await waitUntil(() => h.engine.stats().lanes[1].ownFdTable, 5000, 'lane 1\'s thread to take a table of its own');
  assert.deepEqual(h.engine.stats().lanes.map((l) => l.ownFdTable), [false, true], 'lane 1 serves with a table of its own, lane 0 with the process\'s');
  const lane1 = threadNamed(process.pid, engineThreadName(1));
  assert.ok(lane1, 'lane 1\'s thread');
  const laneTable = `/proc/self/task/${lane1}/fd`;
  const lane = () => table(laneTable);
  const shared = () => table('/proc/self/fd');

  // Every fd lane 1 holds is the same file at the same number in the process's table: a number
  // it shares with another thread means the same there.
  const sameFiles = () => {
    const mine = lane();
    const theirs = shared();
    for (const [fd, link] of mine) assert.equal(theirs.get(fd), link, `lane 1's fd ${fd} (${link}) is the process's fd ${fd}`);
    return mine;
  };
  const before = sameFiles();
  assert.deepEqual(notifyFds(before), [], 'no notify fd before any container');
  assert.ok(before.size <= 16, `lane 1 keeps only the engine's long-lived fds: ${JSON.stringify([...before])}`);

  // A container held between its calls by a fifo it reads (read is not notified).
  const fifo = path.join(h.dir, 'go');
  execFileSync('mkfifo', [fifo]);
  const dirs = path.join(h.dir, 'many');
  const script = `mkdir "${h.dir}/a" && read x < "${fifo}" && mkdir "${h.dir}/b" && read x < "${fifo}" && ` +
    `mkdir "${dirs}" && cd "${dirs}" && for i in $(seq 1 40); do mkdir d$i; done && read x < "${fifo}"`;
  const run = h.run(MKDIR_SYSCALLS, ['/bin/sh', '-c', script]);
  const release = () => fs.writeFileSync(fifo, 'go\n');
  await waitUntil(() => fs.existsSync(path.join(h.dir, 'a')), 10_000, 'its first mkdir, answered on lane 1');
  assert.equal(h.engine.stats().lanes[1].containers, 1, 'its home is lane 1');
  const [fd] = notifyFds(shared());
  assert.deepEqual(notifyFds(sameFiles()), [fd], 'lane 1 holds its notify fd, at its number');

  // Asked of a control plane: it moves to lane 0, and lane 1 lets go of its copy.
  h.attach(1);
  release();
  const asked = await h.waitFor(isMkdirOf(path.join(h.dir, 'b')), 'its second mkdir, asked on lane 0');
  assert.deepEqual(notifyFds(sameFiles()), [], 'lane 1 holds no copy of a container lane 0 serves');
  assert.equal(h.engine.respond(asked.handle, asked.id, { kind: 'continue' }, 1).status, 'ok');
  h.engine.closeSession(1);

  // Answered natively 32 times in a row on lane 0, it goes home: lane 1 copies its fd again.
  release();
  await waitUntil(() => fs.existsSync(path.join(dirs, 'd40')), 10_000, 'its forty mkdirs');
  await waitUntil(() => notifyFds(lane()).length === 1, 5000, 'lane 1 to hold its copy again');
  assert.deepEqual(notifyFds(sameFiles()), [fd], 'home again, at the same number');

  // Gone: neither table holds it.
  release();
  assert.equal((await run.exit).code, 0);
  await h.until(() => (h.events.some((e) => e.type === 'removed') ? true : undefined), 'its removal');
  await waitUntil(() => notifyFds(shared()).length === 0, 5000, 'its fd closed');
  assert.deepEqual(notifyFds(sameFiles()), [], 'no copy left behind on lane 1');
});

test('engine fd tables: without them (laneFdTables false) lanes share the process\'s table and a new container goes to lane 0 first', async (t) => {
  const h = new Harness(t, { lanes: 2, laneFdTables: false });
  assert.deepEqual(h.engine.stats().lanes.map((l) => l.ownFdTable), [false, false]);
  const run = h.mkdir(path.join(h.dir, 'a'));
  assert.equal((await run.exit).code, 0);
  assert.deepEqual(h.engine.stats().lanes.map((l) => l.received), [1, 0]);
});
