import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseGoDuration } from './go-duration';

test('Go duration: the forms time.ParseDuration takes, in milliseconds; anything else is null', () => {
  assert.equal(parseGoDuration('2s'), 2000);
  assert.equal(parseGoDuration('1m30s'), 90_000);
  assert.equal(parseGoDuration('1.5s'), 1500);
  assert.equal(parseGoDuration('300ms'), 300);
  assert.equal(parseGoDuration('.5s'), 500);
  assert.equal(parseGoDuration('250us'), 0.25);
  assert.equal(parseGoDuration('1h'), 3_600_000);
  assert.equal(parseGoDuration('0'), 0);
  assert.equal(parseGoDuration('-1s'), -1000);
  for (const bad of ['', '2', 's', '2 s', '2sec', '1d', '+', '2s3', 'abc', '1e3s']) assert.equal(parseGoDuration(bad), null, bad);
});
