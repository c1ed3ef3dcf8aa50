// The informer (controlplane/kube/informer.ts) on the policy kinds against the loopback API stand-in,
// and the stand-in's status subresource: list, watch, 410 Expired, an outage, PUT (with its
// resourceVersion conflict), merge patch, and server-side apply with one owner per field manager.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { connectKube, Informer } from '../../controlplane/kube/informer';
import { policyKind, type PolicyObject } from '../../controlplane/policy/resources/objects';
import { FakeKubeApiServer } from '../cmd/fake-kube-apiserver/server';

import { captureLogger } from '../support/log-capture';
import { waitUntil } from '../support/wait';

const spec = (errno: string) => ({ rules: [{ syscalls: ['mkdir'], errno }] });

async function setup(t: TestContext) {
  const api = await FakeKubeApiServer.create();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'policy-informer-'));
  const connection = await connectKube(api.writeKubeconfig(path.join(dir, 'kubeconfig')));
  const informer = new Informer<PolicyObject>(policyKind('namespaced'), { resyncPeriodMs: 60_000, retryMaxMs: 200, retryInitialMs: 20, requestTimeoutMs: 2000 }, captureLogger().logger);
  t.after(async () => {
    await informer.stop();
    await api.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { api, informer, connection };
}

test('informer: SeccompNotifyPolicy list, watch (added, changed with a new generation, deleted), 410 Expired lists again, an outage and the recovery', async (t) => {
  const { api, informer, connection } = await setup(t);
  api.applyPolicy('seccompnotifypolicies', { name: 'a', namespace: 'shop', spec: spec('EPERM') });
  informer.start(connection);
  await informer.waitFor('synced', 5000);
  assert.equal(informer.get('namespaced/shop/a')?.generation, 1);
  await waitUntil(() => api.watchesOn('seccompnotifypolicies') === 1, 5000, 'the watch');
  api.applyPolicy('seccompnotifypolicies', { name: 'a', namespace: 'shop', spec: spec('EACCES') });
  api.applyPolicy('seccompnotifypolicies', { name: 'b', namespace: 'blog', spec: spec('EPERM') });
  await waitUntil(() => informer.get('namespaced/shop/a')?.generation === 2 && informer.size === 2, 5000, 'the watch events');
  api.applyPolicy('seccompnotifypolicies', { name: 'a', namespace: 'shop', spec: spec('EACCES') });
  assert.equal(api.getPolicy('seccompnotifypolicies', 'a', 'shop')?.metadata.generation, 2, 'the same spec keeps its generation');
  api.removePolicy('seccompnotifypolicies', 'b', 'blog');
  await waitUntil(() => informer.size === 1, 5000, 'the deletion');

  const lists = () => api.requests.filter((r) => r.path.endsWith('/seccompnotifypolicies') && r.query.watch !== 'true').length;
  await new Promise((r) => setTimeout(r, 1100));
  api.compact();
  api.endWatches();
  await waitUntil(() => lists() === 2 && api.watchesOn('seccompnotifypolicies') === 1, 5000, 'a list after 410 Expired');
  assert.equal(informer.state, 'synced');

  await api.stop();
  await informer.waitFor('unreachable', 5000);
  assert.equal(informer.get('namespaced/shop/a')?.generation, 2, 'the content stays');
  api.applyPolicy('seccompnotifypolicies', { name: 'c', namespace: 'shop', spec: spec('EPERM') });
  await api.start();
  await informer.waitFor('synced', 5000);
  assert.ok(informer.get('namespaced/shop/c'));
});

test('API stand-in: status subresource PUT (409 on a stale resourceVersion), merge patch, server-side apply keeps each field manager\'s entries', async (t) => {
  const { api } = await setup(t);
  const stored = api.applyPolicy('clusterseccompnotifypolicies', { name: 'p', spec: spec('EPERM') });
  const url = `${api.url}/apis/seccompagent.dev/v1alpha1/clusterseccompnotifypolicies/p/status`;
  const send = (method: string, contentType: string, body: unknown, query = '') => fetch(`${url}${query}`, { method, headers: { 'content-type': contentType }, body: JSON.stringify(body) });
  assert.equal((await send('PUT', 'application/json', { metadata: { resourceVersion: '1' }, status: { rules: 9 } })).status, 409);
  assert.equal((await send('PUT', 'application/json', { metadata: { resourceVersion: stored.metadata.resourceVersion }, status: { rules: 1 } })).status, 200);
  assert.equal((await send('PATCH', 'application/merge-patch+json', { status: { observedGeneration: 1 } })).status, 200);
  assert.deepEqual(api.getPolicy('clusterseccompnotifypolicies', 'p')?.status, { rules: 1, observedGeneration: 1 });
  const apply = (manager: string, status: unknown) => send('PATCH', 'application/apply-patch+yaml', { status }, `?fieldManager=${encodeURIComponent(manager)}&force=true`);
  await apply('seccomp-agent/a', { nodes: [{ node: 'a', containers: 1 }] });
  await apply('seccomp-agent/b', { nodes: [{ node: 'b', containers: 2 }] });
  await apply('seccomp-agent/a', { nodes: [{ node: 'a', containers: 3 }] });
  assert.deepEqual(api.getPolicy('clusterseccompnotifypolicies', 'p')?.status.nodes, [{ node: 'b', containers: 2 }, { node: 'a', containers: 3 }]);
  await apply('seccomp-agent/a', { nodes: [] });
  assert.deepEqual(api.getPolicy('clusterseccompnotifypolicies', 'p')?.status.nodes, [{ node: 'b', containers: 2 }], 'a removes only its own entry');
  assert.equal(api.getPolicy('clusterseccompnotifypolicies', 'p')?.metadata.generation, 1, 'status writes never change the generation');
  assert.equal((await send('PATCH', 'application/apply-patch+yaml', { status: {} })).status, 400, 'apply needs a field manager');
  assert.equal((await fetch(`${api.url}/apis/seccompagent.dev/v1alpha1/namespaces/x/clusterseccompnotifypolicies`)).status, 404, 'the cluster kind has no namespaced path');
});
