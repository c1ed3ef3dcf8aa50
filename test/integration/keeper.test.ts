// seccomp-keeper: the fd store in a pod. A real child (test/cmd/fd-store-child) stores fds through
// the addon, is killed for real, and proves after its restart that it holds the same open files.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import type { RunRecord, Step } from '../cmd/fd-store-child/main';
import { ROOT } from '../support/paths';
import { run, start, stop, type Started } from '../support/processes';
import { scratchDir } from '../support/scratch';
import { sleep, waitUntil } from '../support/wait';

const KEEPER = path.join(ROOT, 'build', 'Release', 'seccomp-keeper');
const CHILD = path.join(ROOT, 'dist', 'test', 'cmd', 'fd-store-child', 'main.js');

interface KeeperRun {
  keeper: Started;
  dir: string;
  /** The runs.jsonl records so far. */
  runs(): RunRecord[];
  /** Waits until run `n` (0-based) wrote its record, and returns it. */
  waitRun(n: number): Promise<RunRecord>;
  /** The keeper's JSON log lines so far. */
  logs(): Array<{ level: number; msg: string; [key: string]: unknown }>;
  waitLog(msg: string, timeoutMs?: number): Promise<void>;
  /** The keeper's fds that point into the scratch dir: the stored files and pipes. */
  keptFds(): string[];
}

function startKeeper(t: TestContext, plan: Step[][], extraArgs: string[] = []): KeeperRun {
  const seen = new Set<number>();
  let keeper: Started | undefined;
  // Registered before scratchDir's hook so it runs first: stop the keeper (which stops its child),
  // then kill any child it left behind, then the dir goes.
  t.after(async () => {
    const keeperPid = keeper?.child.pid;
    if (keeperPid !== undefined) {
      try {
        for (const pid of fs.readFileSync(`/proc/${keeperPid}/task/${keeperPid}/children`, 'utf8').split(/\s+/)) {
          if (pid) seen.add(Number(pid));
        }
      } catch {
        // already gone
      }
    }
    if (keeper) await stop(keeper.child);
    for (const pid of seen) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  });
  const dir = scratchDir(t, 'seccomp-keeper-test-');
  keeper = start(null, KEEPER, ['--restart-delay-ms', '50', ...extraArgs, '--', process.execPath, CHILD, dir], {
    env: { ...process.env, FD_STORE_CHILD_PLAN: JSON.stringify(plan) },
  });
  const started = keeper;
  const runs = (): RunRecord[] => {
    let text = '';
    try {
      text = fs.readFileSync(path.join(dir, 'runs.jsonl'), 'utf8');
    } catch {
      return [];
    }
    const records = text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as RunRecord);
    for (const r of records) seen.add(r.pid);
    return records;
  };
  const logs = () =>
    started
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{"level"'))
      .map((line) => JSON.parse(line));
  return {
    keeper: started,
    dir,
    runs,
    logs,
    async waitRun(n) {
      await waitUntil(() => runs().length > n || started.child.exitCode !== null, 15_000, () => `run ${n} of the child; output:\n${started.output()}`);
      const record = runs()[n];
      assert.ok(record, `the keeper exited before run ${n}; output:\n${started.output()}`);
      return record;
    },
    waitLog: async (msg, timeoutMs = 10_000) => {
      await waitUntil(() => logs().some((l) => l.msg === msg), timeoutMs, () => `keeper log "${msg}"; output:\n${started.output()}`);
    },
    keptFds() {
      const pid = started.child.pid!;
      return fs
        .readdirSync(`/proc/${pid}/fd`)
        .map((fd) => {
          try {
            return fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
          } catch {
            return '';
          }
        })
        .filter((link) => link.startsWith(dir));
    },
  };
}

function killed(pid: number): Promise<void> {
  process.kill(pid, 'SIGKILL');
  return waitUntil(() => !fs.existsSync(`/proc/${pid}`) || /State:\s+Z/.test(readStatus(pid)), 5000, `pid ${pid} to die`);
}

function readStatus(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return '';
  }
}

