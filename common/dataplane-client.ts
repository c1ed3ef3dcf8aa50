// A gRPC client of the data plane's Unix socket, shared by the control plane, seccompctl, tests
// and benchmarks.
import * as grpc from '@grpc/grpc-js';
import {
  DataPlaneClient,
  type GetStatusResponse,
  type ListContainersResponse,
} from '../proto/gen/seccompagent/v1/dataplane';

export function createDataPlaneClient(socketPath: string): DataPlaneClient {
  return new DataPlaneClient(`unix://${socketPath}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': 16 * 1024 * 1024,
    // Reconnect within tens of ms after a data plane handoff or restart: its successor holds
    // notifications for the control plane until it is back (docs/operators.md).
    'grpc.initial_reconnect_backoff_ms': 20,
    'grpc.max_reconnect_backoff_ms': 1000,
  });
}


export function getStatus(client: DataPlaneClient): Promise<GetStatusResponse> {
  return new Promise((resolve, reject) => client.getStatus({}, (err, res) => (err ? reject(err) : resolve(res))));
}

export function listContainers(client: DataPlaneClient): Promise<ListContainersResponse> {
  return new Promise((resolve, reject) => client.listContainers({}, (err, res) => (err ? reject(err) : resolve(res))));
}
