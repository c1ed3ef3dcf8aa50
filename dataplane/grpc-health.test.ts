// grpc.health.v1 from one table of statuses, served by a real grpc-js server on a Unix socket.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { HealthCheckResponse_ServingStatus as ServingStatus, HealthClient } from '../proto/gen/grpc/health/v1/health';
import { scratchDir } from '../test/support/scratch';
import { waitUntil } from '../test/support/wait';
import { HealthStatuses, MAX_HEALTH_WATCHES } from './grpc-health';

/** A table with "" SERVING, served on a Unix socket of its own, and a client of it. */
async function serve(t: TestContext): Promise<{ statuses: HealthStatuses; client: HealthClient }> {
  const dir = scratchDir(t, 'health');
  const statuses = new HealthStatuses({ '': 'SERVING' });
  const server = new grpc.Server();
  statuses.addTo(server);
  const socket = `unix://${path.join(dir, 'health.sock')}`;
  await new Promise<void>((resolve, reject) => server.bindAsync(socket, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  t.after(() => server.forceShutdown());
  const client = new HealthClient(socket, grpc.credentials.createInsecure());
  t.after(() => client.close());
  return { statuses, client };
}

test('health: a Watch gets the status now and every change after, and leaves no subscription when cancelled', async (t) => {
  const { statuses, client } = await serve(t);

  const seen: ServingStatus[] = [];
  const watch = client.watch({ service: 'fd-store' });
  watch.on('data', (res: { status: ServingStatus }) => seen.push(res.status));
  watch.on('error', () => {});
  await waitUntil(() => seen.length === 1, 5000, 'the first Watch message');
  statuses.setStatus('fd-store', 'SERVING');
  statuses.setStatus('fd-store', 'SERVING'); // no change: nothing sent
  statuses.setStatus('other', 'NOT_SERVING'); // another service: nothing sent
  statuses.setStatus('fd-store', 'NOT_SERVING');
  await waitUntil(() => seen.length === 3, 5000, 'two changes');
  assert.deepEqual(seen, [ServingStatus.SERVICE_UNKNOWN, ServingStatus.SERVING, ServingStatus.NOT_SERVING]);
  assert.equal(statuses.watching, 1);
  watch.cancel();
  await waitUntil(() => statuses.watching === 0, 5000, 'the cancelled Watch to unsubscribe');
  const checked = await new Promise<ServingStatus>((resolve, reject) =>
    client.check({ service: 'fd-store' }, (err, res) => (err ? reject(err) : resolve(res.status))));
  assert.equal(checked, ServingStatus.NOT_SERVING);
});

test('health: Watch streams are capped; one past the cap is RESOURCE_EXHAUSTED and the others keep theirs', async (t) => {
  const { statuses, client } = await serve(t);
  const open: grpc.ClientReadableStream<unknown>[] = [];
  for (let i = 0; i < MAX_HEALTH_WATCHES; i++) {
    const watch = client.watch({ service: '' });
    watch.on('data', () => {});
    watch.on('error', () => {});
    open.push(watch);
  }
  await waitUntil(() => statuses.watching === MAX_HEALTH_WATCHES, 5000, 'every Watch subscribed');
  // Served (a status came) or refused (an error): whichever comes first.
  const refused = await new Promise<grpc.ServiceError | null>((resolve) => {
    const watch = client.watch({ service: '' });
    open.push(watch);
    watch.on('data', () => resolve(null));
    watch.on('error', resolve);
  });
  assert.equal(refused?.code, grpc.status.RESOURCE_EXHAUSTED, 'one Watch past the cap was served');
  assert.equal(statuses.watching, MAX_HEALTH_WATCHES);
  for (const watch of open) watch.cancel();
  await waitUntil(() => statuses.watching === 0, 5000, 'every cancelled Watch to unsubscribe');
});
