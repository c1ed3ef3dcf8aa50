// The README's numbers are the last whole bench run's, rendered: an edit by hand, or a new report
// without the README rendered again, fails here.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import type { BenchReport } from './report';
import { LATEST, numbersIn, renderReadmeNumbers, withNumbers } from './readme-numbers';

const root = path.resolve(__dirname, '..', '..');
const latest = (): BenchReport => JSON.parse(fs.readFileSync(path.join(root, LATEST), 'utf8')) as BenchReport;

test('README numbers: the table between the markers is docs/bench/latest.json rendered', () => {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
  assert.equal(numbersIn(readme), renderReadmeNumbers(latest()), 'README.md and docs/bench/latest.json disagree: run node dist/bench/readme-numbers.js on a whole bench --json report');
});

test('README numbers: each row shows its paired bare C runs, the median pair ratio and the overhead in µs', () => {
  const report = latest();
  const block = renderReadmeNumbers(report);
  const fast = block.split('\n').find((l) => l.startsWith('| (d) a container\'s compiled policy'));
  assert.ok(fast, block);
  const cells = fast.split('|').map((c) => c.trim());
  const [p50, bare, ratio, overhead] = [cells[2], cells[3], cells[4], cells[5]].map((c) => Number.parseFloat(c.replace('−', '-')));
  // Recomputed here from the report's runs: each run of the row beside the reference run made for it.
  const row = report.scenarios.find((s) => s.id === 'fast-path')?.rows.find((r) => r.variant === '(d) getppid, 1 thread');
  assert.ok(row?.references && row.references.length === row.runs.length, 'the (d) row has a paired reference run per run');
  const mid = (values: number[]) => { const v = [...values].sort((a, b) => a - b); return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2; };
  const pairs = row.runs.map((run, i) => [run.p50Us, row.references![i]?.p50Us] as const).filter(([, ref]) => ref !== undefined) as Array<readonly [number, number]>;
  assert.ok(pairs.length >= 3, fast);
  assert.equal(p50, Number(mid(row.runs.map((r) => r.p50Us)).toFixed(1)), fast);
  assert.equal(bare, Number(mid(pairs.map(([, ref]) => ref)).toFixed(1)), fast);
  assert.equal(ratio, Number(mid(pairs.map(([mine, ref]) => mine / ref)).toFixed(2)), fast);
  assert.equal(overhead, Number(mid(pairs.map(([mine, ref]) => mine - ref)).toFixed(1)), fast);
});

test('README numbers: a report without a row (an --only run) or a --quick one is refused, naming what is missing', () => {
  const report = latest();
  const partial: BenchReport = { ...report, scenarios: report.scenarios.filter((s) => s.id !== 'fast-path') };
  assert.throws(() => renderReadmeNumbers(partial), /no measured row "fast-path \/ \(d\) getppid, 1 thread"/);
  assert.throws(() => renderReadmeNumbers({ ...report, quick: true }), /--quick/);
  assert.throws(() => withNumbers('no markers here', 'x'), /has no/);
});
