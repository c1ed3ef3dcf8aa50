import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { AgentError } from '../../common/errors';
import { cachedPodFrom, describeKubeError, PodCache, type PodCacheOptions } from './pod-cache';

const silent = pino({ level: 'silent' });

function options(over: Partial<PodCacheOptions> = {}): PodCacheOptions {
  return { logger: silent, nodeName: 'node-1', kubeconfig: '', unresolvedAction: 'continue', resyncPeriodMs: 60_000, retryMaxMs: 1000, ...over };
}

test('pod cache: identity data from a pod, container ids without their runtime scheme', () => {
  const pod = cachedPodFrom({
    metadata: { name: 'web-1', namespace: 'shop', uid: 'u-1', annotations: { 'kubernetes.io/config.mirror': 'abc123' } },
    status: {
      containerStatuses: [{ name: 'app', containerID: 'containerd://' + 'a'.repeat(64) }, { name: 'waiting' }],
      initContainerStatuses: [{ name: 'init', containerID: 'cri-o://' + 'b'.repeat(64) }],
      ephemeralContainerStatuses: [{ name: 'debug', containerID: 'docker://' + 'c'.repeat(64) }],
    },
  });
  assert.ok(pod);
  assert.equal(pod.namespace, 'shop');
  assert.equal(pod.pod, 'web-1');
  assert.equal(pod.uid, 'u-1');
  assert.equal(pod.mirrorHash, 'abc123');
  assert.deepEqual([...pod.containers], [
    ['a'.repeat(64), 'app'],
    ['b'.repeat(64), 'init'],
    ['c'.repeat(64), 'debug'],
  ]);
  assert.equal(cachedPodFrom({ metadata: { name: 'x' } }), null, 'no uid, no entry');
  assert.equal(cachedPodFrom({}), null);
});

test('pod cache: failure reasons are short: errno code, HTTP status with the Status message', () => {
  assert.equal(describeKubeError(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' })), 'ECONNREFUSED');
  assert.equal(describeKubeError(Object.assign(new TypeError('fetch failed'), { cause: { code: 'ENOTFOUND' } })), 'ENOTFOUND');
  assert.equal(
    describeKubeError({ code: 403, body: JSON.stringify({ kind: 'Status', message: 'pods is forbidden: User "system:serviceaccount:x:y" cannot list resource "pods"' }) }),
    'HTTP 403: pods is forbidden: User "system:serviceaccount:x:y" cannot list resource "pods"',
  );
  assert.equal(describeKubeError(Object.assign(new Error('Internal Server Error'), { statusCode: 500 })), 'HTTP 500');
  assert.equal(describeKubeError(new AgentError('ETIMEDOUT', 'no answer within 10000 ms')), 'no answer within 10000 ms');
  assert.equal(describeKubeError('weird'), 'weird');
});

test('pod cache: start() without a usable configuration is EKUBE_CONFIG, not an outage', async (t) => {
  const saved = process.env.KUBERNETES_SERVICE_HOST;
  delete process.env.KUBERNETES_SERVICE_HOST;
  t.after(() => {
    if (saved !== undefined) process.env.KUBERNETES_SERVICE_HOST = saved;
  });
  const inCluster = new PodCache(options());
  await assert.rejects(inCluster.start(), (err) => err instanceof AgentError && err.code === 'EKUBE_CONFIG' && /--no-kubernetes/.test(err.message));
  assert.equal(inCluster.state, 'connecting');
  const missing = new PodCache(options({ kubeconfig: '/nonexistent/kubeconfig' }));
  await assert.rejects(missing.start(), (err) => err instanceof AgentError && err.code === 'EKUBE_CONFIG' && /\/nonexistent\/kubeconfig/.test(err.message));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pod-cache-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const empty = path.join(dir, 'kubeconfig');
  fs.writeFileSync(empty, 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n');
  await assert.rejects(new PodCache(options({ kubeconfig: empty })).start(), (err) => err instanceof AgentError && err.code === 'EKUBE_CONFIG');
});

test('pod cache: before start() it is empty, connecting, and lookups answer undefined', async () => {
  const cache = new PodCache(options());
  assert.equal(cache.state, 'connecting');
  assert.equal(cache.reachable, false);
  assert.equal(cache.size, 0);
  assert.equal(cache.lookup('anything'), undefined);
  await assert.rejects(cache.waitFor('synced', 20), (err) => err instanceof AgentError && err.code === 'ETIMEDOUT');
  await cache.waitFor('connecting', 20);
  await cache.stop();
});
