// Prometheus /metrics over HTTP for either plane (--metrics-addr). It shares the event loop that
// decides notifications, so a flood of scrapes must not cost decisions: concurrent scrapes share one
// rendering (and, with `renderIntervalMs`, later ones reuse it that long), requests past
// `ratePerSecond` (after a burst of `burst`) are answered 429 at once without rendering, at most
// `maxConnections` connections are open at a time (the rest wait in the kernel's backlog or are
// closed), and a client that sends its request slowly is cut off after `requestTimeoutMs`.
import * as http from 'node:http';
import type { Registry } from 'prom-client';
import type { Logger } from './logger';

/** Optional /healthz: its HTTP status and JSON body. */
export type HealthProbe = () => { httpStatus: number; body: Record<string, unknown> };

export interface MetricsServerLimits {
  /** A rendered exposition is reused for this long (0: only by scrapes that arrive while it renders). */
  renderIntervalMs: number;
  /** Requests answered per second after a burst of `burst` (a token bucket); past it: 429. */
  ratePerSecond: number;
  burst: number;
  maxConnections: number;
  requestTimeoutMs: number;
}

export const METRICS_SERVER_LIMITS: MetricsServerLimits = Object.freeze({ renderIntervalMs: 0, ratePerSecond: 10, burst: 20, maxConnections: 16, requestTimeoutMs: 5000 });

export interface MetricsServer extends http.Server {
  /** Renders of the exposition so far, and requests refused for the rate. */
  readonly scrapeStats: { renders: number; limited: number };
}

export async function startMetricsServer(
  registry: Registry,
  address: { host: string; port: number },
  log: Logger,
  health?: HealthProbe,
  limits: MetricsServerLimits = METRICS_SERVER_LIMITS,
): Promise<MetricsServer> {
  const stats = { renders: 0, limited: 0 };
  let cached: { body: string; at: number } | null = null;
  let rendering: Promise<string> | null = null;
  const render = (): Promise<string> => {
    if (cached && limits.renderIntervalMs > 0 && Date.now() - cached.at < limits.renderIntervalMs) return Promise.resolve(cached.body);
    if (!rendering) {
      stats.renders++;
      rendering = registry.metrics().then(
        (body) => {
          cached = { body, at: Date.now() };
          rendering = null;
          return body;
        },
        (err: unknown) => {
          rendering = null;
          throw err;
        },
      );
    }
    return rendering;
  };
  let tokens = limits.burst;
  let refilledAt = Date.now();
  let warnedAt = 0;
  const admit = (): boolean => {
    const now = Date.now();
    tokens = Math.min(limits.burst, tokens + ((now - refilledAt) / 1000) * limits.ratePerSecond);
    refilledAt = now;
    if (tokens >= 1) {
      tokens -= 1;
      return true;
    }
    stats.limited++;
    if (now - warnedAt > 60_000) {
      warnedAt = now;
      log.warn({ ratePerSecond: limits.ratePerSecond }, `more than ${limits.ratePerSecond} metrics requests a second (after a burst of ${limits.burst}): the rest are answered 429 without rendering, so decisions are not delayed`);
    }
    return false;
  };

  const server = http.createServer((req, res) => {
    if (!admit()) {
      res.writeHead(429, { 'content-type': 'text/plain', 'retry-after': '1', connection: 'close' }).end('too many requests\n');
      return;
    }
    if (req.method === 'GET' && health && req.url === '/healthz') {
      const { httpStatus, body } = health();
      res.writeHead(httpStatus, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
      return;
    }
    if (req.method !== 'GET' || (req.url !== '/metrics' && !req.url?.startsWith('/metrics?'))) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics\n');
      return;
    }
    render().then(
      (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${err.message}\n`),
    );
  }) as MetricsServer;
  Object.defineProperty(server, 'scrapeStats', { value: stats });
  server.maxConnections = limits.maxConnections;
  server.requestTimeout = limits.requestTimeoutMs;
  server.headersTimeout = Math.min(limits.requestTimeoutMs, 60_000);
  server.maxRequestsPerSocket = 100;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => resolve());
  });
  const bound = server.address();
  log.info({ address: typeof bound === 'object' && bound ? `${bound.address}:${bound.port}` : address }, 'Prometheus metrics serving on /metrics');
  return server;
}
