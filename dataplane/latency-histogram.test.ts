import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Histogram, Registry } from 'prom-client';
import { LatencyHistogram } from './latency-histogram';

const BOUNDS_NS = [10_000, 25_000, 50_000, 100_000, 1_000_000];
const LATENCIES_NS = [0, 10_000, 10_001, 24_000, 60_000, 99_999, 2_000_000, 7_000];

/** The exposition text of `registry`, for comparing the two implementations line by line. */
async function text(registry: Registry): Promise<string> {
  return registry.metrics();
}

test('latency histogram: single observations print exactly as prom-client\'s own Histogram would', async () => {
  const ours = new Registry();
  const theirs = new Registry();
  const histogram = new LatencyHistogram('x_latency_seconds', 'help text', 'answered_by', BOUNDS_NS, ours);
  const reference = new Histogram({ name: 'x_latency_seconds', help: 'help text', labelNames: ['answered_by'], buckets: BOUNDS_NS.map((ns) => ns / 1e9), registers: [theirs] });
  for (const ns of LATENCIES_NS) {
    histogram.observe('default', BigInt(ns));
    reference.observe({ answered_by: 'default' }, ns / 1e9);
  }
  histogram.observe('fast_path', 5n);
  reference.observe({ answered_by: 'fast_path' }, 5 / 1e9);
  assert.equal(await text(ours), await text(theirs));
});

test('latency histogram: a tally adds its buckets, sum and count as that many observations would', async () => {
  const observed = new Registry();
  const tallied = new Registry();
  const one = new LatencyHistogram('x_latency_seconds', 'h', 'answered_by', BOUNDS_NS, observed);
  const bulk = new LatencyHistogram('x_latency_seconds', 'h', 'answered_by', BOUNDS_NS, tallied);
  for (const ns of LATENCIES_NS) one.observe('default', BigInt(ns));
  // What the engine's tally holds for the same answers: per bucket, the rest above the last bound.
  const buckets = BOUNDS_NS.map((bound, i) => LATENCIES_NS.filter((ns) => ns <= bound && (i === 0 || ns > BOUNDS_NS[i - 1])).length);
  const sum = LATENCIES_NS.reduce((a, b) => a + b, 0);
  bulk.add('default', buckets, BigInt(sum), LATENCIES_NS.length);
  assert.deepEqual(buckets, [3, 2, 0, 2, 0]);
  // Equal but for the sum's last digits (one division against many): that line compared apart.
  const withoutSum = (t: string) => t.split('\n').filter((l) => !l.startsWith('x_latency_seconds_sum'));
  const sumOf = (t: string) => Number(/^x_latency_seconds_sum\{[^}]*\} (\S+)$/m.exec(t)?.[1]);
  assert.deepEqual(withoutSum(await text(tallied)), withoutSum(await text(observed)));
  assert.ok(Math.abs(sumOf(await text(tallied)) - sum / 1e9) < 1e-15 && Math.abs(sumOf(await text(observed)) - sum / 1e9) < 1e-12);
  assert.match(await text(tallied), /^x_latency_seconds_bucket\{le="\+Inf",answered_by="default"\} 8$/m);
});
