// The data plane's gRPC API on two local Unix sockets, one per role (docs/operators.md, "Sockets"):
// the observer socket serves Watch, ListContainers, GetStatus, health and reflection (grpcurl or
// `buf curl` work with no .proto file at hand) and refuses Attach; the control socket, root only
// unless given a group, serves Attach as well.
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
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
import { HealthStatuses, type HealthState } from './grpc-health';
import { fileDescriptorsOf, ReflectionIndex } from './grpc-reflection';

export const DATAPLANE_SERVICE_NAME = 'seccompagent.v1.DataPlane';
const PROTO_DIR = path.resolve(__dirname, '..', '..', 'proto');
/** `buf build` output (npm run gen): the real file descriptors, imports and all. */
const DESCRIPTOR_SETS = ['seccompagent.binpb', 'health.binpb'].map((name) => path.join(PROTO_DIR, 'gen', name));

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
export function secureSocket(socketPath: string, mode: number, group: string | null, flag = 'socket-group'): void {
  let gid = 0;
  if (group !== null) {
    if (/^\d+$/.test(group)) gid = Number(group);
    else {
      const line = fs.readFileSync('/etc/group', 'utf8').split('\n').find((l) => l.split(':')[0] === group);
      if (!line) throw new AgentError('EBAD_OPTION', `--${flag}: no group named "${group}" in /etc/group`);
      gid = Number(line.split(':')[2]);
    }
  }
  fs.chownSync(socketPath, 0, gid);
  fs.chmodSync(socketPath, mode);
}

/** Which socket a server answers on: observers may not Attach; the control socket serves everything. */
export type SocketRole = 'observer' | 'control';

export interface SocketSpec {
  path: string;
  mode: number;
  group: string | null;
  /** The option that named the group, for its error message. */
  groupFlag: string;
}

export interface GrpcServerHandle {
  /** grpc.health.v1 of both sockets: a status set here is answered on each. */
  health: { setStatus(service: string, status: HealthState): void };
  /**
   * Binds the observer and the control socket (each claimed first; mode applied before anyone
   * can connect) and serves.
   */
  listen(observer: SocketSpec, control: SocketSpec): Promise<void>;
  /** Graceful: up to 2 s for calls to end, then forced. */
  close(): Promise<void>;
}

/**
 * Watch writes events the hub encoded once (watch-hub.ts): the method's serializer passes those
 * bytes through instead of encoding each event again per stream.
 */
const SERVED_SERVICE = {
  ...DataPlaneService,
  watch: { ...DataPlaneService.watch, responseSerialize: (bytes: Buffer) => bytes },
} as unknown as typeof DataPlaneService;

/** Requests of observers are small (a Watch filter); Attach carries policies and needs more. */
const MAX_RECEIVE = { observer: 1024 * 1024, control: 16 * 1024 * 1024 } as const;

function implementation(dataplane: DataPlane, role: SocketRole, controlSocket: string, refusals: RateLimitedLog): DataPlaneServer {
  return {
    attach(call: grpc.ServerDuplexStream<AttachRequest, AttachResponse>) {
      if (role === 'observer') {
        // Deciding and taking over are the control role's: whoever has the observer socket's
        // group (seccompctl watch, grpcurl) must not replace the control plane.
        const details = `Attach is refused on the observer socket: control planes attach on the control socket ${controlSocket} (root only, or the data plane's --control-socket-group)`;
        refusals.warn({ socket: 'observer' }, `${details}; the caller was refused`);
        call.on('error', () => undefined);
        call.emit('error', { code: status.PERMISSION_DENIED, details });
        return;
      }
      new AttachSession(call, dataplane.attachHooks);
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

/** One warning line per interval at most, with how many were folded into it. */
class RateLimitedLog {
  private last = 0;
  private folded = 0;
  constructor(private readonly log: Logger, private readonly intervalMs: number) {}
  warn(fields: Record<string, unknown>, message: string): void {
    const now = Date.now();
    if (now - this.last < this.intervalMs) {
      this.folded++;
      return;
    }
    this.log.warn({ ...fields, alsoRefused: this.folded || undefined }, message);
    this.last = now;
    this.folded = 0;
  }
}

/** One socket's server: the DataPlane service for its role, health and reflection. */
function buildServer(dataplane: DataPlane, role: SocketRole, controlSocket: string, health: HealthStatuses, reflection: ReflectionIndex, refusals: RateLimitedLog) {
  const server = new grpc.Server({ 'grpc.max_receive_message_length': MAX_RECEIVE[role] });
  server.addService(SERVED_SERVICE, implementation(dataplane, role, controlSocket, refusals));
  health.addTo(server);
  reflection.addTo(server);
  return server;
}

async function bind(server: grpc.Server, spec: SocketSpec, what: string): Promise<void> {
  await claimSocketPath(spec.path, what);
  // The socket is created by bind: a tight umask closes the window before chmod.
  const previousUmask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.bindAsync(`unix://${spec.path}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve()));
    });
  } finally {
    process.umask(previousUmask);
  }
  secureSocket(spec.path, spec.mode, spec.group, spec.groupFlag);
}

/**
 * Builds the gRPC servers of both sockets (services, health, reflection from the descriptor sets)
 * without binding: a successor builds them before a handoff and binds once the old data plane let
 * go, so control planes reattach without waiting for this.
 */
export function createGrpcServer(dataplane: DataPlane, log: Logger, controlSocket: string): GrpcServerHandle {
  const reflection = new ReflectionIndex(DESCRIPTOR_SETS.flatMap((file) => fileDescriptorsOf(fs.readFileSync(file))));
  const health = new HealthStatuses({ '': 'SERVING', [DATAPLANE_SERVICE_NAME]: 'SERVING' });
  const refusals = new RateLimitedLog(log, 5000);
  const built = (['observer', 'control'] as const).map((role) => buildServer(dataplane, role, controlSocket, health, reflection, refusals));
  const bound: string[] = [];
  return {
    health,
    async listen(observer, control) {
      await bind(built[0], observer, 'gRPC observer socket');
      bound.push(observer.path);
      await bind(built[1], control, 'gRPC control socket');
      bound.push(control.path);
      log.info(
        { socket: observer.path, mode: observer.mode.toString(8), controlSocket: control.path, controlMode: control.mode.toString(8), controlGroup: control.group ?? undefined },
        'gRPC API serving: observer socket (Watch, ListContainers, GetStatus, health, reflection; Attach refused) and control socket (Attach, and all of the above)',
      );
    },
    close: () =>
      Promise.all(built.map((server) => new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }))).then(() => {
        for (const p of bound) fs.rmSync(p, { force: true });
      }),
  };
}
