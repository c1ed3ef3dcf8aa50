// A loopback stand-in for the Kubernetes API server: the lists and watches the control plane's
// informers use (pods, namespaces, SeccompNotifyPolicy, ClusterSeccompNotifyPolicy), spoken the
// way the real server speaks them (lists with a resourceVersion, chunked watch lines,
// fieldSelector, 410 Expired), the policies' status subresource (PUT, merge patch, and
// server-side apply with one owner per field manager for the list-map fields), plus what tests
// need: add, change and remove objects, and stop() / start() on the same port for an outage.
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomUUID } from 'node:crypto';

/** The part of a v1 Pod the stand-in stores; extra fields are kept and served as given. */
export interface FakePod {
  apiVersion: 'v1';
  kind: 'Pod';
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    resourceVersion?: string;
    creationTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [key: string]: unknown;
  };
  spec: { nodeName?: string; containers: Array<{ name: string; image: string }>; [key: string]: unknown };
  status: {
    phase?: string;
    containerStatuses?: Array<{ name: string; containerID?: string; [key: string]: unknown }>;
    [key: string]: unknown;
  };
}

export interface PodSpecInput {
  name: string;
  namespace?: string;
  uid?: string;
  nodeName?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Containers; `id` adds a status with "containerd://<id>" (or the runtime given). */
  containers?: Array<{ name: string; id?: string; runtime?: 'containerd' | 'cri-o' }>;
}

/** A realistic running pod. */
export function makePod(input: PodSpecInput): FakePod {
  const containers = input.containers ?? [{ name: 'main' }];
  const now = new Date().toISOString();
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: input.name,
      namespace: input.namespace ?? 'default',
      uid: input.uid ?? randomUUID(),
      creationTimestamp: now,
      ...(input.labels ? { labels: { ...input.labels } } : {}),
      ...(input.annotations ? { annotations: { ...input.annotations } } : {}),
    },
    spec: {
      ...(input.nodeName !== undefined ? { nodeName: input.nodeName } : {}),
      containers: containers.map((c) => ({ name: c.name, image: 'busybox:stable' })),
    },
    status: {
      phase: 'Running',
      containerStatuses: containers.map((c) => ({
        name: c.name,
        ready: c.id !== undefined,
        restartCount: 0,
        image: 'busybox:stable',
        imageID: '',
        ...(c.id !== undefined
          ? { containerID: `${c.runtime ?? 'containerd'}://${c.id}`, started: true, state: { running: { startedAt: now } } }
          : { started: false, state: { waiting: { reason: 'ContainerCreating' } } }),
      })),
    },
  };
}

export interface RequestRecord {
  method: string;
  path: string;
  query: Record<string, string>;
}

/** One status write as the server received it. */
export interface StatusWrite {
  resource: PolicyResource;
  namespace: string | null;
  name: string;
  method: string;
  contentType: string;
  fieldManager: string;
  body: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** A stored object of any resource: the part every kind has. */
interface StoredObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string; generation?: number; [key: string]: unknown };
  [key: string]: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export type PolicyResource = 'seccompnotifypolicies' | 'clusterseccompnotifypolicies';
type Resource = 'pods' | 'namespaces' | PolicyResource;

const RESOURCES: Record<Resource, { namespaced: boolean; apiVersion: string; kind: string; listKind: string }> = {
  pods: { namespaced: true, apiVersion: 'v1', kind: 'Pod', listKind: 'PodList' },
  namespaces: { namespaced: false, apiVersion: 'v1', kind: 'Namespace', listKind: 'NamespaceList' },
  seccompnotifypolicies: { namespaced: true, apiVersion: 'seccompagent.dev/v1alpha1', kind: 'SeccompNotifyPolicy', listKind: 'SeccompNotifyPolicyList' },
  clusterseccompnotifypolicies: { namespaced: false, apiVersion: 'seccompagent.dev/v1alpha1', kind: 'ClusterSeccompNotifyPolicy', listKind: 'ClusterSeccompNotifyPolicyList' },
};

/** Status fields that are lists of maps, by their key (x-kubernetes-list-map-keys in deploy/crds). */
const STATUS_LIST_MAPS: Record<string, string> = { conditions: 'type', nodes: 'node' };

