// Bounded input from profiles (issue 8, item 6): a listenerMetadata of 100,001 lines is one
// warning, and another container's syscalls are not held up while it arrives.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { startControlPlane } from '../support/controlplane';
import { startDataPlane } from '../support/dataplane';
import { runUnderFilter, startUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';

/** Longest a bystander's decided syscall may take while the huge profile arrives (main: 1.2 s and more). */
const MAX_BYSTANDER_MS = 400;

/** The message runc sends, with `metadata` as the profile's listenerMetadata. */
function runtimeMessage(id: string, metadata: string): string {
  const state = { ociVersion: '1.0.2-dev', id, status: 'creating', pid: 0, bundle: '', annotations: {} };
  return JSON.stringify({ ociVersion: '1.0.2-dev', fds: ['seccompFd'], pid: 0, metadata, state });
}

test('seccomp-controlplane listenerMetadata of 100,001 lines: one EPOLICY_TOO_LARGE warning, another container\'s syscalls are not delayed', { timeout: 180_000 }, async (t) => {
  const dp = await startDataPlane(t);
  const cp = await startControlPlane(t, dp);
  const dir = path.join(dp.dir, 'work');
  fs.mkdirSync(dir);
  const stop = path.join(dir, 'stop');
  // The bystander: a mkdir every millisecond, each decided by the control plane, until told to
  // stop (60 s at most); prints how many and the slowest.
  const loop = [
    'use Time::HiRes qw(time sleep); $| = 1; my ($dir, $stop) = @ARGV; my ($n, $max, $end) = (0, 0, time + 60);',
    'while (!-e $stop && time < $end) { my $t = time; mkdir("$dir/b"); my $d = time - $t; $max = $d if $d > $max; print "started\\n" if $n++ == 10; sleep(0.001) }',
    'printf "n=%d max_ms=%.1f\\n", $n, $max * 1000;',
  ].join(' ');
  const bystander = startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir', 'mkdirat'], id: 'bystander', metadata: '' }, ['/usr/bin/perl', '-e', loop, dir, stop]);
  await bystander.waitFor(/started/, 15_000);

  const message = path.join(dp.dir, 'huge.json');
  fs.writeFileSync(message, runtimeMessage('huge', Array.from({ length: 100_001 }, () => 'A=1').join('\n')));
  const huge = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'], extra: ['--raw-message', message] }, ['/bin/true']);
  assert.equal(huge.code, 0, huge.stderr);
  // Its identity line comes after its policy's warnings: the control plane is done with the profile.
  // (A plain search: a regex over main's 16 MB of warnings per output chunk takes minutes.)
  await waitUntil(() => cp.output().includes('"msg":"container huge has no pod identity'), 30_000, 'the control plane to admit container huge');
  fs.writeFileSync(stop, '');
  await bystander.waitFor(/max_ms=/, 15_000);
  const [, n, maxMs] = /n=(\d+) max_ms=([\d.]+)/.exec(bystander.output())!;
  t.diagnostic(`bystander: ${n} mkdirs, the slowest ${maxMs} ms`);
  assert.ok(Number(n) > 10);
  assert.ok(Number(maxMs) < MAX_BYSTANDER_MS, `the bystander's slowest mkdir took ${maxMs} ms while the profile arrived`);

  const hugeLines = cp.output().split('\n').filter((line) => line.includes('"container":"huge"') && line.includes('"level":40'));
  // The policy's own warnings carry a code; the profile lint says its findings once per profile
  // (a "rule" each), not once per line of the metadata.
  const warnings = hugeLines.filter((line) => line.includes('"code":'));
  const findings = hugeLines.filter((line) => line.includes('"rule":'));
  assert.equal(warnings.length, 1, warnings.slice(0, 3).join('\n'));
  assert.ok(findings.length <= 3, findings.slice(0, 3).join('\n'));
  assert.match(warnings[0], /"code":"EPOLICY_TOO_LARGE"/);
  assert.match(warnings[0], /the whole metadata is refused/);
});
