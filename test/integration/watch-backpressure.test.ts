// A slow or vanished watcher never stalls the data plane (issue 8, item 3): Watch streams are
// capped per connection and in total, read one shared ring of encoded events, and one client's
// 500 streams that never read, then its close, leave ingest and the notification path alone.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { Event } from '../../proto/gen/seccompagent/v1/dataplane';
import { DataPlaneClient } from '../../proto/gen/seccompagent/v1/dataplane';
import { startDataPlane, type RunningDataPlane } from '../support/dataplane';
import { BENCH_WORKLOAD, ROOT } from '../support/paths';
import { run, start, type Started } from '../support/processes';
import { waitUntil } from '../support/wait';
import { runUnderFilter, startUnderFilter } from '../support/workload';

const WATCH_FLOOD = path.join(ROOT, 'dist', 'test', 'cmd', 'watch-flood', 'main.js');
const CTL = path.join(ROOT, 'bin', 'seccompctl');
const STREAMS = 500;

/** A client on a connection of its own (grpc-js shares one per target unless told otherwise). */
function ownConnection(t: TestContext, socket: string): DataPlaneClient {
  const client = new DataPlaneClient(`unix://${socket}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
  t.after(() => client.close());
  return client;
}

/** Opens `n` Watch streams on `client`; resolves with how many were refused, and their messages. */
async function openWatches(t: TestContext, client: DataPlaneClient, n: number): Promise<{ calls: grpc.ClientReadableStream<Event>[]; refused: string[] }> {
  const calls: grpc.ClientReadableStream<Event>[] = [];
  const refused: string[] = [];
  for (let i = 0; i < n; i++) {
    const call = client.watch({ containerIds: [], syscalls: [] });
    call.on('error', (err: grpc.ServiceError) => {
      if (err.code === grpc.status.RESOURCE_EXHAUSTED) refused.push(err.details);
    });
    call.on('data', () => undefined);
    calls.push(call);
    t.after(() => call.cancel());
  }
  return { calls, refused };
}

/** A new container (a real runtime connection: seccomp-run's notify fd and state on the listener socket) whose notified mkdir must be answered; resolves with the wall time it took. */
async function newContainerAnswered(dp: RunningDataPlane, name: string): Promise<number> {
  const started = Date.now();
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'], id: name }, ['/bin/mkdir', path.join(dp.dir, name)]);
  const ms = Date.now() - started;
  assert.equal(result.code, 0, `${name}: ${result.stderr}`);
  return ms;
}

/** A container making notified syscalls (getppid, answered by the default action) for `seconds`. */
function busyContainer(t: TestContext, dp: RunningDataPlane, seconds: number): Started {
  return startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['getppid'], id: `busy-${Date.now()}` }, [BENCH_WORKLOAD, '--threads', '1', '--seconds', String(seconds)]);
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

test('seccomp-dataplane Watch caps: beyond --max-watchers-per-connection and --max-watchers a Watch gets RESOURCE_EXHAUSTED saying which; others go on', async (t) => {
  const dp = await startDataPlane(t, ['--max-watchers', '12', '--max-watchers-per-connection', '8']);
  const a = await openWatches(t, ownConnection(t, dp.grpcSocket), 10);
  await waitUntil(() => a.refused.length === 2, 10_000, 'two refusals on the first connection');
  assert.match(a.refused[0], /^Watch refused: this connection has 8 Watch streams already, the most one connection may have \(--max-watchers-per-connection 8\)$/);
  const b = await openWatches(t, ownConnection(t, dp.grpcSocket), 10);
  await waitUntil(() => b.refused.length === 6, 10_000, 'six refusals on the second connection');
  assert.match(b.refused[0], /^Watch refused: 12 Watch streams are served already, the most this data plane serves at once \(--max-watchers 12\)/);
  assert.equal((await dp.status()).watchers, 12);
  // An accepted stream still gets events, and a stream that ends makes room at once.
  for (const call of a.calls.slice(0, 3)) call.cancel();
  await waitUntil(async () => (await dp.status()).watchers === 9, 10_000, 'the cancelled streams to be forgotten');
  const c = await openWatches(t, ownConnection(t, dp.grpcSocket), 3);
  await waitUntil(async () => (await dp.status()).watchers === 12, 10_000, 'three new streams served');
  assert.deepEqual(c.refused, []);
});

test('seccomp-dataplane Watch: 500 never-reading streams on one connection under notified syscalls, then the client goes: a new container is answered within 1 s, seccompctl status answers', async (t) => {
  const dp = await startDataPlane(t, ['--log-level', 'info', '--max-watchers', '1000', '--max-watchers-per-connection', '1000']);
  const timings: number[] = [];
  for (let round = 0; round < 3; round++) {
    const flood = start(t, process.execPath, [WATCH_FLOOD, '--grpc-socket', dp.grpcSocket, '--streams', String(STREAMS)]);
    await flood.waitFor(/opened 500/);
    await waitUntil(async () => (await dp.status()).watchers >= STREAMS, 20_000, `${STREAMS} watchers`);
    // Heavy traffic for every stream while none of them reads: notifications and their answers.
    const busy = busyContainer(t, dp, 3);
    await waitUntil(async () => (await dp.status()).counters!.notifications > 20_000n, 20_000, 'the busy container\'s notifications');
    flood.child.kill('SIGKILL');
    await flood.exited;
    timings.push(await newContainerAnswered(dp, `after-close-${round}`));
    const ctl = await run(CTL, ['status', '--grpc-socket', dp.grpcSocket, '--timeout', '5']);
    assert.equal(ctl.code, 0, ctl.stderr);
    assert.match(ctl.stdout, /containers\s+\d+/);
    // The vanished client's streams are forgotten at once.
    await waitUntil(async () => (await dp.status()).watchers === 0, 5000, 'the dropped watchers to be forgotten');
    await busy.exited;
  }
  t.diagnostic(`new container answered after the client with ${STREAMS} streams closed: ${timings.join(', ')} ms (median ${median(timings)} ms)`);
  for (const ms of timings) assert.ok(ms < 1000, `answered within 1 s (took ${ms} ms)`);
  const log = dp.proc.output();
  assert.doesNotMatch(log, /neither adopted nor rejected/);
  assert.doesNotMatch(log, /is not pending/);
  assert.equal(dp.proc.child.exitCode, null);
});

test('seccomp-dataplane Watch: a runtime connection arriving while 500 streams are flooded is adopted and answered at once', async (t) => {
  const dp = await startDataPlane(t, ['--log-level', 'info', '--max-watchers', '1000', '--max-watchers-per-connection', '1000']);
  const flood = start(t, process.execPath, [WATCH_FLOOD, '--grpc-socket', dp.grpcSocket, '--streams', String(STREAMS)]);
  await waitUntil(async () => (await dp.status()).watchers >= STREAMS, 20_000, `${STREAMS} watchers`);
  const busy = busyContainer(t, dp, 6);
  await waitUntil(async () => (await dp.status()).counters!.notifications > 20_000n, 20_000, 'the busy container\'s notifications');
  const before = (await dp.status()).counters!.containersAdded;
  const timings: number[] = [];
  for (let i = 0; i < 3; i++) timings.push(await newContainerAnswered(dp, `late-${i}`));
  t.diagnostic(`late containers answered during the flood in ${timings.join(', ')} ms`);
  for (const ms of timings) assert.ok(ms < 1000, `answered within 1 s (took ${ms} ms)`);
  const status = await dp.status();
  assert.equal(status.counters!.containersAdded, before + 3n, 'each late container was adopted');
  assert.equal(status.counters!.ingestRejected, 0n);
  assert.equal(flood.child.exitCode, null, 'the flooding client is still there');
  flood.child.kill('SIGKILL');
  await busy.exited;
  assert.doesNotMatch(dp.proc.output(), /neither adopted nor rejected|is not pending/);
});
