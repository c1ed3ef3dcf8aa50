// The containers (one per notify fd) the data plane serves, by native handle.
import { handleToProto, type ContainerHandle } from '../common/container-handle';
import { NotificationWait, type Container, type PeerCredentials } from '../proto/gen/seccompagent/v1/dataplane';
import type { RuntimeContainerState } from './runtime-message';

/** How many removed handles keep their container id (a bounded FIFO). */
const RECENTLY_GONE = 1024;

export class ContainerTable {
  private readonly byHandle = new Map<ContainerHandle, Container>();
  private readonly gone = new Map<ContainerHandle, Container>();
  private readonly answers = new Map<ContainerHandle, { byDefault: number; fastPath: number }>();

  get size(): number {
    return this.byHandle.size;
  }

  add(handle: ContainerHandle, state: RuntimeContainerState, peer: PeerCredentials, registeredAt = new Date()): Container {
    const container: Container = {
      handle: handleToProto(handle),
      containerId: state.containerId,
      status: state.status,
      pid: state.pid,
      processPid: state.processPid,
      bundle: state.bundle,
      annotations: state.annotations,
      metadata: state.metadata,
      ociVersion: state.ociVersion,
      peer,
      registeredAt,
      labels: {},
      policyVersion: '',
      policyRules: 0,
      answeredDefault: 0n,
      answeredFastPath: 0n,
      notificationWait: NotificationWait.NOTIFICATION_WAIT_UNSPECIFIED,
    };
    this.byHandle.set(handle, container);
    this.answers.set(handle, { byDefault: 0, fastPath: 0 });
    return container;
  }

  /** The policy now in force for a handle, as the engine took it. */
  setPolicy(handle: ContainerHandle, version: string, rules: number, labels: Record<string, string>): void {
    const container = this.byHandle.get(handle);
    if (!container) return;
    container.policyVersion = version;
    container.policyRules = rules;
    container.labels = labels;
  }

  /**
   * Counts one answer of a live container by who gave it (Container.answered_default and
   * answered_fast_path). Plain numbers here, on the answer path; bigints only when listed.
   */
  countAnswer(handle: ContainerHandle, by: 'default' | 'fast-path', count = 1): void {
    const counts = this.answers.get(handle);
    if (!counts) return;
    if (by === 'default') counts.byDefault += count;
    else counts.fastPath += count;
  }

  get(handle: ContainerHandle): Container | undefined {
    return this.byHandle.get(handle);
  }

  /** OCI id of a handle, "" when unknown; also of one removed a moment ago (see remove). */
  containerIdOf(handle: ContainerHandle): string {
    return this.recent(handle)?.containerId ?? '';
  }

  /** A container served now, or removed a moment ago (see remove). */
  recent(handle: ContainerHandle): Container | undefined {
    return this.byHandle.get(handle) ?? this.gone.get(handle);
  }

  /**
   * An emulation's helper answers the target itself, so the target may exit, and its fd be
   * removed, before the emulation's result is reported: the id stays known for that report.
   */
  remove(handle: ContainerHandle): Container | undefined {
    const container = this.byHandle.get(handle);
    this.byHandle.delete(handle);
    this.answers.delete(handle);
    if (container) {
      this.gone.set(handle, container);
      if (this.gone.size > RECENTLY_GONE) this.gone.delete(this.gone.keys().next().value!);
    }
    return container;
  }

  /** Every container served now; `waits`: how each one's tasks wait, as the engine saw it (targetWaits()). */
  list(waits: ReadonlyArray<[ContainerHandle, 'killable' | 'interruptible']> = []): Container[] {
    const waitOf = new Map(waits);
    return [...this.byHandle].map(([handle, container]) => {
      const counts = this.answers.get(handle)!;
      const wait = waitOf.get(handle);
      return {
        ...container,
        answeredDefault: BigInt(counts.byDefault),
        answeredFastPath: BigInt(counts.fastPath),
        notificationWait: wait === 'killable' ? NotificationWait.NOTIFICATION_WAIT_KILLABLE
          : wait === 'interruptible' ? NotificationWait.NOTIFICATION_WAIT_INTERRUPTIBLE
            : NotificationWait.NOTIFICATION_WAIT_UNSPECIFIED,
      };
    });
  }

  /**
   * The container's init pid, for a kill: the fd's own pid, or, for an fd that came with pid 0
   * (crun sends pid 0 for exec fds), the pid of a live fd of the same container id; 0 if none.
   */
  initPidOf(handle: number): number {
    const container = this.byHandle.get(handle);
    if (!container || container.pid > 0) return container?.pid ?? 0;
    for (const other of this.byHandle.values()) if (other.containerId === container.containerId && other.pid > 0) return other.pid;
    return 0;
  }
}
