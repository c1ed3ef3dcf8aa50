// The one list/watch loop of the control plane: an informer cache of one kind of Kubernetes
// object (pods of this node, namespaces, the two policy kinds). Callers read its Map
// synchronously; everything that talks to the API server runs in the background loop below.
//
// The loop is ours rather than client-node's ListWatch: that one stops on the first error without
// saying whether the list succeeded, and its reconnect policy differs between client-node
// versions. Here the state is explicit (connecting, synced, unreachable), retries back off up to
// a cap, a routine watch timeout is not an outage (only a list that fails makes the informer
// unreachable), a watch that ends cleanly continues from its resourceVersion, and 410 Expired
// lists again. Transitions are events: each cache says them in its own words, once.
// @kubernetes/client-node still does the work that matters: kubeconfig and in-cluster
// credentials, TLS, the typed list calls and the watch stream.
import { EventEmitter } from 'node:events';
import type * as k8s from '@kubernetes/client-node';
import { AgentError } from '../../common/errors';
import type { Logger } from '../../common/logger';

export type InformerState = 'connecting' | 'synced' | 'unreachable';

type KubeModule = typeof import('@kubernetes/client-node');

// Loaded on first use so commands that never talk to Kubernetes (seccompctl, --no-kubernetes)
// do not pay for it. client-node is ESM-only; Node 20.19+ require()s it (no top-level await).
let kubeModule: Promise<KubeModule> | undefined;
export function loadKube(): Promise<KubeModule> {
  kubeModule ??= import('@kubernetes/client-node');
  return kubeModule;
}

/** One API server connection, shared by every informer and the status writer of a process. */
export interface KubeConnection {
  readonly kube: KubeModule;
  readonly config: k8s.KubeConfig;
  /** The API server's URL. */
  readonly url: string;
  readonly core: k8s.CoreV1Api;
  readonly custom: k8s.CustomObjectsApi;
  readonly watcher: k8s.Watch;
}

/**
 * Reads the kubeconfig ('' for the in-cluster service account). Throws AgentError EKUBE_CONFIG
 * when there is no usable configuration: that is an operator error, not an outage.
 */
export async function connectKube(kubeconfig: string): Promise<KubeConnection> {
  const kube = await loadKube();
  const config = new kube.KubeConfig();
  try {
    if (kubeconfig !== '') {
      config.loadFromFile(kubeconfig);
    } else {
      if (!process.env.KUBERNETES_SERVICE_HOST) {
        throw new Error('KUBERNETES_SERVICE_HOST is not set, so this is not a pod with a service account');
      }
      config.loadFromCluster();
    }
  } catch (err) {
    const where = kubeconfig === '' ? 'the in-cluster configuration' : `kubeconfig ${kubeconfig}`;
    throw new AgentError(
      'EKUBE_CONFIG',
      `cannot use ${where}: ${(err as Error).message}; pass --kubeconfig FILE, or --no-kubernetes to rely on pod annotations only`,
      { cause: err },
    );
  }
  const cluster = config.getCurrentCluster();
  if (!cluster) {
    throw new AgentError('EKUBE_CONFIG', `kubeconfig ${kubeconfig} has no current cluster; set current-context, or pass --no-kubernetes`);
  }
  return Object.freeze({
    kube,
    config,
    url: cluster.server,
    core: config.makeApiClient(kube.CoreV1Api),
    custom: config.makeApiClient(kube.CustomObjectsApi),
    watcher: new kube.Watch(config),
  });
}

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

/** An object as the list (typed) or the watch (plain JSON) gives it. */
export interface KubeObject {
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string; generation?: number; [key: string]: unknown };
  [key: string]: unknown;
}

