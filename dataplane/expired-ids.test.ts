import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ExpiredIds } from './expired-ids';

test('ExpiredIds: remembers expired ids per handle, and forgets the oldest past its bound', () => {
  const ids = new ExpiredIds();
  ids.add(1, 10n);
  assert.equal(ids.has(1, 10n), true);
  assert.equal(ids.has(2, 10n), false);
  for (let i = 0; i < 9000; i++) ids.add(3, BigInt(i));
  assert.equal(ids.has(1, 10n), false, 'the oldest entry was dropped');
  assert.equal(ids.has(3, 8999n), true);
});
