// An informer cache of this node's pods (list, then watch, with fieldSelector
// spec.nodeName=<node>), indexed by pod UID for containers that carry no pod annotations, and by
// namespace/name for the labels a policy selects on. The notification path only ever calls
// lookup() or byName(), Map reads; the list/watch loop is the one of informer.ts.
import { EventEmitter } from 'node:events';
import { AgentError } from '../../common/errors';
import type { Logger } from '../../common/logger';
import { connectKube, describeKubeError, Informer, type InformerKind, type InformerState, type KubeConnection, type KubeObject } from './informer';

export { describeKubeError };

export type PodCacheState = InformerState;

/** What the cache keeps of one pod. */
export interface CachedPod {
  readonly namespace: string;
  readonly pod: string;
  readonly uid: string;
  /** Container id (without its "containerd://" scheme) to container name, from the pod status. */
  readonly containers: ReadonlyMap<string, string>;
  /** Static pods: the config hash the kubelet uses as the pod UID in cgroup paths. */
  readonly mirrorHash: string | null;
  /** metadata.labels and metadata.annotations, for policy selectors and CEL (pod.labels, pod.annotations). */
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
}

export interface PodCacheOptions {
  logger: Logger;
  nodeName: string;
  /** kubeconfig file; '' for the in-cluster service account. */
  kubeconfig: string;
  /** --unresolved-action as typed ("continue", "errno:EPERM"), quoted in the outage warning. */
  unresolvedAction: string;
  /** A full list this often, even while the watch is healthy (repairs missed events). */
  resyncPeriodMs: number;
  /** Cap of the retry backoff. */
  retryMaxMs: number;
  /** First retry delay (500 ms). */
  retryInitialMs?: number;
  /** A list that takes longer fails (10 s). */
  requestTimeoutMs?: number;
}

export interface PodCacheEvents {
  /** The cache is synced again (or for the first time): re-resolve what waited for it. */
  reachable: [{ pods: number }];
  /** A list failed: the cache keeps its last content but may be stale. */
  unreachable: [{ reason: string }];
  /** A pod was added or its identity data changed (e.g. a container id appeared in its status). */
  pod: [CachedPod];
}

function containerIdOf(statusId: string | undefined): string | null {
  if (!statusId) return null;
  const at = statusId.indexOf('://');
  return at === -1 ? statusId : statusId.slice(at + 3);
}

interface PodLike {
  metadata?: { name?: string; namespace?: string; uid?: string; labels?: Record<string, string>; annotations?: Record<string, string>; resourceVersion?: string };
  status?: {
    containerStatuses?: Array<{ name: string; containerID?: string }>;
    initContainerStatuses?: Array<{ name: string; containerID?: string }>;
    ephemeralContainerStatuses?: Array<{ name: string; containerID?: string }>;
  };
}

/** The identity data of a pod from the list (typed) or the watch (plain JSON); null without a UID. */
export function cachedPodFrom(pod: PodLike): CachedPod | null {
  const meta = pod.metadata;
  if (!meta?.uid || !meta.name) return null;
  const containers = new Map<string, string>();
  const status = pod.status ?? {};
  for (const list of [status.containerStatuses, status.initContainerStatuses, status.ephemeralContainerStatuses]) {
    for (const entry of list ?? []) {
      const id = containerIdOf(entry.containerID);
      if (id) containers.set(id, entry.name);
    }
  }
  return Object.freeze({
    namespace: meta.namespace ?? 'default',
    pod: meta.name,
    uid: meta.uid,
    containers,
    mirrorHash: meta.annotations?.['kubernetes.io/config.mirror'] ?? null,
    labels: Object.freeze({ ...(meta.labels ?? {}) }),
    annotations: Object.freeze({ ...(meta.annotations ?? {}) }),
  });
}

function samePod(a: CachedPod, b: CachedPod): boolean {
  if (a.namespace !== b.namespace || a.pod !== b.pod || a.mirrorHash !== b.mirrorHash) return false;
  if (a.containers.size !== b.containers.size) return false;
  for (const [id, name] of a.containers) if (b.containers.get(id) !== name) return false;
  return sameStrings(a.labels, b.labels) && sameStrings(a.annotations, b.annotations);
}

/** Two string maps with the same entries. */
export function sameStrings(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((k) => b[k] === a[k]);
}

/** This node's pods: list and watch with fieldSelector spec.nodeName, keyed by UID. */
function podKind(nodeName: string): InformerKind<CachedPod> {
  return {
    name: 'pod',
    path: '/api/v1/pods',
    fieldSelector: `spec.nodeName=${nodeName}`,
    list: (c, fieldSelector, options) => c.core.listPodForAllNamespaces({ fieldSelector }, options),
    convert: (object) => cachedPodFrom(object as PodLike),
    key: (pod) => pod.uid,
    rawKey: (object: KubeObject) => object.metadata?.uid ?? null,
    same: samePod,
  };
}


export class PodCache extends EventEmitter<PodCacheEvents> {
  private readonly options: Required<PodCacheOptions>;
  private readonly log: Logger;
  readonly informer: Informer<CachedPod>;
  private readonly byMirrorHash = new Map<string, string>();
  private readonly byNamespacedName = new Map<string, string>();
  private url = '';
  private starting: Promise<void> | null = null;
  private started = false;
  private pendingCounter: () => number = () => 0;
  private wasSynced = false;

  constructor(options: PodCacheOptions) {
    super();
    this.options = { retryInitialMs: 500, requestTimeoutMs: 10_000, ...options };
    this.log = options.logger;
    this.informer = new Informer(podKind(options.nodeName), this.options, this.log);
    this.informer.on('upsert', (pod, previous) => this.indexed(pod, previous));
    this.informer.on('delete', (pod) => this.unindexed(pod));
    this.informer.on('synced', ({ first }) => this.enterSynced(first));
    this.informer.on('unreachable', ({ reason, first }) => this.enterUnreachable(reason, first));
  }

