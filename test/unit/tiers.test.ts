// test/run.js's plan (test/tiers.js): which files make each tier, and what a user who is not root
// may run. The rules run here on a made-up tree; the real tree is checked for its tiers' shape.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../support/paths';

interface TestFile { source: string; compiled: string; tier: string }
interface Plan { runs?: Array<{ tier: string; files: TestFile[] }>; notice?: string; error?: string }
// eslint-disable-next-line @typescript-eslint/no-require-imports
const tiers = require(path.join(ROOT, 'test', 'tiers.js')) as {
  listTests(root: string): TestFile[];
  plan(tests: TestFile[], args: string[], uid: number): Plan;
  tierOf(relative: string): string;
};

const TREE = ['common/a.test.ts', 'controlplane/b.test.ts', 'test/unit/c.test.ts', 'test/integration/d.test.ts', 'test/e2e/e.test.ts']
  .map((source) => ({ source, compiled: path.join('/x/dist', source.replace(/\.ts$/, '.js')), tier: tiers.tierOf(source) }));
const shape = (p: Plan) => p.runs?.map((r) => `${r.tier}: ${r.files.map((f) => path.basename(f.source, '.test.ts')).join(' ')}`);

test('test/run.js tiers: beside the code and test/unit are unit, then integration and e2e by folder', () => {
  assert.deepEqual(TREE.map((t) => t.tier), ['unit', 'unit', 'unit', 'integration', 'e2e']);
});

test('test/run.js tiers: root runs every tier in order; another user runs the unit tier alone and is told so', () => {
  assert.deepEqual(shape(tiers.plan(TREE, [], 0)), ['unit: a b c', 'integration: d', 'e2e: e']);
  const user = tiers.plan(TREE, [], 1000);
  assert.deepEqual(shape(user), ['unit: a b c']);
  assert.match(user.notice ?? '', /not root: running the unit tier only/);
});

test('test/run.js tiers: a tier that needs root, asked for by another user, is an error, never a skip', () => {
  for (const args of [['integration'], ['e2e'], ['unit', 'e2e'], ['test/integration'], ['dist/test/e2e/e.test.js']]) {
    const p = tiers.plan(TREE, args, 1000);
    assert.equal(p.runs, undefined, args.join(' '));
    assert.match(p.error ?? '', /needs? root/, args.join(' '));
  }
  assert.deepEqual(shape(tiers.plan(TREE, ['unit'], 1000)), ['unit: a b c']);
});

test('test/run.js tiers: tiers, folders and files select; a name matching nothing is an error', () => {
  assert.deepEqual(shape(tiers.plan(TREE, ['test/e2e'], 0)), ['e2e: e']);
  assert.deepEqual(shape(tiers.plan(TREE, ['dist/test/integration/d.test.js', 'controlplane'], 0)), ['unit: b', 'integration: d']);
  assert.match(tiers.plan(TREE, ['test/nowhere'], 0).error ?? '', /no test files match "test\/nowhere"/);
});

test('test/run.js tiers: the tree has tests in each tier, listed from the sources', () => {
  const all = tiers.listTests(ROOT);
  for (const tier of ['unit', 'integration', 'e2e']) assert.ok(all.some((t) => t.tier === tier), tier);
  assert.ok(all.some((t) => t.source === path.join('test', 'unit', 'tiers.test.ts')));
  assert.ok(all.every((t) => t.compiled.startsWith(path.join(ROOT, 'dist') + path.sep) && t.compiled.endsWith('.test.js')));
});
