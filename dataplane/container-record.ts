// The record kept beside each notify fd for a successor data plane (fd store or handoff): enough to
// list the container again exactly as before, in JSON, versioned.
import type { ContainerHandle } from '../common/container-handle';
import type { PeerCredentials } from '../proto/gen/seccompagent/v1/dataplane';
import type { RuntimeContainerState } from './runtime-message';

interface ContainerRecordV1 {
  v: 1;
  state: RuntimeContainerState;
  peer: PeerCredentials;
  registeredAt: string;
}

export interface RestoredContainer {
  state: RuntimeContainerState;
  peer: PeerCredentials;
  registeredAt: Date;
}

export function encodeContainerRecord(state: RuntimeContainerState, peer: PeerCredentials, registeredAt: Date): string {
  const record: ContainerRecordV1 = { v: 1, state, peer, registeredAt: registeredAt.toISOString() };
  return JSON.stringify(record);
}

/**
 * A record a predecessor wrote; a lost or unreadable one still gives a container to serve (its fd
 * is what matters), named after its handle so an operator can tell it apart.
 */
export function decodeContainerRecord(text: string, handle: ContainerHandle): RestoredContainer {
  try {
    const record = JSON.parse(text) as ContainerRecordV1;
    if (record.v === 1 && typeof record.state?.containerId === 'string') {
      // Records older than processPid have none: 0, as for a runtime that sent none.
      return { state: { ...record.state, processPid: record.state.processPid ?? 0 }, peer: record.peer, registeredAt: new Date(record.registeredAt) };
    }
  } catch {
    // fall through
  }
  return {
    state: {
      containerId: `unknown-${handle}`, status: 'running', pid: 0, processPid: 0, bundle: '', annotations: {}, metadata: '', ociVersion: '',
      seccompFdIndex: 0,
    },
    peer: { pid: 0, uid: 0, gid: 0 },
    registeredAt: new Date(),
  };
}
