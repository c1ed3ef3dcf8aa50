// Planned data plane upgrade: `seccomp-dataplane --takeover` takes every container over from the
// serving one by handoff (listener, notify fds, records, ids in flight) while they run.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { listContainers } from '../../common/dataplane-client';
import { BENCH_WORKLOAD, ROOT } from '../support/paths';
import { startDataPlane } from '../support/dataplane';
import { runUnderFilter, startUnderFilter } from '../support/workload';
import { run } from '../support/processes';
import { scratchDir } from '../support/scratch';
import { startControlPlane, startTestControlPlane } from '../support/controlplane';
import { waitUntil } from '../support/wait';

interface WorkloadReport {
  calls: number;
  errors: number;
  firstErrno: number;
  maxUs: number;
}

const pauseOf = (log: string) => Number(/"pauseMs":([\d.]+)/.exec(log)?.[1] ?? NaN);

test('--takeover under a 4-thread workload: every container moves, no syscall fails, the old one exits 0', async (t) => {
  const a = await startDataPlane(t, ['--log-level', 'info']);
  const idle = startUnderFilter(t, { socket: a.listenerSocket, syscalls: ['getppid'], id: 'idle-one', metadata: 'MKDIR_TMPL=-x' }, ['/bin/sleep', '60']);
  await waitUntil(async () => (await a.status()).containers === 1, 10_000, 'the idle container');
  const load = startUnderFilter(t, { socket: a.listenerSocket, syscalls: ['getppid'], id: 'busy' },
    [BENCH_WORKLOAD, '--threads', '4', '--seconds', '6']);
  await waitUntil(async () => (await a.status()).counters!.notifications > 1000n, 10_000, 'the workload to run');
  // New containers keep arriving while it happens: none may be refused.
  const starts = Array.from({ length: 6 }, (_, i) => runUnderFilter({ socket: a.listenerSocket, syscalls: ['getppid'], id: `during-${i}` }, ['/bin/true']));
  const b = await startDataPlane(t, ['--log-level', 'info', '--takeover'], a.dir);
  assert.equal(await a.proc.exited, 0, a.proc.output());
  for (const started of await Promise.all(starts)) assert.equal(started.code, 0, started.stderr);
  const status = await b.status();
  assert.equal(status.origin, 'handoff');
  const { containers } = await listContainers(b.client);
  const ids = containers.map((c) => c.containerId);
  assert.ok(ids.includes('idle-one') && ids.includes('busy'), `containers after the handoff: ${ids.join(', ')}`);
  assert.equal(containers.find((c) => c.containerId === 'idle-one')!.metadata, 'MKDIR_TMPL=-x', 'the record travels with the fd');
  assert.equal(await load.exited, 0, load.output());
  const report = JSON.parse(load.output().trim().split('\n').pop()!) as WorkloadReport;
  assert.equal(report.errors, 0, `failed syscalls (first errno ${report.firstErrno})`);
  const pause = pauseOf(a.proc.output());
  assert.ok(pause < 100, `the old data plane paused answering for ${pause} ms`);
  t.diagnostic(`handoff pause ${pause.toFixed(1)} ms (old side), longest syscall ${(report.maxUs / 1000).toFixed(1)} ms, ${report.calls} calls`);
  // The successor serves new containers on the same listener and answers the idle one.
  const late = await runUnderFilter({ socket: b.listenerSocket, syscalls: ['getppid'], id: 'after' }, ['/bin/true']);
  assert.equal(late.code, 0, late.stderr);
  idle.child.kill('SIGTERM');
  await idle.exited;
});

test('--takeover: notifications the old one had forwarded to a control plane go to the next control plane', async (t) => {
  const a = await startDataPlane(t, ['--log-level', 'info', '--decision-timeout', '60s']);
  await startTestControlPlane(t, a, 'ignore');
  const started = Date.now();
  const call = runUnderFilter({ socket: a.listenerSocket, syscalls: ['getppid'], id: 'held' }, ['/bin/sh', '-c', 'echo ppid $PPID; cat /proc/self/stat > /dev/null']);
  // getppid is what sh calls for $PPID: it waits for a control plane that never answers.
  await waitUntil(async () => (await a.status()).pending >= 1, 10_000, 'a held notification');
  const b = await startDataPlane(t, ['--log-level', 'info', '--takeover'], a.dir);
  // The old control plane's stream ended with the old data plane; the successor holds what it had.
  assert.match(b.proc.output(), /"inFlightHeld":[1-9]/);
  await startTestControlPlane(t, b, 'errno:EACCES');
  const done = await call;
  assert.ok(Date.now() - started < 30_000, 'answered by the next control plane, not by the 60 s deadline');
  // getppid failed (EACCES, the control plane's decision); the default (continue) gives the real ppid.
  assert.match(done.stdout, /ppid -\d+\b/, `the control plane's decision, not the default: ${done.stdout}`);
  const counters = (await b.status()).counters!;
  assert.ok(counters.answeredControlPlane >= 1n);
  assert.equal(counters.answeredDefaultRecovered + counters.answeredDefaultNoControlPlane, 0n);
});

