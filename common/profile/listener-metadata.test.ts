import assert from 'node:assert/strict';
import { test } from 'node:test';
import { METADATA_LIMITS, parseListenerMetadata } from './listener-metadata';

const codes = (text: string) => parseListenerMetadata(text).warnings.map((w) => `${w.code}:${w.key}`);

test('listenerMetadata: the keys kinvolk/seccompagent reads', () => {
  const { policy, warnings } = parseListenerMetadata(
    'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}-{{.Container}}\nDEFAULT_ACTION=kill-container\nMOUNT_PROC=true\nMOUNT_SYSFS=true\nMOUNT_OTHER_FS_LIST=cifs,nfs\nMOUNT_NEED_CAP_ADMIN=true',
  );
  assert.deepEqual(warnings, []);
  assert.equal(policy.mkdirTemplate?.source, '-{{.Namespace}}-{{.Pod}}-{{.Container}}');
  assert.equal(policy.defaultAction, 'kill-container');
  assert.deepEqual(policy.mount, { filesystems: ['proc', 'sysfs', 'cifs', 'nfs'], needCapAdmin: true });
  assert.ok(Object.isFrozen(policy));
  assert.ok(Object.isFrozen(policy.mount));
  assert.ok(Object.isFrozen(policy.mount!.filesystems));
  assert.ok(Object.isFrozen(policy.entries));
});

test('listenerMetadata: empty metadata is an empty policy', () => {
  const { policy, warnings } = parseListenerMetadata('');
  assert.deepEqual(warnings, []);
  assert.equal(policy.mkdirTemplate, null);
  assert.equal(policy.defaultAction, null);
  assert.equal(policy.mount, null);
  assert.equal(parseListenerMetadata('DEFAULT_ACTION=freeze-container\n').policy.defaultAction, 'freeze-container');
});

test('listenerMetadata: the value is everything after the first "=", verbatim; a later line wins', () => {
  const { policy, warnings } = parseListenerMetadata('MKDIR_TMPL=-a=b\nMKDIR_TMPL=-{{.Pod}}=x');
  assert.equal(policy.mkdirTemplate?.source, '-{{.Pod}}=x');
  assert.deepEqual(warnings.map((w) => w.code), ['EPOLICY_DUPLICATE_KEY']);
  assert.equal(parseListenerMetadata('MOUNT_PROC=true\r\nMOUNT_SYSFS=true\r\n').policy.mount?.filesystems.join(), 'proc,sysfs');
});

test('listenerMetadata: booleans are on only for "true"; other values warn', () => {
  const { policy, warnings } = parseListenerMetadata('MOUNT_PROC=yes\nMOUNT_SYSFS=TRUE\nMOUNT_NEED_CAP_ADMIN=false');
  assert.equal(policy.mount, null);
  assert.deepEqual(warnings.map((w) => `${w.code}:${w.key}`), ['EPOLICY_BAD_VALUE:MOUNT_PROC', 'EPOLICY_BAD_VALUE:MOUNT_SYSFS']);
  // A line without "=" is a key with an empty value, as in kinvolk/seccompagent.
  assert.deepEqual(codes('MOUNT_PROC'), ['EPOLICY_BAD_VALUE:MOUNT_PROC']);
});

test('listenerMetadata: unknown keys are warnings, one each', () => {
  assert.deepEqual(codes('FOO=1\nMKDIR_TEMPLATE=-x\nEXEC_PATTERN=/bin/sh\nSIDECARS=a'), [
    'EPOLICY_UNKNOWN_KEY:FOO',
    'EPOLICY_UNKNOWN_KEY:MKDIR_TEMPLATE',
  ]);
  assert.deepEqual(codes('=orphan'), ['EPOLICY_BAD_VALUE:']);
  // A key named like an Object.prototype property is just an unknown key.
  assert.deepEqual(codes('__proto__=x\nconstructor=y'), ['EPOLICY_UNKNOWN_KEY:__proto__', 'EPOLICY_UNKNOWN_KEY:constructor']);
});

test('listenerMetadata: bad DEFAULT_ACTION and MKDIR_TMPL are ignored with a warning', () => {
  const bad = parseListenerMetadata('DEFAULT_ACTION=kill-process\nMKDIR_TMPL=-{{.Pid}}');
  assert.equal(bad.policy.defaultAction, null);
  assert.equal(bad.policy.mkdirTemplate, null);
  assert.deepEqual(bad.warnings.map((w) => `${w.code}:${w.key}`), ['EMKDIR_TEMPLATE:MKDIR_TMPL', 'EPOLICY_BAD_VALUE:DEFAULT_ACTION']);
  assert.deepEqual(codes('MKDIR_TMPL='), ['EPOLICY_BAD_VALUE:MKDIR_TMPL']);
});

test('listenerMetadata: MOUNT_OTHER_FS_LIST trims names, skips empty ones and duplicates', () => {
  const { policy } = parseListenerMetadata('MOUNT_PROC=true\nMOUNT_OTHER_FS_LIST= cifs,,proc ,tmpfs,');
  assert.deepEqual(policy.mount?.filesystems, ['proc', 'cifs', 'tmpfs']);
  assert.equal(policy.mount?.needCapAdmin, false);
  assert.equal(parseListenerMetadata('MOUNT_OTHER_FS_LIST=').policy.mount, null);
  assert.deepEqual(codes('MOUNT_NEED_CAP_ADMIN=true'), ['EPOLICY_BAD_VALUE:MOUNT_NEED_CAP_ADMIN']);
});

