// seccompctl's options: flag, environment variable, default and meaning side by side.
import { parseBoolean, parseString, type OptionTable } from '../../common/options';
import { SHARED_OPTIONS } from '../../common/shared-options';

// Every command observes, so all of them use the observer socket (--grpc-socket), which the
// socket's group may be given; only `health --control` asks the control socket (the one a control
// plane attaches on), to prove the caller can reach it.
export const CTL_OPTIONS = {
  grpcSocket: SHARED_OPTIONS.grpcSocket,
  controlSocket: SHARED_OPTIONS.controlSocket,
  control: { flag: 'control', default: 'false', boolean: true, parse: parseBoolean, description: 'health: ask the control socket (what a control plane needs to reach) instead of the observer socket' },
  json: { flag: 'json', default: 'false', boolean: true, parse: parseBoolean, description: 'Machine-readable output (one JSON object per line for watch)' },
  container: { flag: 'container', default: '', parse: parseString, description: 'watch: only this container id' },
  syscall: { flag: 'syscall', default: '', parse: parseString, description: 'watch: only this syscall name' },
  timeout: { flag: 'timeout', default: '5', parse: (t: string) => Number(t), description: 'Seconds to wait for the data plane (status, containers, health)' },
  ctlSocket: { flag: 'ctl-socket', env: 'SECCOMP_AGENT_CTL_SOCKET', default: '', parse: parseString, description: 'policies, explain: the control plane\'s socket (default: controlplane.sock beside --grpc-socket)' },
} satisfies OptionTable;
