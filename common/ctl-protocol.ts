// What seccompctl and the control plane's read-only socket (controlplane/ctl-server.ts) say to each
// other: where the socket is, the two GET paths, and the JSON each answers. One file for both ends,
// so seccompctl (ctl/) reads what the server writes without importing the control plane.
import * as path from 'node:path';
import type { NamedContainer } from './explain-query';

/** `seccompctl policies`: GET, answers PoliciesAnswer. */
export const POLICIES_PATH = '/v1/policies';
/** `seccompctl explain`: GET with container, syscall and one `arg` per argument; answers Explanation. */
export const EXPLAIN_PATH = '/v1/explain';

/** --ctl-socket, or controlplane.sock beside the data plane's gRPC socket (both ends default it so). */
export function ctlSocketPath(ctlSocket: string, grpcSocket: string): string {
  return ctlSocket !== '' ? ctlSocket : path.join(path.dirname(grpcSocket), 'controlplane.sock');
}

/** One row of `seccompctl policies`. */
export interface PolicyRow {
  scope: 'namespaced' | 'cluster';
  namespace: string;
  name: string;
  mode: string;
  ready: string;
  reason: string;
  message: string;
  generation: number;
  inForceGeneration: number | null;
  rules: number;
  containers: number;
  conflicts: string[];
}

/** The answer of POLICIES_PATH. */
export interface PoliciesAnswer {
  policies: PolicyRow[];
}

/** The answer of `seccompctl explain`. */
export interface Explanation {
  container: string;
  identity: NamedContainer['identity'];
  syscall: string;
  args: string[];
  /** The policy and rule that answer, or null: listenerMetadata decides. */
  answer: { policy: string; rule: string; index: number; mode: string; action: string; when: string | null } | null;
  audits: Array<{ policy: string; rule: string; action: string }>;
  errors: Array<{ policy: string; rule: string; error: string }>;
  fallback: string | null;
}
