// The fallback for data planes older than MKDIR_SUFFIX_FEATURE (common/mkdir-suffix-feature.ts):
// the path an emulated mkdir under a suffix creates, built here because such a data plane takes
// only the whole path. A data plane that lists the feature gets the caller's path and the suffix
// and builds it with the SuffixedPath its own rules use (native/addon/rule_arguments.hpp): that is
// the one meaning. This twin is held to it case by case: test/testdata/rule-cases.json is run by
// both (test/unit/rule-cases.test.ts, test/cmd/native-tests), so they cannot drift. Delete this file when
// data planes without the feature are no longer supported (docs/upgrades.md).
// Paths are bytes, not text: nothing here decodes them, so two distinct names (`bad\xff\xfe`,
// `bad\xff\xfd`) never become one.

/** Emulate mkdir of `path`, or answer `errno` at once. */
export type MkdirTarget = { readonly path: Buffer } | { readonly errno: number };

const SLASH = 0x2f;
const DOT = 0x2e;
const ENOENT = 2;
const EFAULT = 14;
const ENAMETOOLONG = 36;
const PATH_MAX = 4096;

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

/**
 * SuffixedPath's twin for the caller's path argument as read: not read (null) EFAULT, truncated
 * ENAMETOOLONG, and PATH_MAX long with the suffix ENAMETOOLONG too, as the kernel would say.
 */
export function fallbackMkdirPath(path: Uint8Array | null, truncated: boolean, suffix: Uint8Array): MkdirTarget {
  if (path === null) return { errno: EFAULT };
  if (truncated) return { errno: ENAMETOOLONG };
  const target = mkdirTarget(path, suffix);
  return 'path' in target && target.path.length >= PATH_MAX ? { errno: ENAMETOOLONG } : target;
}