interface HistoryEntry {
  rv: number;
  resource: Resource;
  type: EventType;
  object: StoredObject;
  /** The object before a MODIFIED, to tell selectors it left or entered. */
  previous: StoredObject | null;
}

interface Selector {
  resource: Resource;
  namespace: string | null;
  matches: (object: StoredObject) => boolean;
}

interface Watcher {
  selector: Selector;
  response: http.ServerResponse;
}

const FIELDS: Record<string, (object: StoredObject) => string> = {
  'spec.nodeName': (o) => o.spec?.nodeName ?? '',
  'metadata.name': (o) => o.metadata.name,
  'metadata.namespace': (o) => o.metadata.namespace ?? '',
  'status.phase': (o) => o.status?.phase ?? '',
};

function parseFieldSelector(text: string): ((object: StoredObject) => boolean) | string {
  const terms: Array<(object: StoredObject) => boolean> = [];
  for (const term of text.split(',').filter((t) => t !== '')) {
    const match = /^([^=!]+)(==|=|!=)(.*)$/.exec(term);
    if (!match) return `invalid field selector term "${term}"`;
    const get = FIELDS[match[1]];
    if (!get) return `field label not supported: ${match[1]}`;
    const [, , op, value] = match;
    terms.push(op === '!=' ? (o) => get(o) !== value : (o) => get(o) === value);
  }
  return (o) => terms.every((t) => t(o));
}

function status(code: number, reason: string, message: string) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

/** A policy as tests write it: namespace (namespaced kind only), name, spec. */
export interface PolicyInput {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  spec: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: any, patch: any): any { // eslint-disable-line @typescript-eslint/no-explicit-any
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return structuredClone(patch);
  const out = target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** What one field manager owns of one object's status (server-side apply, simplified). */
interface Owned {
  fields: Set<string>;
  entries: Map<string, Set<string>>;
}

export class FakeKubeApiServer {
  private readonly server: http.Server;
  private readonly sockets = new Set<Socket>();
  private readonly watchers = new Set<Watcher>();
  private readonly store: Record<Resource, Map<string, StoredObject>> = { pods: new Map(), namespaces: new Map(), seccompnotifypolicies: new Map(), clusterseccompnotifypolicies: new Map() };
  /** Status ownership by object key, then field manager. */
  private readonly owners = new Map<string, Map<string, Owned>>();
  private history: HistoryEntry[] = [];
  /** Watches from a resourceVersion older than this get 410 Expired. */
  private oldestRv = 0;
  private rv = 1000;
  private listeningPort = 0;
  private running = false;
  readonly requests: RequestRecord[] = [];
  readonly statusWrites: StatusWrite[] = [];
  /** Resources this service account may not read (403 Forbidden), as an RBAC without them. */
  private readonly forbidden = new Set<Resource>();

