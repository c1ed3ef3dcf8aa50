// Options both planes (and seccompctl) have, spelled the same way: one row each.
import { AgentError } from './errors';
import { LOG_LEVELS } from './logger';
import * as path from 'node:path';
import { parseChoice, parseDurationOrOffMs, parseString, type OptionTable } from './options';

export const DEFAULT_GRPC_SOCKET = '/run/seccomp-agent/dataplane.sock';
/** The data plane's default listener socket: the listenerPath existing profiles name. */
export const DEFAULT_LISTENER_SOCKET = '/run/seccomp-agent.socket';
/**
 * The listener the shipped DaemonSet and systemd units serve beside the default for the Security
 * Profiles Operator, which accepts a listenerPath only under its folder (SPO_LISTENER_PATH).
 */
export const SPO_LISTENER_SOCKET = '/var/run/security-profiles-operator/seccomp-agent.sock';
/** Every listener path the shipped deploy/ serves: what `seccompctl lint` accepts by default. */
export const SHIPPED_LISTENER_SOCKETS: readonly string[] = Object.freeze([DEFAULT_LISTENER_SOCKET, SPO_LISTENER_SOCKET]);
/**
 * The listenerPath a current Security Profiles Operator accepts (v1 and v1beta1 since 2026-06,
 * PR #3239); test/testdata/spo-listener-path-pattern.txt keeps SPO's text, a test compares.
 */
export const SPO_LISTENER_PATH_PATTERN = '^/var/run/security-profiles-operator/[a-zA-Z0-9_\\-\\.]+$';
export const SPO_LISTENER_PATH = new RegExp(SPO_LISTENER_PATH_PATTERN);
/** The control socket's file name: beside the observer (gRPC) socket unless --control-socket says otherwise. */
export const CONTROL_SOCKET_NAME = 'control.sock';

/**
 * The control socket (Attach: deciding, taking over) for a --control-socket value: "" means
 * control.sock beside --grpc-socket, so both planes and seccompctl agree with no flag.
 */
export function controlSocketPath(controlSocket: string, grpcSocket: string): string {
  return controlSocket === '' ? path.join(path.dirname(grpcSocket), CONTROL_SOCKET_NAME) : controlSocket;
}

/** Optional "HOST:PORT" for Prometheus metrics; "" turns them off. */
export function parseListenAddress(text: string, flag: string): { host: string; port: number } | null {
  if (text === '') return null;
  const match = /^(.*):(\d+)$/.exec(text);
  const port = match ? Number(match[2]) : NaN;
  if (!match || port > 65535) throw new AgentError('EBAD_OPTION', `--${flag}: "${text}" is not HOST:PORT (127.0.0.1:9464)`);
  return { host: match[1] === '' ? '127.0.0.1' : match[1], port };
}

export const SHARED_OPTIONS = {
  grpcSocket: {
    flag: 'grpc-socket', env: 'SECCOMP_AGENT_GRPC_SOCKET', default: DEFAULT_GRPC_SOCKET, parse: parseString,
    description: 'Observer socket of the gRPC API: Watch, ListContainers, GetStatus, health, reflection (seccompctl, grpcurl); Attach is refused here',
  },
  controlSocket: {
    flag: 'control-socket', env: 'SECCOMP_AGENT_CONTROL_SOCKET', default: '', parse: parseString,
    description: 'Control socket of the gRPC API: Attach (deciding, taking over) and everything the observer socket serves; root only (0600) unless the data plane has --control-socket-group (empty: control.sock beside --grpc-socket)',
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
    description: 'While decisions are in flight between the planes, poll this long after the last one instead of sleeping: saves a wake-up per decision, costs CPU only under load; the emulation helpers poll as long between requests (0: off)',
  },
} satisfies OptionTable;
