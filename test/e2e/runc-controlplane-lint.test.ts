// The control plane lints each container's profile when it arrives (controlplane/profile-lint-log.ts):
// real runc containers, the real control plane reading each bundle's config.json; each distinct
// profile is logged once, whatever the number of containers and execs that use it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startControlPlane } from '../support/controlplane';
import { startDataPlane } from '../support/dataplane';
import { runcExec, sleepingContainer } from '../support/runc';
import { scratchDir } from '../support/scratch';
import { waitUntil } from '../support/wait';

interface Line {
  msg: string;
  container?: string;
  rule?: string;
  checked?: string;
  profile?: string;
}

function lintLines(output: string): Line[] {
  return output.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Line).filter((l) => /^profile lint, /.test(l.msg));
}

test('seccomp-controlplane: a container\'s profile is linted when it arrives, once per distinct profile, not per container or exec', async (t) => {
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, [], dir);
  const cp = await startControlPlane(t, dp, ['--no-kubernetes']);
  // Two containers with one profile (a misspelled key; mkdir notified with io_uring left open).
  const one = await sleepingContainer(t, dir, dp.listenerSocket, 'MKDIR_TMLP=-x', ['mkdir', 'mkdirat']);
  await waitUntil(() => lintLines(cp.output()).length >= 2, 10_000, () => `the first profile's findings; output:\n${cp.output()}`);
  const two = await sleepingContainer(t, dir, dp.listenerSocket, 'MKDIR_TMLP=-x', ['mkdir', 'mkdirat']);
  const exec = await runcExec(one.bundle, one.id, ['/bin/true']);
  assert.equal(exec.code, 0, exec.stderr);
  // A third with another profile: logged on its own.
  const three = await sleepingContainer(t, dir, dp.listenerSocket, 'MOUNT_PORC=true', ['mkdir', 'mkdirat']);
  // Its two findings, logged after everything that arrived before it (the checks run in arrival
  // order, one at a time): what is not logged by then is not logged at all.
  await waitUntil(() => lintLines(cp.output()).filter((l) => l.container === three.id).length >= 2, 10_000, () => `the third profile's findings; output:\n${cp.output()}`);
  const lines = lintLines(cp.output());
  const of = (id: string) => lines.filter((l) => l.container === id).map((l) => l.rule).sort();
  assert.deepEqual(of(one.id), ['io-uring-open', 'metadata-key']);
  assert.deepEqual(of(two.id), [], 'the same profile is not logged again');
  assert.deepEqual(of(three.id), ['io-uring-open', 'metadata-key']);
  assert.equal(lines.length, 4);
  assert.ok(lines.every((l) => l.checked === 'profile'), 'the profile came from each bundle\'s config.json');
  assert.match(lines.find((l) => l.container === one.id && l.rule === 'metadata-key')!.msg, /MKDIR_TMLP \(did you mean MKDIR_TMPL\?\)/);
  assert.match(lines.find((l) => l.container === three.id && l.rule === 'metadata-key')!.msg, /MOUNT_PORC \(did you mean MOUNT_PROC\?\)/);
  assert.ok(!lines.some((l) => l.rule === 'listener-path'), 'the listener path the data plane serves is not reported');
  assert.equal(new Set(lines.map((l) => l.profile)).size, 2);
});
