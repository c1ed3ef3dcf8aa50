// The policy resources on real runc containers: a SeccompNotifyPolicy in shop selecting app=web
// with errno EPERM for mkdir when paths[0].startsWith("/etc") makes only those pods' mkdir under
// /etc fail; the container's own /etc, inside its rootfs.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { applyPolicy, containerd, NODE, startPolicyControlPlane } from '../support/policy';
import { FakeKubeApiServer } from '../cmd/fake-kube-apiserver/server';
import { startDataPlane } from '../support/dataplane';
import { runcExec, sleepingContainer } from '../support/runc';
import { scratchDir } from '../support/scratch';

test('seccomp-controlplane SeccompNotifyPolicy on runc containers: app=web pods of shop get EPERM for mkdir under /etc, others and other paths do not', async (t) => {
  const dir = scratchDir(t);
  const api = await FakeKubeApiServer.create();
  t.after(() => api.stop());
  api.addNamespace('shop');
  api.addNamespace('blog');
  api.addPod({ name: 'web-1', namespace: 'shop', nodeName: NODE, labels: { app: 'web' }, containers: [{ name: 'app' }] });
  api.addPod({ name: 'db-1', namespace: 'shop', nodeName: NODE, labels: { app: 'db' }, containers: [{ name: 'app' }] });
  api.addPod({ name: 'web-1', namespace: 'blog', nodeName: NODE, labels: { app: 'web' }, containers: [{ name: 'app' }] });
  applyPolicy(api, 'seccompnotifypolicies', {
    name: 'deny-etc', namespace: 'shop',
    spec: { selector: { podSelector: { matchLabels: { app: 'web' } } }, rules: [{ syscalls: ['mkdir', 'mkdirat'], when: 'paths[0].startsWith("/etc") || paths[1].startsWith("/etc")', errno: 'EPERM' }] },
  });
  const kubeconfig = api.writeKubeconfig(path.join(dir, 'kubeconfig'));
  const dp = await startDataPlane(t, [], dir);
  const { cp } = await startPolicyControlPlane(t, dp, kubeconfig, path.join(dir, 'state'));
  await cp.waitFor(/SeccompNotifyPolicy shop\/deny-etc generation 1 in force/, 20_000);
  await cp.waitFor(/3 pods of node/, 20_000);

  const web = await sleepingContainer(t, dir, dp.listenerSocket, '', ['mkdir', 'mkdirat'], containerd('shop', 'web-1', 'app'));
  const db = await sleepingContainer(t, dir, dp.listenerSocket, '', ['mkdir', 'mkdirat'], containerd('shop', 'db-1', 'app'));
  const blog = await sleepingContainer(t, dir, dp.listenerSocket, '', ['mkdir', 'mkdirat'], containerd('blog', 'web-1', 'app'));

  const denied = await runcExec(web.bundle, web.id, ['/bin/mkdir', '/etc/denied']);
  assert.notEqual(denied.code, 0);
  assert.match(denied.stderr, /Operation not permitted/);
  assert.equal(fs.existsSync(path.join(web.bundle.rootfs, 'etc', 'denied')), false);
  const relative = await runcExec(web.bundle, web.id, ['/bin/sh', '-c', 'cd /tmp && mkdir inside-tmp']);
  assert.equal(relative.code, 0, relative.stderr);
  const tmp = await runcExec(web.bundle, web.id, ['/bin/mkdir', '/tmp/allowed']);
  assert.equal(tmp.code, 0, tmp.stderr);
  for (const [name, c] of [['db', db], ['blog', blog]] as const) {
    const made = await runcExec(c.bundle, c.id, ['/bin/mkdir', `/etc/${name}`]);
    assert.equal(made.code, 0, `${name}: ${made.stderr}`);
    assert.ok(fs.statSync(path.join(c.bundle.rootfs, 'etc', name)).isDirectory());
  }
});
