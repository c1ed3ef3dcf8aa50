// An informer cache of this node's pods (list, then watch, with fieldSelector
// spec.nodeName=<node>), indexed by pod UID for containers that carry no pod annotations.
// The notification path only ever calls lookup(), a Map read; everything that talks to the API
// server runs in the background loop below.
//
// The loop is ours rather than client-node's ListWatch: that one stops on the first error without
// saying whether the list succeeded, and its reconnect policy differs between client-node
// versions. Here the state is explicit (connecting, synced, unreachable), every transition is
// logged once, retries back off up to a cap, and a routine watch timeout is not an outage: only a
// list that fails makes the cache unreachable. @kubernetes/client-node still does the work that
// matters: kubeconfig and in-cluster credentials, TLS, the typed list call and the watch stream.
import { EventEmitter } from 'node:events';
import type * as k8s from '@kubernetes/client-node';
import { AgentError } from '../common/errors';
import type { Logger } from '../common/logger';

export type PodCacheState = 'connecting' | 'synced' | 'unreachable';

/** What the cache keeps of one pod. */
export interface CachedPod {
  readonly namespace: string;
  readonly pod: string;
  readonly uid: string;
  /** Container id (without its "containerd://" scheme) to container name, from the pod status. */
  readonly containers: ReadonlyMap<string, string>;
  /** Static pods: the config hash the kubelet uses as the pod UID in cgroup paths. */
  readonly mirrorHash: string | null;
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

type KubeModule = typeof import('@kubernetes/client-node');

// Loaded on first use so commands that never talk to Kubernetes (seccompctl, --no-kubernetes)
// do not pay for it. client-node is ESM-only; Node 20.19+ require()s it (no top-level await).
let kubeModule: Promise<KubeModule> | undefined;
function loadKube(): Promise<KubeModule> {
  kubeModule ??= import('@kubernetes/client-node');
  return kubeModule;
}

/** A watch shorter than this that ends by itself counts as a failure (no tight re-watch loop). */
const MIN_HEALTHY_WATCH_MS = 1000;

type WatchEnd =
  | { kind: 'closed' }
  | { kind: 'resync' }
  | { kind: 'stopped' }
  | { kind: 'expired' }
  | { kind: 'error'; err: unknown };

/** The reason an attempt failed, short enough for one log line: ECONNREFUSED, HTTP 403, ... */
export function describeKubeError(err: unknown): string {
  const e = err as { code?: unknown; statusCode?: unknown; cause?: { code?: unknown }; body?: unknown; message?: unknown };
  if (err instanceof AgentError) return err.message;
  const status = typeof e?.code === 'number' ? e.code : typeof e?.statusCode === 'number' ? e.statusCode : null;
  if (status !== null) {
    let detail = '';
    try {
      const body = typeof e.body === 'string' ? JSON.parse(e.body) : e.body;
      if (body && typeof body.message === 'string') detail = `: ${body.message}`;
    } catch {
      // a body that is not a Status: the code says enough
    }
    return `HTTP ${status}${detail}`;
  }
  if (typeof e?.code === 'string') return e.code;
  if (typeof e?.cause?.code === 'string') return e.cause.code;
  return typeof e?.message === 'string' ? e.message : String(err);
}

function containerIdOf(statusId: string | undefined): string | null {
  if (!statusId) return null;
  const at = statusId.indexOf('://');
  return at === -1 ? statusId : statusId.slice(at + 3);
}

interface PodLike {
  metadata?: { name?: string; namespace?: string; uid?: string; annotations?: Record<string, string>; resourceVersion?: string };
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
  });
}

function samePod(a: CachedPod, b: CachedPod): boolean {
  if (a.namespace !== b.namespace || a.pod !== b.pod || a.mirrorHash !== b.mirrorHash) return false;
  if (a.containers.size !== b.containers.size) return false;
  for (const [id, name] of a.containers) if (b.containers.get(id) !== name) return false;
  return true;
}

