import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { AgentError } from '../../common/errors';
import { CHECKPOINT_FILE, readCheckpoint, writeCheckpoint, type CheckpointContent } from './checkpoint';

const content: CheckpointContent = {
  writtenAt: '2026-12-01T20:00:00.000Z',
  node: 'node-a',
  server: 'https://10.0.0.1:6443',
  pods: [{ namespace: 'shop', pod: 'web-1', uid: 'u1', containers: new Map([['c1', 'app']]), mirrorHash: null, labels: { app: 'web' }, annotations: {} }],
  namespaces: [{ name: 'shop', labels: { team: 'shop' } }],
  policies: [{ scope: 'namespaced', namespace: 'shop', name: 'p', uid: 'pu', generation: 2, spec: { rules: [] }, ready: null }],
  inForce: [{ scope: 'namespaced', namespace: 'shop', name: 'p', uid: 'pu', generation: 1, spec: { rules: [{ syscalls: ['mkdir'], allow: {} }] }, ready: null }],
};

function tmp(t: { after(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'checkpoint-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('checkpoint: written with mode 0600, no temporary file left, read back as written', async (t) => {
  const dir = path.join(tmp(t), 'state');
  assert.equal(readCheckpoint(dir), null, 'none yet');
  await writeCheckpoint(dir, content);
  assert.deepEqual(fs.readdirSync(dir), [CHECKPOINT_FILE]);
  assert.equal(fs.statSync(path.join(dir, CHECKPOINT_FILE)).mode & 0o777, 0o600);
  const back = readCheckpoint(dir)!;
  assert.deepEqual(back, content);
  assert.equal(back.pods[0].containers.get('c1'), 'app');
  await writeCheckpoint(dir, { ...content, node: 'node-b' });
  assert.equal(readCheckpoint(dir)?.node, 'node-b', 'replaced by rename');
});

test('checkpoint: truncated, altered, not JSON or of another format: ECHECKPOINT_CORRUPT, never a crash', async (t) => {
  const dir = tmp(t);
  await writeCheckpoint(dir, content);
  const file = path.join(dir, CHECKPOINT_FILE);
  const good = fs.readFileSync(file, 'utf8');
  const cases: Array<[string, string, RegExp]> = [
    ['truncated', good.slice(0, good.length - 7), /is not JSON/],
    ['altered', good.replace('web-1', 'web-2'), /fails its sha256 checksum/],
    ['empty', '', /is not JSON/],
    ['another format', JSON.stringify({ format: 'x', body: '{}' }), /is not a seccomp-agent.controlplane-checkpoint\/v1 file/],
  ];
  for (const [what, text, message] of cases) {
    fs.writeFileSync(file, text);
    assert.throws(() => readCheckpoint(dir), (e) => e instanceof AgentError && e.code === 'ECHECKPOINT_CORRUPT' && message.test(e.message) && /refused; starting without it/.test(e.message), what);
  }
});

test('checkpoint: the state directory is created, its missing parents are not (a removed hostPath is reported, not recreated)', async (t) => {
  const parent = tmp(t);
  const gone = path.join(parent, 'unmounted');
  await assert.rejects(writeCheckpoint(path.join(gone, 'state'), content), /ENOENT/);
  assert.equal(fs.existsSync(gone), false);
  await writeCheckpoint(path.join(parent, 'state'), content);
  assert.equal(fs.statSync(path.join(parent, 'state')).mode & 0o777, 0o700);
});

test('checkpoint: a symlink planted where the temporary file goes (a directory others may write) is never written through (issue 17)', async (t) => {
  const dir = tmp(t);
  fs.chmodSync(dir, 0o777);
  const victim = path.join(tmp(t), 'root-owned');
  fs.writeFileSync(victim, 'precious\n', { mode: 0o644 });
  // Every name the old writer would use: the checkpoint's name with .tmp-PID.
  const file = path.join(dir, CHECKPOINT_FILE);
  fs.symlinkSync(victim, `${file}.tmp-${process.pid}`);
  await writeCheckpoint(dir, content);
  assert.equal(fs.readFileSync(victim, 'utf8'), 'precious\n', 'the victim is untouched');
  assert.equal(fs.lstatSync(file).isFile(), true);
  assert.deepEqual(await readCheckpoint(dir), content);
  assert.equal(fs.statSync(dir).mode & 0o777, 0o700, 'our own state directory is made 0700');
  // A symlink as the state directory is refused.
  const link = path.join(tmp(t), 'state-link');
  fs.symlinkSync(dir, link);
  await assert.rejects(writeCheckpoint(link, content), (err: unknown) => err instanceof AgentError && err.code === 'ECHECKPOINT_DIR');
});
