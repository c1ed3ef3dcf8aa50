// Translation between the API's decisions and answers and the native engine's: which actions the
// data plane offers, how each is checked, and what an answer reports.
import { answerKindOf } from '../common/answer-labels';
import { AnswerKind, type Decision, type MkdirSuffix } from '../proto/gen/seccompagent/v1/dataplane';
import { EMULATION_FEATURES, emulationNamed, type PathCallName } from '../common/emulations';
import { POLICY_FEATURE } from '../common/policy-feature';
import type { AnsweredEvent, NativeDecision, SuffixedPath } from './native';

const EPERM = 1;
const SIGKILL = 9;

/** Features this data plane offers to control planes (Welcome.features). */
export const DATAPLANE_FEATURES = [
  'decision.continue', 'decision.error', 'decision.value', ...EMULATION_FEATURES, POLICY_FEATURE,
];

/** A path-like field: its `*_bytes` field exactly when set, else its (older, lossy) string field as UTF-8. */
function exactBytes(bytes: Uint8Array | undefined, text: string): Uint8Array {
  return bytes ?? Buffer.from(text, 'utf8');
}

function validErrno(errno: number): boolean {
  return Number.isInteger(errno) && errno > 0 && errno < 4096;
}

/**
 * The native form of a decision, or the reason it cannot be applied. `initPid` is the
 * container's init as the runtime reported it (for kill). `suffixedPath` (the addon's) builds
 * the path of a mkdir that names a suffix (MKDIR_SUFFIX_FEATURE); a refusal it gives (EFAULT,
 * ENAMETOOLONG, ENOENT) is the caller's answer, as when the engine's own rules decide.
 */
export function toNativeDecision(decision: Decision, initPid: number, suffixedPath?: SuffixedPath): NativeDecision | string {
  const action = decision.action;
  if (action === undefined) return 'the decision has no action';
  const row = emulationNamed(action.$case);
  if (row?.shape === 'path') {
    // mkdir, and every emulation of its shape (common/emulations.ts): a path and a mode.
    const m = (action as unknown as Record<string, { path: string; pathBytes?: Uint8Array; mode: number; suffixed?: MkdirSuffix }>)[action.$case];
    let path = exactBytes(m.pathBytes, m.path);
    if (m.suffixed) {
      if (!suffixedPath) return `${row.name} with a suffix is not applied here`;
      const built = suffixedPath(m.suffixed.path ?? null, m.suffixed.truncated, m.suffixed.suffix);
      if ('invalid' in built) return built.invalid;
      if ('errno' in built) return { kind: 'error', errno: built.errno };
      path = built.path;
    }
    if (path.length === 0 || path.includes(0)) return `${row.name} needs a path without NUL bytes`;
    return { kind: row.name as PathCallName, path, mode: m.mode & 0o7777 };
  }
  switch (action.$case) {
    case 'continue':
      return { kind: 'continue' };
    case 'error':
      return validErrno(action.error.errno) ? { kind: 'error', errno: action.error.errno } : `errno ${action.error.errno} is not between 1 and 4095`;
    case 'value':
      return { kind: 'value', value: action.value.value };
    case 'mount': {
      const m = action.mount;
      const [source, target, fstype, data] = [
        exactBytes(m.sourceBytes, m.source), exactBytes(m.targetBytes, m.target), exactBytes(m.fstypeBytes, m.fstype), exactBytes(m.dataBytes, m.data),
      ];
      if (target.length === 0 || fstype.length === 0 || [source, target, fstype, data].some((b) => b.includes(0))) {
        return 'mount needs a target, a filesystem type, and strings without NUL bytes';
      }
      return { kind: 'mount', source, target, fstype, flags: m.flags, data, requireCapSysAdmin: m.requireCapSysAdmin };
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
  return `the action ${action.$case} is not one this data plane performs`;
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
