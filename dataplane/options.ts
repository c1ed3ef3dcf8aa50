// The data plane's options: flag, environment variable, default and meaning side by side.
import * as path from 'node:path';
import { AgentError, errnoName, parseErrno } from '../common/errors';
import { LOG_LEVELS } from '../common/logger';
import { parseBoolean, parseChoice, parseDurationMs, parseDurationOrOffMs, parseString, type OptionTable } from '../common/options';
import type { NativeDefaultAction } from './native';

export const DEFAULT_LISTENER_SOCKET = '/run/seccomp-agent.socket';
export const DEFAULT_GRPC_SOCKET = '/run/seccomp-agent/dataplane.sock';

/** The decision channel lives beside the gRPC socket (same directory, same mode and group). */
export function channelSocketPath(grpcSocket: string): string {
  return path.join(path.dirname(grpcSocket), 'decisions.sock');
}

/** The handoff socket a successor (--takeover) connects to: beside the gRPC socket. */
export function handoffSocketPath(grpcSocket: string): string {
  return path.join(path.dirname(grpcSocket), 'handoff.sock');
}

/** "continue", "errno:EPERM", "error:EACCES", "errno:13". */
export function parseDefaultAction(text: string, flag: string): NativeDefaultAction {
  if (text === 'continue') return { kind: 'continue' };
  const match = /^(?:errno|error):(.+)$/.exec(text);
  if (!match) {
    throw new AgentError('EBAD_OPTION', `--${flag}: "${text}" is not an action: use continue or errno:NAME (errno:EPERM)`);
  }
  return { kind: 'error', errno: parseErrno(match[1]) };
}

/** "0600", "660": an octal file mode for the sockets. */
export function parseSocketMode(text: string, flag: string): number {
  if (!/^0?[0-7]{3}$/.test(text)) throw new AgentError('EBAD_OPTION', `--${flag}: "${text}" is not an octal mode such as 0600`);
  return parseInt(text, 8);
}

/** Optional "HOST:PORT" for Prometheus metrics; "" turns them off. */
export function parseListenAddress(text: string, flag: string): { host: string; port: number } | null {
  if (text === '') return null;
  const match = /^(.*):(\d+)$/.exec(text);
  const port = match ? Number(match[2]) : NaN;
  if (!match || port > 65535) throw new AgentError('EBAD_OPTION', `--${flag}: "${text}" is not HOST:PORT (127.0.0.1:9464)`);
  return { host: match[1] === '' ? '127.0.0.1' : match[1], port };
}

/** Optional group name or gid owning the sockets (mode then usually 0660). */
export function parseGroup(text: string): string | null {
  return text === '' ? null : text;
}

/** The text an operator would type for an action ("continue", "errno:EPERM"), for log lines. */
export function formatDefaultAction(action: NativeDefaultAction): string {
  return action.kind === 'continue' ? 'continue' : `errno:${errnoName(action.errno)}`;
}

/** Options both planes have, spelled the same way. */
export const SHARED_OPTIONS = {
  grpcSocket: {
    flag: 'grpc-socket', env: 'SECCOMP_AGENT_GRPC_SOCKET', default: DEFAULT_GRPC_SOCKET, parse: parseString,
    description: 'Unix socket of the gRPC API (control plane, seccompctl, grpcurl)',
  },
  metricsAddr: {
    flag: 'metrics-addr', env: 'SECCOMP_AGENT_METRICS_ADDR', default: '', parse: parseListenAddress,
    description: 'HOST:PORT for Prometheus /metrics (off when empty)',
  },
  logLevel: {
    flag: 'log-level', env: 'SECCOMP_AGENT_LOG_LEVEL', default: 'info', parse: parseChoice(LOG_LEVELS),
    description: 'Log level',
  },
  busyPollMs: {
    flag: 'busy-poll', env: 'SECCOMP_AGENT_BUSY_POLL', default: '200us', parse: parseDurationOrOffMs,
    description: 'While decisions are in flight between the planes, poll this long after the last one instead of sleeping: saves a wake-up per decision, costs CPU only under load (0: off)',
  },
} satisfies OptionTable;

export const DATAPLANE_OPTIONS = {
  listenerSocket: {
    flag: 'listener-socket', env: 'SECCOMP_AGENT_LISTENER_SOCKET', default: DEFAULT_LISTENER_SOCKET, parse: parseString,
    description: 'Unix socket the OCI runtime sends notify fds to (listenerPath of the profiles)',
  },
  grpcSocket: SHARED_OPTIONS.grpcSocket,
  socketMode: {
    flag: 'socket-mode', env: 'SECCOMP_AGENT_SOCKET_MODE', default: '0600', parse: parseSocketMode,
    description: 'File mode of both sockets',
  },
  socketGroup: {
    flag: 'socket-group', env: 'SECCOMP_AGENT_SOCKET_GROUP', default: '', parse: parseGroup,
    description: 'Group owning both sockets (with --socket-mode 0660)',
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
