#!/usr/bin/env node
// Runs the compiled tests tier by tier (see test/tiers.js) with node's own runner, one file at a
// time (the tests own real sockets, filters and runc), and ends with the count and time per tier.
// A test that hangs is ended at 4 minutes (its own { timeout } may say more: the release-skew
// build), and its cleanup is bounded (test/support/processes.ts, stop()).
//   node test/run.js                      every tier as root; the unit tier alone otherwise
//   node test/run.js unit e2e             those tiers
//   node test/run.js test/integration/metrics.test.ts   files or folders (source or dist paths)
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { listTests, plan } = require('./tiers');

const root = path.resolve(__dirname, '..');
const result = plan(listTests(root), process.argv.slice(2), process.getuid ? process.getuid() : 0);
if (result.error) {
  console.error(`test/run.js: ${result.error}`);
  process.exit(1);
}
if (result.notice) console.error(`test/run.js: ${result.notice}`);
const missing = result.runs.flatMap((r) => r.files).filter((t) => !fs.existsSync(t.compiled));
if (missing.length > 0) {
  console.error(`test/run.js: not built: ${missing.map((t) => t.source).join(', ')}; run "npm run build"`);
  process.exit(1);
}

/** The totals of a TAP report ("# pass 12"). */
function totals(tapFile) {
  const text = fs.existsSync(tapFile) ? fs.readFileSync(tapFile, 'utf8') : '';
  const count = (name) => Number((new RegExp(`^# ${name} (\\d+)$`, 'm').exec(text) ?? [])[1] ?? NaN);
  return { tests: count('tests'), pass: count('pass'), fail: count('fail'), cancelled: count('cancelled'), skipped: count('skipped'), todo: count('todo') };
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'seccomp-agent-run-'));
const summary = [];
let failed = false;
const started = Date.now();
try {
  for (const run of result.runs) {
    console.log(`\n# tier ${run.tier}: ${run.files.length} file(s)`);
    const tap = path.join(tmp, `${run.tier}.tap`);
    const begin = Date.now();
    const child = spawnSync(
      process.execPath,
      ['--test', '--test-concurrency=1', '--test-timeout=240000',
        '--test-reporter=spec', '--test-reporter-destination=stdout', '--test-reporter=tap', `--test-reporter-destination=${tap}`,
        ...run.files.map((t) => t.compiled)],
      { stdio: 'inherit', cwd: root },
    );
    const t = totals(tap);
    const ok = child.status === 0 && t.fail === 0 && t.cancelled === 0 && t.skipped === 0 && t.todo === 0;
    failed ||= !ok;
    summary.push(`${run.tier.padEnd(12)} ${String(run.files.length).padStart(3)} files ${String(t.tests).padStart(4)} tests ${String(t.pass).padStart(4)} pass ${t.fail} fail ${t.cancelled} cancelled ${t.skipped} skipped ${t.todo} todo  ${((Date.now() - begin) / 1000).toFixed(0)} s${ok ? '' : '  FAILED'}`);
  }
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
console.log(`\n# per tier\n${summary.join('\n')}\n# all tiers: ${((Date.now() - started) / 1000).toFixed(0)} s`);
process.exit(failed ? 1 : 0);