  private constructor() {
    this.server = http.createServer((req, res) => this.handle(req, res));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  /** Listens on 127.0.0.1, on `port` or a free one. */
  static async create(port = 0): Promise<FakeKubeApiServer> {
    const server = new FakeKubeApiServer();
    server.listeningPort = port;
    await server.start();
    return server;
  }

  get port(): number {
    return this.listeningPort;
  }

  get url(): string {
    return `http://127.0.0.1:${this.listeningPort}`;
  }

  get isRunning(): boolean {
    return this.running;
  }

  /** Watch streams open now. */
  get openWatches(): number {
    return this.watchers.size;
  }

  /** Watch streams open now on one resource. */
  /** Lists and watches of `resource` get 403 Forbidden (an RBAC that does not grant them), or again 200. */
  forbid(resource: Resource, on = true): void {
    if (on) this.forbidden.add(resource);
    else this.forbidden.delete(resource);
  }

  watchesOn(resource: Resource): number {
    return [...this.watchers].filter((w) => w.selector.resource === resource).length;
  }

  /** Starts listening again, on the same port as before. */
  async start(): Promise<void> {
    if (this.running) return;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.listeningPort, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.listeningPort = (this.server.address() as AddressInfo).port;
    this.running = true;
  }

  /** An outage: stops listening and drops every open connection, watches included. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    this.watchers.clear();
    await closed;
  }

  /** Writes a kubeconfig for this server (plain http, no credentials) and returns its path. */
  writeKubeconfig(file: string): string {
    const text = [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: fake',
      '  cluster:',
      `    server: ${this.url}`,
      // client-node refuses a plain-http server unless TLS verification is explicitly off.
      '    insecure-skip-tls-verify: true',
      'contexts:',
      '- name: fake',
      '  context:',
      '    cluster: fake',
      '    user: fake',
      'current-context: fake',
      'users:',
      '- name: fake',
      '  user: {}',
      '',
    ].join('\n');
    fs.writeFileSync(file, text, { mode: 0o600 });
    return file;
  }

  private static key(object: { metadata: { name: string; namespace?: string } }): string {
    return object.metadata.namespace ? `${object.metadata.namespace}/${object.metadata.name}` : object.metadata.name;
  }

  /** Stores an object (new resourceVersion); watchers get ADDED or MODIFIED unless notify is false. */
  private put(resource: Resource, object: StoredObject, notify = true): StoredObject {
    const full = structuredClone(object);
    const key = FakeKubeApiServer.key(full);
    const previous = this.store[resource].get(key) ?? null;
    full.metadata.resourceVersion = String(++this.rv);
    full.metadata.uid ??= previous?.metadata.uid ?? randomUUID();
    full.metadata.creationTimestamp ??= previous?.metadata.creationTimestamp ?? new Date().toISOString();
    this.store[resource].set(key, full);
    if (notify) this.publish({ rv: this.rv, resource, type: previous ? 'MODIFIED' : 'ADDED', object: full, previous });
    return structuredClone(full);
  }

  private delete(resource: Resource, key: string, notify = true): boolean {
    const previous = this.store[resource].get(key);
    if (!previous) return false;
    this.store[resource].delete(key);
    this.owners.delete(`${resource}/${key}`);
    const gone = structuredClone(previous);
    gone.metadata.resourceVersion = String(++this.rv);
    if (notify) this.publish({ rv: this.rv, resource, type: 'DELETED', object: gone, previous: null });
    return true;
  }

  /**
   * Adds (or replaces) a pod; watchers get ADDED (or MODIFIED). `notify: false` simulates an
   * event a watcher missed: only a new list shows the change.
   */
  addPod(pod: FakePod | PodSpecInput, options: { notify?: boolean } = {}): FakePod {
    const full = 'kind' in pod ? structuredClone(pod) : makePod(pod);
    return this.put('pods', full as unknown as StoredObject, options.notify !== false) as unknown as FakePod;
  }

  /** Changes a stored pod (for example to add container statuses); watchers get MODIFIED. */
  updatePod(namespace: string, name: string, change: (pod: FakePod) => void): FakePod {
    const previous = this.store.pods.get(`${namespace}/${name}`);
    if (!previous) throw new Error(`no pod ${namespace}/${name}`);
    const next = structuredClone(previous) as unknown as FakePod;
    change(next);
    return this.put('pods', next as unknown as StoredObject) as unknown as FakePod;
  }

  /** Removes a pod; watchers get DELETED (unless `notify: false`, as for addPod). */
  removePod(namespace: string, name: string, options: { notify?: boolean } = {}): boolean {
    return this.delete('pods', `${namespace}/${name}`, options.notify !== false);
  }

  listPods(): FakePod[] {
    return [...this.store.pods.values()].map((pod) => structuredClone(pod) as unknown as FakePod);
  }

  /** Adds or relabels a namespace. */
  addNamespace(name: string, labels: Record<string, string> = {}): void {
    const previous = this.store.namespaces.get(name);
    this.put('namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { ...(previous?.metadata ?? {}), name, labels: { 'kubernetes.io/metadata.name': name, ...labels } },
      spec: { finalizers: ['kubernetes'] },
      status: { phase: 'Active' },
    });
  }

  removeNamespace(name: string): boolean {
    return this.delete('namespaces', name);
  }

