// The control plane's reading of compiled rules (proto/seccompagent/v1/policy.proto): the same
// rules the data plane answers from natively, read the same way (native/addon/rule_set.cpp
// MatchRule): the first rule whose syscalls, argument comparisons and paths all hold answers.
// So a policy has one meaning, whichever plane decides: the control plane matches the rules it
// compiles and pushes (compiler.ts), it does not read listenerMetadata a second time.
// test/testdata/rule-cases.json is run by both matchers (test/unit/rule-cases.test.ts and
// test/cmd/native-tests), so they cannot drift.
// Synchronous and allocation-light: it runs for every notification the control plane decides.
import { emulatedCall } from '../../common/emulations';
import type { Decision, Notification } from '../../proto/gen/seccompagent/v1/dataplane';
import { ArgOp, PathOp, type ArgMatcher, type PathMatcher, type Rule } from '../../proto/gen/seccompagent/v1/policy';
import { fallbackMkdirPath } from './mkdir-path';

export type Action = NonNullable<Decision['action']>;
type StringArg = Notification['stringArgs'][number];

/** What the attached data plane takes beyond the oldest decisions (its Welcome says; set on each attach). */
export interface DataplaneForms {
  /** MKDIR_SUFFIX_FEATURE: a mkdir under a suffix goes as the caller's path and the suffix, not the whole path. */
  mkdirSuffix: boolean;
}

/** The forms every data plane takes. */
export const OLDEST_FORMS: Readonly<DataplaneForms> = Object.freeze({ mkdirSuffix: false });

const EFAULT = 14;
const EINVAL = 22;
const ENAMETOOLONG = 36;
/** mount(source, target, fstype, flags, data): where its arguments are, in every ABI. */
export const MOUNT_ARGS = { source: 0, target: 1, fstype: 2, flags: 3, data: 4 } as const;
const NO_BYTES = Buffer.alloc(0);

/** The string argument at `index` as the data plane read it (the first one, as the native matcher takes). */
export function stringArg(n: Notification, index: number): StringArg | null {
  return n.stringArgs.find((s) => s.index === index) ?? null;
}

/** The argument's exact bytes; from a data plane older than `raw`, its text as UTF-8. */
export function bytesOf(arg: StringArg | null): Buffer {
  if (!arg) return NO_BYTES;
  return arg.raw ?? Buffer.from(arg.value, 'utf8');
}

function argHolds(m: ArgMatcher, arg: bigint): boolean {
  switch (m.op) {
    case ArgOp.ARG_OP_EQ: return arg === m.value;
    case ArgOp.ARG_OP_NE: return arg !== m.value;
    case ArgOp.ARG_OP_LT: return arg < m.value;
    case ArgOp.ARG_OP_LE: return arg <= m.value;
    case ArgOp.ARG_OP_GT: return arg > m.value;
    case ArgOp.ARG_OP_GE: return arg >= m.value;
    case ArgOp.ARG_OP_MASKED_EQ: return (arg & m.value) === m.valueTwo;
    default: return false;
  }
}

/** A path that was not read (or only in part) never matches: a rule about a path must not answer for a path nobody saw whole. */
function pathHolds(m: PathMatcher, n: Notification): boolean {
  const arg = stringArg(n, m.index);
  if (!arg || arg.truncated) return false;
  const bytes = bytesOf(arg);
  if (m.op === PathOp.PATH_OP_EQUAL) return bytes.equals(m.value);
  if (m.op === PathOp.PATH_OP_PREFIX) return bytes.length >= m.value.length && bytes.subarray(0, m.value.length).equals(m.value);
  return false;
}

function ruleMatches(rule: Rule, n: Notification): boolean {
  // The data plane names each ABI's call by its name (i386's 39 is "mkdir"), as the native matcher
  // maps each ABI's number to the x86_64 one of the same name.
  if (rule.syscalls.length > 0 && !rule.syscalls.includes(n.syscall)) return false;
  for (const m of rule.args) {
    if (!argHolds(m, n.args[m.index] ?? 0n)) return false;
  }
  for (const m of rule.paths) {
    if (!pathHolds(m, n)) return false;
  }
  return true;
}

