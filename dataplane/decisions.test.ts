import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Decision } from '../proto/gen/seccompagent/v1/dataplane';
import { toNativeDecision } from './decisions';

const latin1 = (s: string) => Buffer.from(s, 'latin1');
const mkdir = (m: { path: string; pathBytes?: Buffer }): Decision => ({ handle: 1n, id: 1n, action: { $case: 'mkdir', mkdir: { mode: 0o755, ...m } }, findings: [] });
const mount = (m: Partial<Extract<Decision['action'], { $case: 'mount' }>['mount']>): Decision => ({
  handle: 1n, id: 1n,
  action: { $case: 'mount', mount: { source: 'none', target: '/t', fstype: 'tmpfs', flags: 0n, data: '', requireCapSysAdmin: false, ...m } },
  findings: [],
});

test('data plane decisions: an emulated mkdir uses path_bytes exactly when set, else the path text as UTF-8', () => {
  const exact = toNativeDecision(mkdir({ path: 'bad\ufffd', pathBytes: latin1('bad\xff') }), 1);
  assert.ok(typeof exact === 'object' && exact.kind === 'mkdir');
  assert.equal(Buffer.from(exact.path as Uint8Array).toString('latin1'), 'bad\xff');
  const text = toNativeDecision(mkdir({ path: '/tmp/é' }), 1);
  assert.ok(typeof text === 'object' && text.kind === 'mkdir');
  assert.deepEqual(Buffer.from(text.path as Uint8Array), Buffer.from('/tmp/é', 'utf8'));
  assert.equal(typeof toNativeDecision(mkdir({ path: 'x', pathBytes: latin1('a\0b') }), 1), 'string', 'NUL in the bytes');
  assert.equal(typeof toNativeDecision(mkdir({ path: 'x', pathBytes: Buffer.alloc(0) }), 1), 'string', 'set but empty: no path');
  assert.equal(typeof toNativeDecision(mkdir({ path: '' }), 1), 'string');
});

test('data plane decisions: an emulated mount uses each *_bytes field when set; empty target or fstype is invalid', () => {
  const d = toNativeDecision(mount({ target: '/t\ufffd', targetBytes: latin1('/t\xff'), data: 'size=1m', dataBytes: latin1('size=2m') }), 1);
  assert.ok(typeof d === 'object' && d.kind === 'mount');
  assert.equal(Buffer.from(d.target as Uint8Array).toString('latin1'), '/t\xff');
  assert.equal(Buffer.from(d.data as Uint8Array).toString('latin1'), 'size=2m');
  assert.equal(Buffer.from(d.fstype as Uint8Array).toString('latin1'), 'tmpfs');
  assert.equal(typeof toNativeDecision(mount({ fstype: '' }), 1), 'string');
  assert.equal(typeof toNativeDecision(mount({ target: '' }), 1), 'string');
  assert.equal(typeof toNativeDecision(mount({ sourceBytes: latin1('a\0') }), 1), 'string');
});
