// Context for (c): a bare @grpc/grpc-js bidi echo between two Node processes on a Unix socket,
// one ~100-byte message in flight at a time, no data plane and no seccomp at all. Whatever (c)
// costs beyond this is the data plane's and the control plane's own work; this much is the price
// of one gRPC round trip between two Node processes on this machine.
//   node dist/bench/grpc-floor.js PARAMS            (the scenario: starts its echo server)
//   node dist/bench/grpc-floor.js --server SOCKET   (the echo server)
import * as grpc from '@grpc/grpc-js';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { runScenario } from './scenario-process';
import { isListening } from './tools';

const identity = (buffer: Buffer) => buffer;
const ECHO = {
  echo: {
    path: '/bench.Floor/Echo', requestStream: true, responseStream: true,
    requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity,
  },
} satisfies grpc.ServiceDefinition;

function serve(socket: string): void {
  const server = new grpc.Server();
  server.addService(ECHO, {
    echo: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      call.on('data', (message: Buffer) => call.write(message));
      call.on('end', () => call.end());
    },
  });
  server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) => {
    if (err) {
      process.stderr.write(`grpc-floor server: ${err.message}\n`);
      process.exit(1);
    }
  });
  process.on('SIGTERM', () => server.forceShutdown());
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

/** Ping-pong for `seconds` after `warmupMs`; latencies in µs. */
function pingPong(socket: string, seconds: number, warmupMs: number): Promise<{ latencies: number[]; seconds: number }> {
  const Client = grpc.makeGenericClientConstructor(ECHO, 'Floor');
  const client = new Client(`unix://${socket}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    echo(): grpc.ClientDuplexStream<Buffer, Buffer>;
  };
  const call = client.echo();
  const payload = Buffer.alloc(100, 1);
  const latencies: number[] = [];
  const begin = process.hrtime.bigint();
  const measureFrom = begin + BigInt(warmupMs) * 1_000_000n;
  const end = measureFrom + BigInt(Math.round(seconds * 1e9));
  let sent = begin;
  return new Promise((resolve, reject) => {
    call.on('error', reject);
    call.on('data', () => {
      const now = process.hrtime.bigint();
      if (sent >= measureFrom) latencies.push(Number(now - sent) / 1000);
      if (now >= end) {
        call.end();
        client.close();
        resolve({ latencies, seconds: Number(now - measureFrom) / 1e9 });
        return;
      }
      sent = process.hrtime.bigint();
      call.write(payload);
    });
    call.write(payload);
  });
}

if (process.argv[2] === '--server') {
  serve(process.argv[3]);
} else {
  runScenario(async ({ params, dir, children }) => {
    const socket = path.join(dir, 'floor.sock');
    const server = children.start('grpc echo server', process.execPath, [__filename, '--server', socket]);
    const deadline = Date.now() + 10_000;
    while (!isListening(socket)) {
      if (!server.alive() || Date.now() > deadline) throw new Error(`the echo server did not listen: ${server.stderr().trim()}`);
      await sleep(10);
    }
    const { latencies, seconds } = await pingPong(socket, params.seconds, params.warmupMs);
    if (latencies.length === 0) throw new Error('no round trip measured');
    latencies.sort((a, b) => a - b);
    return {
      callsPerSec: latencies.length / seconds,
      p50Us: percentile(latencies, 0.5),
      p90Us: percentile(latencies, 0.9),
      p99Us: percentile(latencies, 0.99),
      maxUs: latencies[latencies.length - 1],
    };
  });
}
