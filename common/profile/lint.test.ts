import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { SHIPPED_LISTENER_SOCKETS, SPO_LISTENER_PATH, SPO_LISTENER_PATH_PATTERN } from '../shared-options';
import { ROOT } from '../../test/support/paths';
import { readProfileDocuments } from './document';
import { LINT_RULES, lintProfile, RUNTIME_NOTIFY_LIMITS, type LintFinding, type SeccompSection } from './lint';
import { CLEAN_LINT_SOCKET as SOCKET, cleanLintProfile as profile, lintRules as rules } from '../../test/support/seccomp-profile';

const only = (findings: LintFinding[], rule: string) => findings.filter((f) => f.rule === rule);

test('lint: a clean profile has no finding; every finding has a severity, a known rule, why and fix', () => {
  assert.deepEqual(lintProfile(profile()), []);
  const messy = lintProfile(profile({ defaultAction: 'SCMP_ACT_NOTIFY', architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86'], listenerMetadata: 'MKDIR_TMPLE=x', syscalls: [{ names: ['write', 'openat'], action: 'SCMP_ACT_NOTIFY' }, { names: ['openat'], action: 'SCMP_ACT_ERRNO' }] }));
  assert.ok(messy.length >= 5);
  for (const f of messy) {
    assert.ok(['error', 'warning', 'info'].includes(f.severity));
    assert.ok(f.rule in LINT_RULES, f.rule);
    assert.ok(f.message && f.why && f.fix);
  }
  // Errors first.
  const order = messy.map((f) => ['error', 'warning', 'info'].indexOf(f.severity));
  assert.deepEqual(order, [...order].sort());
});

test('lint self-hang: what each runtime refuses or hangs on, as measured (runc refuses to notify write)', () => {
  assert.deepEqual(Object.keys(RUNTIME_NOTIFY_LIMITS.runc.refuses), ['write']);
  const runc = lintProfile(profile({ syscalls: [{ names: ['write', 'mkdir'], action: 'SCMP_ACT_NOTIFY' }] }), { runtime: 'runc' });
  assert.deepEqual(rules(only(runc, 'self-hang')), ['error self-hang']);
  assert.match(only(runc, 'self-hang')[0].message, /runc refuses to notify write/);
  // crun starts such a profile (measured): no self-hang finding for crun alone.
  assert.deepEqual(only(lintProfile(profile({ syscalls: [{ names: ['write'], action: 'SCMP_ACT_NOTIFY' }] }), { runtime: 'crun' }), 'self-hang'), []);
  // No runtime named: every runtime measured, each finding names its runtime.
  assert.match(only(lintProfile(profile({ syscalls: [{ names: ['write'], action: 'SCMP_ACT_NOTIFY' }] })), 'self-hang')[0].message, /^runc /);
  // A hang entry (none measured for these versions) would be reported as one too.
  const limits = { ...RUNTIME_NOTIFY_LIMITS, crun: { ...RUNTIME_NOTIFY_LIMITS.crun, hangs: ['sendmsg'] } };
  const hang = only(lintProfile(profile({ syscalls: [{ names: ['sendmsg', 'mkdir'], action: 'SCMP_ACT_NOTIFY' }] }), { runtime: 'crun', limits }), 'self-hang');
  assert.deepEqual(rules(hang), ['error self-hang']);
  assert.match(hang[0].message, /^crun makes sendmsg itself .* the container start hangs/);
});

test('lint default-notify: defaultAction SCMP_ACT_NOTIFY is an error', () => {
  assert.deepEqual(rules(only(lintProfile(profile({ defaultAction: 'SCMP_ACT_NOTIFY' })), 'default-notify')), ['error default-notify']);
});

test('lint compat-arch: i386 or x32 beside notified names is info (decided by the same rules); a warning for i386 aliases not notified; nothing without notify rules', () => {
  const f = only(lintProfile(profile({ architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32'] })), 'compat-arch');
  assert.deepEqual(rules(f), ['info compat-arch']);
  assert.match(f[0].message, /SCMP_ARCH_X86, SCMP_ARCH_X32/);
  assert.match(f[0].why, /a rule's syscall names cover every ABI/);
  // Docker's archMap form too.
  assert.equal(only(lintProfile(profile({ architectures: undefined, archMap: [{ architecture: 'SCMP_ARCH_X86_64', subArchitectures: ['SCMP_ARCH_X86'] }] })), 'compat-arch').length, 1);
  // chown notified, chown32 (what i386 libc calls) not: a warning naming it; x32 alone has no such names.
  const chown = (architectures: string[]) => only(lintProfile(profile({ architectures, syscalls: [{ names: ['mkdir', 'chown'], action: 'SCMP_ACT_NOTIFY' }] })), 'compat-arch');
  const w = chown(['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86']);
  assert.deepEqual(rules(w), ['warning compat-arch']);
  assert.match(w[0].message, /chown32 \(chown\)/);
  assert.deepEqual(rules(chown(['SCMP_ARCH_X86_64', 'SCMP_ARCH_X32'])), ['info compat-arch']);
  assert.deepEqual(rules(only(lintProfile(profile({ architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86'], syscalls: [{ names: ['chown', 'chown32'], action: 'SCMP_ACT_NOTIFY' }] })), 'compat-arch')), ['info compat-arch']);
  assert.deepEqual(only(lintProfile(profile({ architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86'], listenerPath: undefined, syscalls: [] })), 'compat-arch'), []);
});

test('lint notify-overlap: a syscall notified by one rule and denied by another', () => {
  const f = only(lintProfile(profile({ syscalls: [{ names: ['mkdir'], action: 'SCMP_ACT_NOTIFY' }, { names: ['mkdir'], action: 'SCMP_ACT_KILL_PROCESS' }, { names: ['io_uring_setup', 'io_uring_enter'], action: 'SCMP_ACT_ERRNO' }] })), 'notify-overlap');
  assert.deepEqual(rules(f), ['warning notify-overlap']);
  assert.match(f[0].message, /mkdir is both notified and denied \(SCMP_ACT_KILL_PROCESS\)/);
  assert.deepEqual(only(lintProfile(profile({ syscalls: [{ names: ['mkdir'], action: 'SCMP_ACT_NOTIFY' }, { names: ['rmdir'], action: 'SCMP_ACT_ERRNO' }] })), 'notify-overlap'), []);
});

test('lint signal-window: emulation keys without WAIT_KILLABLE_RECV; flags under runc 1.1', () => {
  const f = only(lintProfile(profile({ listenerMetadata: 'MKDIR_TMPL=-{{.Pod}}' })), 'signal-window');
  assert.deepEqual(rules(f), ['warning signal-window']);
  assert.match(f[0].fix, /SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV/);
  assert.equal(only(lintProfile(profile({ listenerMetadata: 'MOUNT_PROC=true', syscalls: [{ names: ['mount'], action: 'SCMP_ACT_NOTIFY' }] })), 'signal-window').length, 1);
  // With the flag, under crun: nothing to say.
  assert.deepEqual(only(lintProfile(profile({ listenerMetadata: 'MKDIR_TMPL=-x', flags: ['SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV'] }), { runtime: 'crun' }), 'signal-window'), []);
  // Under runc 1.1 the flag itself stops the container; the missing flag is only information.
  assert.deepEqual(rules(only(lintProfile(profile({ listenerMetadata: 'MKDIR_TMPL=-x', flags: ['SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV'] }), { runtime: 'runc' }), 'signal-window')), ['error signal-window']);
  assert.deepEqual(rules(only(lintProfile(profile({ listenerMetadata: 'MKDIR_TMPL=-x' }), { runtime: 'runc' }), 'signal-window')), ['info signal-window']);
});

test('lint listener-path: missing, not served, refused by SPO, or unused', () => {
  assert.deepEqual(rules(only(lintProfile(profile({ listenerPath: undefined })), 'listener-path')), ['error listener-path']);
  const other = only(lintProfile(profile({ listenerPath: '/run/other.sock' })), 'listener-path');
  assert.deepEqual(rules(other), ['error listener-path']);
  assert.match(other[0].message, /not a socket this agent serves/);
  // Both shipped paths are served; /var/run is /run.
  for (const p of [...SHIPPED_LISTENER_SOCKETS, '/var/run/seccomp-agent.socket']) assert.deepEqual(only(lintProfile(profile({ listenerPath: p })), 'listener-path'), [], p);
  // Unknown served paths: not judged.
  assert.deepEqual(only(lintProfile(profile({ listenerPath: '/run/other.sock' }), { servedPaths: null }), 'listener-path'), []);
  // Served paths given (the control plane asks the data plane).
  assert.deepEqual(only(lintProfile(profile({ listenerPath: '/tmp/x.sock' }), { servedPaths: ['/tmp/x.sock'] }), 'listener-path'), []);
  // An SPO SeccompProfile must match the operator's pattern.
  assert.match(only(lintProfile(profile(), { spo: true }), 'listener-path')[0].message, /Security Profiles Operator/);
  assert.deepEqual(only(lintProfile(profile({ listenerPath: SHIPPED_LISTENER_SOCKETS[1] }), { spo: true }), 'listener-path'), []);
  assert.deepEqual(rules(only(lintProfile(profile({ syscalls: [] })), 'listener-path')), ['info listener-path']);
});

test('lint metadata-key: unknown keys, with the nearest known key for a misspelling', () => {
  const f = only(lintProfile(profile({ listenerMetadata: 'MKDIR_TMLP=-x\nFROBNICATE=1' })), 'metadata-key');
  assert.deepEqual(f.map((x) => x.message), ['unknown listenerMetadata key MKDIR_TMLP (did you mean MKDIR_TMPL?)', 'unknown listenerMetadata key FROBNICATE']);
  assert.equal(f[0].fix, 'rename it MKDIR_TMPL');
  assert.match(f[1].fix, /known keys: MKDIR_TMPL, DEFAULT_ACTION/);
  // --metadata replaces the profile's.
  assert.equal(only(lintProfile(profile({ listenerMetadata: 'MOUNT_PORC=true' }), { metadata: '' }), 'metadata-key').length, 0);
  assert.equal(only(lintProfile(profile(), { metadata: 'DEFAULT_ACTON=kill-container' }), 'metadata-key')[0].fix, 'rename it DEFAULT_ACTION');
});

test('lint metadata-value: bad values, and keys whose syscalls are not notified', () => {
  assert.match(only(lintProfile(profile({ listenerMetadata: 'MOUNT_PROC=yes', syscalls: [{ names: ['mount'], action: 'SCMP_ACT_NOTIFY' }] })), 'metadata-value')[0].message, /MOUNT_PROC="yes" is not "true" or "false"/);
  assert.match(only(lintProfile(profile({ listenerMetadata: 'MKDIR_TMPL=-x', syscalls: [{ names: ['getppid'], action: 'SCMP_ACT_NOTIFY' }] })), 'metadata-value')[0].message, /neither mkdir nor mkdirat is notified/);
  assert.match(only(lintProfile(profile({ listenerMetadata: 'MOUNT_SYSFS=true' })), 'metadata-value')[0].message, /mount is not notified/);
});

test('lint io-uring-open: io_uring allowed beside notified file syscalls', () => {
  const open = profile({ syscalls: [{ names: ['openat'], action: 'SCMP_ACT_NOTIFY' }] });
  assert.deepEqual(rules(only(lintProfile(open), 'io-uring-open')), ['warning io-uring-open']);
  // Denied, or nothing notified that io_uring can do: nothing to say.
  assert.deepEqual(only(lintProfile(profile()), 'io-uring-open'), []);
  assert.deepEqual(only(lintProfile(profile({ syscalls: [{ names: ['getppid'], action: 'SCMP_ACT_NOTIFY' }] })), 'io-uring-open'), []);
  // A deny-by-default profile that allows io_uring_enter explicitly.
  const explicit = profile({ defaultAction: 'SCMP_ACT_ERRNO', syscalls: [{ names: ['mkdir'], action: 'SCMP_ACT_NOTIFY' }, { names: ['io_uring_enter'], action: 'SCMP_ACT_ALLOW' }] });
  assert.match(only(lintProfile(explicit), 'io-uring-open')[0].message, /^io_uring_enter left allowed/);
});

test('lint: a profile with fields of the wrong type is linted as far as it can be, never a crash', () => {
  const odd = { defaultAction: 'SCMP_ACT_ALLOW', architectures: 'SCMP_ARCH_X86', listenerPath: SOCKET, listenerMetadata: 7, flags: {}, syscalls: [null, 3, { names: 'mkdir', action: 'SCMP_ACT_NOTIFY' }, { names: ['mkdir', 5], action: 'SCMP_ACT_NOTIFY' }] } as unknown as SeccompSection;
  assert.deepEqual(rules(lintProfile(odd)), ['warning io-uring-open']);
  assert.deepEqual(lintProfile({} as SeccompSection), []);
});

test('lint: SPO_LISTENER_PATH is the pattern kept in test/testdata', () => {
  assert.ok(SPO_LISTENER_PATH.test(SHIPPED_LISTENER_SOCKETS[1]));
  assert.equal(SPO_LISTENER_PATH_PATTERN, fs.readFileSync(path.join(ROOT, 'test/testdata/spo-listener-path-pattern.txt'), 'utf8').trim());
});

test('profile documents: OCI JSON, config.json, and SPO SeccompProfile YAML (several documents)', () => {
  assert.deepEqual(readProfileDocuments(JSON.stringify(profile()), 'p.json').map((d) => [d.name, d.spo]), [['p.json', false]]);
  assert.equal(readProfileDocuments(JSON.stringify({ ociVersion: '1.0.2', linux: { seccomp: profile() } }), 'config.json')[0].section.listenerPath, SOCKET);
  const yaml = `apiVersion: security-profiles-operator.x-k8s.io/v1beta1\nkind: SeccompProfile\nmetadata: {name: a, namespace: n}\nspec:\n  defaultAction: SCMP_ACT_ALLOW\n---\nkind: ConfigMap\n---\nkind: SeccompProfile\nmetadata: {name: b}\nspec: {defaultAction: SCMP_ACT_LOG}\n`;
  assert.deepEqual(readProfileDocuments(yaml, 'p.yaml').map((d) => [d.name, d.spo]), [['p.yaml: SeccompProfile n/a', true], ['p.yaml: SeccompProfile default/b', true]]);
  assert.throws(() => readProfileDocuments('{"a":', 'bad.json'), { code: 'EPROFILE' });
  assert.throws(() => readProfileDocuments('kind: Pod\n', 'pod.yaml'), { code: 'EPROFILE' });
});
