// Starts a real seccomp-dataplane process on sockets in a scratch folder, for integration tests.
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { createDataPlaneClient, getStatus } from '../../common/dataplane-client';
import type { DataPlaneClient, Event, GetStatusResponse } from '../../proto/gen/seccompagent/v1/dataplane';
import { DATAPLANE_MAIN } from './paths';
import { start, type Started } from './processes';
import { scratchDir } from './scratch';

export interface RunningDataPlane {
  proc: Started;
  dir: string;
  listenerSocket: string;
  grpcSocket: string;
  client: DataPlaneClient;
  status(): Promise<GetStatusResponse>;
}

export async function startDataPlane(t: TestContext, extraArgs: string[] = [], dir = scratchDir(t)): Promise<RunningDataPlane> {
  const listenerSocket = path.join(dir, 'listener.sock');
  const grpcSocket = path.join(dir, 'grpc', 'dataplane.sock');
  const proc = start(t, process.execPath, [
    DATAPLANE_MAIN, '--listener-socket', listenerSocket, '--grpc-socket', grpcSocket, '--log-level', 'debug', ...extraArgs,
  ]);
  const client = createDataPlaneClient(grpcSocket);
  t.after(() => client.close());
  // Ready when the gRPC API answers (whatever the log level).
  await new Promise<void>((resolve, reject) => {
    client.waitForReady(new Date(Date.now() + 15_000), (err) => (err ? reject(new Error(`data plane not ready: ${err.message}; output:\n${proc.output()}`)) : resolve()));
  });
  await getStatus(client);
  return { proc, dir, listenerSocket, grpcSocket, client, status: () => getStatus(client) };
}

/** Collects Watch events until the test ends. */
export function watchEvents(t: TestContext, client: DataPlaneClient, filter: { containerIds?: string[]; syscalls?: string[] } = {}) {
  const events: Event[] = [];
  const waiters: Array<() => void> = [];
  const call = client.watch({ containerIds: filter.containerIds ?? [], syscalls: filter.syscalls ?? [] });
  call.on('data', (event: Event) => {
    events.push(event);
    for (const w of waiters.splice(0)) w();
  });
  call.on('error', () => undefined);
  t.after(() => call.cancel());
  const waitFor = (predicate: (e: Event) => boolean, timeoutMs = 10_000) =>
    new Promise<Event>((resolve, reject) => {
      const deadline = setTimeout(() => reject(new Error(`no matching Watch event within ${timeoutMs} ms; saw ${events.length} events`)), timeoutMs);
      const check = () => {
        const found = events.find(predicate);
        if (found) {
          clearTimeout(deadline);
          resolve(found);
        } else waiters.push(check);
      };
      check();
    });
  return { events, waitFor, call };
}

/** Polls `probe` until it returns true. */
export async function eventually(probe: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await probe()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