/** What an informer needs to know about its kind. */
export interface InformerKind<T> {
  /** For log lines and errors: "pod", "SeccompNotifyPolicy". */
  readonly name: string;
  /** The watch path: /api/v1/pods, /apis/seccompagent.dev/v1alpha1/seccompnotifypolicies. */
  readonly path: string;
  readonly fieldSelector?: string;
  /** One list call (every namespace), with the options that carry the abort signal. */
  list(connection: KubeConnection, fieldSelector: string | undefined, options: k8s.ConfigurationOptions): Promise<{ items?: unknown[]; metadata?: { resourceVersion?: string } }>;
  /** The cached form; null skips the object (e.g. a pod without a UID). */
  convert(object: KubeObject): T | null;
  /** The cache key of a cached object. */
  key(item: T): string;
  /** The cache key of a raw object (for DELETED events). */
  rawKey(object: KubeObject): string | null;
  /** True when nothing the caches use changed (no 'upsert' event then). */
  same(a: T, b: T): boolean;
}

export interface InformerOptions {
  /** A full list this often, even while the watch is healthy (repairs missed events). */
  resyncPeriodMs: number;
  /** Cap of the retry backoff. */
  retryMaxMs: number;
  /** First retry delay (500 ms). */
  retryInitialMs?: number;
  /** A list that takes longer fails (10 s). */
  requestTimeoutMs?: number;
}

export interface InformerEvents<T> {
  /** The informer is synced again (or for the first time), with every listed object in place. */
  synced: [{ first: boolean; count: number }];
  /** A list failed: the content stays but may be stale. Said on each failure; `first` on the transition. */
  unreachable: [{ reason: string; first: boolean; err: unknown }];
  /** An object was added or changed (from a list or the watch). */
  upsert: [T, T | undefined];
  /** An object went away (from a list or the watch). */
  delete: [T];
}

/** A watch shorter than this that ends by itself counts as a failure (no tight re-watch loop). */
const MIN_HEALTHY_WATCH_MS = 1000;

type WatchEnd =
  | { kind: 'closed' }
  | { kind: 'resync' }
  | { kind: 'stopped' }
  | { kind: 'expired' }
  | { kind: 'error'; err: unknown };

export class Informer<T> extends EventEmitter<InformerEvents<T>> {
  private readonly options: Required<InformerOptions>;
  private readonly items = new Map<string, T>();
  private currentState: InformerState = 'connecting';
  private lastReason = '';
  private connection: KubeConnection | null = null;
  private resourceVersion = '';
  private stopped = false;
  private loop: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private abortWatch: (() => void) | null = null;
  private listAbort: AbortController | null = null;

  constructor(
    readonly kind: InformerKind<T>,
    options: InformerOptions,
    private readonly log: Logger,
  ) {
    super();
    this.options = { retryInitialMs: 500, requestTimeoutMs: 10_000, ...options };
  }

  get state(): InformerState {
    return this.currentState;
  }

  /** Why the last attempt failed, '' while synced. */
  get lastError(): string {
    return this.currentState === 'synced' ? '' : this.lastReason;
  }

  get size(): number {
    return this.items.size;
  }

  get(key: string): T | undefined {
    return this.items.get(key);
  }

  values(): IterableIterator<T> {
    return this.items.values();
  }

  /**
   * Content known before the first list (the node checkpoint): served while connecting or
   * unreachable, replaced by the first list that succeeds. Emits 'upsert' for each.
   */
  seed(items: readonly T[]): void {
    for (const item of items) this.store(item);
  }

  /** Starts the list/watch loop in the background; returns at once. */
  start(connection: KubeConnection): void {
    if (this.loop) return;
    this.connection = connection;
    this.stopped = false;
    this.loop = this.run();
  }

