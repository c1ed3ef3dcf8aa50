// test/testdata/previous-release.json names the release the skew test builds from git
// (test/e2e/release-skew.test.ts): a valid, older version and a commit this clone holds.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { test } from 'node:test';
import { VERSION } from '../../common/version';
import { cacheDirOf, previousReleaseBuild, readPreviousRelease } from '../support/release';

const parts = (v: string) => v.split('.').map(Number);
const older = (a: string, b: string) => {
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i] < y[i];
  return false;
};

test('previous release file: an x.y.z version older than package.json\'s and a full commit hash', () => {
  const r = readPreviousRelease();
  assert.ok(older(r.version, VERSION), `previous release ${r.version} is not older than this tree's ${VERSION}`);
  assert.match(r.commit, /^[0-9a-f]{40}$/);
});

test('previous release build: a commit missing from the clone fails with what to do, never a skip', async () => {
  const missing = { version: '0.0.1', commit: '0123456789abcdef0123456789abcdef01234567' };
  await assert.rejects(previousReleaseBuild(() => undefined, missing), /0\.0\.1 \(commit 0123456789abcdef0123456789abcdef01234567, named in test\/testdata\/previous-release\.json\) is not in this clone.*Fetch the full history/);
  assert.equal(fs.existsSync(cacheDirOf(missing.commit)), false, 'nothing is built or cached for it');
});
