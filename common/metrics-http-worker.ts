// The HTTP side of --metrics-addr, in a worker thread (common/metrics-server.ts starts it): accepting,
// parsing and refusing requests happen here, never on the event loop that decides notifications.
// The plane's own thread only renders the exposition when this worker asks, at most at the rate
// below (concurrent scrapes share one rendering).
import * as http from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';
import type { MetricsServerLimits } from './metrics-server';

/** Messages between the worker and the plane's thread. */
export type ToPlane =
  | { type: 'listening'; address: string; port: number }
  | { type: 'listen-error'; message: string; code: string }
  | { type: 'render'; id: number }
  | { type: 'health'; id: number }
  | { type: 'limited' };
export type ToWorker =
  | { type: 'rendered'; id: number; body: string; contentType: string }
  | { type: 'render-failed'; id: number; message: string }
  | { type: 'health'; id: number; httpStatus: number; body: string };

interface Data {
  host: string;
  port: number;
  limits: MetricsServerLimits;
  health: boolean;
}

const { host, port, limits, health } = workerData as Data;
const port_ = parentPort!;
let nextId = 1;
const waiting = new Map<number, (reply: ToWorker) => void>();
/** The rendering in flight, shared by every scrape that arrives meanwhile. */
let rendering: Promise<ToWorker> | null = null;

function ask(message: { type: 'render' | 'health' }): Promise<ToWorker> {
  const id = nextId++;
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    port_.postMessage({ ...message, id } satisfies ToPlane);
  });
}

port_.on('message', (reply: ToWorker) => {
  const resolve = waiting.get(reply.id);
  waiting.delete(reply.id);
  resolve?.(reply);
});

let tokens = limits.burst;
let refilledAt = Date.now();
let toldAt = 0;
function admit(): boolean {
  const now = Date.now();
  tokens = Math.min(limits.burst, tokens + ((now - refilledAt) / 1000) * limits.ratePerSecond);
  refilledAt = now;
  if (tokens >= 1) {
    tokens -= 1;
    return true;
  }
  if (now - toldAt > 60_000) {
    toldAt = now;
    port_.postMessage({ type: 'limited' } satisfies ToPlane);
  }
  return false;
}

const server = http.createServer((req, res) => {
  if (!admit()) {
    res.writeHead(429, { 'content-type': 'text/plain', 'retry-after': '1', connection: 'close' }).end('too many requests\n');
    return;
  }
  if (req.method === 'GET' && health && req.url === '/healthz') {
    void ask({ type: 'health' }).then((reply) => {
      if (reply.type === 'health') res.writeHead(reply.httpStatus, { 'content-type': 'application/json' }).end(reply.body);
    });
    return;
  }
  if (req.method !== 'GET' || (req.url !== '/metrics' && !req.url?.startsWith('/metrics?'))) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics\n');
    return;
  }
  rendering ??= ask({ type: 'render' }).finally(() => {
    rendering = null;
  });
  void rendering.then((reply) => {
    if (reply.type === 'rendered') res.writeHead(200, { 'content-type': reply.contentType }).end(reply.body);
    else if (reply.type === 'render-failed') res.writeHead(500, { 'content-type': 'text/plain' }).end(`${reply.message}\n`);
  });
});
server.maxConnections = limits.maxConnections;
server.requestTimeout = limits.requestTimeoutMs;
server.headersTimeout = Math.min(limits.requestTimeoutMs, 60_000);
server.maxRequestsPerSocket = 100;
server.once('error', (err: NodeJS.ErrnoException) => port_.postMessage({ type: 'listen-error', message: err.message, code: err.code ?? '' } satisfies ToPlane));
server.listen(port, host, () => {
  const bound = server.address();
  if (bound && typeof bound === 'object') port_.postMessage({ type: 'listening', address: bound.address, port: bound.port } satisfies ToPlane);
});
