// More than one listener path (repeatable --listener-socket): the default /run/seccomp-agent.socket
// and the Security Profiles Operator's folder. Real runc containers start through each path and
// are answered; both sockets survive a crash of the data plane under seccomp-keeper (the fd store)
// and a handoff to a successor (--takeover), the very sockets (same inode), not new ones.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { keeperChild, startDataPlane, type RunningDataPlane } from '../support/dataplane';
import { makeBundle, runContainer, runcExec, sleepingContainer } from '../support/runc';
import { scratchDir } from '../support/scratch';
import { waitUntil } from '../support/wait';

/** A busybox container through `listener` whose mkdir is notified: exits 0 once answered. */
async function startThrough(t: Parameters<typeof runContainer>[0], dp: RunningDataPlane, dir: string, listener: string, name: string): Promise<void> {
  const before = (await dp.status()).counters!.notifications;
  const id = `paths-${name}-${process.pid}`;
  const bundle = makeBundle(path.join(dir, id), ['/bin/sh', '-c', 'mkdir /made && echo made'], { listenerPath: listener, syscalls: ['mkdir', 'mkdirat'] });
  const proc = runContainer(t, bundle, id);
  await proc.waitFor(/made/, 20_000);
  assert.equal(await proc.exited, 0, proc.output());
  assert.ok(fs.statSync(path.join(bundle.rootfs, 'made')).isDirectory());
  const after = (await dp.status()).counters!.notifications;
  assert.ok(after > before, `${name}: the data plane answered its mkdir through ${listener} (notifications ${before} -> ${after})`);
}

test('runc + seccomp-dataplane --listener-socket twice: a container through each path is answered; both sockets survive a keeper restart and a --takeover', async (t) => {
  const dir = scratchDir(t);
  const spo = path.join(dir, 'var-run', 'security-profiles-operator', 'seccomp-agent.sock');
  const a = await startDataPlane(t, ['--listener-socket', spo, '--log-level', 'info'], dir, true);
  const paths = [a.listenerSocket, spo];
  assert.deepEqual((await a.status()).listenerSockets, paths, 'status lists every listener path');
  const inodes = paths.map((p) => fs.statSync(p).ino);
  for (const [i, p] of paths.entries()) await startThrough(t, a, dir, p, `fresh-${i}`);
  // A container started through the SPO path, running across what follows: its exec fds too.
  const running = await sleepingContainer(t, dir, spo, '', ['mkdir', 'mkdirat']);

  // The data plane crashes: the keeper restarts it with every fd it kept, both listeners included.
  const keeper = a.proc.child.pid!;
  const first = keeperChild(keeper);
  process.kill(first, 'SIGKILL');
  await waitUntil(async () => {
    const s = await a.status().catch(() => null);
    return s !== null && s.pid !== first && s.pid === keeperChild(keeper);
  }, 15_000, () => `the keeper's next data plane; output:\n${a.proc.output()}`);
  // What a data plane that took both sockets over must do: serve the very sockets, start
  // containers through each, and answer the running container's exec (a new fd through the SPO path).
  const servesBoth = async (dp: RunningDataPlane, origin: string, phase: string) => {
    const status = await dp.status();
    assert.equal(status.origin, origin);
    assert.deepEqual(status.listenerSockets, paths);
    assert.deepEqual(paths.map((p) => fs.statSync(p).ino), inodes, `${phase}: the same sockets, not new ones`);
    for (const [i, p] of paths.entries()) await startThrough(t, dp, dir, p, `${phase}-${i}`);
    const exec = await runcExec(running.bundle, running.id, ['/bin/mkdir', `/after-${phase}`]);
    assert.equal(exec.code, 0, exec.stderr);
    assert.ok(fs.statSync(path.join(running.bundle.rootfs, `after-${phase}`)).isDirectory());
  };
  await servesBoth(a, 'fd-store', 'restart');

  // A successor takes over: it receives both listeners (and serves no new socket of its own).
  const b = await startDataPlane(t, ['--listener-socket', spo, '--log-level', 'info', '--takeover'], dir);
  await servesBoth(b, 'handoff', 'handoff');
  assert.ok((await b.status()).containers >= 1, 'the running container moved with the handoff');
});

test('seccomp-dataplane --takeover with a listener path its predecessor did not serve: keeps the old ones and adds the new one', async (t) => {
  const dir = scratchDir(t);
  const a = await startDataPlane(t, ['--log-level', 'info'], dir);
  const spo = path.join(dir, 'spo', 'seccomp-agent.sock');
  assert.deepEqual((await a.status()).listenerSockets, [a.listenerSocket]);
  const b = await startDataPlane(t, ['--listener-socket', spo, '--log-level', 'info', '--takeover'], dir);
  assert.equal(await a.proc.exited, 0, a.proc.output());
  assert.deepEqual((await b.status()).listenerSockets, [a.listenerSocket, spo]);
  for (const [i, p] of [a.listenerSocket, spo].entries()) await startThrough(t, b, dir, p, `added-${i}`);
});
