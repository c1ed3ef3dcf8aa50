// seccomp-dataplane facing bad input: each case gets a clear log line, everything the client sent
// is closed, and the data plane goes on serving other containers.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { startDataPlane, type RunningDataPlane } from '../support/dataplane';
import { socketArgs } from '../support/controlplane';
import { IDLE_CLIENTS, TEST_CONTROL_PLANE } from '../support/paths';
import { metricsUrl, run, start, stop, type Started } from '../support/processes';
import { fdCount, runUnderFilter, startUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';

/** After a bad client: same fd count as before, and a normal container is still served. */
async function assertStillServing(dp: RunningDataPlane, fdsBefore: number, name: string): Promise<void> {
  await waitUntil(() => fdCount(dp.proc.child.pid!) === fdsBefore, 10_000, `the data plane's fds to return to ${fdsBefore} (now ${fdCount(dp.proc.child.pid!)})`);
  const target = path.join(dp.dir, `ok-after-${name}`);
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'] }, ['/bin/mkdir', target]);
  assert.equal(result.code, 0, result.stderr);
  assert.ok(fs.existsSync(target));
  await waitUntil(() => fdCount(dp.proc.child.pid!) === fdsBefore, 10_000, 'fds back after the good container');
  assert.equal(dp.proc.child.exitCode, null, 'the data plane must still run');
}

async function baseline(t: TestContext, extra: string[] = []) {
  const dp = await startDataPlane(t, extra);
  await dp.status();
  return { dp, fds: fdCount(dp.proc.child.pid!) };
}

// Log lines are JSON: quotes in messages appear escaped (\").
const RAW_CASES: Array<{ name: string; message: string | Buffer; extra: string[]; log: RegExp; clientSeesError?: boolean }> = [
  { name: 'malformed JSON', message: '{"ociVersion": "1.0.2", "fds": ["seccompFd"', extra: [], log: /runtime message refused: the message is not JSON/ },
  { name: 'no state.id', message: JSON.stringify({ fds: ['seccompFd'], state: { status: 'creating' } }), extra: [], log: /state\.id\\" is missing/ },
  { name: 'no fd', message: JSON.stringify({ fds: ['seccompFd'], state: { id: 'x', status: 'creating' } }), extra: ['--send-fds', '0'], log: /no fd came with the message/ },
  { name: 'three fds', message: JSON.stringify({ fds: ['seccompFd'], state: { id: 'x', status: 'creating' } }), extra: ['--send-fds', '3'], log: /names 1 fd\(s\) .* but 3 were received/ },
  { name: 'a pipe instead of a seccomp fd', message: JSON.stringify({ fds: ['seccompFd'], state: { id: 'x', status: 'creating' } }), extra: ['--send-pipe', '--no-filter'], log: /is not a seccomp notify fd/ },
  { name: '2 MiB of JSON', message: JSON.stringify({ fds: ['seccompFd'], metadata: 'x'.repeat(2 * 1024 * 1024), state: { id: 'x', status: 'creating' } }), extra: [], log: /runtime connection refused: .*(1 MiB|1048576|too large)/i, clientSeesError: true },
];

for (const c of RAW_CASES) {
  test(`seccomp-dataplane ingest: ${c.name} is refused with a log line, its fds closed, and others still served`, async (t) => {
    const { dp, fds } = await baseline(t);
    const file = path.join(dp.dir, 'message.json');
    fs.writeFileSync(file, c.message);
    // The workload runs on: with the fd refused its filter has no listener, so it must not notify anything it needs.
    const result = await runUnderFilter(
      { socket: dp.listenerSocket, syscalls: ['mkdir'], extra: ['--raw-message', file, ...c.extra] },
      ['/bin/true'],
    );
    // Refusing a too-large message means hanging up before the runtime finished writing it.
    if (c.clientSeesError) assert.match(result.stderr, /Broken pipe|Connection reset/);
    else assert.equal(result.code, 0, result.stderr);
    await dp.proc.waitFor(c.log);
    await assertStillServing(dp, fds, c.name.replace(/\W+/g, '-'));
    assert.equal((await dp.status()).counters!.ingestRejected, 1n, 'the bad connection, and only it, counted as refused');
  });
}

test('seccomp-dataplane ingest: a message split over many sendmsg calls is read whole', async (t) => {
  const { dp, fds } = await baseline(t);
  const target = path.join(dp.dir, 'chunked');
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'chunky', extra: ['--chunk', '7'] }, ['/bin/mkdir', target]);
  assert.equal(result.code, 0, result.stderr);
  await dp.proc.waitFor(/container chunky registered/);
  await assertStillServing(dp, fds, 'chunked');
  assert.equal((await dp.status()).counters!.ingestRejected, 0n, 'nothing refused');
});

