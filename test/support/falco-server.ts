// A gRPC server speaking kinvolk's Falco plugin API (seccompagentfalco.SeccompAgentFalco, the
// proto the plugin serves) on a temp Unix socket, for MIDDLEWARE=falco tests: it records each
// PublishEvent, and in 'never' mode never answers (a plugin that hangs). Closed when the test ends.
import * as grpc from '@grpc/grpc-js';
import type { TestContext } from 'node:test';
import { collector } from './wait';
import { SeccompAgentFalcoService, type PublishEventRequest } from '../../proto/gen/seccompagentfalco/seccomp-agent';

export interface FalcoServer {
  events: PublishEventRequest[];
  waitFor(predicate: (e: PublishEventRequest) => boolean, timeoutMs?: number): Promise<PublishEventRequest>;
}

export async function startFalcoServer(t: TestContext, socketPath: string, mode: 'answer' | 'never' = 'answer'): Promise<FalcoServer> {
  const server = new grpc.Server();
  const { items: events, push, waitFor } = collector<PublishEventRequest>('PublishEvent');
  server.addService(SeccompAgentFalcoService, {
    publishEvent: (call: grpc.ServerUnaryCall<PublishEventRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      push(call.request);
      if (mode === 'answer') callback(null, {});
    },
  });
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  t.after(() => server.forceShutdown());
  return { events, waitFor };
}
