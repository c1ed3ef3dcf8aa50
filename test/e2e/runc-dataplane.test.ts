// The real runc from Debian's packages sends its notify fds to seccomp-dataplane.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { listContainers } from '../../common/dataplane-client';
import { AnsweredBy } from '../../proto/gen/seccompagent/v1/dataplane';
import { startDataPlane, watchEvents } from '../support/dataplane';
import { makeBundle, runContainer, runcExec } from '../support/runc';
import { scratchDir } from '../support/scratch';
import { waitUntil } from '../support/wait';

test('runc + seccomp-dataplane: a busybox container notifying on mkdir is seen and answered; runc exec arrives as status running with its own fd', async (t) => {
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, [], dir);
  const watch = await watchEvents(t, dp.client);
  await waitUntil(async () => (await dp.status()).watchers === 1, 5000, 'the watcher to register');
  const bundle = makeBundle(
    path.join(dir, 'bundle'),
    ['/bin/sh', '-c', 'mkdir /made-by-init && echo init-done && sleep 60'],
    { listenerPath: dp.listenerSocket, listenerMetadata: 'MKDIR_TMPL=-{{.Namespace}}', syscalls: ['mkdir', 'mkdirat'] },
    { 'io.kubernetes.cri.sandbox-namespace': 'ns1', 'io.kubernetes.cri.sandbox-name': 'pod1' },
  );
  fs.mkdirSync(bundle.dir, { recursive: true });
  const id = `e2e-${process.pid}`;
  const container = runContainer(t, bundle, id);
  await container.waitFor(/init-done/, 20_000);
  assert.ok(fs.statSync(path.join(bundle.rootfs, 'made-by-init')).isDirectory());

  const added = await watch.waitFor((e) => e.event?.$case === 'containerAdded' && e.event.containerAdded.containerId === id);
  assert.equal(added.event?.$case === 'containerAdded' && added.event.containerAdded.status, 'creating');
  assert.equal(added.event?.$case === 'containerAdded' && added.event.containerAdded.metadata, 'MKDIR_TMPL=-{{.Namespace}}');
  assert.equal(added.event?.$case === 'containerAdded' && added.event.containerAdded.annotations['io.kubernetes.cri.sandbox-name'], 'pod1');
  const notification = await watch.waitFor((e) => e.event?.$case === 'notification' && e.event.notification.containerId === id);
  assert.ok(notification.event?.$case === 'notification' && notification.event.notification.stringArgs.some((s) => s.value === '/made-by-init'));
  const answer = await watch.waitFor((e) => e.event?.$case === 'answer' && e.event.answer.containerId === id);
  assert.equal(answer.event?.$case === 'answer' && answer.event.answer.answeredBy, AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE);

  const exec = await runcExec(bundle, id, ['/bin/mkdir', '/made-by-exec']);
  assert.equal(exec.code, 0, exec.stderr);
  assert.ok(fs.statSync(path.join(bundle.rootfs, 'made-by-exec')).isDirectory());
  const { containers } = await listContainers(dp.client);
  const mine = containers.filter((c) => c.containerId === id);
  // The exec's fd is gone once its process exited; it must have arrived as "running" with its own handle.
  const execAdded = await watch.waitFor((e) => e.event?.$case === 'containerAdded' && e.event.containerAdded.containerId === id && e.event.containerAdded.status === 'running');
  const execHandle = execAdded.event?.$case === 'containerAdded' ? execAdded.event.containerAdded.handle : -1n;
  assert.notEqual(execHandle, added.event?.$case === 'containerAdded' ? added.event.containerAdded.handle : -1n);
  assert.ok(mine.some((c) => c.status === 'creating'), 'the init fd stays registered while the container runs');
  await watch.waitFor((e) => e.event?.$case === 'answer' && e.event.answer.handle === execHandle);
});
