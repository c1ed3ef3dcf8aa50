// seccompctl's options: flag, environment variable, default and meaning side by side.
import { parseBoolean, parseString, type OptionTable } from '../common/options';
import { AgentError } from '../common/errors';
import { parseAbi, type Abi } from '../common/syscall-abi';
import type { LintRuntime } from '../common/profile/lint';

function parseArch(text: string): Abi {
  const abi = parseAbi(text);
  if (abi === null) throw new AgentError('EBAD_OPTION', `--arch: "${text}" is not x86_64, i386 (x86) or x32`);
  return abi;
}

function parseRuntime(text: string, flag: string): LintRuntime | null {
  if (text === '') return null;
  if (text === 'runc' || text === 'crun') return text;
  throw new AgentError('EBAD_OPTION', `--${flag}: "${text}" is not runc or crun`);
}
import { SHARED_OPTIONS } from '../common/shared-options';

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
  arch: { flag: 'arch', default: 'x86_64', parse: parseArch, description: 'explain: the caller\'s ABI, x86_64, i386 (int $0x80) or x32' },
  timeout: { flag: 'timeout', default: '5', parse: (t: string) => Number(t), description: 'Seconds to wait for the data plane (status, containers, health)' },
  metadata: { flag: 'metadata', default: '', parse: (t: string) => (t === '' ? null : t.replace(/\\n/g, '\n')), description: 'lint: listenerMetadata to check instead of the profile\'s (KEY=VALUE lines; \\n separates lines)' },
  runtime: { flag: 'runtime', default: '', parse: parseRuntime, description: 'lint: the runtime the profile runs under, runc or crun (default: both)' },
  ctlSocket: { flag: 'ctl-socket', env: 'SECCOMP_AGENT_CTL_SOCKET', default: '', parse: parseString, description: 'policies, explain: the control plane\'s socket (default: controlplane.sock beside --grpc-socket)' },
} satisfies OptionTable;