test('listenerMetadata: past a bound (100,001 lines, 1 MiB, 65 keys) the whole metadata is refused with one EPOLICY_TOO_LARGE', () => {
  const lines = Array.from({ length: 100_001 }, (_, i) => `K${i}=v`);
  lines.unshift('MOUNT_PROC=true', 'DEFAULT_ACTION=kill-container');
  for (const text of [
    lines.join('\n'),
    'MOUNT_PROC=true\n' + '\n'.repeat(METADATA_LIMITS.lines + 1) + 'X=1',
    'MOUNT_PROC=true\nMKDIR_TMPL=-' + 'x'.repeat(METADATA_LIMITS.bytes),
    'MOUNT_PROC=true\nMKDIR_TMPL=-' + 'é'.repeat(METADATA_LIMITS.bytes / 2),
    Array.from({ length: METADATA_LIMITS.keys + 1 }, (_, i) => `K${i}=v`).join('\n'),
  ]) {
    const started = process.hrtime.bigint();
    const { policy, warnings } = parseListenerMetadata(text);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    assert.deepEqual(warnings.map((w) => w.code), ['EPOLICY_TOO_LARGE']);
    assert.match(warnings[0].message, /the whole metadata is refused/);
    assert.ok(warnings[0].message.length < 400, 'the warning does not quote the metadata');
    assert.equal(policy.mount, null, 'no key applies, granting ones included');
    assert.equal(policy.defaultAction, null);
    assert.equal(policy.mkdirTemplate, null);
    assert.deepEqual(Object.keys(policy.entries), []);
    assert.ok(ms < 50, `parsing took ${ms.toFixed(1)} ms`);
  }
});

test('listenerMetadata: up to the bounds it is read, with at most one warning per key', () => {
  const keys = Array.from({ length: METADATA_LIMITS.keys - 1 }, (_, i) => `K${i}=v`);
  const atLimit = parseListenerMetadata(['MOUNT_PROC=true', ...keys].join('\n') + '\n');
  assert.deepEqual(atLimit.policy.mount?.filesystems, ['proc']);
  assert.equal(atLimit.warnings.length, METADATA_LIMITS.keys - 1, 'one unknown-key warning each');
  // A key repeated on every line is one warning that counts them; so are lines without a key.
  const repeated = parseListenerMetadata(Array.from({ length: METADATA_LIMITS.lines }, (_, i) => (i % 2 ? `MOUNT_PROC=${i === METADATA_LIMITS.lines - 1 ? 'true' : 'no'}` : '=x')).join('\n'));
  assert.deepEqual(repeated.warnings.map((w) => `${w.code}:${w.key}`), ['EPOLICY_BAD_VALUE:', 'EPOLICY_DUPLICATE_KEY:MOUNT_PROC']);
  assert.match(repeated.warnings[0].message, /and 511 more/);
  assert.match(repeated.warnings[1].message, /MOUNT_PROC 512 times/);
  assert.deepEqual(repeated.policy.mount?.filesystems, ['proc']);
  // Long values are cut in messages.
  const long = parseListenerMetadata(`DEFAULT_ACTION=${'y'.repeat(10_000)}`);
  assert.ok(long.warnings[0].message.length < 400);
  assert.match(long.warnings[0].message, /10000 characters/);
});

test('listenerMetadata: kinvolk\'s EXEC_PATTERN + EXEC_DURATION, SIDECARS + SIDECARS_DELAY (Go durations, at most 60 s) and MIDDLEWARE', () => {
  const { policy, warnings } = parseListenerMetadata('EXEC_PATTERN=/bin/true\nEXEC_DURATION=1m\nSIDECARS=[istio-proxy, log]\nSIDECARS_DELAY=500ms\nMIDDLEWARE=falco,prometheus');
  assert.deepEqual(warnings, []);
  assert.deepEqual(policy.exec, { pattern: '/bin/true', durationMs: 60_000 });
  assert.deepEqual(policy.sidecars, { names: ['istio-proxy', 'log'], delayMs: 500 });
  assert.deepEqual(policy.middleware, { falco: true, prometheus: true });
  // No duration: 0, as kinvolk (the execve continues at once).
  assert.deepEqual(parseListenerMetadata('EXEC_PATTERN=/x').policy.exec, { pattern: '/x', durationMs: 0 });
  assert.deepEqual(parseListenerMetadata('').policy.middleware, { falco: false, prometheus: false });
  assert.deepEqual(codes('EXEC_PATTERN=/x\nEXEC_DURATION=61s'), ['EPOLICY_BAD_VALUE:EXEC_DURATION']);
  assert.equal(parseListenerMetadata('EXEC_PATTERN=/x\nEXEC_DURATION=2').policy.exec, null, 'not a Go duration: nothing is held');
  assert.deepEqual(codes('SIDECARS=a\nSIDECARS_DELAY=-1s'), ['EPOLICY_BAD_VALUE:SIDECARS_DELAY']);
  assert.deepEqual(codes('EXEC_DURATION=1s\nSIDECARS_DELAY=1s'), ['EPOLICY_BAD_VALUE:EXEC_DURATION', 'EPOLICY_BAD_VALUE:SIDECARS_DELAY']);
  const unknown = parseListenerMetadata('MIDDLEWARE=falco,statsd,otel');
  assert.deepEqual(unknown.policy.middleware, { falco: true, prometheus: false });
  assert.deepEqual(unknown.warnings.map((w) => `${w.code}:${w.key}`), ['EPOLICY_BAD_VALUE:MIDDLEWARE'], 'one warning for the unknown names');
  assert.match(unknown.warnings[0].message, /"statsd", "otel"/);
});
