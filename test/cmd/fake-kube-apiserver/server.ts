// A loopback stand-in for the Kubernetes API server: just the pods list and watch the control
// plane's pod cache uses, spoken the way the real server speaks them (PodList with a
// resourceVersion, chunked watch lines, fieldSelector, 410 Expired), plus what tests need: add,
// change and remove pods, and stop() / start() on the same port to simulate an outage.
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

type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface HistoryEntry {
  rv: number;
  type: EventType;
  pod: FakePod;
  /** The pod before a MODIFIED, to tell selectors it left or entered. */
  previous: FakePod | null;
}

interface Selector {
  namespace: string | null;
  matches: (pod: FakePod) => boolean;
}

interface Watcher {
  selector: Selector;
  response: http.ServerResponse;
}

const FIELDS: Record<string, (pod: FakePod) => string> = {
  'spec.nodeName': (pod) => pod.spec.nodeName ?? '',
  'metadata.name': (pod) => pod.metadata.name,
  'metadata.namespace': (pod) => pod.metadata.namespace,
  'status.phase': (pod) => pod.status.phase ?? '',
};

function parseFieldSelector(text: string): ((pod: FakePod) => boolean) | string {
  const terms: Array<(pod: FakePod) => boolean> = [];
  for (const term of text.split(',').filter((t) => t !== '')) {
    const match = /^([^=!]+)(==|=|!=)(.*)$/.exec(term);
    if (!match) return `invalid field selector term "${term}"`;
    const get = FIELDS[match[1]];
    if (!get) return `field label not supported: ${match[1]}`;
    const [, , op, value] = match;
    terms.push(op === '!=' ? (pod) => get(pod) !== value : (pod) => get(pod) === value);
  }
  return (pod) => terms.every((t) => t(pod));
}

function status(code: number, reason: string, message: string) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

export class FakeKubeApiServer {
  private readonly server: http.Server;
  private readonly sockets = new Set<Socket>();
  private readonly watchers = new Set<Watcher>();
  private readonly pods = new Map<string, FakePod>();
  private history: HistoryEntry[] = [];
  /** Watches from a resourceVersion older than this get 410 Expired. */
  private oldestRv = 0;
  private rv = 1000;
  private listeningPort = 0;
  private running = false;
  readonly requests: RequestRecord[] = [];

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

  /**
   * Adds (or replaces) a pod; watchers get ADDED (or MODIFIED). `notify: false` simulates an
   * event a watcher missed: only a new list shows the change.
   */
  addPod(pod: FakePod | PodSpecInput, options: { notify?: boolean } = {}): FakePod {
    const full = 'kind' in pod ? structuredClone(pod) : makePod(pod);
    const key = `${full.metadata.namespace}/${full.metadata.name}`;
    const previous = this.pods.get(key) ?? null;
    full.metadata.resourceVersion = String(++this.rv);
    this.pods.set(key, full);
    if (options.notify !== false) this.publish({ rv: this.rv, type: previous ? 'MODIFIED' : 'ADDED', pod: full, previous });
    return structuredClone(full);
  }

  /** Changes a stored pod (for example to add container statuses); watchers get MODIFIED. */
  updatePod(namespace: string, name: string, change: (pod: FakePod) => void): FakePod {
    const key = `${namespace}/${name}`;
    const previous = this.pods.get(key);
    if (!previous) throw new Error(`no pod ${key}`);
    const next = structuredClone(previous);
    change(next);
    next.metadata.resourceVersion = String(++this.rv);
    this.pods.set(key, next);
    this.publish({ rv: this.rv, type: 'MODIFIED', pod: next, previous });
    return structuredClone(next);
  }

  /** Removes a pod; watchers get DELETED (unless `notify: false`, as for addPod). */
  removePod(namespace: string, name: string, options: { notify?: boolean } = {}): boolean {
    const key = `${namespace}/${name}`;
    const previous = this.pods.get(key);
    if (!previous) return false;
    this.pods.delete(key);
    const gone = structuredClone(previous);
    gone.metadata.resourceVersion = String(++this.rv);
    if (options.notify !== false) this.publish({ rv: this.rv, type: 'DELETED', pod: gone, previous: null });
    return true;
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

  listPods(): FakePod[] {
    return [...this.pods.values()].map((pod) => structuredClone(pod));
  }

  private publish(entry: HistoryEntry): void {
    this.history.push(entry);
    for (const watcher of this.watchers) this.send(watcher, entry);
  }

  /** Sends one event as a watcher with a selector sees it (a pod leaving the selector is DELETED). */
  private send(watcher: Watcher, entry: HistoryEntry): void {
    const inScope = (pod: FakePod | null) =>
      pod !== null &&
      (watcher.selector.namespace === null || pod.metadata.namespace === watcher.selector.namespace) &&
      watcher.selector.matches(pod);
    const now = inScope(entry.pod);
    const before = entry.type === 'MODIFIED' ? inScope(entry.previous) : now;
    let type: EventType = entry.type;
    if (entry.type === 'MODIFIED' && now && !before) type = 'ADDED';
    else if (entry.type === 'MODIFIED' && !now && before) type = 'DELETED';
    else if (!now) return;
    watcher.response.write(`${JSON.stringify({ type, object: entry.pod })}\n`);
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const query = Object.fromEntries(url.searchParams.entries());
    this.requests.push({ method: req.method ?? '', path: url.pathname, query });
    const reply = (code: number, body: unknown) => {
      res.writeHead(code, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const match = /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?pods$/.exec(url.pathname);
    if (!match) return reply(404, status(404, 'NotFound', 'the server could not find the requested resource'));
    if (req.method !== 'GET') return reply(405, status(405, 'MethodNotAllowed', `${req.method} is not supported here`));
    const matches = parseFieldSelector(query.fieldSelector ?? '');
    if (typeof matches === 'string') return reply(400, status(400, 'BadRequest', matches));
    const selector: Selector = { namespace: match[1] ? decodeURIComponent(match[1]) : null, matches };
    const selected = () =>
      [...this.pods.values()].filter(
        (pod) => (selector.namespace === null || pod.metadata.namespace === selector.namespace) && matches(pod),
      );

    if (query.watch !== 'true' && query.watch !== '1') {
      return reply(200, {
        kind: 'PodList',
        apiVersion: 'v1',
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
      for (const pod of selected()) res.write(`${JSON.stringify({ type: 'ADDED', object: pod })}\n`);
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
