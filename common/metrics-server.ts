// Prometheus /metrics over HTTP for either plane (--metrics-addr). The HTTP server runs in a worker
// thread (metrics-http-worker.ts): a flood of connections and requests is accepted, parsed and
// refused there, not on the event loop that decides notifications. This thread only renders the
// exposition when the worker asks: concurrent scrapes share one rendering, requests past
// `ratePerSecond` (after a burst of `burst`) are answered 429 by the worker without asking, at
// most `maxConnections` connections are open at a time, and a client that sends its request
// slowly is cut off after `requestTimeoutMs`.
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Registry } from 'prom-client';
import { AgentError } from './errors';
import type { Logger } from './logger';
import type { ToPlane, ToWorker } from './metrics-http-worker';

/** Optional /healthz: its HTTP status and JSON body. */
export type HealthProbe = () => { httpStatus: number; body: Record<string, unknown> };

export interface MetricsServerLimits {
  /** Requests answered per second after a burst of `burst` (a token bucket); past it: 429. */
  ratePerSecond: number;
  burst: number;
  maxConnections: number;
  requestTimeoutMs: number;
}

export const METRICS_SERVER_LIMITS: MetricsServerLimits = Object.freeze({ ratePerSecond: 10, burst: 20, maxConnections: 16, requestTimeoutMs: 5000 });

export interface MetricsServer {
  /** Where it listens. */
  address(): { address: string; port: number };
  /** Stops the worker (and its server). */
  close(done?: () => void): void;
}

export async function startMetricsServer(
  registry: Registry,
  address: { host: string; port: number },
  log: Logger,
  health?: HealthProbe,
  limits: MetricsServerLimits = METRICS_SERVER_LIMITS,
): Promise<MetricsServer> {
  const worker = new Worker(path.join(__dirname, 'metrics-http-worker.js'), {
    workerData: { host: address.host, port: address.port, limits, health: health !== undefined },
  });
  const reply = (message: ToWorker) => worker.postMessage(message);
  const bound = await new Promise<{ address: string; port: number }>((resolve, reject) => {
    worker.once('error', reject);
    worker.on('message', (message: ToPlane) => {
      switch (message.type) {
        case 'listening':
          resolve({ address: message.address, port: message.port });
          break;
        case 'listen-error':
          void worker.terminate();
          reject(new AgentError('EBAD_OPTION', `--metrics-addr ${address.host}:${address.port}: ${message.message}`));
          break;
        case 'render':
          registry.metrics().then(
            (body) => reply({ type: 'rendered', id: message.id, body, contentType: registry.contentType }),
            (err: Error) => reply({ type: 'render-failed', id: message.id, message: err.message }),
          );
          break;
        case 'health': {
          const { httpStatus, body } = health!();
          reply({ type: 'health', id: message.id, httpStatus, body: `${JSON.stringify(body)}\n` });
          break;
        }
        case 'limited':
          log.warn({ ratePerSecond: limits.ratePerSecond }, `more than ${limits.ratePerSecond} metrics requests a second (after a burst of ${limits.burst}): the rest are answered 429 without rendering, so decisions are not delayed`);
          break;
      }
    });
  });
  worker.on('error', (err) => log.error({ err }, `metrics server thread failed (${err.message}); metrics are not served, decisions go on`));
  // The metrics thread never keeps a plane alive by itself.
  worker.unref();
  log.info({ address: `${bound.address}:${bound.port}` }, 'Prometheus metrics serving on /metrics');
  return {
    address: () => bound,
    close: (done) => {
      void worker.terminate().then(() => done?.());
    },
  };
}
