// seccompctl lint's self-hang table (common/profile/lint.ts, RUNTIME_NOTIFY_LIMITS) against
// the installed runtimes: the experiment of test/cmd/self-hang-probe, re-run for some entries. A
// busybox container notifies one syscall, a real data plane answers on the listener; what the
// table says each runtime does (refuse, hang, start) must be what it does. The full probe runs
// 112 candidates: `node dist/test/cmd/self-hang-probe/main.js` (README.md there).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { RUNTIME_NOTIFY_LIMITS, type LintRuntime } from '../../common/profile/lint';
import { crunBinary } from '../support/crun';
import { startDataPlane } from '../support/dataplane';
import { ROOT } from '../support/paths';
import { run } from '../support/processes';
import { requireRunc } from '../support/runc';
import { scratchDir } from '../support/scratch';
import { probeSelfHang } from '../support/self-hang';

/** Entries re-checked per runtime: syscalls the runtime makes around the handover that the table says do not hang. */
const STARTS: Record<LintRuntime, string[]> = { runc: ['sendmsg', 'close', 'fcntl', 'futex'], crun: ['sendmsg', 'write', 'close', 'fcntl'] };
const TIMEOUT_MS = 8000;

function version(runtime: LintRuntime): string {
  const binary = runtime === 'runc' ? 'runc' : crunBinary();
  const first = execFileSync(binary, ['--version'], { encoding: 'utf8' }).split('\n')[0];
  return /(\d+\.\d+\.\d+)/.exec(first)?.[1] ?? first;
}

for (const runtime of ['runc', 'crun'] as const) {
  test(`seccompctl lint self-hang: ${runtime}, as installed, refuses, hangs on and starts with what the recorded table says`, async (t) => {
    requireRunc();
    const limits = RUNTIME_NOTIFY_LIMITS[runtime];
    assert.ok(limits.measured.includes(version(runtime)), `${runtime} ${version(runtime)} is installed, the table was measured with ${limits.measured}: run test/cmd/self-hang-probe and record its result`);
    const dir = scratchDir(t);
    const dp = await startDataPlane(t, ['--log-level', 'warn'], dir);
    for (const [syscall, message] of Object.entries(limits.refuses)) {
      const r = await probeSelfHang(runtime, syscall, dp.listenerSocket, dir, TIMEOUT_MS);
      assert.equal(r.outcome, 'failed', `${runtime} refuses to notify ${syscall}: ${r.detail}`);
      assert.ok(r.detail.includes(message.replace(/^.*: /, '')), `${runtime}'s message: ${r.detail}`);
    }
    for (const syscall of limits.hangs) {
      const r = await probeSelfHang(runtime, syscall, dp.listenerSocket, dir, TIMEOUT_MS);
      assert.equal(r.outcome, 'hang', `${runtime} hangs when ${syscall} is notified: ${r.detail}`);
    }
    for (const syscall of STARTS[runtime]) {
      assert.ok(!limits.hangs.includes(syscall) && !(syscall in limits.refuses));
      for (const noNewPrivileges of [true, false]) {
        const r = await probeSelfHang(runtime, syscall, dp.listenerSocket, dir, TIMEOUT_MS, noNewPrivileges);
        assert.equal(r.outcome, 'ok', `${runtime} starts with ${syscall} notified (no_new_privs ${noNewPrivileges}): ${r.detail}`);
      }
    }
    const status = await dp.status();
    assert.ok(status.counters!.notifications > 0n, 'the probes\' filters did notify the data plane');
  });
}

test('seccompctl lint: a profile notifying write is an error under runc (exit 1, --json), the shipped profile passes', async (t) => {
  const dir = scratchDir(t);
  const file = path.join(dir, 'write.json');
  fs.writeFileSync(file, JSON.stringify({ defaultAction: 'SCMP_ACT_ALLOW', architectures: ['SCMP_ARCH_X86_64'], listenerPath: '/run/seccomp-agent.socket', syscalls: [{ names: ['write'], action: 'SCMP_ACT_NOTIFY' }] }));
  const ctl = path.join(ROOT, 'bin', 'seccompctl');
  const bad = await run(ctl, ['lint', file, '--runtime', 'runc', '--json']);
  assert.equal(bad.code, 1, bad.stderr);
  const report = JSON.parse(bad.stdout);
  assert.equal(report.errors, 1);
  assert.equal(report.profiles[0].findings[0].rule, 'self-hang');
  const good = await run(ctl, ['lint', path.join(ROOT, 'deploy/profiles/seccompprofile.yaml'), '--runtime', 'runc']);
  assert.equal(good.code, 0, good.stdout + good.stderr);
  assert.match(good.stdout, /0 error\(s\), 0 warning\(s\)/);
  const typo = await run(ctl, ['lint', path.join(ROOT, 'deploy/profiles/seccomp-agent-mkdir.json'), '--metadata', 'MKDIR_TMPL=-x\\nMOUNT_PORC=true']);
  assert.equal(typo.code, 0);
  assert.match(typo.stdout, /unknown listenerMetadata key MOUNT_PORC \(did you mean MOUNT_PROC\?\)/);
});
