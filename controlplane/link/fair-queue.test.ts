import assert from 'node:assert/strict';
import { test } from 'node:test';
import { performance } from 'node:perf_hooks';
import { FairQueue } from './fair-queue';

const busy = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

test('fair queue: a source whose items are slow does not hold another source\'s item behind its backlog (issue 17)', async () => {
  const served: string[] = [];
  const servedAt = new Map<string, number>();
  const start = performance.now();
  const q = new FairQueue<string>((item) => {
    served.push(item);
    servedAt.set(item, performance.now() - start);
    if (item.startsWith('a')) busy(20);
  }, 5);
  // One batch as the data plane sends it: 30 slow items of namespace a, then one of b.
  for (let i = 0; i < 30; i++) q.push('a', `a${i}`);
  q.push('b', 'b0');
  await new Promise<void>((resolve) => {
    const poll = () => (q.waiting === 0 ? resolve() : setImmediate(poll));
    poll();
  });
  assert.equal(served.length, 31);
  assert.ok(served.indexOf('b0') <= 2, `b0 served at position ${served.indexOf('b0')}: ${served.slice(0, 5).join(',')}`);
  // By position, not by clock (a loaded machine stretches every slice): b0 never waits for a's backlog.
  assert.ok(servedAt.get('b0')! <= servedAt.get('a3')!, 'b0 before most of a');
});

test('fair queue: an item pushed while nothing waits is served at once; a full source drops its oldest', () => {
  const served: number[] = [];
  const dropped: number[] = [];
  const q = new FairQueue<number>((n) => served.push(n), 5, 2, (n) => dropped.push(n));
  q.push('a', 1);
  assert.deepEqual(served, [1], 'served on the caller\'s stack');
  const slow = new FairQueue<number>((n) => {
    served.push(n);
    busy(10);
  }, 1, 2, (n) => dropped.push(n));
  for (let i = 10; i < 15; i++) slow.push('x', i);
  assert.deepEqual(dropped, [11, 12]);
  assert.equal(slow.dropped, 2);
});
