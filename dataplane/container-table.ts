// The containers (one per notify fd) the data plane serves, by native handle.
import type { Container, PeerCredentials } from '../proto/gen/seccompagent/v1/dataplane';
import type { RuntimeContainerState } from './runtime-message';

export class ContainerTable {
  private readonly byHandle = new Map<number, Container>();

  get size(): number {
    return this.byHandle.size;
  }

  add(handle: number, state: RuntimeContainerState, peer: PeerCredentials, registeredAt = new Date()): Container {
    const container: Container = {
      handle: BigInt(handle),
      containerId: state.containerId,
      status: state.status,
      pid: state.pid,
      bundle: state.bundle,
      annotations: state.annotations,
      metadata: state.metadata,
      ociVersion: state.ociVersion,
      peer,
      registeredAt,
    };
    this.byHandle.set(handle, container);
    return container;
  }

  get(handle: number): Container | undefined {
    return this.byHandle.get(handle);
  }

  /** OCI id of a handle, "" when unknown. */
  containerIdOf(handle: number): string {
    return this.byHandle.get(handle)?.containerId ?? '';
  }

  remove(handle: number): Container | undefined {
    const container = this.byHandle.get(handle);
    this.byHandle.delete(handle);
    return container;
  }

  list(): Container[] {
    return [...this.byHandle.values()];
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