export class PodCache extends EventEmitter<PodCacheEvents> {
  private readonly options: Required<PodCacheOptions>;
  private readonly log: Logger;
  private readonly byUid = new Map<string, CachedPod>();
  private readonly byMirrorHash = new Map<string, string>();
  private currentState: PodCacheState = 'connecting';
  private lastReason = '';
  private url = '';
  private api: k8s.CoreV1Api | null = null;
  private watcher: k8s.Watch | null = null;
  private kube: KubeModule | null = null;
  private resourceVersion = '';
  private stopped = false;
  private loop: Promise<void> | null = null;
  private starting: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private abortWatch: (() => void) | null = null;
  private listAbort: AbortController | null = null;
  private pendingCounter: () => number = () => 0;

  constructor(options: PodCacheOptions) {
    super();
    this.options = { retryInitialMs: 500, requestTimeoutMs: 10_000, ...options };
    this.log = options.logger;
  }

  get state(): PodCacheState {
    return this.currentState;
  }

  /** True while the last list succeeded (the cache is current). */
  get reachable(): boolean {
    return this.currentState === 'synced';
  }

  /** Pods cached now. */
  get size(): number {
    return this.byUid.size;
  }

  /** The API server's URL, once start() has read the kubeconfig. */
  get serverUrl(): string {
    return this.url;
  }

  /** Why the last attempt failed, '' when it did not. */
  get lastError(): string {
    return this.currentState === 'synced' ? '' : this.lastReason;
  }

  /** The number of containers waiting for the cache, quoted when it comes back. */
  setPendingCounter(counter: () => number): void {
    this.pendingCounter = counter;
  }

  /** Synchronous, for the notification path: the pod with this UID (or static pod hash). */
  lookup(uid: string): CachedPod | undefined {
    const pod = this.byUid.get(uid);
    if (pod) return pod;
    const real = this.byMirrorHash.get(uid);
    return real === undefined ? undefined : this.byUid.get(real);
  }

  pods(): IterableIterator<CachedPod> {
    return this.byUid.values();
  }

  /**
   * Reads the kubeconfig (or the in-cluster config) and starts the list/watch loop in the
   * background; returns before the first sync. Throws AgentError EKUBE_CONFIG when there is no
   * usable configuration: that is an operator error, not an outage.
   */
  start(): Promise<void> {
    this.starting ??= this.connect().finally(() => {
      this.starting = null;
    });
    return this.starting;
  }

  private async connect(): Promise<void> {
    if (this.loop) return;
    const kube = await loadKube();
    const config = new kube.KubeConfig();
    try {
      if (this.options.kubeconfig !== '') {
        config.loadFromFile(this.options.kubeconfig);
      } else {
        if (!process.env.KUBERNETES_SERVICE_HOST) {
          throw new Error('KUBERNETES_SERVICE_HOST is not set, so this is not a pod with a service account');
        }
        config.loadFromCluster();
      }
    } catch (err) {
      const where = this.options.kubeconfig === '' ? 'the in-cluster configuration' : `kubeconfig ${this.options.kubeconfig}`;
      throw new AgentError(
        'EKUBE_CONFIG',
        `cannot use ${where}: ${(err as Error).message}; pass --kubeconfig FILE, or --no-kubernetes to rely on pod annotations only`,
        { cause: err },
      );
    }
    const cluster = config.getCurrentCluster();
    if (!cluster) {
      throw new AgentError('EKUBE_CONFIG', `kubeconfig ${this.options.kubeconfig} has no current cluster; set current-context, or pass --no-kubernetes`);
    }
    this.url = cluster.server;
    this.kube = kube;
    this.api = config.makeApiClient(kube.CoreV1Api);
    this.watcher = new kube.Watch(config);
    this.stopped = false;
    this.loop = this.run();
  }

  /** Stops the loop and closes the watch; the cache content stays readable. */
  async stop(): Promise<void> {
    await this.starting?.catch(() => undefined);
    this.stopped = true;
    this.abortWatch?.();
    this.listAbort?.abort();
    this.wake?.();
    const loop = this.loop;
    this.loop = null;
    await loop;
  }

