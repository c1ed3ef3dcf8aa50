// Pod identity of a container from the annotations its CRI runtime writes into the OCI state.
// Needs no API server: when these are present the pod cache is never consulted.

/** Who a container belongs to in Kubernetes. */
export interface PodIdentity {
  readonly namespace: string;
  readonly pod: string;
  /** Container name in the pod; null while unknown (the pod status does not list it yet). */
  readonly container: string | null;
  /** metadata.uid of the pod; null when the runtime did not say. */
  readonly podUid: string | null;
  /** 'annotations': from the runtime; 'cgroup': pod UID from /proc/<pid>/cgroup, then the pod cache. */
  readonly source: 'annotations' | 'cgroup';
}

interface AnnotationKeys {
  namespace: string;
  pod: string;
  container: string;
  podUid: string;
}

// containerd first: CRI-O also writes io.kubernetes.pod.* labels into some annotations of its
// own, but never the io.kubernetes.cri.* ones, so the order cannot pick the wrong runtime.
const RUNTIME_KEYS: readonly AnnotationKeys[] = [
  {
    namespace: 'io.kubernetes.cri.sandbox-namespace',
    pod: 'io.kubernetes.cri.sandbox-name',
    container: 'io.kubernetes.cri.container-name',
    podUid: 'io.kubernetes.cri.sandbox-uid',
  },
  {
    namespace: 'io.kubernetes.pod.namespace',
    pod: 'io.kubernetes.pod.name',
    container: 'io.kubernetes.container.name',
    podUid: 'io.kubernetes.pod.uid',
  },
];

/**
 * The identity written by containerd or CRI-O, or null when neither wrote a namespace and a pod
 * name. Keys of one runtime are never mixed with the other's.
 */
export function identityFromAnnotations(annotations: Readonly<Record<string, string>> | undefined): PodIdentity | null {
  if (!annotations) return null;
  for (const keys of RUNTIME_KEYS) {
    const namespace = annotations[keys.namespace];
    const pod = annotations[keys.pod];
    if (!namespace || !pod) continue;
    return Object.freeze({
      namespace,
      pod,
      container: annotations[keys.container] || null,
      podUid: annotations[keys.podUid] || null,
      source: 'annotations',
    });
  }
  return null;
}

/**
 * The identity a control plane resolved from the cgroup and pushed with the container's policy
 * (controlplane/policy/compiler.ts labels); null when the labels hold none. Annotation identities are read
 * from the annotations again, so only cgroup ones come back this way.
 */
export function identityFromLabels(labels: Readonly<Record<string, string>> | undefined): PodIdentity | null {
  if (!labels || labels.resolution !== 'cgroup' || !labels.namespace || !labels.pod) return null;
  return Object.freeze({
    namespace: labels.namespace,
    pod: labels.pod,
    container: labels.container ?? null,
    podUid: labels['pod-uid'] ?? null,
    source: 'cgroup' as const,
  });
}
