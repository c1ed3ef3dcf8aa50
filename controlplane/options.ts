// The control plane's options: flag, environment variable, default and meaning side by side.
import * as os from 'node:os';
import { parseDefaultAction } from '../common/default-action';
import { parseBoolean, parseDurationMs, parseDurationOrOffMs, parsePositiveInteger, parseString, type OptionTable } from '../common/options';
import { SHARED_OPTIONS } from '../common/shared-options';
import { DEFAULT_CEL_COST_LIMIT } from './policy/resources/cel-condition';

export const CONTROLPLANE_OPTIONS = {
  grpcSocket: SHARED_OPTIONS.grpcSocket,
  controlSocket: SHARED_OPTIONS.controlSocket,
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
  metricsAddr: SHARED_OPTIONS.metricsAddr,
  logLevel: SHARED_OPTIONS.logLevel,
  resyncPeriodMs: {
    flag: 'resync-period', env: 'SECCOMP_AGENT_RESYNC_PERIOD', default: '5m', parse: parseDurationMs,
    description: 'How often the pod cache lists this node\'s pods again (repairs a missed watch event)',
  },
  reconnectMaxMs: {
    flag: 'reconnect-max', env: 'SECCOMP_AGENT_RECONNECT_MAX', default: '10s', parse: parseDurationMs,
    description: 'Longest wait between two attempts to reach the data plane or the API server',
  },
  busyPollMs: SHARED_OPTIONS.busyPollMs,
  takeover: {
    flag: 'takeover', env: 'SECCOMP_AGENT_TAKEOVER', default: 'false', boolean: true, parse: parseBoolean,
    description: 'Replace the control plane attached now (planned upgrade: no notification is left to the default action)',
  },
  resumeGraceMs: {
    flag: 'resume-grace', env: 'SECCOMP_AGENT_RESUME_GRACE', default: '30s', parse: parseDurationOrOffMs,
    description: 'After handing over to a successor (its --takeover), how long to watch it: if it detaches within this time and no control plane is attached, attach again and decide instead of idling (0: idle at once)',
  },
  fastPath: {
    flag: 'fast-path', env: 'SECCOMP_AGENT_FAST_PATH', default: 'true', boolean: true, parse: parseBoolean,
    description: 'Push each container\'s compiled policy to the data plane, which answers from it natively and keeps it while this process is down (false: every notification is decided here, as before policy.v1)',
  },
  stateDir: {
    flag: 'state-dir', env: 'SECCOMP_AGENT_STATE_DIR', default: '/var/lib/seccomp-agent', parse: parseString,
    description: 'Directory of the node checkpoint (last synced pods and policies; the DaemonSet\'s hostPath); empty: none',
  },
  ctlSocket: {
    flag: 'ctl-socket', env: 'SECCOMP_AGENT_CTL_SOCKET', default: '', parse: parseString,
    description: 'Unix socket of the read-only view seccompctl policies and explain read (empty: controlplane.sock beside --grpc-socket; "off": none)',
  },
  celCostLimit: {
    flag: 'cel-cost-limit', env: 'SECCOMP_AGENT_CEL_COST_LIMIT', default: String(DEFAULT_CEL_COST_LIMIT), parse: parsePositiveInteger,
    description: 'Worst-case cost one evaluation of a policy\'s when may have (a when above it is refused: Ready=False)',
  },
  decisionBudgetMs: {
    flag: 'decision-budget', env: 'SECCOMP_AGENT_DECISION_BUDGET', default: '1s', parse: parseDurationMs,
    description: 'Per notification, from its arrival: a policy\'s when not evaluated by then gives way to its rule\'s failurePolicy (keep it below the data plane\'s --decision-timeout)',
  },
  statusPeriodMs: {
    flag: 'status-period', env: 'SECCOMP_AGENT_STATUS_PERIOD', default: '10s', parse: parseDurationMs,
    description: 'How often this node\'s container counts in the policies\' status are brought up to date',
  },
  falcoSocket: {
    flag: 'falco-socket', env: 'SECCOMP_AGENT_FALCO_SOCKET', default: '/run/seccomp-agent-falco-plugin.sock', parse: parseString,
    description: 'Unix socket of kinvolk\'s Falco plugin, for containers whose listenerMetadata says MIDDLEWARE=falco',
  },
  falcoQueue: {
    flag: 'falco-queue', env: 'SECCOMP_AGENT_FALCO_QUEUE', default: '1024', parse: parsePositiveInteger,
    description: 'MIDDLEWARE=falco events waiting for the plugin, at most (past it they are dropped and counted; answers never wait)',
  },
} satisfies OptionTable;

export type ControlPlaneOptions = {
  readonly [K in keyof typeof CONTROLPLANE_OPTIONS]: ReturnType<(typeof CONTROLPLANE_OPTIONS)[K]['parse']>;
};