  /**
   * Creates or replaces a policy's spec (kubectl apply): the generation goes up when the spec
   * changes, the status is kept. Returns the stored object.
   */
  applyPolicy(resource: PolicyResource, input: PolicyInput): StoredObject {
    const info = RESOURCES[resource];
    const namespace = info.namespaced ? input.namespace ?? 'default' : undefined;
    const key = namespace ? `${namespace}/${input.name}` : input.name;
    const previous = this.store[resource].get(key);
    const changed = !previous || JSON.stringify(previous.spec) !== JSON.stringify(input.spec);
    const generation = (previous?.metadata.generation ?? 0) + (changed ? 1 : 0);
    return this.put(resource, {
      apiVersion: info.apiVersion,
      kind: info.kind,
      metadata: { ...(previous?.metadata ?? {}), name: input.name, ...(namespace ? { namespace } : {}), generation, ...(input.labels ? { labels: input.labels } : {}) },
      spec: structuredClone(input.spec),
      ...(previous?.status ? { status: previous.status } : {}),
    });
  }

  removePolicy(resource: PolicyResource, name: string, namespace?: string): boolean {
    return this.delete(resource, RESOURCES[resource].namespaced ? `${namespace ?? 'default'}/${name}` : name);
  }

  /** The stored policy (with its status), or undefined. */
  getPolicy(resource: PolicyResource, name: string, namespace?: string): StoredObject | undefined {
    const object = this.store[resource].get(RESOURCES[resource].namespaced ? `${namespace ?? 'default'}/${name}` : name);
    return object ? structuredClone(object) : undefined;
  }

  /** Ends every open watch cleanly, as the server does when a watch's timeout passes. */
  endWatches(): void {
    for (const watcher of this.watchers) watcher.response.end();
    this.watchers.clear();
  }

  /**
   * Forgets the event history, as etcd compaction does: a watch from any resourceVersion handed
   * out so far gets 410 Expired; a new list gives a resourceVersion that works again.
   */
  compact(): void {
    this.history = [];
    this.oldestRv = ++this.rv;
  }

  private publish(entry: HistoryEntry): void {
    this.history.push(entry);
    for (const watcher of this.watchers) this.send(watcher, entry);
  }

  /** Sends one event as a watcher with a selector sees it (an object leaving the selector is DELETED). */
  private send(watcher: Watcher, entry: HistoryEntry): void {
    if (entry.resource !== watcher.selector.resource) return;
    const inScope = (o: StoredObject | null) =>
      o !== null && (watcher.selector.namespace === null || o.metadata.namespace === watcher.selector.namespace) && watcher.selector.matches(o);
    const now = inScope(entry.object);
    const before = entry.type === 'MODIFIED' ? inScope(entry.previous) : now;
    let type: EventType = entry.type;
    if (entry.type === 'MODIFIED' && now && !before) type = 'ADDED';
    else if (entry.type === 'MODIFIED' && !now && before) type = 'DELETED';
    else if (!now) return;
    watcher.response.write(`${JSON.stringify({ type, object: entry.object })}\n`);
  }

