// The engine's events (JS thread): each batch becomes containers, notifications for the attached control plane, log lines and Watch events.
import { handleToProto, type ContainerHandle } from '../common/container-handle';
import { formatDefaultAction } from '../common/default-action';
import { isEmulationName } from '../common/emulations';
import { errnoName } from '../common/errors';
import type { Logger } from '../common/logger';
import { AnsweredBy, type Notification } from '../proto/gen/seccompagent/v1/dataplane';
import type { AnswerLedger } from './answer-ledger';
import { encodeContainerRecord } from './container-record';
import type { ContainerTable } from './container-table';
import type { MutableCounters } from './counters';
import type { DataPlaneConfig } from './dataplane';
import type { DecisionApplier } from './decision-applier';
import { outcomeOf } from './decisions';
import type {
  AnsweredEvent,
  ConnectionEvent,
  NativeEngine,
  NativeEvent,
  NotificationEvent,
  ReadStallEvent,
  TallyEvent,
} from './native';
import type { PolicyApplier } from './policy-applier';
import { parseRuntimeMessage } from './runtime-message';
import type { SessionRegistry } from './session-registry';
import type { WatchHub } from './watch-hub';

/** What the engine events act on: the data plane's parts, each owning its job. */
export interface EngineEventParts {
  config: DataPlaneConfig;
  log: Logger;
  engine: Pick<NativeEngine, 'adopt' | 'reject' | 'policyOf'>;
  containers: ContainerTable;
  counters: MutableCounters;
  hub: WatchHub;
  ledger: AnswerLedger;
  sessions: SessionRegistry;
  decisions: DecisionApplier;
  policies: PolicyApplier;
  syscallName(nr: number, arch: number): string;
  /** A successor connected to the handoff socket. */
  onHandoff(conn: number, peerPid: number): void;
}

export class EngineEvents {
  /** Wall-clock ns minus monotonic ns: turns the engine's CLOCK_MONOTONIC stamps into dates. */
  private readonly wallOffsetNs = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();

  constructor(private readonly parts: EngineEventParts) {}

  onEvents(events: NativeEvent[]): void {
    const { log, counters, hub, sessions } = this.parts;
    let forSession: Notification[] | null = null;
    // Runtime connections first: a runtime waits on its adoption (and its container's start with
    // it), while nothing waits on the events before it in the batch (Watch, counters).
    const ordered = events.some((e) => e.type === 'connection')
      ? [...events.filter((e) => e.type === 'connection'), ...events.filter((e) => e.type !== 'connection')]
      : events;
    for (const event of ordered) {
      try {
        switch (event.type) {
          case 'notification': {
            const notification = this.onNotification(event);
            if (notification) (forSession ??= []).push(notification);
            break;
          }
          case 'answered':
            this.onAnswered(event);
            break;
          case 'tally':
            this.onTally(event);
            break;
          case 'connection':
            this.onConnection(event);
            break;
          case 'ingest-error':
            // One aggregated line for many connections (counted natively: stats().ingestDropped).
            if (event.code === 'dropped') {
              log.warn({ peer: event.peer, code: event.code }, event.message);
              break;
            }
            counters.ingestRejected++;
            log.warn({ peer: event.peer, code: event.code }, `runtime connection refused: ${event.message}`);
            hub.publish({ $case: 'ingestRejected', ingestRejected: { reason: event.message, peer: event.peer } }, null);
            break;
          case 'removed':
            this.onRemoved(event.handle);
            break;
          case 'decision-dropped':
            this.parts.decisions.onDropped(event.session, event.handle, event.id, event.reason);
            break;
          case 'session-drained':
            sessions.get(event.session)?.close('replaced');
            break;
          case 'channel':
            log.info({ session: sessions.get(event.session)?.id, state: event.state, reason: event.reason || undefined }, `decision channel ${event.state}${event.reason ? `: ${event.reason}` : ''}`);
            break;
          case 'handoff':
            this.parts.onHandoff(event.conn, event.peer.pid);
            break;
          case 'read-stall':
            this.onReadStall(event);
            break;
          case 'error':
            log.error(`native engine: ${event.message}`);
            break;
        }
      } catch (err) {
        log.error({ err, event: event.type }, 'internal error while handling an engine event; the data plane goes on');
      }
    }
    if (forSession && sessions.active) sessions.active.sendNotifications(forSession);
  }

  private onConnection(event: ConnectionEvent): void {
    const { engine, containers, counters, log, hub, sessions } = this.parts;
    let state;
    try {
      state = parseRuntimeMessage(event.json, event.fds);
    } catch (err) {
      engine.reject(event.conn);
      counters.ingestRejected++;
      const reason = (err as Error).message;
      log.warn({ peer: event.peer, fds: event.fds.length }, `runtime message refused: ${reason}; every fd it sent was closed`);
      hub.publish({ $case: 'ingestRejected', ingestRejected: { reason, peer: event.peer } }, null);
      return;
    }
    const registeredAt = new Date();
    const handle = engine.adopt(event.conn, state.seccompFdIndex, encodeContainerRecord(state, event.peer, registeredAt), state.containerId);
    const container = containers.add(handle, state, event.peer, registeredAt);
    // An exec answers as its container's first fd does from its first notification on.
    const inherited = engine.policyOf(handle);
    if (inherited) containers.setPolicy(handle, inherited.version, inherited.rules, inherited.labels);
    counters.containersAdded++;
    log.info(
      { container: state.containerId, handle, status: state.status, pid: state.pid, peer: event.peer },
      `container ${state.containerId} registered (${state.status === 'running' ? 'exec' : 'init'})`,
    );
    hub.publish({ $case: 'containerAdded', containerAdded: container }, { containerId: state.containerId, syscall: '' });
    sessions.active?.sendContainerAdded(container);
  }

