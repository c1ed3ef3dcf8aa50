// The data plane's options: flag, environment variable, default and meaning side by side.
import * as os from 'node:os';
import * as path from 'node:path';
import { parseDefaultAction } from '../common/default-action';
import { AgentError } from '../common/errors';
import { parseBoolean, parseDurationMs, parseDurationOrOffMs, parsePositiveInteger, type OptionTable } from '../common/options';
import { DEFAULT_LISTENER_SOCKET, SHARED_OPTIONS } from '../common/shared-options';

export { DEFAULT_LISTENER_SOCKET } from '../common/shared-options';

/** The decision channel lives beside the gRPC socket (same directory, same mode and group). */
export function channelSocketPath(grpcSocket: string): string {
  return path.join(path.dirname(grpcSocket), 'decisions.sock');
}

/** The handoff socket a successor (--takeover) connects to: beside the gRPC socket. */
export function handoffSocketPath(grpcSocket: string): string {
  return path.join(path.dirname(grpcSocket), 'handoff.sock');
}

/** "0600", "660": an octal file mode for the sockets. */
export function parseSocketMode(text: string, flag: string): number {
  if (!/^0?[0-7]{3}$/.test(text)) throw new AgentError('EBAD_OPTION', `--${flag}: "${text}" is not an octal mode such as 0600`);
  return parseInt(text, 8);
}

/** "a.sock,b.sock": the listener sockets, absolute, each once, at least one. */
export function parseSocketList(text: string, flag: string): readonly string[] {
  const paths = text.split(',').map((p) => p.trim()).filter((p) => p !== '');
  if (paths.length === 0) throw new AgentError('EBAD_OPTION', `--${flag}: no socket path given`);
  const seen = new Set<string>();
  for (const p of paths) {
    if (!path.isAbsolute(p)) throw new AgentError('EBAD_OPTION', `--${flag}: "${p}" is not an absolute path`);
    const normal = path.normalize(p);
    if (seen.has(normal)) throw new AgentError('EBAD_OPTION', `--${flag}: "${p}" is given twice`);
    seen.add(normal);
  }
  return Object.freeze(paths.map((p) => path.normalize(p)));
}

/** Most engine threads the native side runs (engine_lanes.cpp). */
export const MAX_ENGINE_THREADS = 64;

/**
 * "auto" (one per CPU this process may run on, at most 4: a lane per container that floods, beside
 * the engine thread, is what keeps another container's latency) or a count from 1 to 64.
 */
export function parseEngineThreads(text: string, flag: string): number {
  if (text === 'auto') return Math.min(os.availableParallelism(), 4);
  const n = /^[0-9]+$/.test(text) ? Number(text) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_ENGINE_THREADS) {
    throw new AgentError('EBAD_OPTION', `--${flag}: "${text}" is neither auto nor a thread count from 1 to ${MAX_ENGINE_THREADS}`);
  }
  return n;
}

/** Optional group name or gid owning the sockets (mode then usually 0660). */
export function parseGroup(text: string): string | null {
  return text === '' ? null : text;
}

export const DATAPLANE_OPTIONS = {
  listenerSockets: {
    flag: 'listener-socket', env: 'SECCOMP_AGENT_LISTENER_SOCKET', default: DEFAULT_LISTENER_SOCKET, parse: parseSocketList, repeatable: true,
    description: 'Unix socket the OCI runtime sends notify fds to (listenerPath of the profiles); repeat it (or list paths with commas) to serve several, e.g. /run/seccomp-agent.socket and the Security Profiles Operator\'s /var/run/security-profiles-operator/seccomp-agent.sock',
  },
  grpcSocket: SHARED_OPTIONS.grpcSocket,
  controlSocket: SHARED_OPTIONS.controlSocket,
  socketMode: {
    flag: 'socket-mode', env: 'SECCOMP_AGENT_SOCKET_MODE', default: '0600', parse: parseSocketMode,
    description: 'File mode of the listener socket and of the observer (--grpc-socket) socket',
  },
  socketGroup: {
    flag: 'socket-group', env: 'SECCOMP_AGENT_SOCKET_GROUP', default: '', parse: parseGroup,
    description: 'Group owning the listener and observer sockets (with --socket-mode 0660): who may watch, never who may attach',
  },
  controlSocketGroup: {
    flag: 'control-socket-group', env: 'SECCOMP_AGENT_CONTROL_SOCKET_GROUP', default: '', parse: parseGroup,
    description: 'Group given the control socket and the decision channel, mode 0660 (a control plane that does not run as root); empty: root only, 0600',
  },
  maxWatchers: {
    flag: 'max-watchers', env: 'SECCOMP_AGENT_MAX_WATCHERS', default: '64', parse: parsePositiveInteger,
    description: 'Watch streams served at once in total; more get RESOURCE_EXHAUSTED',
  },
  maxWatchersPerConnection: {
    flag: 'max-watchers-per-connection', env: 'SECCOMP_AGENT_MAX_WATCHERS_PER_CONNECTION', default: '8', parse: parsePositiveInteger,
    description: 'Watch streams served at once on one client connection; more get RESOURCE_EXHAUSTED',
  },
  defaultAction: {
    flag: 'default-action', env: 'SECCOMP_AGENT_DEFAULT_ACTION', default: 'continue', parse: parseDefaultAction,
    description: 'Answer while no control plane decides: continue or errno:NAME',
  },
  decisionTimeoutMs: {
    flag: 'decision-timeout', env: 'SECCOMP_AGENT_DECISION_TIMEOUT', default: '2s', parse: parseDurationMs,
    description: 'How long a control plane may take to decide before the default action answers',
  },
  busyPollMs: SHARED_OPTIONS.busyPollMs,
  engineThreads: {
    flag: 'engine-threads', env: 'SECCOMP_AGENT_ENGINE_THREADS', default: 'auto', parse: parseEngineThreads,
    description: 'Threads that receive and answer notifications; each container is served by one (the least loaded when it arrives), so a container that floods the agent delays only those on its thread (auto: one per CPU, at most 4)',
  },
  controlPlaneGraceMs: {
    flag: 'control-plane-grace', env: 'SECCOMP_AGENT_CONTROL_PLANE_GRACE', default: '1s', parse: parseDurationOrOffMs,
    description: 'After a handoff or restart from a data plane that had a control plane, how long new notifications wait for one to reattach instead of getting the default action (0: answer at once)',
  },
  takeover: {
    flag: 'takeover', env: 'SECCOMP_AGENT_TAKEOVER', default: 'false', boolean: true, parse: parseBoolean,
    description: 'Take every container over from the data plane serving these sockets (planned upgrade); start fresh if none does',
  },
  keeperRecovery: {
    flag: 'keeper-recovery', env: 'SECCOMP_AGENT_KEEPER_RECOVERY', default: 'true', boolean: true, parse: parseBoolean,
    description: 'When the seccomp-keeper holding the fd store dies, start a keeper again with its command line; its data plane takes over by handoff (false: only report it, e.g. when a supervisor restarts the keeper itself)',
  },
  metricsAddr: SHARED_OPTIONS.metricsAddr,
  logLevel: SHARED_OPTIONS.logLevel,
} satisfies OptionTable;
