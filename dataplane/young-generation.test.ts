import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { test } from 'node:test';

/** New space size in MiB before and after an allocation-heavy loop, in a fresh node. */
function newSpace(load: boolean, nodeOptions = ''): { before: number; after: number } {
  const script = `
    const v8 = require('node:v8');
    const size = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / 1048576;
    ${load ? `require(${JSON.stringify(path.join(__dirname, 'young-generation.js'))});` : ''}
    const before = size();
    let keep = [];
    for (let i = 0; i < 3e6; i++) { keep.push({ i, s: 'x' + i }); if (keep.length > 20000) keep = []; }
    process.stdout.write(JSON.stringify({ before, after: size() }));`;
  const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: nodeOptions }, timeout: 30_000 });
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout) as { before: number; after: number };
}

test('young generation: the data plane keeps its initial size under allocation; without it V8 grows it', () => {
  // Two 1 MiB semi-spaces at most; V8's own growth takes the same loop to 16 MiB or more.
  const kept = newSpace(true);
  assert.ok(kept.after <= 2, `new space ${kept.before} MiB grew to ${kept.after} MiB`);
  const grown = newSpace(false);
  assert.ok(grown.after >= 8, `without the module the same loop grows new space (${grown.before} -> ${grown.after} MiB)`);
});

test('young generation: a semi-space flag in NODE_OPTIONS is the operator\'s, not overridden', () => {
  for (const flag of ['--max-semi-space-size=8', '--max_semi_space_size=8']) {
    const chosen = newSpace(true, flag);
    assert.ok(chosen.after >= 8, `${flag}: new space ${chosen.before} -> ${chosen.after} MiB`);
  }
});