test('--takeover --control-plane-grace 0: what the old one had forwarded gets the default at once (recovered)', async (t) => {
  const a = await startDataPlane(t, ['--log-level', 'info', '--decision-timeout', '60s']);
  await startTestControlPlane(t, a, 'ignore');
  const call = runUnderFilter({ socket: a.listenerSocket, syscalls: ['getppid'], id: 'held' }, ['/bin/sh', '-c', 'echo ppid $PPID']);
  await waitUntil(async () => (await a.status()).pending >= 1, 10_000, 'a held notification');
  const b = await startDataPlane(t, ['--log-level', 'info', '--takeover', '--control-plane-grace', '0'], a.dir);
  const done = await call;
  assert.match(done.stdout, /ppid [1-9]\d*/, 'continued by the default action: the real ppid');
  assert.match(b.proc.output(), /"inFlightAnswered":[1-9]/);
  assert.doesNotMatch(b.proc.output(), /new notifications wait for one to attach/);
  assert.ok((await b.status()).counters!.answeredDefaultRecovered >= 1n);
});

test('--takeover with a control plane attached: its policy holds across the handoff, nothing gets the default', async (t) => {
  const a = await startDataPlane(t, ['--log-level', 'info']);
  const cp = await startControlPlane(t, a);
  const made = path.join(a.dir, 'made');
  fs.mkdirSync(made);
  const stopFile = path.join(a.dir, 'stop');
  // Every mkdir is emulated by the control plane's policy with the suffix; one answered by the
  // default action (continue) would leave a directory without it.
  const loop = `cd ${made}; i=0; while [ ! -e ${stopFile} ]; do mkdir d$i; i=$((i+1)); done`;
  const workload = startUnderFilter(t, {
    socket: a.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id: 'policy', metadata: 'MKDIR_TMPL=-{{.Namespace}}',
    annotations: { 'io.kubernetes.cri.sandbox-namespace': 'held', 'io.kubernetes.cri.sandbox-name': 'p' },
  }, ['/bin/sh', '-c', loop]);
  await waitUntil(() => fs.readdirSync(made).length > 20, 10_000, 'the control plane to emulate mkdir');
  const b = await startDataPlane(t, ['--log-level', 'info', '--takeover'], a.dir);
  assert.equal(await a.proc.exited, 0, a.proc.output());
  await waitUntil(() => (cp.output().match(/attached to the data plane/g) ?? []).length >= 2, 10_000, 'the control plane to attach to the successor');
  const before = fs.readdirSync(made).length;
  await waitUntil(() => fs.readdirSync(made).length > before + 20, 10_000, 'the policy to go on after the handoff');
  fs.writeFileSync(stopFile, '');
  assert.equal(await workload.exited, 0, workload.output());
  const unsuffixed = fs.readdirSync(made).filter((name) => !name.endsWith('-held'));
  assert.deepEqual(unsuffixed, [], 'every mkdir went through the control plane, none through the default action');
  assert.match(b.proc.output(), /new notifications wait for one to attach/);
  const counters = (await b.status()).counters!;
  assert.equal(counters.answeredDefaultNoControlPlane + counters.answeredDefaultDeadline, 0n);
});

test('--takeover with no data plane serving starts fresh', async (t) => {
  const dp = await startDataPlane(t, ['--takeover']);
  assert.equal((await dp.status()).origin, 'fresh');
  assert.match(dp.proc.output(), /no data plane serves the handoff socket; starting fresh/);
});

test('the handoff socket is 0600 and root\'s: another user cannot take the containers', async (t) => {
  const dp = await startDataPlane(t);
  const handoff = path.join(dp.dir, 'grpc', 'handoff.sock');
  const stat = fs.statSync(handoff);
  assert.deepEqual({ mode: stat.mode & 0o777, uid: stat.uid, socket: stat.isSocket() }, { mode: 0o600, uid: 0, socket: true });
  // Only the socket's own mode may refuse: its folders (the test's own) can be traversed by anyone, and
  // the client is the real one (the addon's handoffConnect) copied where anyone can read it, so
  // neither a private checkout (a clone under /root) nor the scratch folder's 0700 decides.
  for (const dir of [dp.dir, path.dirname(handoff)]) fs.chmodSync(dir, fs.statSync(dir).mode | 0o011);
  const client = scratchDir(t, 'seccomp-agent-handoff-client-');
  fs.chmodSync(client, 0o755);
  const addon = path.join(client, 'seccomp_agent.node');
  fs.copyFileSync(path.join(ROOT, 'build', 'Release', 'seccomp_agent.node'), addon);
  fs.chmodSync(addon, 0o644);
  const probe = `const fs = require('node:fs');
    console.log('reachable ' + fs.statSync(${JSON.stringify(handoff)}).isSocket());
    try { const c = require(${JSON.stringify(addon)}).handoffConnect(${JSON.stringify(handoff)}); console.log(c === null ? 'none' : 'connected'); } catch (e) { console.log('refused: ' + e.message); }`;
  const nobody = await run(process.execPath, ['-e', probe], { uid: 65534, gid: 65534, cwd: client });
  assert.match(nobody.stdout, /^reachable true$/m, `uid 65534 reaches the socket file: ${nobody.stdout}${nobody.stderr}`);
  assert.match(nobody.stdout, /^refused: .*Permission denied/m, nobody.stdout + nobody.stderr);
  assert.equal((await dp.status()).origin, 'fresh');
  assert.equal(dp.proc.child.exitCode, null, 'the data plane serves on');
});