  /** Stops the loop and closes the watch; the content stays readable. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abortWatch?.();
    this.listAbort?.abort();
    this.wake?.();
    const loop = this.loop;
    this.loop = null;
    await loop;
  }

  /** Resolves once the informer is in `state` (now or later); rejects after timeoutMs. */
  waitFor(state: InformerState, timeoutMs: number): Promise<void> {
    if (this.currentState === state) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.currentState !== state) return;
        cleanup();
        resolve();
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new AgentError('ETIMEDOUT', `${this.kind.name} cache not ${state} after ${timeoutMs} ms (it is ${this.currentState})`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.off('synced', check);
        this.off('unreachable', check);
      };
      this.on('synced', check);
      this.on('unreachable', check);
    });
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
          const changed = this.replaceAll(list.items ?? []);
          this.resourceVersion = list.metadata?.resourceVersion ?? '';
          resyncAt = Date.now() + this.options.resyncPeriodMs;
          listFailures = 0;
          needList = false;
          // 'synced' first, with every object in place, so the counts its listeners log are right.
          this.enterSynced();
          for (const [item, previous] of changed) this.tell('upsert', item, previous);
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
        this.log.debug({ url: this.connection?.url, reason: describeKubeError(end.err) }, `${this.kind.name} watch failed; listing again`);
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

  private async list(): Promise<{ items?: unknown[]; metadata?: { resourceVersion?: string } }> {
    const connection = this.connection!;
    const kube = connection.kube;
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
      return await this.kind.list(connection, this.kind.fieldSelector, { middleware: [withSignal], middlewareMergeStrategy: 'append' });
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
        const raw = object as KubeObject;
        const rv = raw?.metadata?.resourceVersion;
        if (type === 'ADDED' || type === 'MODIFIED') this.upsert(raw);
        else if (type === 'DELETED') this.remove(raw);
        if (rv) this.resourceVersion = rv;
      };
      const query: Record<string, string | boolean> = { resourceVersion: this.resourceVersion, allowWatchBookmarks: true };
      if (this.kind.fieldSelector) query.fieldSelector = this.kind.fieldSelector;
      this.connection!.watcher
        .watch(this.kind.path, query, onEvent, (err: unknown) => finish(err ? { kind: 'error', err } : { kind: 'closed' }))
        .then((c) => {
          controller = c;
          if (settled) c.abort();
        })
        .catch((err: unknown) => finish({ kind: 'error', err }));
    });
  }

  /** Makes the cache the list's content; returns what is new or changed (deletions are told at once). */
  private replaceAll(objects: unknown[]): Array<[T, T | undefined]> {
    const seen = new Set<string>();
    const changed: Array<[T, T | undefined]> = [];
    for (const object of objects) {
      const item = this.kind.convert(object as KubeObject);
      if (!item) continue;
      const key = this.kind.key(item);
      seen.add(key);
      const previous = this.items.get(key);
      if (this.store(item, false)) changed.push([item, previous]);
    }
    for (const [key, item] of [...this.items]) {
      if (seen.has(key)) continue;
      this.items.delete(key);
      this.tell('delete', item);
    }
    return changed;
  }

  private upsert(object: KubeObject): void {
    const item = this.kind.convert(object);
    if (item) this.store(item);
  }

  /** Stores an item; false when nothing the caches use changed. */
  private store(item: T, tell = true): boolean {
    const key = this.kind.key(item);
    const previous = this.items.get(key);
    if (previous !== undefined && this.kind.same(previous, item)) return false;
    this.items.set(key, item);
    if (tell) this.tell('upsert', item, previous);
    return true;
  }

  private remove(object: KubeObject): void {
    const key = this.kind.rawKey(object);
    const item = key === null ? undefined : this.items.get(key);
    if (key === null || item === undefined) return;
    this.items.delete(key);
    this.tell('delete', item);
  }

  /** Emits to the listeners; a listener that throws is logged, never taken for an API failure. */
  private tell<E extends keyof InformerEvents<T>>(event: E, ...args: InformerEvents<T>[E]): void {
    try {
      (this.emit as (event: E, ...args: InformerEvents<T>[E]) => boolean)(event, ...args);
    } catch (err) {
      this.log.error({ err, event }, `${this.kind.name} cache listener failed on '${event}': ${(err as Error).message}`);
    }
  }

  private enterSynced(): void {
    const previous = this.currentState;
    if (previous === 'synced') return;
    this.currentState = 'synced';
    this.tell('synced', { first: previous === 'connecting', count: this.items.size });
  }

  private enterUnreachable(err: unknown): void {
    const reason = describeKubeError(err);
    this.lastReason = reason;
    const first = this.currentState !== 'unreachable';
    this.currentState = 'unreachable';
    this.tell('unreachable', { reason, first, err });
  }
}
