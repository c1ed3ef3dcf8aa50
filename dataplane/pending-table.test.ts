import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PendingTable } from './pending-table';

const entry = (session: string) => ({ session, syscall: 'mkdir', containerId: 'c' });

test('PendingTable: take removes once; a second take finds nothing', () => {
  const table = new PendingTable<string>();
  table.add(1, 10n, entry('a'));
  assert.equal(table.size, 1);
  assert.equal(table.take(1, 10n)?.session, 'a');
  assert.equal(table.take(1, 10n), undefined);
  assert.equal(table.size, 0);
});

test('PendingTable: expired ids are remembered to tell late decisions from unknown ones', () => {
  const table = new PendingTable<string>();
  table.add(1, 10n, entry('a'));
  table.expire(1, 10n);
  assert.equal(table.get(1, 10n), undefined);
  assert.equal(table.wasExpired(1, 10n), true);
  assert.equal(table.wasExpired(1, 11n), false);
});

test('PendingTable: takeSession returns only that session\'s entries; dropHandle forgets a container', () => {
  const table = new PendingTable<string>();
  table.add(1, 1n, entry('a'));
  table.add(1, 2n, entry('b'));
  table.add(2, 1n, entry('a'));
  assert.equal(table.countSession('a'), 2);
  assert.deepEqual(table.takeSession('a').map((p) => `${p.handle}:${p.id}`).sort(), ['1:1', '2:1']);
  assert.equal(table.size, 1);
  table.dropHandle(1);
  assert.equal(table.size, 0);
});
