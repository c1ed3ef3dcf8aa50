// Translation between the API's decisions and answers and the native engine's: which actions the
// data plane offers, how each is checked, and what an answer reports.
import { answerKindOf } from '../common/answer-labels';
import { AnswerKind, type Decision } from '../proto/gen/seccompagent/v1/dataplane';
import { POLICY_FEATURE } from '../common/policy-feature';
import type { AnsweredEvent, NativeDecision } from './native';

const EPERM = 1;
const SIGKILL = 9;

/** Features this data plane offers to control planes (Welcome.features). */
export const DATAPLANE_FEATURES = [
  'decision.continue', 'decision.error', 'decision.value',
  'decision.mkdir', 'decision.mount', 'decision.kill', 'decision.freeze', POLICY_FEATURE,
];

function validErrno(errno: number): boolean {
  return Number.isInteger(errno) && errno > 0 && errno < 4096;
}

/**
 * The native form of a decision, or the reason it cannot be applied. `initPid` is the
 * container's init as the runtime reported it (for kill).
 */
export function toNativeDecision(decision: Decision, initPid: number): NativeDecision | string {
  const action = decision.action;
  if (action === undefined) return 'the decision has no action';
  switch (action.$case) {
    case 'continue':
      return { kind: 'continue' };
    case 'error':
      return validErrno(action.error.errno) ? { kind: 'error', errno: action.error.errno } : `errno ${action.error.errno} is not between 1 and 4095`;
    case 'value':
      return { kind: 'value', value: action.value.value };
    case 'mkdir':
      if (action.mkdir.path === '' || action.mkdir.path.includes('\0')) return 'mkdir needs a path without NUL bytes';
      return { kind: 'mkdir', path: action.mkdir.path, mode: action.mkdir.mode & 0o7777 };
    case 'mount': {
      const m = action.mount;
      if (m.target === '' || [m.source, m.target, m.fstype, m.data].some((s) => s.includes('\0'))) return 'mount needs a target and strings without NUL bytes';
      return { kind: 'mount', source: m.source, target: m.target, fstype: m.fstype, flags: m.flags, data: m.data, requireCapSysAdmin: m.requireCapSysAdmin };
    }
    case 'kill': {
      const signal = action.kill.signal === 0 ? SIGKILL : action.kill.signal;
      if (signal < 1 || signal > 64) return `signal ${action.kill.signal} is not between 1 and 64`;
      if (initPid <= 0) return 'the container has no init pid to kill';
      return { kind: 'kill', signal, initPid, errno: EPERM };
    }
    case 'freeze': {
      const errno = action.freeze.errno === 0 ? EPERM : action.freeze.errno;
      return validErrno(errno) ? { kind: 'freeze', errno } : `errno ${action.freeze.errno} is not between 1 and 4095`;
    }
  }
}

/** What an answer did, as the API reports it. */
export interface AnswerOutcome {
  kind: AnswerKind;
  errno: number;
  value: bigint;
}

export function outcomeOf(action: NativeDecision | AnsweredEvent['action'], gone: boolean): AnswerOutcome {
  if (gone) return { kind: AnswerKind.ANSWER_KIND_TARGET_GONE, errno: 0, value: 0n };
  const errno = 'errno' in action ? action.errno : 0;
  const value = 'value' in action && typeof action.value === 'bigint' ? action.value : 0n;
  return { kind: answerKindOf(action.kind), errno, value };
}
