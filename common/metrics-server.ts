// Prometheus /metrics over HTTP for either plane (--metrics-addr).
import * as http from 'node:http';
import type { Registry } from 'prom-client';
import type { Logger } from './logger';

/** Optional /healthz: its HTTP status and JSON body. */
export type HealthProbe = () => { httpStatus: number; body: Record<string, unknown> };

export async function startMetricsServer(
  registry: Registry,
  address: { host: string; port: number },
  log: Logger,
  health?: HealthProbe,
): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && health && req.url === '/healthz') {
      const { httpStatus, body } = health();
      res.writeHead(httpStatus, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
      return;
    }
    if (req.method !== 'GET' || (req.url !== '/metrics' && !req.url?.startsWith('/metrics?'))) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics\n');
      return;
    }
    registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${err.message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => resolve());
  });
  const bound = server.address();
  log.info({ address: typeof bound === 'object' && bound ? `${bound.address}:${bound.port}` : address }, 'Prometheus metrics serving on /metrics');
  return server;
}
