// The Watch hub's ring, caps and filters, with stand-in calls that count writes and say "full"
// when told (the HTTP/2 side is covered by test/integration/watch-backpressure.test.ts).
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { status } from '@grpc/grpc-js';
import { Event } from '../proto/gen/seccompagent/v1/dataplane';
import { captureLogger } from '../test/support/log-capture';
import { WatchHub, type EventBody } from './watch-hub';

class FakeCall extends EventEmitter {
  readonly written: Event[] = [];
  ended: { code: number; details: string } | null = null;
  headersSent = 0;
  /** Writes accepted before the stream says full; Infinity: always room. */
  room = Infinity;
  readonly call: { stream: { session: object } };
  constructor(readonly request: { containerIds: string[]; syscalls: string[] }, session: object) {
    super();
    this.call = { stream: { session } };
    this.on('error', (e: { code: number; details: string }) => (this.ended = e));
  }
  sendMetadata(): void {
    this.headersSent++;
  }
  write(bytes: Buffer): boolean {
    this.written.push(Event.decode(bytes));
    return --this.room > 0;
  }
  end(): void {}
}

const body = (containerId: string): EventBody => ({ $case: 'containerRemoved', containerRemoved: { handle: 1n, containerId, reason: 'exited' } });
const tick = () => new Promise((resolve) => setImmediate(resolve));

function hub(limits: Partial<ConstructorParameters<typeof WatchHub>[1]> = {}) {
  const { logger } = captureLogger();
  return new WatchHub(logger, { maxWatchers: 64, maxPerConnection: 8, ...limits });
}

function watch(h: WatchHub, session: object = {}, filter: { containerIds?: string[]; syscalls?: string[] } = {}): FakeCall {
  const call = new FakeCall({ containerIds: filter.containerIds ?? [], syscalls: filter.syscalls ?? [] }, session);
  h.add(call as never);
  return call;
}

test('watch hub: each event is encoded once and reaches every matching watcher in order, from when it subscribed', async () => {
  const h = hub();
  const all = watch(h);
  const only = watch(h, {}, { containerIds: ['b'] });
  h.publish(body('a'), { containerId: 'a', syscall: '' });
  h.publish(body('b'), { containerId: 'b', syscall: '' });
  h.publish({ $case: 'ingestRejected', ingestRejected: { reason: 'x', peer: undefined } }, null);
  await tick();
  assert.deepEqual(all.written.map((e) => e.seq), [1n, 2n, 3n]);
  assert.deepEqual(only.written.map((e) => e.seq), [2n, 3n], 'the filter applies; untagged events reach everyone');
  const late = watch(h);
  h.publish(body('c'), { containerId: 'c', syscall: '' });
  await tick();
  assert.deepEqual(late.written.map((e) => e.seq), [4n], 'a new watcher starts at the head');
  assert.deepEqual([all.headersSent, only.headersSent, late.headersSent], [1, 1, 1], 'headers as each is registered: the client knows from when it sees everything');
});

test('watch hub: a stream that says full gets nothing more until it drains, then catches up from its cursor', async () => {
  const h = hub({ ringEvents: 64 });
  const slow = watch(h);
  slow.room = 2;
  for (let i = 0; i < 10; i++) h.publish(body('a'), { containerId: 'a', syscall: '' });
  await tick();
  assert.equal(slow.written.length, 2, 'two writes, the second said full');
  slow.room = Infinity;
  slow.emit('drain');
  await tick();
  assert.deepEqual(slow.written.map((e) => Number(e.seq)), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  assert.equal(slow.ended, null);
});

test('watch hub: a stream the ring\'s tail overtakes is ended with RESOURCE_EXHAUSTED and the count it missed; the others go on', async () => {
  const h = hub({ ringEvents: 8 });
  const stuck = watch(h);
  stuck.room = 1;
  const reader = watch(h);
  for (let i = 0; i < 20; i++) {
    h.publish(body('a'), { containerId: 'a', syscall: '' });
    await tick();
  }
  assert.equal(stuck.ended?.code, status.RESOURCE_EXHAUSTED);
  assert.match(stuck.ended!.details, /^watcher too slow: it fell \d+ event\(s\) behind what the data plane keeps \(8 events/);
  assert.equal(h.dropped, 1);
  assert.equal(h.size, 1);
  assert.equal(reader.written.length, 20);
  assert.equal(reader.ended, null);
});

test('watch hub: caps per connection and in total refuse with RESOURCE_EXHAUSTED; a watcher that goes frees its place', async () => {
  const h = hub({ maxWatchers: 3, maxPerConnection: 2 });
  const session = {};
  const [a, b, c] = [watch(h, session), watch(h, session), watch(h, session)];
  assert.equal(a.ended, null);
  assert.equal(b.ended, null);
  assert.equal(c.ended?.code, status.RESOURCE_EXHAUSTED);
  assert.match(c.ended!.details, /this connection has 2 Watch streams already.*--max-watchers-per-connection 2/);
  assert.equal(c.headersSent, 0, 'a refused stream is not told it is registered');
  const d = watch(h, {});
  const e = watch(h, {});
  assert.equal(d.ended, null);
  assert.match(e.ended!.details, /3 Watch streams are served already.*--max-watchers 3/);
  a.emit('cancelled');
  assert.equal(h.size, 2);
  assert.equal(watch(h, session).ended, null, 'room again on that connection');
  assert.equal(h.refused, 2);
});

test('watch hub: when the last watcher goes, the ring lets its events go and the hub turns inactive', async () => {
  const h = hub();
  const changes: boolean[] = [];
  h.onActiveChange = (active) => changes.push(active);
  const w = watch(h);
  w.room = 1;
  for (let i = 0; i < 5; i++) h.publish(body('a'), { containerId: 'a', syscall: '' });
  w.emit('close');
  assert.deepEqual(changes, [true, false]);
  assert.equal(h.active, false);
  const next = watch(h);
  h.publish(body('b'), { containerId: 'b', syscall: '' });
  await tick();
  assert.deepEqual(next.written.map((e) => e.seq), [6n], 'nothing of the old backlog');
});