test('seccomp-dataplane ingest: a client that connects and sends nothing is dropped after the ingest timeout', async (t) => {
  const { dp, fds } = await baseline(t);
  assert.equal((await dp.status()).counters!.ingestRejected, 0n);
  const silent = net.connect(dp.listenerSocket);
  t.after(() => silent.destroy());
  const closed = new Promise<void>((resolve) => silent.on('close', () => resolve()));
  silent.on('error', () => undefined);
  await closed; // the data plane hangs up on it
  await waitUntil(async () => (await dp.status()).counters!.ingestRejected === 1n, 10_000, 'the silent connection to be counted as refused');
  await dp.proc.waitFor(/runtime connection refused: .*did not finish its message within/);
  await assertStillServing(dp, fds, 'silent');
  assert.equal((await dp.status()).counters!.ingestRejected, 1n, 'counted once');
});

test('seccomp-dataplane decisions: an unknown id and a second decision for the same id are ignored, counted and logged', async (t) => {
  const { dp, fds } = await baseline(t);
  const cp = start(t, process.execPath, [TEST_CONTROL_PLANE, ...socketArgs(dp), '--mode', 'bogus']);
  await cp.waitFor(/attached/);
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'] }, ['/bin/mkdir', path.join(dp.dir, 'bogus')]);
  // The real decision (EPERM) is applied once; the bogus and the repeated one are not.
  assert.match(result.stderr, /Operation not permitted/);
  await cp.waitFor(/rejected unknown-id[\s\S]*rejected unknown-id/);
  const counters = (await dp.status()).counters!;
  assert.equal(counters.decisionsUnknown, 2n);
  assert.equal(counters.answeredControlPlane, 1n);
  await dp.proc.waitFor(/decision ignored: no such notification is pending/);
  // Without the control plane (and its connection), the default serves the next container.
  await stop(cp.child);
  await waitUntil(async () => (await dp.status()).controlPlane === undefined, 5000, 'the control plane to detach');
  await assertStillServing(dp, fds, 'bogus');
});

test('seccomp-dataplane decisions: a decision for a container whose process died is dropped without harm', async (t) => {
  const { dp } = await baseline(t, ['--decision-timeout', '30s']);
  const cp = start(t, process.execPath, [TEST_CONTROL_PLANE, ...socketArgs(dp), '--mode', 'late:800']);
  await cp.waitFor(/attached/);
  const workload = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'c-dies' }, ['/bin/mkdir', path.join(dp.dir, 'never')]);
  await waitUntil(async () => (await dp.status()).pending === 1, 5000, 'the mkdir to be pending');
  workload.child.kill('SIGKILL');
  await workload.exited;
  await cp.waitFor(/decided 1/);
  await waitUntil(async () => {
    const c = (await dp.status()).counters!;
    return c.targetGone + c.decisionsLate + c.decisionsUnknown >= 1n;
  }, 5000, 'the decision to be dropped');
  assert.equal(fs.existsSync(path.join(dp.dir, 'never')), false);
  assert.equal(dp.proc.child.exitCode, null);
});

// ---- Bounded listener connections --------------------------------------------------------------

async function metricsOf(proc: Started): Promise<() => Promise<string>> {
  const url = `${await metricsUrl(proc)}/metrics`;
  return async () => (await fetch(url)).text();
}

function droppedByReason(body: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const m of body.matchAll(/^seccomp_agent_ingest_connections_dropped_total\{reason="([a-z_]+)"\} (\d+)$/gm)) counts[m[1]] = Number(m[2]);
  return counts;
}

