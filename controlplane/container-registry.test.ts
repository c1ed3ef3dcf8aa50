import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import type { CgroupPodRef } from './kube/cgroup-pod-uid';
import { ContainerRegistry } from './container-registry';
import { Container } from '../proto/gen/seccompagent/v1/dataplane';
import type { CachedPod, PodCacheEvents, PodCacheState } from './kube/pod-cache';
import { captureLogger } from '../test/support/log-capture';


/** A pod cache without a server: tests set its state and pods. */
class FakePods extends EventEmitter<PodCacheEvents> {
  state: PodCacheState = 'connecting';
  readonly byUid = new Map<string, CachedPod>();
  counter: () => number = () => -1;
  lookup(uid: string): CachedPod | undefined {
    return this.byUid.get(uid);
  }
  setPendingCounter(counter: () => number): void {
    this.counter = counter;
  }
  addPod(pod: CachedPod): void {
    this.byUid.set(pod.uid, pod);
    this.emit('pod', pod);
  }
  sync(): void {
    this.state = 'synced';
    this.emit('reachable', { pods: this.byUid.size });
  }
}

const UID = '1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d';
const CID = 'a'.repeat(64);

function pod(containers: Record<string, string> = { [CID]: 'app' }): CachedPod {
  return { namespace: 'shop', pod: 'web-1', uid: UID, containers: new Map(Object.entries(containers)), mirrorHash: null, labels: {}, annotations: {} };
}

