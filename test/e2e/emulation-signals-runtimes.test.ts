// The emulation conformance under signals (test/integration/emulation-signals.test.ts) in real
// containers: runc (Debian's 1.1: no WAIT_KILLABLE_RECV, so a signal abandons a notification and
// the agent answers the restarted call from its replay book) and crun with and without the
// profile flag SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV. The workload (static, copied into the
// busybox rootfs) makes fresh directories under MKDIR_TMPL while a 100 µs SA_RESTART timer keeps
// interrupting it; without the agent every mkdir returns 0, and so must every one here, each
// directory made once, suffixed.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { startControlPlane } from '../support/controlplane';
import { crunRuntime, runCrunContainer } from '../support/crun';
import { startDataPlane } from '../support/dataplane';
import { SIGNAL_WORKLOAD } from '../support/paths';
import { containerd } from '../support/policy';
import { run } from '../support/processes';
import { makeBundle, runContainer } from '../support/runc';
import { scratchDir } from '../support/scratch';

const CALLS = 2000;
const ARGS = ['--count', String(CALLS), '--timer-us', '100'];
const SUFFIX = '-shop-web-1';

interface Counts { calls: number; ok: number; eexist: number; other: number; firstErrno: number; signals: number }

function parse(output: string): Counts {
  const line = output.split('\n').find((l) => l.startsWith('{"op"'));
  assert.ok(line, `the workload printed no result:\n${output}`);
  return JSON.parse(line) as Counts;
}

async function inContainer(t: TestContext, runtime: 'runc' | 'crun', flags?: string[]) {
  if (!fs.existsSync(SIGNAL_WORKLOAD)) throw new Error(`${SIGNAL_WORKLOAD} is missing: run npm ci (node-gyp builds it)`);
  const dir = scratchDir(t);
  // What the kernel gives without an agent, on this machine now.
  fs.mkdirSync(path.join(dir, 'bare'));
  const bare = await run(SIGNAL_WORKLOAD, ['--dir', path.join(dir, 'bare'), ...ARGS]);
  const reference = parse(bare.stdout);
  assert.equal(reference.ok, CALLS, bare.stderr);
  const dp = await startDataPlane(t, ['--log-level', 'info'], dir);
  await startControlPlane(t, dp);
  const id = `signals-${runtime}-${Math.random().toString(36).slice(2, 8)}`;
  const bundle = makeBundle(path.join(dir, id), ['/bin/seccomp-signal-workload', '--dir', '/work', ...ARGS],
    { listenerPath: dp.listenerSocket, listenerMetadata: 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', syscalls: ['mkdir', 'mkdirat'], flags },
    containerd('shop', 'web-1', 'app'));
  fs.copyFileSync(SIGNAL_WORKLOAD, path.join(bundle.rootfs, 'bin', 'seccomp-signal-workload'));
  fs.chmodSync(path.join(bundle.rootfs, 'bin', 'seccomp-signal-workload'), 0o755);
  fs.mkdirSync(path.join(bundle.rootfs, 'work'));
  const proc = runtime === 'runc' ? runContainer(t, bundle, id) : runCrunContainer(crunRuntime(t), bundle, id);
  await proc.waitFor(/\{"op".*\}/, 120_000);
  const counts = parse(proc.output());
  const names = fs.readdirSync(path.join(bundle.rootfs, 'work'));
  const suffixed = names.filter((n) => n.endsWith(SUFFIX)).length;
  t.diagnostic(`without the agent: ${reference.ok}/${reference.calls} returned 0 (${reference.signals} signals); in the ${runtime} container${flags ? ` (${flags.join(',')})` : ''}: ${counts.ok}/${counts.calls} returned 0, ${counts.eexist} EEXIST, ${counts.other} other (first errno ${counts.firstErrno}); ${counts.signals} signals; ${suffixed} suffixed directories, ${names.length - suffixed} others`);
  assert.equal(counts.eexist, 0, 'EEXIST for a fresh name: a directory made twice');
  assert.equal(counts.other, 0, `other errors (first errno ${counts.firstErrno})`);
  assert.equal(counts.ok, reference.ok);
  assert.ok(counts.signals > 0, 'the timer interrupted nothing');
  assert.equal(suffixed, CALLS);
  assert.equal(names.length, CALLS, 'a mkdir that bypassed the agent');
}

test('runc (no WAIT_KILLABLE_RECV): 2,000 fresh MKDIR_TMPL mkdirs under a 100 µs SA_RESTART timer all return 0, one suffixed directory each', { timeout: 180_000 }, async (t) => {
  await inContainer(t, 'runc');
});

test('crun without the profile flag: the same, every mkdir 0 and made once', { timeout: 180_000 }, async (t) => {
  await inContainer(t, 'crun');
});

test('crun with flags: [SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV]: the same, every mkdir 0 and made once', { timeout: 180_000 }, async (t) => {
  await inContainer(t, 'crun', ['SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV']);
});