test('seccomp-keeper: a SIGKILLed child is started again with its stored file and pipe, same names, same order, twice', async (t) => {
  const k = startKeeper(t, [[{ storeFile: 'state' }, { storePipe: 'pipe' }, 'ready'], [], []]);
  const first = await k.waitRun(0);
  assert.deepEqual(first.received, [], 'the first run gets no fds');
  assert.match(first.notifySocket ?? '', /^\/run\/seccomp-keeper\/seccomp-keeper-\d+-[0-9a-f]{16}\.sock$/);
  assert.deepEqual(first.results, [true, true, true]);
  await k.waitLog('child is ready');
  assert.equal(k.keptFds().length, 3, 'the keeper holds the file and both pipe ends');

  await killed(first.pid);
  const second = await k.waitRun(1);
  assert.notEqual(second.pid, first.pid);
  assert.deepEqual(
    second.received.map(({ fd, name, cloexec }) => ({ fd, name, cloexec })),
    [
      { fd: 3, name: 'state', cloexec: true },
      { fd: 4, name: 'pipe', cloexec: true },
      { fd: 5, name: 'pipe', cloexec: true },
    ],
  );
  // The unlinked file is reachable only through the passed fd; the pipe still holds what the
  // dead run wrote into it: these are the same open files, not new ones.
  assert.equal(second.received[0].content, 'marker-state');
  assert.equal(second.received[1].content, 'pipe-pipe');
  assert.equal(second.received[2].error, 'EBADF', 'fd 5 is the write end');
  assert.deepEqual(second.envAfterTake, [null, null, null], 'takeListenFds unsets LISTEN_*');

  // The store keeps them until removed (systemd semantics): a second crash passes them again.
  await killed(second.pid);
  const third = await k.waitRun(2);
  assert.deepEqual(third.received.map((r) => r.name), ['state', 'pipe', 'pipe']);
  assert.equal(third.received[0].content, 'marker-state');
  assert.equal(third.received[1].error, 'EAGAIN', 'the second run read the pipe empty');
  assert.equal(k.keptFds().length, 3);
  const restarts = k.logs().filter((l) => l.msg === 'restarting the child with the kept fds');
  assert.equal(restarts.length, 2);
  assert.deepEqual(restarts.map((l) => l.fds), [3, 3]);
  assert.deepEqual(restarts.map((l) => l.delayMs), [50, 100], 'quick crashes double the delay');
  assert.equal(k.keeper.child.exitCode, null);
});

test('seccomp-keeper: FDSTOREREMOVE=1 closes the named fds and they are not passed on', async (t) => {
  const k = startKeeper(t, [[{ storeFile: 'a' }, { storeFile: 'b' }, { storeFile: 'a' }, { remove: 'a' }], []]);
  const first = await k.waitRun(0);
  assert.deepEqual(first.results, [true, true, true, true]);
  await k.waitLog('removed fds from the store');
  assert.equal(k.logs().find((l) => l.msg === 'removed fds from the store')?.closedFds, 2);
  assert.equal(k.keptFds().length, 1);
  await killed(first.pid);
  const second = await k.waitRun(1);
  assert.deepEqual(second.received.map(({ fd, name, content }) => ({ fd, name, content })), [{ fd: 3, name: 'b', content: 'marker-b' }]);
});

test('seccomp-keeper: STOPPING=1 then exit 0 is a handover: no restart, the store is closed, the keeper idles until SIGTERM', async (t) => {
  const k = startKeeper(t, [[{ storeFile: 'a' }, 'ready', 'stopping', { exit: 0 }]]);
  await k.waitRun(0);
  await k.waitLog('child handed over; not restarting it, idle until SIGTERM');
  assert.equal(k.logs().find((l) => l.msg.startsWith('child handed over'))?.closedFds, 1);
  await sleep(500); // ten restart delays
  assert.equal(k.runs().length, 1, 'not restarted');
  assert.equal(k.keeper.child.exitCode, null, 'the keeper is still running');
  assert.deepEqual(k.keptFds(), []);
  k.keeper.child.kill('SIGTERM');
  assert.equal(await k.keeper.exited, 0);
});

test('seccomp-keeper: STOPPING=1 then a non-zero exit is a crash: restarted with the store', async (t) => {
  const k = startKeeper(t, [[{ storeFile: 'a' }, 'stopping', { exit: 3 }], []]);
  await k.waitRun(0);
  const second = await k.waitRun(1);
  assert.deepEqual(second.received.map((r) => [r.name, r.content]), [['a', 'marker-a']]);
});

test('seccomp-keeper: SIGTERM is forwarded to the child and the keeper exits with its status', async (t) => {
  const k = startKeeper(t, [[{ storeFile: 'a' }, 'ready']]);
  const first = await k.waitRun(0);
  await k.waitLog('child is ready');
  k.keeper.child.kill('SIGTERM');
  assert.equal(await k.keeper.exited, 7, 'the child exits 7 on SIGTERM');
  assert.ok(k.logs().some((l) => l.msg === 'forwarding the stop signal to the child' && l.child === first.pid));
  assert.equal(k.runs().length, 1, 'not restarted');
  assert.ok(!fs.existsSync(`/proc/${first.pid}`) || /State:\s+Z/.test(readStatus(first.pid)));
});

test('seccomp-keeper: a notification from a process that is not the child is refused and its fds are not passed on', async (t) => {
  const k = startKeeper(t, [[{ storeFile: 'own' }, 'ready'], []]);
  const first = await k.waitRun(0);
  await k.waitLog('child is ready');
  const foreign = await run(process.execPath, [CHILD, 'foreign', k.dir], {
    env: { ...process.env, NOTIFY_SOCKET: first.notifySocket ?? '' },
  });
  assert.equal(foreign.code, 0, foreign.stderr);
  const sender = Number(/sent=true pid=(\d+)/.exec(foreign.stdout)?.[1]);
  assert.ok(sender > 0, foreign.stdout);
  await k.waitLog('refused a notification from a process that is not the child');
  const refused = k.logs().find((l) => l.msg === 'refused a notification from a process that is not the child');
  assert.equal(refused?.sender, sender);
  assert.equal(refused?.closedFds, 1);
  assert.equal(k.keptFds().length, 1, 'only the child\'s own fd is kept');
  await killed(first.pid);
  const second = await k.waitRun(1);
  assert.deepEqual(second.received.map((r) => r.name), ['own']);
});