/** The data plane's Container, with a number for a handle. */
function info(over: Partial<Omit<Container, 'handle'>> & { handle?: number } = {}): Container {
  return Container.fromPartial({ containerId: CID, pid: 4242, metadata: 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', ...over, handle: BigInt(over.handle ?? 1) });
}

const cgroupOf = (uid: string | null) => (): CgroupPodRef | null => (uid ? { podUid: uid, containerId: CID, path: `/kubepods/pod${uid}/${CID}` } : null);

const CONTAINERD = {
  'io.kubernetes.cri.sandbox-namespace': 'shop',
  'io.kubernetes.cri.sandbox-name': 'web-1',
  'io.kubernetes.cri.container-name': 'app',
  'io.kubernetes.cri.sandbox-uid': UID,
};

test('registry: a container with pod annotations is resolved at once, without the cgroup or the cache', () => {
  const { logger, lines } = captureLogger();
  const pods = new FakePods();
  let cgroupReads = 0;
  const registry = new ContainerRegistry({ logger, pods, unresolvedAction: 'continue', readCgroup: () => (cgroupReads++, null) });
  const entry = registry.add(info({ annotations: CONTAINERD, metadata: 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}-{{.Container}}' }));
  assert.equal(entry.resolution, 'annotations');
  assert.deepEqual(entry.mkdir, { kind: 'suffix', suffix: '-shop-web-1-app' });
  assert.equal(cgroupReads, 0);
  assert.equal(registry.get(1), entry);
  assert.equal(registry.get(1), entry);
  assert.equal(registry.unresolvedCount, 0);
  assert.deepEqual(lines, []);
});

test('registry: no annotations, pod UID from the cgroup found in the cache', () => {
  const { logger } = captureLogger();
  const pods = new FakePods();
  pods.addPod(pod());
  pods.sync();
  const registry = new ContainerRegistry({ logger, pods, unresolvedAction: 'continue', readCgroup: cgroupOf(UID) });
  const entry = registry.add(info({ metadata: 'MKDIR_TMPL=-{{.Pod}}-{{.Container}}' }));
  assert.equal(entry.resolution, 'cgroup');
  assert.deepEqual(entry.identity, { namespace: 'shop', pod: 'web-1', container: 'app', podUid: UID, source: 'cgroup' });
  assert.deepEqual(entry.mkdir, { kind: 'suffix', suffix: '-web-1-app' });
});

test('registry: admitted unresolved while the cache is down, resolved when the pod arrives; logged once each way', () => {
  const { logger, lines } = captureLogger();
  const pods = new FakePods();
  pods.state = 'unreachable';
  const registry = new ContainerRegistry({ logger, pods, unresolvedAction: 'errno:EPERM', readCgroup: cgroupOf(UID) });
  const init = registry.add(info());
  const exec = registry.add(info({ handle: 2 }));
  assert.equal(init.resolution, 'unresolved');
  assert.equal(init.mkdir.kind, 'unresolved');
  assert.match(init.unresolvedReason, /API server is unreachable/);
  assert.equal(registry.unresolvedCount, 2);
  assert.equal(pods.counter(), 2);
  const warnings = lines.filter((l) => l.level === 40);
  assert.equal(warnings.length, 1, 'one warning for the container, not one per notify fd');
  assert.match(warnings[0].msg, /container a+ is unresolved .*--unresolved-action \(errno:EPERM\)/);
  assert.equal(warnings[0].container, CID);

  pods.addPod(pod());
  assert.equal(init.resolution, 'cgroup');
  assert.equal(exec.resolution, 'cgroup');
  assert.deepEqual(init.mkdir, { kind: 'suffix', suffix: '-shop-web-1' });
  assert.equal(registry.unresolvedCount, 0);
  const infos = lines.filter((l) => l.level === 30);
  assert.equal(infos.length, 1);
  assert.match(infos[0].msg, /resolved to pod shop\/web-1 container app .*suffix "-shop-web-1"/);
  pods.sync();
  assert.equal(lines.length, 2, 'nothing more to say once resolved');
});

test('registry: the cache becoming reachable re-resolves every unresolved container', () => {
  const { logger } = captureLogger();
  const pods = new FakePods();
  const registry = new ContainerRegistry({ logger, pods, unresolvedAction: 'continue', readCgroup: cgroupOf(UID) });
  const entry = registry.add(info());
  assert.match(entry.unresolvedReason, /still syncing/);
  pods.byUid.set(UID, pod()); // in place before the event, as a list fills the cache
  pods.sync();
  assert.equal(entry.resolution, 'cgroup');
});

test('registry: {{.Container}} waits for the container id to appear in the pod status', () => {
  const { logger } = captureLogger();
  const pods = new FakePods();
  pods.addPod(pod({}));
  pods.sync();
  const registry = new ContainerRegistry({ logger, pods, unresolvedAction: 'continue', readCgroup: cgroupOf(UID) });
  const withContainer = registry.add(info({ metadata: 'MKDIR_TMPL=-{{.Container}}' }));
  const withoutContainer = registry.add(info({ handle: 2, containerId: 'b'.repeat(64), metadata: 'MKDIR_TMPL=-{{.Pod}}' }));
  assert.equal(withContainer.resolution, 'unresolved');
  assert.match(withContainer.unresolvedReason, /does not list container/);
  assert.deepEqual(withoutContainer.mkdir, { kind: 'suffix', suffix: '-web-1' });
  pods.addPod(pod({ [CID]: 'app' }));
  assert.deepEqual(withContainer.mkdir, { kind: 'suffix', suffix: '-app' });
});

test('registry: --no-kubernetes and non-pod processes stay unresolved; a policy without MKDIR_TMPL is only noted', () => {
  const { logger, lines } = captureLogger();
  const registry = new ContainerRegistry({ logger, pods: null, unresolvedAction: 'continue', readCgroup: cgroupOf(UID) });
  const entry = registry.add(info());
  assert.match(entry.unresolvedReason, /--no-kubernetes/);
  const plain = new ContainerRegistry({ logger, pods: null, unresolvedAction: 'continue', readCgroup: cgroupOf(null) }).add(
    info({ containerId: 'c1', metadata: 'MOUNT_PROC=true' }),
  );
  assert.equal(plain.resolution, 'unresolved');
  assert.deepEqual(plain.mkdir, { kind: 'none' });
  assert.match(plain.unresolvedReason, /no pod UID in \/proc\/4242\/cgroup/);
  assert.deepEqual(plain.policy.mount?.filesystems, ['proc']);
  assert.deepEqual(lines.map((l) => l.level), [40, 30]);
});

test('registry: a cgroup read error is a reason, not a crash', () => {
  const { logger } = captureLogger();
  const registry = new ContainerRegistry({
    logger,
    pods: null,
    unresolvedAction: 'continue',
    readCgroup: () => {
      throw new Error('cannot read /proc/4242/cgroup (EACCES)');
    },
  });
  assert.match(registry.add(info()).unresolvedReason, /EACCES/);
});

test('registry: unknown policy keys and a refused template are logged once per container', () => {
  const { logger, lines } = captureLogger();
  const registry = new ContainerRegistry({ logger, pods: null, unresolvedAction: 'continue', readCgroup: cgroupOf(null) });
  const annotations = { ...CONTAINERD, 'io.kubernetes.cri.sandbox-name': '..' };
  const metadata = 'MKDIR_TMPL={{.Pod}}\nFOO=bar';
  const first = registry.add(info({ annotations, metadata }));
  registry.add(info({ handle: 2, annotations, metadata }));
  assert.equal(first.mkdir.kind, 'refused');
  assert.equal(first.resolution, 'annotations');
  assert.equal(first.mkdir.kind === 'refused' && first.mkdir.error.code, 'EMKDIR_SUFFIX');
  assert.deepEqual(lines.map((l) => l.code), ['EPOLICY_UNKNOWN_KEY', 'EMKDIR_SUFFIX']);
  // Once every fd of the container is gone, a new container with the same id is news again.
  registry.remove(1);
  registry.remove(2);
  registry.add(info({ handle: 3, annotations, metadata }));
  assert.equal(lines.length, 4);
});

test('registry: remove and replaceAll follow the data plane', () => {
  const { logger } = captureLogger();
  const pods = new FakePods();
  const registry = new ContainerRegistry({ logger, pods, unresolvedAction: 'continue', readCgroup: cgroupOf(UID) });
  registry.add(info({ handle: 1 }));
  registry.add(info({ handle: 2 }));
  assert.equal(registry.unresolvedCount, 2);
  assert.equal(registry.remove(1), true);
  assert.equal(registry.remove(1), false);
  assert.equal(registry.get(1), undefined);
  assert.equal(registry.unresolvedCount, 1);
  const kept = registry.get(2);
  registry.replaceAll([info({ handle: 2 }), info({ handle: 5, containerId: 'other', annotations: CONTAINERD })]);
  assert.equal(registry.size, 2);
  assert.equal(registry.get(2), kept, 'an entry the snapshot still lists is kept as is');
  assert.equal(registry.get(5)?.resolution, 'annotations');
  registry.replaceAll([]);
  assert.equal(registry.size, 0);
  assert.equal(registry.unresolvedCount, 0);
  registry.close();
  assert.equal(pods.listenerCount('pod'), 0);
  assert.equal(pods.listenerCount('reachable'), 0);
});

test('registry: a static pod is found by the config hash in its cgroup path', () => {
  const { logger } = captureLogger();
  const pods = new FakePods();
  const hash = '6c3c1c2e2f0c4b7a9d8e7f6a5b4c3d2e';
  const registry = new ContainerRegistry({ logger, pods, unresolvedAction: 'continue', readCgroup: cgroupOf(hash) });
  const entry = registry.add(info());
  assert.equal(entry.resolution, 'unresolved');
  const mirror = { ...pod(), mirrorHash: hash };
  pods.byUid.set(hash, mirror); // the real cache answers lookup() by hash too
  pods.emit('pod', mirror);
  assert.equal(entry.resolution, 'cgroup');
});

test('registry: an exec fd that came with pid 0 (crun) takes its cgroup and pid from the init fd of the same container', () => {
  const { logger } = captureLogger();
  const pods = new FakePods();
  pods.addPod(pod());
  pods.sync();
  const read: number[] = [];
  // Only the init (4242) is a process with a pod cgroup; /proc/0 is no process.
  const readCgroup = (pid: number) => (read.push(pid), pid === 4242 ? cgroupOf(UID)() : null);
  const registry = new ContainerRegistry({ logger, pods, unresolvedAction: 'continue', readCgroup });
  registry.add(info({ handle: 1 }));
  const exec = registry.add(info({ handle: 2, pid: 0 }));
  assert.deepEqual(read, [4242, 4242]);
  assert.equal(exec.pid, 4242);
  assert.equal(exec.resolution, 'cgroup');
  assert.deepEqual(exec.mkdir, { kind: 'suffix', suffix: '-shop-web-1' });

  // A snapshot may list the exec fd before its init.
  const after = new ContainerRegistry({ logger, pods, unresolvedAction: 'continue', readCgroup });
  after.replaceAll([info({ handle: 7, pid: 0 }), info({ handle: 6 })]);
  assert.equal(after.get(7)?.pid, 4242);
  assert.equal(after.get(7)?.resolution, 'cgroup');

  // Once every fd of the container is gone, its init pid is forgotten.
  registry.remove(1);
  registry.remove(2);
  const stray = registry.add(info({ handle: 3, pid: 0 }));
  assert.equal(stray.pid, 0);
  assert.equal(stray.resolution, 'unresolved');
});
