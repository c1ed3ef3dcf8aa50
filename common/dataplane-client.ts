// A gRPC client of the data plane's Unix socket, shared by the control plane, seccompctl, tests
// and benchmarks.
import * as grpc from '@grpc/grpc-js';
import { DataPlaneClient } from '../proto/gen/seccompagent/v1/dataplane';

export function createDataPlaneClient(socketPath: string): DataPlaneClient {
  return new DataPlaneClient(`unix://${socketPath}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': 16 * 1024 * 1024,
    // Reconnect quickly after a data plane restart.
    'grpc.initial_reconnect_backoff_ms': 100,
    'grpc.max_reconnect_backoff_ms': 2000,
  });
}

/** Calls a unary method as a promise. */
export function unary<Req, Res>(
  method: (request: Req, callback: (err: grpc.ServiceError | null, response: Res) => void) => unknown,
  request: Req,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    method(request, (err, response) => (err ? reject(err) : resolve(response)));
  });
}