  /** Resolves once the cache is in `state` (now or later); rejects after timeoutMs. */
  waitFor(state: PodCacheState, timeoutMs: number): Promise<void> {
    if (this.currentState === state) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.currentState !== state) return;
        cleanup();
        resolve();
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new AgentError('ETIMEDOUT', `pod cache not ${state} after ${timeoutMs} ms (it is ${this.currentState})`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.off('reachable', check);
        this.off('unreachable', check);
      };
      this.on('reachable', check);
      this.on('unreachable', check);
    });
  }

  private fieldSelector(): string {
    return `spec.nodeName=${this.options.nodeName}`;
  }

  private async run(): Promise<void> {
    let listFailures = 0;
    let quickWatchEnds = 0;
    let needList = true;
    let resyncAt = 0;
    while (!this.stopped) {
      if (needList) {
        try {
          const list = await this.list();
          if (this.stopped) break;
          const changed = this.replaceAll(list.items);
          this.resourceVersion = list.metadata?.resourceVersion ?? '';
          resyncAt = Date.now() + this.options.resyncPeriodMs;
          listFailures = 0;
          needList = false;
          // 'reachable' first, with every pod in place, so the count in its log line is right.
          this.enterSynced();
          for (const pod of changed) this.tell('pod', pod);
        } catch (err) {
          if (this.stopped) break;
          this.enterUnreachable(err);
          await this.sleep(this.backoff(listFailures++));
          continue;
        }
      }
      const started = Date.now();
      const end = await this.watchOnce(Math.max(0, resyncAt - started));
      if (end.kind === 'stopped' || this.stopped) break;
      const quick = Date.now() - started < MIN_HEALTHY_WATCH_MS;
      quickWatchEnds = quick ? quickWatchEnds + 1 : 0;
      if (end.kind === 'error') {
        this.log.debug({ url: this.url, reason: describeKubeError(end.err) }, 'pod watch failed; listing again');
      }
      // A watch that ended cleanly continues from where it stopped; anything else lists again.
      needList = end.kind !== 'closed' || quick;
      if (quickWatchEnds > 0) await this.sleep(this.backoff(quickWatchEnds - 1));
    }
  }

  private backoff(attempt: number): number {
    const base = Math.min(this.options.retryMaxMs, this.options.retryInitialMs * 2 ** Math.min(attempt, 30));
    return base * (0.8 + Math.random() * 0.2);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = null;
        done();
      };
    });
  }

  private async list(): Promise<k8s.V1PodList> {
    const api = this.api!;
    const kube = this.kube!;
    const controller = new AbortController();
    this.listAbort = controller;
    const timeoutMs = this.options.requestTimeoutMs;
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    const withSignal: k8s.ObservableMiddleware = {
      pre: (context) => {
        context.setSignal(controller.signal);
        return new kube.Observable(Promise.resolve(context));
      },
      post: (context) => new kube.Observable(Promise.resolve(context)),
    };
    try {
      return await api.listPodForAllNamespaces(
        { fieldSelector: this.fieldSelector() },
        { middleware: [withSignal], middlewareMergeStrategy: 'append' },
      );
    } catch (err) {
      if (controller.signal.aborted && !this.stopped) {
        throw new AgentError('ETIMEDOUT', `no answer within ${timeoutMs} ms`, { cause: err });
      }
      throw err;
    } finally {
      clearTimeout(timer);
      this.listAbort = null;
    }
  }

  /** One watch request from the current resourceVersion, until it ends or the resync is due. */
  private watchOnce(untilResyncMs: number): Promise<WatchEnd> {
    return new Promise<WatchEnd>((resolve) => {
      let settled = false;
      let controller: AbortController | null = null;
      const finish = (end: WatchEnd) => {
        if (settled) return;
        settled = true;
        clearTimeout(resync);
        this.abortWatch = null;
        controller?.abort();
        resolve(end);
      };
      const resync = setTimeout(() => finish({ kind: 'resync' }), untilResyncMs);
      this.abortWatch = () => finish({ kind: 'stopped' });
      const onEvent = (type: string, object: unknown) => {
        if (settled) return;
        if (type === 'ERROR') {
          const code = (object as { code?: number })?.code;
          finish(code === 410 ? { kind: 'expired' } : { kind: 'error', err: object });
          return;
        }
        const rv = (object as PodLike)?.metadata?.resourceVersion;
        if (type === 'ADDED' || type === 'MODIFIED') this.upsert(object as PodLike);
        else if (type === 'DELETED') this.remove(object as PodLike);
        if (rv) this.resourceVersion = rv;
      };
      this.watcher!
        .watch(
          '/api/v1/pods',
          { fieldSelector: this.fieldSelector(), resourceVersion: this.resourceVersion, allowWatchBookmarks: true },
          onEvent,
          (err: unknown) => finish(err ? { kind: 'error', err } : { kind: 'closed' }),
        )
        .then((c) => {
          controller = c;
          if (settled) c.abort();
        })
        .catch((err: unknown) => finish({ kind: 'error', err }));
    });
  }

  /** Makes the cache the list's content; returns the pods that are new or changed. */
  private replaceAll(items: PodLike[]): CachedPod[] {
    const seen = new Set<string>();
    const changed: CachedPod[] = [];
    for (const item of items) {
      const pod = cachedPodFrom(item);
      if (!pod) continue;
      seen.add(pod.uid);
      if (this.store(pod)) changed.push(pod);
    }
    for (const uid of [...this.byUid.keys()]) if (!seen.has(uid)) this.forget(uid);
    return changed;
  }

  private upsert(item: PodLike): void {
    const pod = cachedPodFrom(item);
    if (pod && this.store(pod)) this.tell('pod', pod);
  }

  /** Stores a pod; false when nothing the registry uses changed. */
  private store(pod: CachedPod): boolean {
    const previous = this.byUid.get(pod.uid);
    if (previous && samePod(previous, pod)) return false;
    if (previous?.mirrorHash) this.byMirrorHash.delete(previous.mirrorHash);
    this.byUid.set(pod.uid, pod);
    if (pod.mirrorHash) this.byMirrorHash.set(pod.mirrorHash, pod.uid);
    return true;
  }

  private remove(item: PodLike): void {
    const uid = item.metadata?.uid;
    if (uid) this.forget(uid);
  }

  private forget(uid: string): void {
    const pod = this.byUid.get(uid);
    if (!pod) return;
    this.byUid.delete(uid);
    if (pod.mirrorHash) this.byMirrorHash.delete(pod.mirrorHash);
  }

  /** Emits to the listeners; a listener that throws is logged, never taken for an API failure. */
  private tell<E extends keyof PodCacheEvents>(event: E, ...args: PodCacheEvents[E]): void {
    try {
      (this.emit as (event: E, ...args: PodCacheEvents[E]) => boolean)(event, ...args);
    } catch (err) {
      this.log.error({ err, event }, `pod cache listener failed on '${event}': ${(err as Error).message}`);
    }
  }

  private enterSynced(): void {
    const previous = this.currentState;
    if (previous === 'synced') return;
    this.currentState = 'synced';
    const fields = { url: this.url, node: this.options.nodeName, pods: this.byUid.size };
    if (previous === 'connecting') {
      this.log.info(fields, `Kubernetes API server reachable at ${this.url}: ${this.byUid.size} pods of node ${this.options.nodeName} cached`);
    } else {
      const pending = this.pendingCounter();
      this.log.info(
        { ...fields, pending },
        `Kubernetes API server reachable again at ${this.url}: ${this.byUid.size} pods cached; resolving ${pending} containers admitted without identity`,
      );
    }
    this.tell('reachable', { pods: this.byUid.size });
  }

  private enterUnreachable(err: unknown): void {
    const reason = describeKubeError(err);
    this.lastReason = reason;
    if (this.currentState === 'unreachable') {
      this.log.debug({ url: this.url, reason }, 'Kubernetes API server still unreachable');
      return;
    }
    const cached = this.currentState === 'synced' ? `The ${this.byUid.size} pods cached before still resolve containers. ` : '';
    this.currentState = 'unreachable';
    this.log.warn(
      { url: this.url, node: this.options.nodeName, reason, pods: this.byUid.size },
      `Kubernetes API server unreachable at ${this.url} (${reason}). ${cached}` +
        'Containers without pod annotations whose pod is not cached have no namespace or pod: ' +
        `MKDIR_TMPL is not applied to them and their mkdir gets --unresolved-action (${this.options.unresolvedAction}) ` +
        `until their pod is known; other policy keys still apply; retrying with backoff up to ${this.options.retryMaxMs / 1000}s`,
    );
    this.tell('unreachable', { reason });
  }
}
