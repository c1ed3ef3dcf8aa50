import assert from 'node:assert/strict';
import { test } from 'node:test';
import { identityFromAnnotations } from './pod-identity';

const CONTAINERD = {
  'io.kubernetes.cri.container-type': 'container',
  'io.kubernetes.cri.sandbox-id': '5d1f0c1e2b3a',
  'io.kubernetes.cri.sandbox-namespace': 'shop',
  'io.kubernetes.cri.sandbox-name': 'web-7d9f8-abcde',
  'io.kubernetes.cri.container-name': 'nginx',
  'io.kubernetes.cri.sandbox-uid': '1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d',
  'io.kubernetes.cri.image-name': 'docker.io/library/nginx:1.27',
};

const CRIO = {
  'io.kubernetes.cri-o.ContainerType': 'container',
  'io.kubernetes.cri-o.Name': 'k8s_nginx_web-7d9f8-abcde_shop_1b2c3d4e_0',
  'io.kubernetes.pod.namespace': 'shop',
  'io.kubernetes.pod.name': 'web-7d9f8-abcde',
  'io.kubernetes.container.name': 'nginx',
  'io.kubernetes.pod.uid': '1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d',
};

test('identity: containerd annotations give namespace, pod, container and pod UID', () => {
  assert.deepEqual(identityFromAnnotations(CONTAINERD), {
    namespace: 'shop',
    pod: 'web-7d9f8-abcde',
    container: 'nginx',
    podUid: '1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d',
    source: 'annotations',
  });
});

test('identity: CRI-O annotations give the same identity', () => {
  assert.deepEqual(identityFromAnnotations(CRIO), identityFromAnnotations(CONTAINERD));
  assert.ok(Object.isFrozen(identityFromAnnotations(CRIO)));
});

test('identity: no pod annotations, or only part of them, gives null', () => {
  assert.equal(identityFromAnnotations(undefined), null);
  assert.equal(identityFromAnnotations({}), null);
  assert.equal(identityFromAnnotations({ 'org.opencontainers.image.title': 'busybox' }), null);
  assert.equal(identityFromAnnotations({ 'io.kubernetes.cri.sandbox-name': 'p' }), null);
  assert.equal(identityFromAnnotations({ 'io.kubernetes.pod.namespace': 'ns', 'io.kubernetes.pod.name': '' }), null);
});

test('identity: the two runtimes\' keys are never mixed', () => {
  const mixed = { 'io.kubernetes.cri.sandbox-namespace': 'a', 'io.kubernetes.pod.name': 'b', 'io.kubernetes.container.name': 'c' };
  assert.equal(identityFromAnnotations(mixed), null);
});

test('identity: a sandbox container (no container name, no uid) has container and podUid null', () => {
  const sandbox = {
    'io.kubernetes.cri.container-type': 'sandbox',
    'io.kubernetes.cri.sandbox-namespace': 'shop',
    'io.kubernetes.cri.sandbox-name': 'web-7d9f8-abcde',
  };
  assert.deepEqual(identityFromAnnotations(sandbox), { namespace: 'shop', pod: 'web-7d9f8-abcde', container: null, podUid: null, source: 'annotations' });
});
