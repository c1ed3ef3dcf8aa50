// The session registry: which control plane sessions are attached (the active one and any still draining), from Hello to their end.
import { randomBytes } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { CHANNEL_FEATURE } from '../common/decision-channel';
import { defaultActionToProto, formatDefaultAction } from '../common/default-action';
import { durationFromMs } from '../common/duration';
import { HOLD_FEATURE } from '../common/hold-feature';
import { MKDIR_SUFFIX_FEATURE } from '../common/mkdir-suffix-feature';
import type { Logger } from '../common/logger';
import { VERSION } from '../common/version';
import type { AttachSession } from './attach-session';
import type { ContainerTable } from './container-table';
import type { DataPlaneConfig } from './dataplane';
import { DATAPLANE_FEATURES } from './decisions';
import type { NativeEngine } from './native';
import type { WatchHub } from './watch-hub';

type SessionEngine = Pick<NativeEngine, 'openSession' | 'setActiveSession' | 'closeSession' | 'sessionPending'>;

export class SessionRegistry {
  /** Attached sessions by engine session number: the active one and any still draining. */
  private readonly sessions = new Map<number, AttachSession>();
  private nextSessionNumber = 1;
  private activeSession: AttachSession | null = null;
  /** Once stopping, the engine is going away: sessions end without it. */
  private stopping = false;

  constructor(
    private readonly config: DataPlaneConfig,
    private readonly log: Logger,
    private readonly engine: SessionEngine,
    private readonly containers: ContainerTable,
    private readonly hub: WatchHub,
  ) {}

  /** The session whose control plane decides now, if any. */
  get active(): AttachSession | null {
    return this.activeSession;
  }

  /** A session by its engine number: attached, or replaced and still draining. */
  get(sessionNumber: number): AttachSession | undefined {
    return this.sessions.get(sessionNumber);
  }

  /** Ends every session (the data plane is shutting down). */
  stop(): void {
    this.stopping = true;
    for (const session of [...this.sessions.values()]) session.fail(status.UNAVAILABLE, 'the data plane is shutting down', 'shutdown');
  }

  onHello(session: AttachSession): { code: status; details: string } | null {
    const hello = session.hello!;
    if (this.stopping) return { code: status.UNAVAILABLE, details: 'the data plane is shutting down' };
    if (this.activeSession && this.activeSession.isOpen && !hello.takeover) {
      const current = this.activeSession.hello!;
      this.log.warn({ session: session.id, name: hello.name }, `second control plane refused: ${current.name} ${current.version} is attached (session ${this.activeSession.id})`);
      return {
        code: status.FAILED_PRECONDITION,
        details: `a control plane is attached already (${current.name} ${current.version}, session ${this.activeSession.id}); set Hello.takeover to replace it`,
      };
    }
    const previous = this.activeSession;
    session.number = this.nextSessionNumber++;
    const token = randomBytes(16);
    this.engine.openSession(session.number, token);
    this.sessions.set(session.number, session);
    this.activeSession = session;
    const channel = hello.features.includes(CHANNEL_FEATURE);
    session.sendWelcome({
      sessionId: session.id,
      dataplaneVersion: VERSION,
      decisionTimeout: durationFromMs(this.config.decisionTimeoutMs),
      defaultAction: defaultActionToProto(this.config.defaultAction),
      features: [...DATAPLANE_FEATURES, CHANNEL_FEATURE, HOLD_FEATURE, MKDIR_SUFFIX_FEATURE],
      decisionChannel: channel ? { socketPath: this.config.channelSocket, token } : undefined,
    });
    session.sendSnapshot(this.containers.list());
    this.engine.setActiveSession(session.number);
    this.log.info(
      { session: session.id, name: hello.name, version: hello.version, features: hello.features, containers: this.containers.size, channel },
      `control plane ${hello.name} ${hello.version} attached: it decides from now on`,
    );
    this.hub.publish({
      $case: 'controlPlaneAttached',
      controlPlaneAttached: { sessionId: session.id, name: hello.name, version: hello.version, features: hello.features },
    }, null);
    if (previous?.isOpen) {
      // Takeover: the previous session keeps what it holds and ends once it has answered it all
      // (the engine says so with session-drained).
      const held = this.engine.sessionPending(previous.number);
      this.log.info({ session: previous.id, successor: session.id, held }, `control plane ${previous.name} replaced by takeover; it finishes the ${held} notification(s) it holds, new ones go to ${hello.name}`);
      previous.sendDrain(session);
      if (held === 0) previous.close('replaced');
    }
    return null;
  }

  onSessionEnded(session: AttachSession, reason: string): void {
    if (session.hello === null || session.number === 0) return; // never attached
    const wasActive = this.activeSession === session;
    if (wasActive) {
      this.activeSession = null;
      if (!this.stopping) this.engine.setActiveSession(0);
    }
    // The engine answers what the session held with the default action (answered events follow).
    const held = this.stopping ? 0 : this.engine.closeSession(session.number);
    this.sessions.delete(session.number);
    const message = wasActive
      ? `control plane ${session.name} detached (${reason}): ${held} notification(s) it held answered by the default action; the default action (${formatDefaultAction(this.config.defaultAction)}) answers until one attaches`
      : `control plane ${session.name} detached (${reason}) after handing over`;
    (wasActive ? this.log.warn : this.log.info).call(this.log, { session: session.id, reason, answeredByDefault: held }, message);
    this.hub.publish({
      $case: 'controlPlaneDetached',
      controlPlaneDetached: { sessionId: session.id, reason, answeredByDefault: held },
    }, null);
  }
}
