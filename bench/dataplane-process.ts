// The data plane as the bench runs it: a real `node dist/dataplane/main.js` child process on
// sockets in the scenario's temp dir, with a gRPC client for its status.
import * as grpc from '@grpc/grpc-js';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataPlaneClient, type GetStatusResponse } from '../proto/gen/seccompagent/v1/dataplane';
import type { Child, Children } from './children';
import { isListening, notifyFdCount, rssMiB, TOOLS } from './tools';

export interface DataPlaneProcess {
  child: Child;
  /** Its log (stderr): pino JSON lines. */
  logFile: string;
  listenerSocket: string;
  grpcSocket: string;
  /** The control socket (Attach), explicit so no bench relies on the default beside grpcSocket. */
  controlSocket: string;
  client: DataPlaneClient;
  status(): Promise<GetStatusResponse>;
  rssMiB(): number;
  close(): void;
}

/**
 * `extraArgs` come last (a later --log-level wins). `name` also names its log file: a successor
 * started with --takeover on the same sockets gets its own. Ready when this process answers.
 */
export async function startDataPlane(children: Children, dir: string, extraArgs: string[] = [], name = 'dataplane'): Promise<DataPlaneProcess> {
  const listenerSocket = path.join(dir, 'listener.sock');
  const grpcSocket = path.join(dir, 'dataplane.sock');
  const controlSocket = path.join(dir, 'control.sock');
  const logFile = path.join(dir, `${name}.log`);
  const child = children.start(name, process.execPath, [
    TOOLS.dataplaneMain, '--listener-socket', listenerSocket, '--grpc-socket', grpcSocket, '--control-socket', controlSocket, '--log-level', 'warn',
    ...extraArgs,
  ], { logFile });
  const client = new DataPlaneClient(`unix://${grpcSocket}`, grpc.credentials.createInsecure());
  const status = () =>
    new Promise<GetStatusResponse>((resolve, reject) => {
      client.getStatus({}, new grpc.Metadata(), { deadline: Date.now() + 5000 }, (err, response) => (err ? reject(err) : resolve(response)));
    });
  const dataplane: DataPlaneProcess = {
    child, logFile, listenerSocket, grpcSocket, controlSocket, client, status,
    rssMiB: () => rssMiB(child.pid),
    close: () => client.close(),
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (!child.alive()) throw new Error(`the data plane exited at start: ${child.stderr().trim()}`);
    if (Date.now() > deadline) throw new Error(`the data plane was not ready within 20 s: ${child.stderr().trim()}`);
    if (isListening(listenerSocket) && isListening(grpcSocket) && isListening(controlSocket)) {
      try {
        // A predecessor it takes over from answers on these sockets until the handoff.
        if ((await status()).pid === child.pid) return dataplane;
      } catch {
        // not serving yet
      }
    }
    await sleep(20);
  }
}

/**
 * Waits until the data plane holds at least `count` notify fds. Counted in /proc rather than
 * asked over gRPC: its container table is fed by events, and this must not depend on them.
 */
export async function waitForContainers(dataplane: DataPlaneProcess, count: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const held = notifyFdCount(dataplane.child.pid);
    if (held >= count) return held;
    if (!dataplane.child.alive()) throw new Error(`the data plane exited: ${dataplane.child.stderr().trim()}`);
    if (Date.now() > deadline) throw new Error(`the data plane holds ${held} notify fds after ${timeoutMs} ms, expected ${count}`);
    await sleep(50);
  }
}
