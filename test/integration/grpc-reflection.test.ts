// The data plane's gRPC API seen by a reflection-only client (`buf curl`, which behaves as grpcurl
// does): no .proto file at hand.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import { startDataPlane } from '../support/dataplane';
import { ROOT } from '../support/paths';
import { run, start } from '../support/processes';
import { runUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';

const BUF = path.join(ROOT, 'node_modules', '.bin', 'buf');
const curlArgs = (socket: string) => ['curl', '--protocol', 'grpc', '--http2-prior-knowledge', '--unix-socket', socket];

test('seccomp-dataplane reflection: buf curl lists services and methods, describes and calls GetStatus and Health without a .proto', async (t) => {
  const dp = await startDataPlane(t);
  const services = await run(BUF, [...curlArgs(dp.grpcSocket), '--list-services', 'http://localhost']);
  assert.equal(services.code, 0, services.stderr);
  assert.match(services.stdout, /^seccompagent\.v1\.DataPlane$/m);
  assert.match(services.stdout, /^grpc\.health\.v1\.Health$/m);
  const methods = await run(BUF, [...curlArgs(dp.grpcSocket), '--list-methods', 'http://localhost']);
  for (const method of ['Attach', 'Watch', 'ListContainers', 'GetStatus']) assert.match(methods.stdout, new RegExp(`seccompagent\\.v1\\.DataPlane/${method}`));
  const status = await run(BUF, [...curlArgs(dp.grpcSocket), 'http://localhost/seccompagent.v1.DataPlane/GetStatus']);
  assert.equal(status.code, 0, status.stderr);
  assert.equal(JSON.parse(status.stdout).listenerSocket, dp.listenerSocket);
  const health = await run(BUF, [...curlArgs(dp.grpcSocket), 'http://localhost/grpc.health.v1.Health/Check']);
  assert.deepEqual(JSON.parse(health.stdout), { status: 'SERVING' });
});

test('seccomp-dataplane reflection: a streaming Watch through buf curl shows a workload\'s notification', async (t) => {
  const dp = await startDataPlane(t);
  const watch = start(t, BUF, [...curlArgs(dp.grpcSocket), 'http://localhost/seccompagent.v1.DataPlane/Watch']);
  await waitUntil(async () => (await dp.status()).watchers === 1, 10_000, 'buf curl\'s Watch to subscribe');
  const target = path.join(dp.dir, 'seen-by-buf-curl');
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'c-curl' }, ['/bin/mkdir', target]);
  assert.equal(result.code, 0, result.stderr);
  await watch.waitFor(/"value":\s*"[^"]*seen-by-buf-curl"/);
  await watch.waitFor(/"answeredBy":\s*"ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE"/);
});
