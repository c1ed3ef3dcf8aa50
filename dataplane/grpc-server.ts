// The data plane's gRPC API on a local Unix socket: DataPlane, server reflection and
// grpc.health.v1, so grpcurl (or `buf curl`) works with no .proto file at hand.
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import { AgentError } from '../common/errors';
import type { Logger } from '../common/logger';
import {
  DataPlaneService,
  type AttachRequest,
  type AttachResponse,
  type DataPlaneServer,
  type Event,
  type WatchRequest,
} from '../proto/gen/seccompagent/v1/dataplane';
import { AttachSession } from './attach-session';
import type { DataPlane } from './dataplane';

export const DATAPLANE_SERVICE_NAME = 'seccompagent.v1.DataPlane';
const PROTO_DIR = path.resolve(__dirname, '..', '..', 'proto');
/** `buf build` output (npm run gen): the real file descriptors, imports and all. */
const DESCRIPTOR_SETS = ['seccompagent.binpb', 'health.binpb'].map((name) => path.join(PROTO_DIR, 'gen', name));

/**
 * The FileDescriptorProtos of a FileDescriptorSet (field 1, repeated, length-delimited).
 * proto-loader rebuilds descriptors per package and drops their imports, which leaves
 * reflection clients (grpcurl, buf curl) unable to resolve google.protobuf types; the set that
 * buf compiled has them right.
 */
export function fileDescriptorsOf(set: Buffer): Buffer[] {
  const files: Buffer[] = [];
  let at = 0;
  const varint = () => {
    let value = 0;
    let shift = 0;
    for (;;) {
      const byte = set[at++];
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
      shift += 7;
    }
  };
  while (at < set.length) {
    const key = varint();
    if (key !== 0x0a) throw new AgentError('EDESCRIPTOR_SET', `not a FileDescriptorSet: unexpected field key ${key}; run npm run gen`);
    const length = varint();
    files.push(set.subarray(at, at + length));
    at += length;
  }
  return files;
}

/** True when something accepts connections on the socket path. */
function socketIsLive(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.connect(socketPath);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
}

/** Removes a stale socket file; refuses when another process still serves it. */
export async function claimSocketPath(socketPath: string, what: string, replaceLive = false): Promise<void> {
  fs.mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o755 });
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(socketPath);
  } catch {
    return;
  }
  if (!stat.isSocket()) {
    throw new AgentError('ESOCKET_PATH', `${what} ${socketPath} exists and is not a socket; refusing to replace it`);
  }
  if (!replaceLive && (await socketIsLive(socketPath))) {
    throw new AgentError('ESOCKET_BUSY', `${what} ${socketPath} is served by another process (another data plane?); stop it or use another path`);
  }
  fs.unlinkSync(socketPath);
}

/** Applies owner root, the optional group and the mode to a socket file. */
export function secureSocket(socketPath: string, mode: number, group: string | null): void {
  let gid = 0;
  if (group !== null) {
    if (/^\d+$/.test(group)) gid = Number(group);
    else {
      const line = fs.readFileSync('/etc/group', 'utf8').split('\n').find((l) => l.split(':')[0] === group);
      if (!line) throw new AgentError('EBAD_OPTION', `--socket-group: no group named "${group}" in /etc/group`);
      gid = Number(line.split(':')[2]);
    }
  }
  fs.chownSync(socketPath, 0, gid);
  fs.chmodSync(socketPath, mode);
}

export interface GrpcServerHandle {
  server: grpc.Server;
  health: HealthImplementation;
  /** Binds `socketPath` (claimed first; mode applied before anyone can connect) and serves. */
  listen(socketPath: string, mode: number, group: string | null): Promise<void>;
  /** Graceful: up to 2 s for calls to end, then forced. */
  close(): Promise<void>;
}

function implementation(dataplane: DataPlane): DataPlaneServer {
  return {
    attach(call: grpc.ServerDuplexStream<AttachRequest, AttachResponse>) {
      new AttachSession(call, {
        onHello: (session) => dataplane.onHello(session),
        onDecisions: (session, decisions) => dataplane.onDecisions(session, decisions),
        onPolicies: (session, policies) => dataplane.onPolicies(session, policies),
        onEnded: (session, reason) => dataplane.onSessionEnded(session, reason),
      });
    },
    watch(call: grpc.ServerWritableStream<WatchRequest, Event>) {
      dataplane.hub.add(call);
    },
    listContainers(_call, callback) {
      callback(null, { containers: dataplane.listContainers() });
    },
    getStatus(_call, callback) {
      callback(null, dataplane.status());
    },
    explainRule(call, callback) {
      try {
        callback(null, dataplane.explainRule(call.request));
      } catch (err) {
        callback({ code: grpc.status.INVALID_ARGUMENT, details: (err as Error).message });
      }
    },
  };
}

/**
 * Builds the gRPC server (services, health, reflection from the descriptor sets) without binding:
 * a successor builds it before a handoff and binds once the old data plane let go, so control
 * planes reattach without waiting for this.
 */
export function createGrpcServer(dataplane: DataPlane, log: Logger): GrpcServerHandle {
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 16 * 1024 * 1024 });
  server.addService(DataPlaneService, implementation(dataplane));
  const health = new HealthImplementation({ '': 'SERVING', [DATAPLANE_SERVICE_NAME]: 'SERVING' });
  health.addToServer(server);
  // ReflectionService reads only `fileDescriptorProtos` of each entry.
  const fileDescriptorProtos = DESCRIPTOR_SETS.flatMap((file) => fileDescriptorsOf(fs.readFileSync(file)));
  const descriptors = { all: { format: 'Protocol Buffer 3 DescriptorProto', type: {}, fileDescriptorProtos } };
  new ReflectionService(descriptors as unknown as protoLoader.PackageDefinition).addToServer(server);
  let boundPath: string | null = null;
  return {
    server,
    health,
    async listen(socketPath, mode, group) {
      await claimSocketPath(socketPath, 'gRPC socket');
      // The socket is created by bind: a tight umask closes the window before chmod.
      const previousUmask = process.umask(0o177);
      try {
        await new Promise<void>((resolve, reject) => {
          server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve()));
        });
      } finally {
        process.umask(previousUmask);
      }
      boundPath = socketPath;
      secureSocket(socketPath, mode, group);
      log.info({ socket: socketPath, mode: mode.toString(8) }, 'gRPC API serving (DataPlane, reflection, health)');
    },
    close: () =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }).finally(() => {
        if (boundPath !== null) fs.rmSync(boundPath, { force: true });
      }),
  };
}
