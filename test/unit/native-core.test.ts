// The native core's own unit tests (test/cmd/native-tests, built by node-gyp as the test-only
// target seccomp-native-tests): run the program, and each of its cases becomes a subtest here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const PROGRAM = path.join(ROOT, 'build', 'Release', 'seccomp-native-tests');

test('seccomp-native-tests: the native core\'s unit tests pass (pending table, decision check, rule table, boundaries, cgroup paths)', async (t) => {
  assert.ok(fs.existsSync(PROGRAM), `${PROGRAM} is missing: run npx node-gyp rebuild`);
  const run = spawnSync(PROGRAM, [], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(run.error, undefined);
  const lines = run.stdout.split('\n');
  const cases = lines.filter((l) => /^(not )?ok \d+ - /.test(l));
  assert.ok(cases.length >= 8, `expected the cases, got:\n${run.stdout}\n${run.stderr}`);
  for (const line of cases) {
    const name = line.replace(/^(not )?ok \d+ - /, '');
    await t.test(name, () => {
      const at = lines.indexOf(line);
      const details = [];
      for (let i = at + 1; i < lines.length && lines[i].startsWith('#'); i++) details.push(lines[i]);
      assert.ok(line.startsWith('ok '), `${line}\n${details.join('\n')}`);
    });
  }
  assert.match(run.stdout, new RegExp(`^${cases.length} passed, 0 failed$`, 'm'));
  assert.equal(run.status, 0, run.stdout + run.stderr);
});