  get state(): PodCacheState {
    return this.informer.state;
  }

  /** True while the last list succeeded (the cache is current). */
  get reachable(): boolean {
    return this.informer.state === 'synced';
  }

  /** Pods cached now. */
  get size(): number {
    return this.informer.size;
  }

  /** The API server's URL, once start() has read the kubeconfig. */
  get serverUrl(): string {
    return this.url;
  }

  /** Why the last attempt failed, '' when it did not. */
  get lastError(): string {
    return this.informer.lastError;
  }

  /** The number of containers waiting for the cache, quoted when it comes back. */
  setPendingCounter(counter: () => number): void {
    this.pendingCounter = counter;
  }

  /** Synchronous, for the notification path: the pod with this UID (or static pod hash). */
  lookup(uid: string): CachedPod | undefined {
    const pod = this.informer.get(uid);
    if (pod) return pod;
    const real = this.byMirrorHash.get(uid);
    return real === undefined ? undefined : this.informer.get(real);
  }

  /** Synchronous: the pod namespace/name (for labels of a container identified by annotations). */
  byName(namespace: string, name: string): CachedPod | undefined {
    const uid = this.byNamespacedName.get(`${namespace}/${name}`);
    return uid === undefined ? undefined : this.informer.get(uid);
  }

  pods(): IterableIterator<CachedPod> {
    return this.informer.values();
  }

  /** Pods known before the first list (the node checkpoint). */
  seed(pods: readonly CachedPod[]): void {
    this.informer.seed(pods);
  }

  /**
   * Reads the kubeconfig (or the in-cluster config) and starts the list/watch loop in the
   * background; returns before the first sync. Throws AgentError EKUBE_CONFIG when there is no
   * usable configuration: that is an operator error, not an outage. `connection`: share one.
   */
  start(connection?: KubeConnection): Promise<void> {
    this.starting ??= (async () => {
      if (this.started) return;
      const c = connection ?? (await connectKube(this.options.kubeconfig));
      this.url = c.url;
      this.started = true;
      this.informer.start(c);
    })().finally(() => {
      this.starting = null;
    });
    return this.starting;
  }

  /** Stops the loop and closes the watch; the cache content stays readable. */
  async stop(): Promise<void> {
    await this.starting?.catch(() => undefined);
    await this.informer.stop();
    this.started = false;
  }

  /** Resolves once the cache is in `state` (now or later); rejects after timeoutMs. */
  waitFor(state: PodCacheState, timeoutMs: number): Promise<void> {
    return this.informer.waitFor(state, timeoutMs).catch((err) => {
      throw err instanceof AgentError && err.code === 'ETIMEDOUT'
        ? new AgentError('ETIMEDOUT', `pod cache not ${state} after ${timeoutMs} ms (it is ${this.state})`)
        : err;
    });
  }

  private indexed(pod: CachedPod, previous: CachedPod | undefined): void {
    if (previous?.mirrorHash) this.byMirrorHash.delete(previous.mirrorHash);
    if (previous) this.byNamespacedName.delete(`${previous.namespace}/${previous.pod}`);
    if (pod.mirrorHash) this.byMirrorHash.set(pod.mirrorHash, pod.uid);
    this.byNamespacedName.set(`${pod.namespace}/${pod.pod}`, pod.uid);
    this.tell('pod', pod);
  }

  private unindexed(pod: CachedPod): void {
    if (pod.mirrorHash) this.byMirrorHash.delete(pod.mirrorHash);
    if (this.byNamespacedName.get(`${pod.namespace}/${pod.pod}`) === pod.uid) this.byNamespacedName.delete(`${pod.namespace}/${pod.pod}`);
  }

  /** Emits to the listeners; a listener that throws is logged, never taken for an API failure. */
  private tell<E extends keyof PodCacheEvents>(event: E, ...args: PodCacheEvents[E]): void {
    try {
      (this.emit as (event: E, ...args: PodCacheEvents[E]) => boolean)(event, ...args);
    } catch (err) {
      this.log.error({ err, event }, `pod cache listener failed on '${event}': ${(err as Error).message}`);
    }
  }

  private enterSynced(first: boolean): void {
    this.wasSynced = true;
    const fields = { url: this.url, node: this.options.nodeName, pods: this.size };
    if (first) {
      this.log.info(fields, `Kubernetes API server reachable at ${this.url}: ${this.size} pods of node ${this.options.nodeName} cached`);
    } else {
      const pending = this.pendingCounter();
      this.log.info(
        { ...fields, pending },
        `Kubernetes API server reachable again at ${this.url}: ${this.size} pods cached; resolving ${pending} containers admitted without identity`,
      );
    }
    this.tell('reachable', { pods: this.size });
  }

  private enterUnreachable(reason: string, first: boolean): void {
    if (!first) {
      this.log.debug({ url: this.url, reason }, 'Kubernetes API server still unreachable');
      return;
    }
    const cached = this.wasSynced || this.size > 0 ? `The ${this.size} pods cached before still resolve containers. ` : '';
    this.log.warn(
      { url: this.url, node: this.options.nodeName, reason, pods: this.size },
      `Kubernetes API server unreachable at ${this.url} (${reason}). ${cached}` +
        'Containers without pod annotations whose pod is not cached have no namespace or pod: ' +
        `MKDIR_TMPL is not applied to them and their mkdir gets --unresolved-action (${this.options.unresolvedAction}) ` +
        `until their pod is known; other policy keys still apply; retrying with backoff up to ${this.options.retryMaxMs / 1000}s`,
    );
    this.tell('unreachable', { reason });
  }
}
