// Where an emulated mkdir under MKDIR_TMPL goes: the path the container gave with the suffix
// appended to its last component, byte for byte. Paths are bytes, not text: nothing here decodes
// them, so two distinct names (`bad\xff\xfe`, `bad\xff\xfd`) never become one.
import type { Decision, Notification } from '../../../proto/gen/seccompagent/v1/dataplane';

/** Emulate mkdir of `path`, or answer `errno` at once. */
export type MkdirTarget = { readonly path: Buffer } | { readonly errno: number };

const SLASH = 0x2f;
const DOT = 0x2e;
const ENOENT = 2;

/** The last component of `path` with trailing slashes dropped, as [start, end) offsets. */
function lastComponent(path: Uint8Array): { start: number; end: number } {
  let end = path.length;
  while (end > 0 && path[end - 1] === SLASH) end--;
  let start = end;
  while (start > 0 && path[start - 1] !== SLASH) start--;
  return { start, end };
}

/** "." and "..": path elements, not names a directory can be created under. */
function isDotElement(path: Uint8Array, start: number, end: number): boolean {
  const length = end - start;
  return (length === 1 || length === 2) && path[start] === DOT && path[end - 1] === DOT;
}

/**
 * `/tmp/a/` + `-ns-pod` -> `/tmp/a-ns-pod`. A path whose last component is not a plain name gets
 * no suffix and goes as it is: `.`, `..`, `/tmp/.`, `a/..`, `/`. The emulation then answers what
 * the kernel answers for it without creating anything: EEXIST once the parent resolves, else the
 * walk's own error (ENOENT for `missing/.`, ENOTDIR for `file/.`). An empty path is ENOENT, as
 * the kernel says, without emulating.
 */
export function mkdirTarget(path: Uint8Array, suffix: Uint8Array): MkdirTarget {
  if (path.length === 0) return { errno: ENOENT };
  const { start, end } = lastComponent(path);
  if (start === end || isDotElement(path, start, end)) return { path: Buffer.from(path) };
  return { path: Buffer.concat([path.subarray(0, end), suffix]) };
}

const ENAMETOOLONG = 36;
const EFAULT = 14;
/** Where mkdir and mkdirat keep their path and mode. */
const MKDIR_ARGS: Record<string, { path: number; mode: number }> = {
  mkdir: { path: 0, mode: 1 },
  mkdirat: { path: 1, mode: 2 },
};

/**
 * The decision for a mkdir/mkdirat under a suffix rule: emulated with the suffixed path, or an
 * errno at once (a path not read: EFAULT; truncated: ENAMETOOLONG; empty: ENOENT). null for other
 * syscalls. Shared by listenerMetadata's MKDIR_TMPL and the policy resources' mkdir action.
 */
export function suffixedMkdir(n: Notification, suffix: string): Decision['action'] | null {
  const at = MKDIR_ARGS[n.syscall];
  if (!at) return null;
  const path = n.stringArgs.find((s) => s.index === at.path);
  if (!path || path.truncated) return { $case: 'error', error: { errno: path ? ENAMETOOLONG : EFAULT } };
  const target = mkdirTarget(path.raw ?? Buffer.from(path.value, 'utf8'), Buffer.from(suffix, 'utf8'));
  if ('errno' in target) return { $case: 'error', error: { errno: target.errno } };
  const mode = Number((n.args[at.mode] ?? 0o777n) & 0o7777n);
  return { $case: 'mkdir', mkdir: { path: target.path.toString('utf8'), mode, pathBytes: target.path } };
}
