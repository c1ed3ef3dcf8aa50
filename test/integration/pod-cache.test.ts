// The control plane's pod cache against the loopback Kubernetes API stand-in: sync, watch, an
// outage (one warning, lookups still answered), the recovery (one info line, unresolved
// containers resolved), a server that is down at start, 410 Expired, and the periodic resync.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { ContainerRegistry } from '../../controlplane/container-registry';
import { Container } from '../../proto/gen/seccompagent/v1/dataplane';
import { PodCache, type PodCacheOptions } from '../../controlplane/kube/pod-cache';
import { FakeKubeApiServer } from '../cmd/fake-kube-apiserver/server';
import { captureLogger, type LogLine } from '../support/log-capture';
import { sleep, waitUntil } from '../support/wait';


const NODE = 'node-a';
const UID = '1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d';
const CID = '9f2d0c5b8a7e6d4c3b2a19f8e7d6c5b4a39281f0e9d8c7b6a5f4e3d2c1b0a998';
/** A stand-in server, its kubeconfig and a started cache with small timings; all cleaned up. */
async function setup(t: TestContext, over: Partial<PodCacheOptions> = {}, serverUp = true) {
  const server = await FakeKubeApiServer.create();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pod-cache-it-'));
  const kubeconfig = server.writeKubeconfig(path.join(dir, 'kubeconfig'));
  if (!serverUp) await server.stop();
  const log = captureLogger();
  const cache = new PodCache({
    logger: log.logger,
    nodeName: NODE,
    kubeconfig,
    unresolvedAction: 'continue',
    resyncPeriodMs: 60_000,
    retryMaxMs: 200,
    retryInitialMs: 20,
    requestTimeoutMs: 2000,
    ...over,
  });
  t.after(async () => {
    await cache.stop();
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { server, cache, lines: log.lines };
}

const warnings = (lines: LogLine[]) => lines.filter((l) => l.level === 40);
const infos = (lines: LogLine[]) => lines.filter((l) => l.level === 30);

test('pod cache: lists only this node\'s pods (fieldSelector spec.nodeName) and logs one line when synced', async (t) => {
  const { server, cache, lines } = await setup(t);
  server.addPod({ name: 'web-1', namespace: 'shop', uid: UID, nodeName: NODE, containers: [{ name: 'app', id: CID }] });
  server.addPod({ name: 'elsewhere', namespace: 'shop', nodeName: 'node-b' });
  server.addPod({ name: 'pending', namespace: 'shop' });
  await cache.start();
  await cache.waitFor('synced', 5000);
  assert.equal(cache.size, 1);
  assert.equal(cache.reachable, true);
  const pod = cache.lookup(UID);
  assert.equal(pod?.pod, 'web-1');
  assert.equal(pod?.containers.get(CID), 'app');
  assert.deepEqual(server.requests[0], { method: 'GET', path: '/api/v1/pods', query: { fieldSelector: `spec.nodeName=${NODE}` } });
  assert.equal(infos(lines).length, 1);
  assert.match(infos(lines)[0].msg, /^Kubernetes API server reachable at http:\/\/127\.0\.0\.1:\d+: 1 pods of node node-a cached$/);
  assert.equal(warnings(lines).length, 0);
});

test('pod cache: the watch adds, updates and removes pods; pods of other nodes never arrive', async (t) => {
  const { server, cache } = await setup(t);
  await cache.start();
  await cache.waitFor('synced', 5000);
  await waitUntil(() => server.openWatches === 1, 10_000, 'the watch to be open');
  const seen: string[] = [];
  cache.on('pod', (pod) => seen.push(`${pod.pod}:${[...pod.containers.values()].join(',')}`));
  server.addPod({ name: 'late', namespace: 'shop', uid: UID, nodeName: NODE, containers: [{ name: 'app' }] });
  server.addPod({ name: 'other', namespace: 'shop', nodeName: 'node-b' });
  await waitUntil(() => cache.lookup(UID) !== undefined, 10_000, 'the added pod');
  server.updatePod('shop', 'late', (pod) => {
    pod.status.containerStatuses = [{ name: 'app', containerID: `containerd://${CID}` }];
  });
  await waitUntil(() => cache.lookup(UID)?.containers.get(CID) === 'app', 10_000, 'the container id');
  server.removePod('shop', 'late');
  await waitUntil(() => cache.lookup(UID) === undefined, 10_000, 'the removal');
  assert.deepEqual(seen, ['late:', 'late:app']);
  assert.equal(cache.size, 0);
  const watch = server.requests.find((r) => r.query.watch === 'true');
  assert.equal(watch?.query.fieldSelector, `spec.nodeName=${NODE}`);
  assert.notEqual(watch?.query.resourceVersion, '', 'the watch continues from the list\'s resourceVersion');
});

test('pod cache: API server outage: one warning, lookups still answered; recovery: one info line and the unresolved container is resolved', async (t) => {
  const { server, cache, lines } = await setup(t);
  const registryLog = captureLogger();
  const registry = new ContainerRegistry({
    logger: registryLog.logger,
    pods: cache,
    unresolvedAction: 'continue',
    readCgroup: (pid) => (pid === 4242 ? { podUid: UID, containerId: CID, path: `/kubepods/besteffort/pod${UID}/${CID}` } : null),
  });
  t.after(() => registry.close());
  const knownUid = '0a0b0c0d-0000-4000-8000-000000000001';
  server.addPod({ name: 'known', namespace: 'shop', uid: knownUid, nodeName: NODE });
  await cache.start();
  await cache.waitFor('synced', 5000);
  await waitUntil(() => server.openWatches === 1, 10_000, 'the watch to be open');

  await server.stop();
  await cache.waitFor('unreachable', 5000);
  const outageStarted = Date.now();
  // Several retries happen (200 ms cap) while the server is down; none of them logs a warning.
  await sleep(700);
  assert.equal(warnings(lines).length, 1, 'exactly one warning for the outage');
  const warning = warnings(lines)[0];
  assert.match(warning.msg, /^Kubernetes API server unreachable at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)\. The 1 pods cached before still resolve containers\./);
  assert.match(warning.msg, /MKDIR_TMPL is not applied to them and their mkdir gets --unresolved-action \(continue\)/);
  assert.match(warning.msg, /retrying with backoff up to 0\.2s$/);
  assert.ok(server.requests.filter((r) => r.query.watch !== 'true').length >= 1);

  // Lookups answer at once from the last content, without waiting for anything.
  const start = process.hrtime.bigint();
  assert.equal(cache.lookup(knownUid)?.pod, 'known');
  assert.ok(process.hrtime.bigint() - start < 5_000_000n);
  assert.equal(cache.state, 'unreachable');
  assert.equal(cache.reachable, false);
  assert.equal(cache.lastError, 'ECONNREFUSED');

  // A container of a pod the cache has never seen is admitted unresolved.
  const entry = registry.add(Container.fromPartial({ handle: 7n, containerId: CID, pid: 4242, metadata: 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}' }));
  assert.equal(entry.resolution, 'unresolved');
  assert.match(entry.unresolvedReason, /API server is unreachable/);
  assert.deepEqual(entry.mkdir.kind, 'unresolved');

  // The pod is created during the outage; the server comes back on the same port.
  server.addPod({ name: 'web-1', namespace: 'shop', uid: UID, nodeName: NODE, containers: [{ name: 'app', id: CID }] });
  const infosBefore = infos(lines).length;
  await server.start();
  await cache.waitFor('synced', 5000);
  assert.ok(Date.now() - outageStarted < 5000);
  const back = infos(lines).slice(infosBefore);
  assert.equal(back.length, 1, 'exactly one info line for the recovery');
  assert.match(back[0].msg, /^Kubernetes API server reachable again at http:\/\/127\.0\.0\.1:\d+: 2 pods cached; resolving 1 containers admitted without identity$/);
  assert.equal(warnings(lines).length, 1, 'still only the one warning');

  assert.equal(entry.resolution, 'cgroup');
  assert.deepEqual(entry.identity, { namespace: 'shop', pod: 'web-1', container: 'app', podUid: UID, source: 'cgroup' });
  assert.deepEqual(entry.mkdir, { kind: 'suffix', suffix: '-shop-web-1' });
  assert.equal(registry.unresolvedCount, 0);
  const registryLines = registryLog.lines.map((l) => `${l.level} ${l.msg}`);
  assert.equal(registryLines.length, 2, registryLines.join('\n'));
  assert.match(registryLines[0], /^40 container 9f2d\w+ is unresolved/);
  assert.match(registryLines[1], /^30 container 9f2d\w+ resolved to pod shop\/web-1 container app/);
});

test('pod cache: API server down at start: one warning, then synced when it starts', async (t) => {
  const { server, cache, lines } = await setup(t, {}, false);
  server.addPod({ name: 'web-1', namespace: 'shop', uid: UID, nodeName: NODE });
  await cache.start();
  await cache.waitFor('unreachable', 5000);
  await sleep(300);
  assert.equal(warnings(lines).length, 1);
  assert.match(warnings(lines)[0].msg, /\(ECONNREFUSED\)\. Containers without pod annotations/);
  await server.start();
  await cache.waitFor('synced', 5000);
  assert.equal(cache.lookup(UID)?.pod, 'web-1');
  assert.equal(infos(lines).length, 1);
  assert.match(infos(lines)[0].msg, /reachable again .*: 1 pods cached; resolving 0 containers/);
});

test('pod cache: a watch the server ends continues from its resourceVersion; 410 Expired lists again, quietly', async (t) => {
  const { server, cache, lines } = await setup(t);
  await cache.start();
  await cache.waitFor('synced', 5000);
  await waitUntil(() => server.openWatches === 1, 10_000, 'the watch to be open');
  const kinds = () => server.requests.map((r) => (r.query.watch === 'true' ? `watch@${r.query.resourceVersion}` : 'list'));
  server.addPod({ name: 'web-1', namespace: 'shop', uid: UID, nodeName: NODE });
  await waitUntil(() => cache.lookup(UID) !== undefined, 10_000, 'the pod');
  const rvAfterPod = server.listPods()[0].metadata.resourceVersion;
  // A watch that ran its course (more than a second) and ends: watch again, no list.
  await sleep(1100);
  server.endWatches();
  await waitUntil(() => server.openWatches === 1 && kinds().length === 3, 10_000, 'the second watch');
  assert.equal(kinds()[0], 'list');
  assert.match(kinds()[1], /^watch@\d+$/);
  assert.equal(kinds()[2], `watch@${rvAfterPod}`);
  // Compaction, then the watch ends again: the re-watch gets 410 Expired, so the cache lists.
  await sleep(1100);
  server.addPod({ name: 'web-2', namespace: 'shop', nodeName: NODE });
  await waitUntil(() => cache.size === 2, 10_000, 'the second pod');
  server.compact();
  server.endWatches();
  await waitUntil(() => kinds().filter((k) => k === 'list').length === 2 && server.openWatches === 1, 10_000, 'a list after the 410');
  const tail = kinds().slice(3);
  assert.match(tail[0], /^watch@\d+$/);
  assert.equal(tail[1], 'list');
  assert.equal(cache.state, 'synced');
  assert.equal(cache.size, 2);
  assert.equal(warnings(lines).length, 0, 'a 410 is routine, not an outage');
});

test('pod cache: the resync period lists again and repairs what the watch missed', async (t) => {
  const { server, cache, lines } = await setup(t, { resyncPeriodMs: 300 });
  server.addPod({ name: 'gone-unseen', namespace: 'shop', uid: '0a0b0c0d-0000-4000-8000-000000000002', nodeName: NODE });
  await cache.start();
  await cache.waitFor('synced', 5000);
  assert.equal(cache.size, 1);
  server.addPod({ name: 'web-1', namespace: 'shop', uid: UID, nodeName: NODE }, { notify: false });
  server.removePod('shop', 'gone-unseen', { notify: false });
  await sleep(50);
  assert.equal(cache.lookup(UID), undefined, 'the watch did not see it');
  await waitUntil(() => cache.lookup(UID) !== undefined && cache.size === 1, 3000, 'the resync');
  const lists = () => server.requests.filter((r) => r.query.watch !== 'true').length;
  await waitUntil(() => lists() >= 3, 3000, 'another resync');
  assert.equal(cache.state, 'synced');
  assert.equal(warnings(lines).length, 0);
  assert.equal(infos(lines).length, 1, 'a resync is not news');
});

test('pod cache: a listener that throws is logged as an error, not taken for an API failure', async (t) => {
  const { server, cache, lines } = await setup(t);
  server.addPod({ name: 'web-1', namespace: 'shop', uid: UID, nodeName: NODE });
  cache.on('pod', () => {
    throw new Error('listener bug');
  });
  await cache.start();
  await cache.waitFor('synced', 5000);
  await sleep(100);
  assert.equal(cache.state, 'synced');
  assert.equal(warnings(lines).length, 0);
  const errors = lines.filter((l) => l.level === 50);
  assert.equal(errors.length, 1);
  assert.match(errors[0].msg, /listener failed on 'pod': listener bug/);
});
