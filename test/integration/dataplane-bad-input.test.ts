// seccomp-dataplane facing bad input: each case gets a clear log line, everything the client sent
// is closed, and the data plane goes on serving other containers.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { startDataPlane, type RunningDataPlane } from '../support/dataplane';
import { TEST_CONTROL_PLANE } from '../support/paths';
import { start, stop } from '../support/processes';
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
  const cp = start(t, process.execPath, [TEST_CONTROL_PLANE, '--grpc-socket', dp.grpcSocket, '--mode', 'bogus']);
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
  const cp = start(t, process.execPath, [TEST_CONTROL_PLANE, '--grpc-socket', dp.grpcSocket, '--mode', 'late:800']);
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
