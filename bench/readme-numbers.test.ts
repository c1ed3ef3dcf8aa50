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

test('README numbers: each row shows the bare C reference and the overhead in µs beside the ratio', () => {
  const block = renderReadmeNumbers(latest());
  const fast = block.split('\n').find((l) => l.startsWith('| (d) a container\'s compiled policy'));
  assert.ok(fast, block);
  const cells = fast.split('|').map((c) => c.trim());
  const [p50, bare, ratio, overhead] = [cells[2], cells[3], cells[4], cells[5]].map((c) => Number.parseFloat(c.replace('−', '-')));
  assert.ok(Math.abs(p50 / bare - ratio) < 0.02, fast); // figures rounded to 0.1 µs
  assert.ok(Math.abs(p50 - bare - overhead) < 0.11, fast);
});

test('README numbers: a report without a row (an --only run) or a --quick one is refused, naming what is missing', () => {
  const report = latest();
  const partial: BenchReport = { ...report, scenarios: report.scenarios.filter((s) => s.id !== 'fast-path') };
  assert.throws(() => renderReadmeNumbers(partial), /no measured row "fast-path \/ \(d\) getppid, 1 thread"/);
  assert.throws(() => renderReadmeNumbers({ ...report, quick: true }), /--quick/);
  assert.throws(() => withNumbers('no markers here', 'x'), /has no/);
});
