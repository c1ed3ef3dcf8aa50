// Keeps the bench's native tools from rotting: `npm run bench` itself never runs under `npm test`
// (it is not a test), so this runs its reference pair once, briefly, for real.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import { ROOT, SECCOMP_RUN } from '../support/paths';
import { run, start } from '../support/processes';
import { scratchDir } from '../support/scratch';

const RESPONDER = path.join(ROOT, 'build', 'Release', 'seccomp-bench-responder');
const WORKLOAD = path.join(ROOT, 'build', 'Release', 'seccomp-bench-workload');

test('seccomp-bench-workload under seccomp-run, answered by seccomp-bench-responder: 1 s of getppid gives a JSON line with calls', async (t) => {
  const dir = scratchDir(t, 'seccomp-bench-smoke-');
  const socket = path.join(dir, 'responder.sock');
  const responder = start(t, RESPONDER, [socket]);
  await responder.waitFor(/"listening"/);

  const result = await run(SECCOMP_RUN, [
    '--socket', socket, '--syscalls', 'getppid', '--id', 'bench-smoke', '--',
    WORKLOAD, '--threads', '2', '--seconds', '1', '--warmup-ms', '100',
  ]);
  assert.equal(result.code, 0, `seccomp-run + workload failed:\n${result.stdout}\n${result.stderr}`);
  const line = JSON.parse(result.stdout.trim().split('\n').pop() ?? '') as Record<string, number | string>;
  assert.equal(line.syscall, 'getppid');
  assert.equal(line.threads, 2);
  assert.ok(Number(line.calls) > 0, `no calls measured: ${result.stdout}`);
  assert.equal(line.errors, 0);
  assert.ok(Number(line.p50Us) > 0 && Number(line.p50Us) <= Number(line.p99Us), result.stdout);

  // The calls really went through the responder (a missing filter would make them free).
  responder.child.kill('SIGTERM');
  await responder.exited;
  const stats = /\{"answered":(\d+)/.exec(responder.output());
  assert.ok(stats, `no stats from the responder: ${responder.output()}`);
  assert.ok(Number(stats[1]) >= Number(line.calls), `responder answered ${stats[1]} for ${line.calls} measured calls`);
});

test('seccomp-bench-workload --linger-ms: after its line the container stays, making no call, until SIGTERM, and exits 0', async (t) => {
  const dir = scratchDir(t, 'seccomp-bench-linger-');
  const socket = path.join(dir, 'responder.sock');
  const responder = start(t, RESPONDER, [socket]);
  await responder.waitFor(/"listening"/);
  // No warm-up: every call the workload makes is one it counts.
  const workload = start(t, SECCOMP_RUN, [
    '--socket', socket, '--syscalls', 'getppid', '--id', 'bench-linger', '--',
    WORKLOAD, '--threads', '1', '--seconds', '0.3', '--warmup-ms', '0', '--linger-ms', '60000',
  ]);
  const line = JSON.parse(await workload.waitFor(/\{"syscall".*\}/)) as Record<string, number | string>;
  assert.ok(Number(line.calls) > 0, workload.output());
  // Its line is out and it still runs: a bench reads the agent's record of it now.
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(workload.child.exitCode, null, `the workload exited after its line: ${workload.output()}`);
  workload.child.kill('SIGTERM');
  assert.equal(await workload.exited, 0, workload.output());

  responder.child.kill('SIGTERM');
  await responder.exited;
  const stats = /\{"answered":(\d+)/.exec(responder.output());
  assert.ok(stats, `no stats from the responder: ${responder.output()}`);
  assert.equal(Number(stats[1]), Number(line.calls), 'calls made after the line, or not counted in it');
});

// The noisy-neighbour scenario reads both containers' records after the victim's measured seconds
// (not during them, where its gRPC work would load the CPUs the bare C rows do not share): the
// victim lingers for it. Its own check fails the run when the victim's record says it was not
// answered by the default path (a record read after the victim exited is gone).
test('bench noisy-neighbour scenario, default path: both records read after the measured seconds prove the path; one metrics line', { timeout: 60_000 }, async () => {
  const script = path.join(ROOT, 'dist', 'bench', 'noisy-neighbour.js');
  const params = { threads: 2, seconds: 0.3, warmupMs: 100, syscall: 'getppid', neighbourPath: 'default' };
  const result = await run(process.execPath, [script, JSON.stringify(params)]);
  const line = JSON.parse(result.stdout.trim().split('\n').pop() ?? '{}') as { metrics?: Record<string, number>; error?: string };
  assert.equal(line.error, undefined, `the scenario failed: ${line.error}\n${result.stderr}`);
  assert.equal(result.code, 0, result.stderr);
  assert.ok(line.metrics && line.metrics.p99Us > 0 && line.metrics.neighbourCallsPerSec > 0, result.stdout);
  assert.equal(line.metrics.byControlPlane, 0);
});

// The fast-path scenario (rows (d) and (e)) as `npm run bench` runs it, briefly: its own checks
// fail the run when the answers did not come from the fast path (or mkdir got no suffix).
for (const syscall of ['getppid', 'mkdir'] as const) {
  test(`bench fast-path scenario, ${syscall}: the real control plane pushes the policy, the data plane answers natively; one metrics line`, { timeout: 60_000 }, async () => {
    const script = path.join(ROOT, 'dist', 'bench', 'fast-path.js');
    const result = await run(process.execPath, [script, JSON.stringify({ threads: 1, seconds: 0.3, warmupMs: 100, syscall })]);
    const line = JSON.parse(result.stdout.trim().split('\n').pop() ?? '{}') as { metrics?: Record<string, number>; error?: string };
    assert.equal(line.error, undefined, `the scenario failed: ${line.error}\n${result.stderr}`);
    assert.equal(result.code, 0, result.stderr);
    assert.ok(line.metrics && line.metrics.calls > 0 && line.metrics.p50Us > 0, result.stdout);
    assert.equal(line.metrics.defaultAnswers, 0);
  });
}