  private onReadStall(event: ReadStallEvent): void {
    const { log, containers } = this.parts;
    const fields = { container: containers.containerIdOf(event.handle), handle: event.handle, pid: event.pid, lane: event.lane, stalledMs: Number(event.stalledNs / 1_000_000n) };
    if (event.returned) {
      const syscall = this.parts.syscallName(event.nr, event.arch);
      log.warn({ ...fields, syscall }, `the stalled read of a ${syscall} argument returned after ${fields.stalledMs} ms: the container is served again`);
    } else {
      log.warn(fields, `reading a path argument from task ${event.pid}'s memory has taken ${fields.stalledMs} ms (a page its userfaultfd or FUSE server holds?): `
        + `engine thread ${event.lane} goes on with a new thread; this container's notifications wait until that read returns, as its own call would in the kernel`);
    }
  }

  private onRemoved(handle: ContainerHandle): void {
    const { containers, counters, log, hub, sessions, ledger } = this.parts;
    // Later, not now: an emulation's result may still be on its way (its helper answered the
    // target, which then exited); what the kernel failed with the fd is forgotten then.
    setTimeout(() => ledger.forgetContainer(handle), 2000).unref();
    const container = containers.remove(handle);
    this.parts.policies.forgetContainer(handle);
    const containerId = container?.containerId ?? '';
    counters.containersRemoved++;
    log.info({ container: containerId, handle }, `container ${containerId} gone: no task left in its filter, notify fd closed`);
    const removed = { handle: handleToProto(handle), containerId, reason: 'exited' };
    hub.publish({ $case: 'containerRemoved', containerRemoved: removed }, { containerId, syscall: '' });
    sessions.active?.sendContainerRemoved(removed);
  }

  private toNotification(event: NotificationEvent, containerId: string, syscall: string): Notification {
    return {
      handle: handleToProto(event.handle),
      id: event.id,
      pid: event.pid,
      syscallNr: event.nr,
      syscall,
      arch: event.arch,
      instructionPointer: event.ip,
      args: event.args,
      stringArgs: event.strings,
      containerId,
      receivedAt: new Date(Number((event.receivedNs + this.wallOffsetNs) / 1_000_000n)),
    };
  }

  private onTally(event: TallyEvent): void {
    this.parts.ledger.recordTally(event.handle, this.parts.syscallName(event.nr, event.arch), event.by, event.gone, event.count, event.latencyBuckets, event.latencySumNs);
  }

  /** Returns the notification to send to its session over gRPC, if it goes there. */
  private onNotification(event: NotificationEvent): Notification | null {
    const { containers, ledger, sessions, hub } = this.parts;
    const containerId = containers.containerIdOf(event.handle);
    const syscall = this.parts.syscallName(event.nr, event.arch);
    ledger.countNotifications(syscall);
    const session = event.forwarded && !event.viaChannel ? sessions.get(event.session) : undefined;
    if (event.forwarded && !event.viaChannel && session === undefined) {
      // Its session ended while the event was on its way: the default answers it now.
      this.parts.decisions.answerWithDefault(event.handle, event.id, containerId, syscall, AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED);
    }
    if (!hub.active && session === undefined) return null;
    const notification = this.toNotification(event, containerId, syscall);
    if (hub.active) {
      ledger.rememberSyscall(event.handle, event.id, syscall);
      hub.publish({ $case: 'notification', notification }, { containerId, syscall });
    }
    return session ? notification : null;
  }

  private onAnswered(event: AnsweredEvent): void {
    const { config, log, containers, ledger } = this.parts;
    if (event.notified) ledger.countNotifications(this.parts.syscallName(event.notified.nr, event.notified.arch));
    const containerId = containers.containerIdOf(event.handle);
    const syscall = ledger.takeSyscall(event.handle, event.id);
    if (event.by === AnsweredBy.ANSWERED_BY_DEFAULT_DEADLINE) {
      log.warn(
        { container: containerId, syscall, id: String(event.id), handle: event.handle },
        `control plane missed the ${config.decisionTimeoutMs} ms decision deadline: answered with the default action (${formatDefaultAction(config.defaultAction)})`,
      );
    } else if (event.by === AnsweredBy.ANSWERED_BY_CONTROL_PLANE && 'errno' in event.action && event.action.errno !== 0 && isEmulationName(event.action.kind)) {
      log.info(
        { container: containerId, syscall, id: String(event.id), handle: event.handle, errno: errnoName(event.action.errno) },
        `emulated ${event.action.kind} returned ${errnoName(event.action.errno)}`,
      );
    }
    const findings = ledger.takeFindings(event.handle, event.id);
    ledger.record(event.handle, event.id, containerId, syscall, event.by, outcomeOf(event.action, event.gone), event.latencyNs, event.rule, findings);
  }
}