const IDLE_CASES: Array<{
  name: string;
  /** RLIMIT_NOFILE of the data plane (prlimit), or null to keep its own. */
  limit: number | null;
  clients: Array<{ processes: number; connections: number; uid?: number }>;
  /** Reasons that must have dropped connections. */
  reasons: string[];
  /** Most fds the data plane may hold meanwhile. */
  maxFds: (baseline: number) => number;
}> = [
  {
    name: 'one process with 3,000 idle connections and an open file limit of 1,024 (per-pid cap)',
    limit: 1024, clients: [{ processes: 1, connections: 3000 }], reasons: ['per_pid'], maxFds: () => 1024,
  },
  {
    name: '90 processes of two uids with 20 idle connections each (total and per-uid caps)',
    // uid 65534 first: 60 x 16 kept > 768 for one uid; then uid 0: 30 x 16 more > 1,024 in all.
    limit: null, clients: [{ processes: 60, connections: 20, uid: 65534 }, { processes: 30, connections: 20 }],
    reasons: ['per_pid', 'per_uid', 'total'], maxFds: (baseline) => baseline + 1024 + 32,
  },
  {
    name: '8 processes with 50 idle connections each and an open file limit of 160 (fds kept in reserve)',
    limit: 160, clients: [{ processes: 8, connections: 50 }], reasons: ['fd_reserve'], maxFds: () => 160,
  },
];

for (const c of IDLE_CASES) {
  test(`seccomp-dataplane ingest: ${c.name}: a new container is admitted and answered within 1 s, drops counted in one log line`, async (t) => {
    const { dp, fds } = await baseline(t, ['--metrics-addr', '127.0.0.1:0', '--socket-mode', '0666', '--log-level', 'info']);
    const metrics = await metricsOf(dp.proc);
    const pid = dp.proc.child.pid!;
    if (c.limit !== null) {
      const limited = await run('prlimit', ['--pid', String(pid), `--nofile=${c.limit}:${c.limit}`]);
      assert.equal(limited.code, 0, limited.stderr);
    }
    // Other uids must reach the listener in the scratch dir (mkdtemp makes it 0700).
    if (c.clients.some((g) => g.uid !== undefined)) fs.chmodSync(dp.dir, 0o711);
    // One group after the other, so each cap is reached for sure (by the group that crosses it).
    for (const g of c.clients) {
      const client = start(t, IDLE_CLIENTS, [
        '--socket', dp.listenerSocket, '--processes', String(g.processes), '--connections', String(g.connections),
        ...(g.uid === undefined ? [] : ['--uid', String(g.uid)]),
      ]);
      await client.waitFor(/connected \d+/, 60_000);
    }
    const total = c.clients.reduce((n, g) => n + g.processes * g.connections, 0);

    const target = path.join(dp.dir, 'admitted');
    const began = Date.now();
    const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'admitted' }, ['/bin/mkdir', target]);
    const tookMs = Date.now() - began;
    t.diagnostic(`a new container behind ${total} idle connections: admitted and its mkdir answered in ${tookMs} ms`);
    assert.equal(result.code, 0, result.stderr);
    assert.ok(fs.existsSync(target));
    assert.ok(tookMs < 1000, `took ${tookMs} ms`);
    assert.ok(fdCount(pid) <= c.maxFds(fds), `the data plane holds ${fdCount(pid)} fds`);

    // Counted by reason, and told in one aggregated line per 5 s, never one per connection.
    let dropped: Record<string, number> = {};
    await waitUntil(async () => {
      dropped = droppedByReason(await metrics());
      return c.reasons.every((r) => (dropped[r] ?? 0) > 0);
    }, 10_000, `drops for ${c.reasons.join(', ')}`);
    t.diagnostic(`dropped: ${JSON.stringify(dropped)}`);
    await dp.proc.waitFor(/"code":"dropped".*"msg":"closed \d+ runtime connection/, 15_000);
    const lines = dp.proc.output().split('\n').filter((l) => l.includes('"code":"dropped"'));
    const sum = Object.values(dropped).reduce((a, b) => a + b, 0);
    assert.ok(lines.length <= 3 && sum > lines.length * 10, `${lines.length} log lines for ${sum} drops`);
    assert.equal(dp.proc.child.exitCode, null);
    assert.ok((await dp.status()).containers >= 0, 'status still answers');
  });
}
