// Parses the message an OCI runtime (runc, crun) sends with its seccomp notify fd over the
// listenerPath socket (runtime-spec "seccomp listener"): which received fd is the notify fd, and
// the container state that comes with it.
import { AgentError } from '../common/errors';

/** What the data plane keeps of a runtime's message. */
export interface RuntimeContainerState {
  containerId: string;
  /** "creating" for a container's init, "running" for an exec. */
  status: string;
  pid: number;
  /** The runtime message's top-level pid: the process that attached the filter (0: none sent). */
  processPid: number;
  bundle: string;
  annotations: Record<string, string>;
  metadata: string;
  ociVersion: string;
  /** Index of the seccomp notify fd among the fds received. */
  seccompFdIndex: number;
}

const KNOWN_STATUSES = new Set(['creating', 'created', 'running']);

function fail(detail: string): never {
  throw new AgentError('EBAD_RUNTIME_MESSAGE', detail);
}

function optionalString(value: unknown, field: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') fail(`"${field}" must be a string`);
  return value;
}

function optionalPid(value: unknown, field: string): number {
  if (value === undefined || value === null) return 0;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 0x7fffffff) {
    fail(`"${field}" must be a pid (a non-negative integer)`);
  }
  return value;
}

/**
 * Checks the message against the fds that came with it. Throws AgentError EBAD_RUNTIME_MESSAGE
 * with a reason a person can act on; the caller then closes every fd.
 */
export function parseRuntimeMessage(text: string, fds: ReadonlyArray<{ seccomp: boolean }>): RuntimeContainerState {
  if (fds.length === 0) fail('no fd came with the message (SCM_RIGHTS): nothing to serve');
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch (err) {
    fail(`the message is not JSON (${(err as Error).message}); ${text.length} bytes received`);
  }
  if (typeof message !== 'object' || message === null || Array.isArray(message)) fail('the message is not a JSON object');
  const root = message as Record<string, unknown>;
  const names = root.fds;
  if (!Array.isArray(names) || names.some((n) => typeof n !== 'string')) fail('"fds" must be an array of fd names');
  if (names.length !== fds.length) {
    fail(`the message names ${names.length} fd(s) (${JSON.stringify(names)}) but ${fds.length} were received`);
  }
  const seccompFdIndex = names.indexOf('seccompFd');
  if (seccompFdIndex === -1) fail(`"fds" has no "seccompFd" entry (${JSON.stringify(names)})`);
  if (!fds[seccompFdIndex].seccomp) fail(`fd ${seccompFdIndex} ("seccompFd") is not a seccomp notify fd`);
  const state = root.state;
  if (typeof state !== 'object' || state === null || Array.isArray(state)) fail('"state" must be an object');
  const st = state as Record<string, unknown>;
  const containerId = optionalString(st.id, 'state.id');
  if (containerId === '') fail('"state.id" is missing: the container has no id');
  const status = optionalString(st.status, 'state.status');
  if (!KNOWN_STATUSES.has(status)) fail(`"state.status" is "${status}", expected creating (init) or running (exec)`);
  const rawAnnotations = st.annotations ?? {};
  if (typeof rawAnnotations !== 'object' || rawAnnotations === null || Array.isArray(rawAnnotations)) {
    fail('"state.annotations" must be an object');
  }
  const annotations: Record<string, string> = {};
  for (const [key, value] of Object.entries(rawAnnotations as Record<string, unknown>)) {
    if (typeof value !== 'string') fail(`annotation "${key}" must be a string`);
    annotations[key] = value;
  }
  return {
    containerId,
    status,
    pid: optionalPid(st.pid, 'state.pid') || optionalPid(root.pid, 'pid'),
    processPid: optionalPid(root.pid, 'pid'),
    bundle: optionalString(st.bundle, 'state.bundle'),
    annotations,
    metadata: optionalString(root.metadata, 'metadata'),
    ociVersion: optionalString(root.ociVersion, 'ociVersion'),
    seccompFdIndex,
  };
}
