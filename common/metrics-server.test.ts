import assert from 'node:assert/strict';
import * as http from 'node:http';
import { test } from 'node:test';
import pino from 'pino';
import { Gauge, Registry } from 'prom-client';
import { startMetricsServer } from './metrics-server';

const silent = pino({ level: 'silent' });

function get(port: number): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/metrics', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(-1));
    req.setTimeout(20_000, () => req.destroy());
  });
}

test('metrics server: a flood of 400 scrapes is served from its own thread, renders the exposition a bounded number of times and leaves the event loop free (issue 17)', async (t) => {
  const registry = new Registry();
  let renders = 0;
  // A costly exposition, as with many policies and containers: 10 ms of the event loop per render.
  new Gauge({
    name: 'test_costly', help: 'x', registers: [registry],
    collect() {
      renders++;
      const end = Date.now() + 10;
      while (Date.now() < end);
      this.set(renders);
    },
  });
  const server = await startMetricsServer(registry, { host: '127.0.0.1', port: 0 }, silent);
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = server.address().port;

  // The decision path's stand-in: a 5 ms timer whose lateness is what a decision would wait.
  let worstLagMs = 0;
  let last = Date.now();
  const tick = setInterval(() => {
    const now = Date.now();
    worstLagMs = Math.max(worstLagMs, now - last - 5);
    last = now;
  }, 5);
  t.after(() => clearInterval(tick));

  const began = Date.now();
  const codes = await Promise.all(Array.from({ length: 400 }, () => get(port)));
  const tookS = (Date.now() - began) / 1000;
  const ok = codes.filter((c) => c === 200).length;
  const limited = codes.filter((c) => c === 429).length;
  const closed = codes.filter((c) => c === -1).length;
  t.diagnostic(`${ok} answered, ${limited} refused (429), ${closed} closed past 16 connections; ${renders} renders in ${tookS.toFixed(2)} s; worst event-loop lag ${worstLagMs} ms`);
  assert.ok(ok >= 1, 'scrapes are still answered');
  assert.equal(ok + limited + closed, 400, `every request was answered or refused: ${codes.filter((c) => ![200, 429, -1].includes(c)).join(',')}`);
  assert.ok(renders <= 20 + Math.ceil(tookS * 10) + 1, `${renders} renders: at most the burst plus the rate`);
  assert.ok(limited + closed > 0, 'the flood is refused');
  // One client asking as fast as it can: past the burst, 429 without rendering.
  const rendersBefore = renders;
  const sequential: number[] = [];
  for (let i = 0; i < 60; i++) sequential.push(await get(port));
  t.diagnostic(`60 sequential scrapes: ${sequential.filter((c) => c === 200).length} answered, ${sequential.filter((c) => c === 429).length} refused (429); ${renders - rendersBefore} renders`);
  assert.ok(sequential.includes(429));
  assert.ok(renders - rendersBefore <= 20 + 10, `${renders - rendersBefore} renders`);
  assert.ok(worstLagMs < 1000, `the loop was held ${worstLagMs} ms`);
  assert.equal(await get(port) === 200 || (await new Promise((r) => setTimeout(r, 200)).then(() => get(port))) === 200, true, 'a scrape after the flood is answered');
});
