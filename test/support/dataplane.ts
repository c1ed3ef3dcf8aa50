// Starts a real seccomp-dataplane process on sockets in a scratch folder, for integration tests.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { ANSWERED_BY_LABELS } from '../../common/answer-labels';
import { createDataPlaneClient, getStatus } from '../../common/dataplane-client';
import type { Counters, DataPlaneClient, Event, GetStatusResponse } from '../../proto/gen/seccompagent/v1/dataplane';
import { CURRENT_BUILD, type AgentBuild } from './paths';
import { start, type Started } from './processes';
import { scratchDir } from './scratch';
import { collector, waitUntil } from './wait';

export interface RunningDataPlane {
  proc: Started;
  dir: string;
  listenerSocket: string;
  /** The observer socket (Watch, List, Status; Attach refused). */
  grpcSocket: string;
  /** The control socket (Attach). */
  controlSocket: string;
  /** On the observer socket. */
  client: DataPlaneClient;
  /** On the control socket: what attaches. */
  controlClient: DataPlaneClient;
  status(): Promise<GetStatusResponse>;
  /**
   * The counters once every notification counted has its answer counted too. An answer the engine
   * gives itself (a channel decision, a deadline, a tally) reaches the counters with its next event
   * batch, which may come after the workload it answered has exited.
   */
  settledCounters(timeoutMs?: number): Promise<Counters>;
}

/** Every answer counted, whoever gave it, and the targets that died before theirs. */
export const answersCounted = (c: Counters) => ANSWERED_BY_LABELS.reduce((sum, l) => sum + c[l.counter], 0n) + c.targetGone;

/** A data plane (under its build's seccomp-keeper when `underKeeper`) of `build`: this tree's unless said. */
export async function startDataPlane(
  t: TestContext, extraArgs: string[] = [], dir = scratchDir(t), underKeeper = false, build: AgentBuild = CURRENT_BUILD,
): Promise<RunningDataPlane> {
  const listenerSocket = path.join(dir, 'listener.sock');
  const grpcSocket = path.join(dir, 'grpc', 'dataplane.sock');
  const controlSocket = path.join(dir, 'grpc', 'control.sock');
  const dataplane = [build.dataplaneMain, '--listener-socket', listenerSocket, '--grpc-socket', grpcSocket, '--control-socket', controlSocket, '--log-level', 'debug', ...extraArgs];
  const proc = underKeeper
    ? start(t, build.keeper, ['--restart-delay-ms', '50', '--', process.execPath, ...dataplane])
    : start(t, process.execPath, dataplane);
  const client = createDataPlaneClient(grpcSocket);
  const controlClient = createDataPlaneClient(controlSocket);
  t.after(() => {
    client.close();
    controlClient.close();
  });
  // Ready when this process answers on the gRPC socket (whatever the log level; a predecessor
  // it takes over from may answer there for a moment).
  const servedByThis = async () => {
    const pid = underKeeper ? keeperChild(proc.child.pid!) : proc.child.pid;
    return getStatus(client).then((s) => s.pid === pid, () => false);
  };
  await waitUntil(servedByThis, 15_000, () => `the data plane of ${build.label} to serve; output:\n${proc.output()}`);
  const status = () => getStatus(client);
  const settledCounters = async (timeoutMs = 10_000) => {
    let last: Counters | undefined;
    await waitUntil(async () => {
      last = (await status()).counters!;
      return answersCounted(last) === last.notifications;
    }, timeoutMs, () => `every notification's answer to be counted; last counters: ${JSON.stringify(last, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`);
    return last!;
  };
  return { proc, dir, listenerSocket, grpcSocket, controlSocket, client, controlClient, status, settledCounters };
}

/**
 * The data plane that seccomp-keeper (pid `keeperPid`) runs now; 0 while it has none. The keeper
 * also reaps orphans of a data plane that died (a helper finishing its request): those are not it.
 */
export function keeperChild(keeperPid: number): number {
  const children = fs.readFileSync(`/proc/${keeperPid}/task/${keeperPid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number);
  const comm = (pid: number) => { try { return fs.readFileSync(`/proc/${pid}/comm`, 'utf8'); } catch { return ''; } };
  return children.find((pid) => !comm(pid).startsWith('seccomp-nshelp')) ?? 0;
}

/** Collects Watch events until the test ends; returns once the data plane has registered the stream
 * (its response headers): every event from then on reaches it, so a workload started after cannot
 * be missed. */
export async function watchEvents(t: TestContext, client: DataPlaneClient, filter: { containerIds?: string[]; syscalls?: string[] } = {}) {
  const { items: events, push, waitFor } = collector<Event>('Watch event');
  const call = client.watch({ containerIds: filter.containerIds ?? [], syscalls: filter.syscalls ?? [] });
  t.after(() => call.cancel());
  let registered = false;
  let failed: Error | null = null;
  call.once('metadata', () => (registered = true));
  call.on('data', push);
  call.on('error', (err) => (failed ??= err));
  await waitUntil(() => {
    if (!registered && failed) throw new Error(`Watch failed before the data plane registered it: ${failed.message}`);
    return registered;
  }, 10_000, 'the data plane to register the Watch stream');
  return { events, waitFor, call };
}