  /** /api/v1/[namespaces/NS/]pods, /api/v1/namespaces, /apis/seccompagent.dev/v1alpha1/[namespaces/NS/]PLURAL[/NAME[/status]]. */
  private route(pathname: string): { resource: Resource; namespace: string | null; name: string | null; status: boolean } | null {
    let m = /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?pods$/.exec(pathname);
    if (m) return { resource: 'pods', namespace: m[1] ? decodeURIComponent(m[1]) : null, name: null, status: false };
    if (pathname === '/api/v1/namespaces') return { resource: 'namespaces', namespace: null, name: null, status: false };
    m = /^\/apis\/seccompagent\.dev\/v1alpha1\/(?:namespaces\/([^/]+)\/)?(seccompnotifypolicies|clusterseccompnotifypolicies)(?:\/([^/]+)(\/status)?)?$/.exec(pathname);
    if (!m) return null;
    const resource = m[2] as PolicyResource;
    if (m[1] && !RESOURCES[resource].namespaced) return null;
    return { resource, namespace: m[1] ? decodeURIComponent(m[1]) : null, name: m[3] ? decodeURIComponent(m[3]) : null, status: m[4] !== undefined };
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const query = Object.fromEntries(url.searchParams.entries());
    this.requests.push({ method: req.method ?? '', path: url.pathname, query });
    const reply = (code: number, body: unknown) => {
      res.writeHead(code, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const route = this.route(url.pathname);
    if (!route) return reply(404, status(404, 'NotFound', 'the server could not find the requested resource'));
    if (this.forbidden.has(route.resource)) {
      return reply(403, status(403, 'Forbidden', `${route.resource} is forbidden: User "system:serviceaccount:seccomp-agent:seccomp-agent" cannot list resource "${route.resource}" in API group "" at the cluster scope`));
    }
    if (route.name !== null) {
      let text = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (text += chunk));
      req.on('end', () => {
        const result = this.objectRequest(route as typeof route & { name: string }, req.method ?? '', String(req.headers['content-type'] ?? ''), query, text);
        reply(result.code, result.body);
      });
      return;
    }
    if (req.method !== 'GET') return reply(405, status(405, 'MethodNotAllowed', `${req.method} is not supported here`));
    const matches = parseFieldSelector(query.fieldSelector ?? '');
    if (typeof matches === 'string') return reply(400, status(400, 'BadRequest', matches));
    const selector: Selector = { resource: route.resource, namespace: route.namespace, matches };
    const selected = () =>
      [...this.store[route.resource].values()].filter((o) => (selector.namespace === null || o.metadata.namespace === selector.namespace) && matches(o));

    if (query.watch !== 'true' && query.watch !== '1') {
      const info = RESOURCES[route.resource];
      return reply(200, {
        kind: info.listKind,
        apiVersion: info.apiVersion,
        metadata: { resourceVersion: String(this.rv) },
        items: selected(),
      });
    }

    const from = query.resourceVersion ?? '';
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
    res.flushHeaders();
    const watcher: Watcher = { selector, response: res };
    if (from === '' || from === '0') {
      // "Start at most recent" with the current state as synthetic ADDED events, as the server does.
      for (const o of selected()) res.write(`${JSON.stringify({ type: 'ADDED', object: o })}\n`);
    } else {
      const since = Number(from);
      if (!Number.isInteger(since) || since < this.oldestRv) {
        res.end(`${JSON.stringify({ type: 'ERROR', object: status(410, 'Expired', `too old resource version: ${from} (${this.oldestRv})`) })}\n`);
        return;
      }
      for (const entry of this.history) if (entry.rv > since) this.send(watcher, entry);
    }
    this.watchers.add(watcher);
    const finish = () => this.watchers.delete(watcher);
    res.on('close', finish);
    const timeoutSeconds = Number(query.timeoutSeconds ?? '0');
    if (timeoutSeconds > 0) {
      const timer = setTimeout(() => {
        finish();
        res.end();
      }, timeoutSeconds * 1000);
      timer.unref();
      res.on('close', () => clearTimeout(timer));
    }
  }

  /** GET of one object; PUT, merge PATCH or apply PATCH of a policy's status subresource. */
  private objectRequest(
    route: { resource: Resource; namespace: string | null; name: string; status: boolean },
    method: string,
    contentType: string,
    query: Record<string, string>,
    text: string,
  ): { code: number; body: unknown } {
    const info = RESOURCES[route.resource];
    const key = info.namespaced ? `${route.namespace ?? ''}/${route.name}` : route.name;
    const stored = this.store[route.resource].get(key);
    const what = `${route.resource}.seccompagent.dev "${route.name}"`;
    if (!stored) return { code: 404, body: status(404, 'NotFound', `${what} not found`) };
    if (method === 'GET') return { code: 200, body: stored };
    if (!route.status) return { code: 405, body: status(405, 'MethodNotAllowed', `${method} of the object itself is not supported by the stand-in`) };
    let body: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    try {
      body = JSON.parse(text);
    } catch (err) {
      return { code: 400, body: status(400, 'BadRequest', `body is not JSON: ${(err as Error).message}`) };
    }
    const fieldManager = query.fieldManager ?? '';
    this.statusWrites.push({ resource: route.resource as PolicyResource, namespace: route.namespace, name: route.name, method, contentType, fieldManager, body });
    const next = structuredClone(stored);
    if (method === 'PUT') {
      if (body.metadata?.resourceVersion && body.metadata.resourceVersion !== stored.metadata.resourceVersion) {
        return { code: 409, body: status(409, 'Conflict', `Operation cannot be fulfilled on ${what}: the object has been modified; please apply your changes to the latest version and try again`) };
      }
      next.status = structuredClone(body.status ?? {});
    } else if (method === 'PATCH' && contentType.startsWith('application/merge-patch+json')) {
      next.status = mergePatch(next.status ?? {}, body.status ?? {});
    } else if (method === 'PATCH' && contentType.startsWith('application/apply-patch+yaml')) {
      if (!fieldManager) return { code: 400, body: status(400, 'BadRequest', 'PATCH with apply-patch needs a fieldManager') };
      next.status = this.applyStatus(`${route.resource}/${key}`, next.status ?? {}, fieldManager, body.status ?? {});
    } else {
      return { code: 415, body: status(415, 'UnsupportedMediaType', `${method} with ${contentType} is not supported by the stand-in`) };
    }
    // The status subresource never changes the spec nor the generation.
    next.spec = stored.spec;
    next.metadata.generation = stored.metadata.generation;
    if (JSON.stringify(next.status) === JSON.stringify(stored.status ?? {})) return { code: 200, body: stored };
    return { code: 200, body: this.put(route.resource, next) };
  }

  /**
   * Server-side apply of a status, simplified to what the agents need: a manager owns the fields
   * it sent, and in the list-map fields (conditions by type, nodes by node) the entries it sent;
   * what it owned before and omits now is removed, what other managers own is left alone.
   */
  private applyStatus(objectKey: string, current: Record<string, any>, manager: string, applied: Record<string, any>): Record<string, any> { // eslint-disable-line @typescript-eslint/no-explicit-any
    let byManager = this.owners.get(objectKey);
    if (!byManager) this.owners.set(objectKey, (byManager = new Map()));
    const before = byManager.get(manager) ?? { fields: new Set<string>(), entries: new Map<string, Set<string>>() };
    const now: Owned = { fields: new Set(), entries: new Map() };
    const out = structuredClone(current);
    const ownedByOthers = (field: string, entry?: string) =>
      [...byManager!].some(([m, o]) => m !== manager && (entry === undefined ? o.fields.has(field) : o.entries.get(field)?.has(entry)));
    for (const [field, value] of Object.entries(applied)) {
      const mapKey = STATUS_LIST_MAPS[field];
      if (mapKey && Array.isArray(value)) {
        const sent = new Set(value.map((e: Record<string, unknown>) => String(e[mapKey])));
        const kept = ((out[field] ?? []) as Array<Record<string, unknown>>).filter((e) => {
          const k = String(e[mapKey]);
          return !sent.has(k) && !(before.entries.get(field)?.has(k) && !ownedByOthers(field, k));
        });
        out[field] = [...kept, ...structuredClone(value)];
        now.entries.set(field, sent);
      } else {
        out[field] = structuredClone(value);
        now.fields.add(field);
      }
    }
    for (const field of before.fields) if (!(field in applied) && !ownedByOthers(field)) delete out[field];
    for (const [field, keys] of before.entries) {
      if (field in applied) continue;
      const mapKey = STATUS_LIST_MAPS[field];
      out[field] = ((out[field] ?? []) as Array<Record<string, unknown>>).filter((e) => !keys.has(String(e[mapKey])) || ownedByOthers(field, String(e[mapKey])));
    }
    byManager.set(manager, now);
    return out;
  }
}

// Standalone: `node dist/test/cmd/fake-kube-apiserver/server.js [--port N] [--kubeconfig FILE]`
// serves an empty cluster until killed, for trying the control plane by hand.
if (require.main === module) {
  const arg = (name: string) => {
    const at = process.argv.indexOf(name);
    return at === -1 ? undefined : process.argv[at + 1];
  };
  void FakeKubeApiServer.create(Number(arg('--port') ?? 0)).then((server) => {
    const kubeconfig = arg('--kubeconfig');
    if (kubeconfig) server.writeKubeconfig(kubeconfig);
    process.stdout.write(`fake kube-apiserver at ${server.url}${kubeconfig ? `, kubeconfig ${kubeconfig}` : ''}\n`);
  });
}
