// The data plane's gRPC API seen by a reflection-only client (`buf curl`, which behaves as grpcurl
// does): no .proto file at hand.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import {
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthClient,
} from '../../proto/gen/grpc/health/v1/health';
import {
  ServerReflectionService,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from '../../proto/gen/grpc/reflection/v1/reflection';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { fromBinary } from '@bufbuild/protobuf';
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

test('seccomp-dataplane reflection: the v1alpha service (older grpcurl) answers on the control socket too, a stream asks several times', async (t) => {
  const dp = await startDataPlane(t);
  const definition = { info: { ...ServerReflectionService.serverReflectionInfo, path: '/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo' } };
  const Client = grpc.makeGenericClientConstructor(definition as unknown as grpc.ServiceDefinition, 'ServerReflection');
  const client = new Client(`unix://${dp.controlSocket}`, grpc.credentials.createInsecure());
  t.after(() => client.close());
  const call = (client as unknown as { info(): grpc.ClientDuplexStream<ServerReflectionRequest, ServerReflectionResponse> }).info();
  const answers: ServerReflectionResponse[] = [];
  const ended = new Promise<void>((resolve, reject) => {
    call.on('data', (answer: ServerReflectionResponse) => answers.push(answer));
    call.on('end', resolve);
    call.on('error', reject);
  });
  call.write({ host: '', messageRequest: { $case: 'listServices', listServices: '' } });
  call.write({ host: '', messageRequest: { $case: 'fileContainingSymbol', fileContainingSymbol: 'seccompagent.v1.DataPlane.Watch' } });
  call.write({ host: '', messageRequest: { $case: 'fileContainingSymbol', fileContainingSymbol: 'seccompagent.v1.NoSuchThing' } });
  call.end();
  await ended;
  assert.equal(answers.length, 3);
  assert.equal(answers[0].messageResponse?.$case, 'listServicesResponse');
  assert.deepEqual(answers[0].messageResponse.listServicesResponse.service.map((s) => s.name).sort(), ['grpc.health.v1.Health', 'seccompagent.v1.DataPlane']);
  assert.equal(answers[1].messageResponse?.$case, 'fileDescriptorResponse');
  const files = answers[1].messageResponse.fileDescriptorResponse.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b).name);
  assert.equal(files[0], 'seccompagent/v1/dataplane.proto');
  assert.ok(files.includes('google/protobuf/duration.proto'), files.join(', '));
  assert.equal(answers[2].messageResponse?.$case, 'errorResponse');
  assert.equal(answers[2].messageResponse.errorResponse.errorCode, grpc.status.NOT_FOUND);
});

test('seccomp-dataplane health: Check, List, and a Watch that hears fd-store; an unknown service is NOT_FOUND to Check and SERVICE_UNKNOWN to Watch', async (t) => {
  const dp = await startDataPlane(t);
  const client = new HealthClient(`unix://${dp.grpcSocket}`, grpc.credentials.createInsecure());
  t.after(() => client.close());
  const check = (service: string) => new Promise<ServingStatus>((resolve, reject) =>
    client.check({ service }, (err, res) => (err ? reject(err) : resolve(res.status))));
  assert.equal(await check(''), ServingStatus.SERVING);
  assert.equal(await check('seccompagent.v1.DataPlane'), ServingStatus.SERVING);
  await assert.rejects(check('nope'), (err: grpc.ServiceError) => err.code === grpc.status.NOT_FOUND);
  const list = await new Promise<Record<string, { status: ServingStatus }>>((resolve, reject) =>
    client.list({}, (err, res) => (err ? reject(err) : resolve(res.statuses))));
  assert.deepEqual(Object.keys(list).sort(), ['', 'fd-store', 'seccompagent.v1.DataPlane']);
  const first = (service: string) => new Promise<ServingStatus>((resolve, reject) => {
    const watch = client.watch({ service });
    watch.once('data', (res: { status: ServingStatus }) => {
      resolve(res.status);
      watch.cancel();
    });
    watch.once('error', (err: grpc.ServiceError) => { if (err.code !== grpc.status.CANCELLED) reject(err); });
  });
  assert.equal(await first('fd-store'), list['fd-store'].status);
  assert.equal(await first('nope'), ServingStatus.SERVICE_UNKNOWN);
});
