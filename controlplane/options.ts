// The control plane's options: flag, environment variable, default and meaning side by side.
import * as os from 'node:os';
import { errnoName } from '../common/errors';
import { LOG_LEVELS } from '../common/logger';
import { parseBoolean, parseChoice, parseDurationMs, parseString, type OptionTable } from '../common/options';
import type { NativeDefaultAction } from '../dataplane/native';
import { DEFAULT_GRPC_SOCKET, parseDefaultAction, parseListenAddress } from '../dataplane/options';

export const CONTROLPLANE_OPTIONS = {
  grpcSocket: {
    flag: 'grpc-socket', env: 'SECCOMP_AGENT_GRPC_SOCKET', default: DEFAULT_GRPC_SOCKET, parse: parseString,
    description: 'Unix socket of the data plane gRPC API to attach to',
  },
  kubeconfig: {
    flag: 'kubeconfig', env: 'KUBECONFIG', default: '', parse: parseString,
    description: 'kubeconfig file for the pod cache (empty: in-cluster service account)',
  },
  nodeName: {
    flag: 'node-name', env: 'NODE_NAME', default: os.hostname(), parse: parseString,
    description: 'This node\'s name: only its pods are cached (spec.nodeName)',
  },
  noKubernetes: {
    flag: 'no-kubernetes', env: 'SECCOMP_AGENT_NO_KUBERNETES', default: 'false', boolean: true, parse: parseBoolean,
    description: 'No API server: identity comes from pod annotations only',
  },
  unresolvedAction: {
    flag: 'unresolved-action', env: 'SECCOMP_AGENT_UNRESOLVED_ACTION', default: 'continue', parse: parseDefaultAction,
    description: 'Answer for calls whose policy needs a pod identity that is not known: continue or errno:NAME',
  },
  metricsAddr: {
    flag: 'metrics-addr', env: 'SECCOMP_AGENT_METRICS_ADDR', default: '', parse: parseListenAddress,
    description: 'HOST:PORT for Prometheus /metrics (off when empty)',
  },
  logLevel: {
    flag: 'log-level', env: 'SECCOMP_AGENT_LOG_LEVEL', default: 'info', parse: parseChoice(LOG_LEVELS),
    description: 'Log level',
  },
  resyncPeriodMs: {
    flag: 'resync-period', env: 'SECCOMP_AGENT_RESYNC_PERIOD', default: '5m', parse: parseDurationMs,
    description: 'How often the pod cache lists this node\'s pods again (repairs a missed watch event)',
  },
  reconnectMaxMs: {
    flag: 'reconnect-max', env: 'SECCOMP_AGENT_RECONNECT_MAX', default: '10s', parse: parseDurationMs,
    description: 'Longest wait between two attempts to reach the data plane or the API server',
  },
  takeover: {
    flag: 'takeover', env: 'SECCOMP_AGENT_TAKEOVER', default: 'false', boolean: true, parse: parseBoolean,
    description: 'Replace the control plane attached now (planned upgrade: no notification is left to the default action)',
  },
} satisfies OptionTable;

export type ControlPlaneOptions = {
  readonly [K in keyof typeof CONTROLPLANE_OPTIONS]: ReturnType<(typeof CONTROLPLANE_OPTIONS)[K]['parse']>;
};

/** The text an operator would type for an action ("continue", "errno:EPERM"), for log lines. */
export function formatAction(action: NativeDefaultAction): string {
  return action.kind === 'continue' ? 'continue' : `errno:${errnoName(action.errno)}`;
}
