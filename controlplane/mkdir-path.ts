// Where an emulated mkdir under MKDIR_TMPL goes: the path the container gave with the suffix
// appended to its last component, byte for byte. Paths are bytes, not text: nothing here decodes
// them, so two distinct names (`bad\xff\xfe`, `bad\xff\xfd`) never become one.

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
