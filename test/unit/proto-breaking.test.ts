// proto/seccompagent/v1 never breaks (xDS's rule: additive only): `buf breaking` with the rules of
// buf.yaml against the proto as it was at the last release, kept as a buf image in
// test/testdata/proto-baseline.binpb (no tag, no git history and no network needed).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { ROOT } from '../support/paths';
import { scratchDir } from '../support/scratch';

const BUF = path.join(ROOT, 'node_modules', '.bin', 'buf');
const BASELINE = path.join(ROOT, 'test', 'testdata', 'proto-baseline.binpb');
const PROTO = path.join('proto', 'seccompagent', 'v1', 'dataplane.proto');

/** buf keeps a cache under $HOME, which a user such as nobody does not have: one per test instead. */
function bufBreaking(t: TestContext, cwd: string): { status: number | null; output: string } {
  const env = { ...process.env, BUF_CACHE_DIR: scratchDir(t, 'seccomp-agent-buf-cache-') };
  const r = spawnSync(BUF, ['breaking', '--against', BASELINE], { cwd, env, encoding: 'utf8', timeout: 120_000 });
  if (r.error) throw r.error;
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

/** A copy of the module (buf.yaml and proto/seccompagent) with dataplane.proto edited. */
function editedModule(t: TestContext, edit: (proto: string) => string): string {
  const dir = scratchDir(t, 'seccomp-agent-proto-');
  fs.copyFileSync(path.join(ROOT, 'buf.yaml'), path.join(dir, 'buf.yaml'));
  fs.cpSync(path.join(ROOT, 'proto', 'seccompagent'), path.join(dir, 'proto', 'seccompagent'), { recursive: true });
  const file = path.join(dir, PROTO);
  const before = fs.readFileSync(file, 'utf8');
  const after = edit(before);
  assert.notEqual(after, before, 'the edit changed the proto');
  fs.writeFileSync(file, after);
  return dir;
}

test('proto: buf breaking against the last release finds nothing', (t) => {
  const r = bufBreaking(t, ROOT);
  assert.equal(r.status, 0, `buf breaking against ${path.relative(ROOT, BASELINE)}:\n${r.output}`);
});

test('proto: buf breaking refuses a changed field type and passes an added field', (t) => {
  const changed = bufBreaking(t, editedModule(t, (p) => p.replace(/(message Container \{[^}]*?)uint64 handle = 1;/, '$1string handle = 1;')));
  assert.notEqual(changed.status, 0);
  assert.match(changed.output, /handle/);
  const added = bufBreaking(t, editedModule(t, (p) => p.replace(/message Container \{/, 'message Container {\n  // Added by this test.\n  string test_only_added = 900;')));
  assert.equal(added.status, 0, added.output);
});
