import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdirTarget } from './mkdir-path';

const SUFFIX = Buffer.from('-ns-pod');
const b = (s: string) => Buffer.from(s, 'latin1');
/** The path it emulates, as latin1 (one char per byte), or `errno N`. */
function target(path: string): string {
  const t = mkdirTarget(b(path), SUFFIX);
  return 'errno' in t ? `errno ${t.errno}` : t.path.toString('latin1');
}

test('mkdir path under MKDIR_TMPL: the suffix goes on the last component, trailing slashes dropped', () => {
  assert.equal(target('/tmp/a'), '/tmp/a-ns-pod');
  assert.equal(target('/tmp/a/'), '/tmp/a-ns-pod');
  assert.equal(target('/tmp/a//'), '/tmp/a-ns-pod');
  assert.equal(target('rel'), 'rel-ns-pod');
  assert.equal(target('../../x'), '../../x-ns-pod');
  // Names made of dots that are not "." or ".." are plain names, as the kernel sees them.
  assert.equal(target('...'), '...-ns-pod');
  assert.equal(target('/tmp/.a'), '/tmp/.a-ns-pod');
  assert.equal(target('a.'), 'a.-ns-pod');
});

test('mkdir path under MKDIR_TMPL: bytes stay bytes, distinct names stay distinct', () => {
  const one = mkdirTarget(Buffer.from([0x62, 0x61, 0x64, 0xff, 0xfe]), SUFFIX);
  const two = mkdirTarget(Buffer.from([0x62, 0x61, 0x64, 0xff, 0xfd]), SUFFIX);
  assert.ok('path' in one && 'path' in two);
  assert.deepEqual([...one.path], [...Buffer.from('bad\xff\xfe-ns-pod', 'latin1')]);
  assert.deepEqual([...two.path], [...Buffer.from('bad\xff\xfd-ns-pod', 'latin1')]);
  assert.notDeepEqual(one.path, two.path);
  // A suffix that is not ASCII is appended as its bytes too.
  const t = mkdirTarget(b('/d'), Buffer.from('-é', 'utf8'));
  assert.ok('path' in t);
  assert.deepEqual([...t.path], [0x2f, 0x64, 0x2d, 0xc3, 0xa9]);
});

test('mkdir path under MKDIR_TMPL: "." and ".." as last component go unsuffixed, the empty path is ENOENT', () => {
  for (const path of ['.', '..', './', '../', '/tmp/.', '/tmp/..', '/tmp/../', 'a/.', 'a/..', 'a/./', 'x/y/..//', '/', '//']) {
    assert.equal(target(path), path, `${JSON.stringify(path)} must go as it is (the emulation answers as the kernel)`);
  }
  assert.equal(target(''), 'errno 2');
});

test('mkdir path under MKDIR_TMPL: the result is a copy, not a view of the notification', () => {
  const path = b('/tmp/.');
  const t = mkdirTarget(path, SUFFIX);
  assert.ok('path' in t);
  path[1] = 0x78;
  assert.equal(t.path.toString('latin1'), '/tmp/.');
});