/** Index of the first rule from `from` on that matches `n`, or -1 (MatchRule). */
export function matchRule(rules: readonly Rule[], n: Notification, from = 0): number {
  for (let i = from; i < rules.length; i++) {
    if (ruleMatches(rules[i], n)) return i;
  }
  return -1;
}

/**
 * An emulated mkdir of the caller's path with `suffix` on its last component: to a data plane
 * that takes the suffix, its path as read and the suffix (it builds the path, or answers the
 * errno, as its own rules do); to an older one, the whole path (or the errno) built here by the
 * fallback. null when `n` is no call the mkdir emulation answers.
 */
export function mkdirDecision(n: Notification, suffix: Uint8Array, forms: DataplaneForms): Action | null {
  const call = emulatedCall('mkdir', n.syscall);
  if (!call) return null;
  const arg = stringArg(n, call.path);
  const mode = Number((n.args[call.mode] ?? 0o777n) & 0o7777n);
  const path = arg ? bytesOf(arg) : null;
  const truncated = arg?.truncated ?? false;
  if (forms.mkdirSuffix) {
    return { $case: 'mkdir', mkdir: { path: '', mode, suffixed: { path: path ?? undefined, truncated, suffix: Buffer.from(suffix) } } };
  }
  const target = fallbackMkdirPath(path, truncated, suffix);
  if ('errno' in target) return { $case: 'error', error: { errno: target.errno } };
  return { $case: 'mkdir', mkdir: { path: target.path.toString('utf8'), mode, pathBytes: target.path } };
}

/**
 * An emulated mount as the caller asked: source, target, fstype and data as bytes (the strings
 * beside them only their lossy reading, for older data planes), or the errno the data plane's
 * rules answer at once (native/addon/rule_arguments.hpp MountFromPaths): no target or type read
 * EFAULT, a truncated target ENAMETOOLONG, a truncated source, type or data EINVAL (a cut option
 * string is not what the caller meant).
 */
export function mountDecision(n: Notification, requireCapSysAdmin: boolean): Action {
  const sourceArg = stringArg(n, MOUNT_ARGS.source);
  const targetArg = stringArg(n, MOUNT_ARGS.target);
  const fstypeArg = stringArg(n, MOUNT_ARGS.fstype);
  const dataArg = stringArg(n, MOUNT_ARGS.data);
  const refused = !targetArg || !fstypeArg ? EFAULT
    : targetArg.truncated ? ENAMETOOLONG
    : sourceArg?.truncated || fstypeArg.truncated || dataArg?.truncated ? EINVAL
    : 0;
  if (refused !== 0) return { $case: 'error', error: { errno: refused } };
  const source = bytesOf(sourceArg);
  const target = bytesOf(targetArg);
  const fstype = bytesOf(fstypeArg);
  const data = bytesOf(dataArg);
  return {
    $case: 'mount',
    mount: {
      source: source.toString('utf8'),
      target: target.toString('utf8'),
      fstype: fstype.toString('utf8'),
      flags: n.args[MOUNT_ARGS.flags] ?? 0n,
      data: data.toString('utf8'),
      requireCapSysAdmin,
      sourceBytes: source,
      targetBytes: target,
      fstypeBytes: fstype,
      dataBytes: data,
    },
  };
}

/**
 * The decision a matched rule gives `n`, as the data plane would answer it natively. null: an
 * ask rule (the control plane's own deciders answer: CEL, holds), or a rule whose emulation does
 * not answer this syscall.
 */
export function ruleDecision(rule: Rule, n: Notification, forms: DataplaneForms): Action | null {
  const action = rule.action?.action;
  switch (action?.$case) {
    case 'continue':
      return { $case: 'continue', continue: {} };
    case 'error':
      return { $case: 'error', error: { errno: action.error.errno } };
    case 'value':
      return { $case: 'value', value: { value: action.value.value } };
    case 'mkdir':
      return mkdirDecision(n, action.mkdir.suffix, forms);
    case 'mount':
      return mountDecision(n, action.mount.requireCapSysAdmin);
    case 'kill':
      return { $case: 'kill', kill: { signal: 0 } };
    case 'freeze':
      return { $case: 'freeze', freeze: { errno: action.freeze.errno } };
    default:
      return null;
  }
}
