// MIDDLEWARE=falco's publisher against real gRPC servers speaking the plugin's API: a plugin's
// answer is bounded in size, and the client runs off the event loop that decides notifications
// (issue 17: a plugin answering 4 MB per event multiplied decision p99 by 226).
import * as grpc from '@grpc/grpc-js';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { test } from 'node:test';
import { SeccompAgentFalcoService, type PublishEventRequest } from '../../../proto/gen/seccompagentfalco/seccomp-agent';
import { captureLogger } from '../../../test/support/log-capture';
import { ROOT } from '../../../test/support/paths';
import { scratchDir } from '../../../test/support/scratch';
import { waitUntil } from '../../../test/support/wait';
import { FALCO_LIMITS, FalcoPublisher } from './falco-publisher';

const event = (id: number): PublishEventRequest => ({ id: BigInt(id), pid: 7n, syscall: 'mkdir', k8s: { namespace: 'shop', pod: 'web-1', container: 'app', pid: 1n, pidFilter: 1n } });

/**
 * PublishEventResponse with a field it does not know, just under grpc-js's default receive limit
 * (4 MiB): valid protobuf, read whole and decoded as {} by a client without a bound of its own.
 */
function hugeAnswer(): Buffer {
  const size = 4 * 1024 * 1024 - 64;
  const varint: number[] = [];
  for (let n = size; ; n >>>= 7) {
    if (n < 0x80) {
      varint.push(n);
      break;
    }
    varint.push((n & 0x7f) | 0x80);
  }
  return Buffer.concat([Buffer.from([(15 << 3) | 2, ...varint]), Buffer.alloc(size, 0x61)]);
}

test('falco publisher: a plugin answering 4 MB per event is refused from the answer\'s length (counted as failed), never read as a delivered event', async (t) => {
  const socket = path.join(scratchDir(t), 'falco.sock');
  const server = new grpc.Server();
  const answer = hugeAnswer();
  let received = 0;
  server.addService({ publishEvent: { ...SeccompAgentFalcoService.publishEvent, responseSerialize: () => answer } }, {
    publishEvent: (_call: grpc.ServerUnaryCall<PublishEventRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      received++;
      callback(null, {});
    },
  });
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  t.after(() => server.forceShutdown());
  const { logger, lines } = captureLogger();
  const falco = new FalcoPublisher(socket, logger);
  t.after(() => falco.close());
  for (let id = 1; id <= 3; id++) falco.publish(event(id));
  await waitUntil(() => falco.dropped.get('failed') === 3, 10_000, 'the three answers refused');
  assert.equal(received, 3, 'the plugin got every event');
  assert.equal(falco.published, 0);
  const warned = lines.filter((l) => l.reason === 'failed');
  assert.equal(warned.length, 1, 'one log line for the burst');
  assert.match(String(warned[0].msg), /larger than max|RESOURCE_EXHAUSTED|exceeds/i);
});

test('falco publisher: events are sent while the event loop that published them is blocked (the client lives in a worker thread)', async (t) => {
  const socket = path.join(scratchDir(t), 'falco.sock');
  const root = ROOT;
  // The plugin in another process, so that blocking this thread blocks only the publisher's caller.
  const plugin = spawn(process.execPath, ['-e', `
    const grpc = require('@grpc/grpc-js');
    const { SeccompAgentFalcoService } = require(${JSON.stringify(path.join(root, 'dist', 'proto', 'gen', 'seccompagentfalco', 'seccomp-agent.js'))});
    const server = new grpc.Server();
    server.addService(SeccompAgentFalcoService, { publishEvent: (call, callback) => { process.stdout.write('got ' + call.request.id + ' ' + Date.now() + '\\n'); callback(null, {}); } });
    server.bindAsync('unix://' + ${JSON.stringify(socket)}, grpc.ServerCredentials.createInsecure(), (err) => { if (err) throw err; process.stdout.write('listening\\n'); });
  `], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => plugin.kill('SIGKILL'));
  let output = '';
  plugin.stdout.on('data', (d: Buffer) => { output += d.toString(); });
  await waitUntil(() => output.includes('listening'), 10_000, 'the plugin process');
  const { logger } = captureLogger();
  const falco = new FalcoPublisher(socket, logger, FALCO_LIMITS);
  t.after(() => falco.close());
  for (let id = 1; id <= 5; id++) falco.publish(event(id));
  // This thread does nothing for 3 s: no timer, no I/O, no callback of its own runs meanwhile.
  const blockedUntil = Date.now() + 3000;
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3000);
  await waitUntil(() => (output.match(/^got /gm) ?? []).length === 5, 10_000, `five events at the plugin; it printed:\n${output}`);
  const late = output.split('\n').filter((l) => l.startsWith('got ')).map((l) => Number(l.split(' ')[2])).filter((at) => at >= blockedUntil);
  assert.deepEqual(late, [], 'events reached the plugin only once the publishing thread ran again: the client is on its event loop');
  await waitUntil(() => falco.published === 5, 5_000, 'the tallies');
});