test('seccomp-keeper: malformed and oversized notifications are refused, their fds closed, and the keeper goes on', async (t) => {
  const k = startKeeper(t, [
    [
      { raw: `FDSTORE=1\nFDNAME=big\nSTATUS=${'x'.repeat(64 * 1024)}`, withFd: true },
      { raw: 'FDSTORE=1\nFDNAME=bad:name', withFd: true },
      { raw: 'FDSTORE=1\nFDNAME=nul\u0000x', withFd: true },
      { raw: 'no equals sign\nUNKNOWN=1\n\n', withFd: true },
      { raw: 'FDSTOREREMOVE=1', withFd: false },
      { raw: 'FDSTORE=1', withFd: false },
      { raw: 'FDSTORE=1\nX_UNKNOWN_KEY=1', withFd: true },
      { storeFile: 'good' },
      'ready',
    ],
    [],
  ]);
  const first = await k.waitRun(0);
  assert.ok(first.results.every((r) => r === true), JSON.stringify(first.results));
  await k.waitLog('child is ready');
  const warnings = k.logs().filter((l) => l.level === 40).map((l) => l.msg);
  for (const expected of [
    'refused a notification longer than 4096 bytes',
    'refused a notification with an invalid FDNAME',
    'refused a notification containing a NUL byte',
    'closed fds sent without FDSTORE=1',
    'FDSTOREREMOVE=1 without FDNAME ignored',
    'FDSTORE=1 without fds ignored',
  ]) {
    assert.ok(warnings.includes(expected), `missing warning "${expected}" in ${JSON.stringify(warnings)}`);
  }
  assert.equal(k.keptFds().length, 2, 'the unnamed FDSTORE=1 fd and "good"; every refused fd was closed');
  await killed(first.pid);
  const second = await k.waitRun(1);
  assert.deepEqual(second.received.map((r) => [r.name, r.content]), [['stored', 'raw'], ['good', 'marker-good']]);
  assert.equal(k.keeper.child.exitCode, null);
});

test('seccomp-keeper --max-fds: a notification that would overfill the store is refused whole', async (t) => {
  const k = startKeeper(t, [[{ storeFile: 'a' }, { storePipe: 'p' }, { storeFile: 'b' }], []], ['--max-fds', '2']);
  const first = await k.waitRun(0);
  await k.waitLog('the store is full (--max-fds); closed the fds of this notification');
  assert.equal(k.keptFds().length, 2);
  await killed(first.pid);
  const second = await k.waitRun(1);
  assert.deepEqual(second.received.map((r) => r.name), ['a', 'b']);
});

test('seccomp-keeper: bad usage exits 2 with a message', async () => {
  const noCommand = await run(KEEPER, ['--restart-delay-ms', '5']);
  assert.equal(noCommand.code, 2);
  assert.match(noCommand.stderr, /no command given/);
  const badValue = await run(KEEPER, ['--max-fds', '0', '--', 'true']);
  assert.equal(badValue.code, 2);
  assert.match(badValue.stderr, /--max-fds needs an integer/);
});

test('seccomp-keeper: a flood of 20,000 datagrams from a process that is not the child makes a bounded number of log lines, with a summary (issue 17)', async (t) => {
  const k = startKeeper(t, [['ready'], []]);
  const first = await k.waitRun(0);
  await k.waitLog('child is ready');
  const before = k.keeper.output().length;
  const flood = await run('python3', ['-c', [
    'import socket, sys',
    's = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)',
    'for i in range(20000): s.sendto(b"FDSTORE=1\\nFDNAME=x", sys.argv[1])',
    'print("sent")',
  ].join('\n'), first.notifySocket ?? ''], { timeout: 60_000 });
  assert.equal(flood.code, 0, flood.stderr);
  await k.waitLog('refused 19990 more notification(s) in the last 5 s without logging each (at most 10 lines per window); their fds were closed', 15_000).catch(() => undefined);
  const lines = k.keeper.output().slice(before).split('\n').filter((l) => l.startsWith('{"level"'));
  const refused = lines.filter((l) => l.includes('"msg":"refused a notification from a process that is not the child"')).length;
  const summaries = lines.map((l) => JSON.parse(l) as { msg: string; suppressed?: number }).filter((l) => /^refused \d+ more notification/.test(l.msg));
  t.diagnostic(`${lines.length} log lines (${k.keeper.output().length - before} bytes) for 20,000 datagrams: ${refused} one by one, summaries ${summaries.map((s) => s.suppressed).join(', ')}`);
  assert.ok(lines.length <= 50, `${lines.length} lines`);
  assert.ok(refused >= 1 && refused <= 40);
  assert.equal(refused + summaries.reduce((n, s) => n + (s.suppressed ?? 0), 0), 20_000, 'every refusal is accounted for');
  assert.equal(k.keeper.child.exitCode, null, 'the keeper goes on');
});
