// The policy a seccomp profile carries in listenerMetadata, as KEY=VALUE lines read the way
// kinvolk/seccompagent reads them, so profiles written for it work unchanged:
//   - lines split on "\n"; the key is what precedes the first "=", the value all that follows
//     (verbatim); a line without "=" is a key with an empty value; a later line wins;
//   - booleans are on only when the value is exactly "true";
//   - DEFAULT_ACTION is kill-container or freeze-container; any other value is ignored.
// Differences, all in the direction of telling the operator: each ignored or unknown thing is a
// warning (logged once per container by the caller), keys are trimmed, a trailing "\r" is dropped,
// and empty names in MOUNT_OTHER_FS_LIST are skipped rather than allowing the empty type.
// Bounded: a profile is input too. Metadata past METADATA_LIMITS (bytes, lines or keys) is refused
// whole with one EPOLICY_TOO_LARGE warning, checked before anything is split; below them there is
// at most one warning per key (a repeated key or line is counted, not repeated) and values are
// shortened in messages, so nothing a profile says costs more than a few hundred lines of work.
import type { AgentError } from '../errors';
import { parseGoDuration } from './go-duration';
import { parseMkdirTemplate, type MkdirTemplate } from './mkdir-template';

export type ContainerAction = 'kill-container' | 'freeze-container';

export interface MountPolicy {
  /** Filesystem types a container may mount (proc, sysfs, MOUNT_OTHER_FS_LIST). */
  readonly filesystems: readonly string[];
  /** MOUNT_NEED_CAP_ADMIN=true: the caller must hold CAP_SYS_ADMIN in its user namespace. */
  readonly needCapAdmin: boolean;
}

export interface ListenerPolicy {
  /** MKDIR_TMPL, parsed; null when absent or invalid. */
  readonly mkdirTemplate: MkdirTemplate | null;
  /** DEFAULT_ACTION: what every notified syscall without a rule of its own gets; null: continue. */
  readonly defaultAction: ContainerAction | null;
  /** Mounts to emulate; null when no filesystem type is allowed. */
  readonly mount: MountPolicy | null;
  /** EXEC_PATTERN + EXEC_DURATION: an execve of exactly this path is held this long, then continues. */
  readonly exec: { readonly pattern: string; readonly durationMs: number } | null;
  /** SIDECARS + SIDECARS_DELAY: the init execve of a container not named here waits until its start + delay. */
  readonly sidecars: { readonly names: readonly string[]; readonly delayMs: number } | null;
  /** MIDDLEWARE: publish each notification to kinvolk's Falco plugin; observe answers in a histogram. */
  readonly middleware: { readonly falco: boolean; readonly prometheus: boolean };
  /** Every key and value as read, for `seccompctl containers` and logs. */
  readonly entries: Readonly<Record<string, string>>;
}

export interface PolicyWarning {
  /** EPOLICY_TOO_LARGE, EPOLICY_UNKNOWN_KEY, EPOLICY_BAD_VALUE, EPOLICY_DUPLICATE_KEY, EMKDIR_TEMPLATE */
  readonly code: string;
  readonly key: string;
  readonly message: string;
}

export interface ParsedListenerMetadata {
  readonly policy: ListenerPolicy;
  readonly warnings: readonly PolicyWarning[];
}

/** Every listenerMetadata key this agent reads (seccompctl lint suggests the nearest for a misspelling). */
export const KNOWN_KEYS: ReadonlySet<string> = new Set([
  'MKDIR_TMPL', 'DEFAULT_ACTION', 'MOUNT_PROC', 'MOUNT_SYSFS', 'MOUNT_OTHER_FS_LIST', 'MOUNT_NEED_CAP_ADMIN',
  'EXEC_PATTERN', 'EXEC_DURATION', 'SIDECARS', 'SIDECARS_DELAY', 'MIDDLEWARE',
]);
/** Longest EXEC_DURATION and SIDECARS_DELAY: a held execve is a blocked task (hold.v1 grants at most 60 s). */
export const MAX_WAIT_MS = 60_000;
const MIDDLEWARES = ['falco', 'prometheus'] as const;
const BOOLEAN_KEYS = new Set(['MOUNT_PROC', 'MOUNT_SYSFS', 'MOUNT_NEED_CAP_ADMIN']);

/**
 * What this agent reads of a listenerMetadata (kinvolk/seccompagent's own examples are a few
 * lines of under 200 bytes). Past any bound the whole metadata is refused: applying a part could
 * drop a restricting key (MOUNT_NEED_CAP_ADMIN, DEFAULT_ACTION) while keeping a granting one.
 */
export const METADATA_LIMITS = Object.freeze({ bytes: 64 * 1024, lines: 1024, keys: 64 });
/** Longest value quoted in a warning; longer ones are cut (with their length). */
const SHOWN_VALUE = 120;

function shown(value: string): string {
  return value.length <= SHOWN_VALUE ? value : `${value.slice(0, SHOWN_VALUE)}… (${value.length} characters)`;
}

/** Which bound `text` passes, or null; only counts, never splits or copies. */
function pastLimit(text: string): string | null {
  // UTF-8 never has fewer bytes than UTF-16 code units: the length alone refuses most of it.
  if (text.length > METADATA_LIMITS.bytes || Buffer.byteLength(text, 'utf8') > METADATA_LIMITS.bytes) {
    return `larger than ${METADATA_LIMITS.bytes} bytes (${Buffer.byteLength(text, 'utf8')})`;
  }
  let lines = 1;
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) {
    if (++lines > METADATA_LIMITS.lines && at + 1 < text.length) return `longer than ${METADATA_LIMITS.lines} lines`;
  }
  return null;
}

const NO_MIDDLEWARE = Object.freeze({ falco: false, prometheus: false });
const EMPTY_POLICY: ListenerPolicy = Object.freeze({
  mkdirTemplate: null, defaultAction: null, mount: null, exec: null, sidecars: null, middleware: NO_MIDDLEWARE, entries: Object.freeze(Object.create(null)),
});

function refused(why: string): ParsedListenerMetadata {
  const message =
    `listenerMetadata is ${why}, more than this agent reads (${METADATA_LIMITS.bytes} bytes, ${METADATA_LIMITS.lines} lines, ` +
    `${METADATA_LIMITS.keys} keys): the whole metadata is refused and none of its keys applies (no MKDIR_TMPL, DEFAULT_ACTION or MOUNT_*), ` +
    'so this container\'s notified syscalls continue to the kernel as if there were no agent';
  return Object.freeze({ policy: EMPTY_POLICY, warnings: Object.freeze([Object.freeze({ code: 'EPOLICY_TOO_LARGE', key: '', message })]) });
}

/** Parses listenerMetadata. Never throws: whatever cannot be used becomes a warning. */
export function parseListenerMetadata(text: string): ParsedListenerMetadata {
  const tooLarge = pastLimit(text);
  if (tooLarge !== null) return refused(tooLarge);
  // No prototype: a key such as "__proto__" from a profile is just an unknown key.
  const entries: Record<string, string> = Object.create(null);
  const warnings: PolicyWarning[] = [];
  const warn = (code: string, key: string, message: string) => warnings.push(Object.freeze({ code, key, message }));
  const repeats = new Map<string, number>();
  const keyless: string[] = [];
  let keys = 0;

  for (const rawLine of text.split('\n')) {
    const line = rawLine.endsWith('\r') ? rawLine.slice(0, -1) : rawLine;
    if (line.trim() === '') continue;
    const eq = line.indexOf('=');
    const key = (eq === -1 ? line : line.slice(0, eq)).trim();
    const value = eq === -1 ? '' : line.slice(eq + 1);
    if (key === '') {
      keyless.push(line);
      continue;
    }
    if (key in entries) repeats.set(key, (repeats.get(key) ?? 1) + 1);
    else if (++keys > METADATA_LIMITS.keys) return refused(`more than ${METADATA_LIMITS.keys} keys`);
    entries[key] = value;
  }
  if (keyless.length > 0) {
    const more = keyless.length > 1 ? ` (and ${keyless.length - 1} more such lines)` : '';
    warn('EPOLICY_BAD_VALUE', '', `listenerMetadata line "${shown(keyless[0])}" has no key before "="${more}: ignored`);
  }
  for (const [key, times] of repeats) {
    warn('EPOLICY_DUPLICATE_KEY', key, `listenerMetadata sets ${key} ${times} times: the last value, "${shown(entries[key])}", is used`);
  }

  let mkdirTemplate: MkdirTemplate | null = null;
  let defaultAction: ContainerAction | null = null;
  const filesystems: string[] = [];
  for (const [key, value] of Object.entries(entries)) {
    if (!KNOWN_KEYS.has(key)) {
      warn('EPOLICY_UNKNOWN_KEY', key, `unknown listenerMetadata key ${key}: ignored (known keys: ${[...KNOWN_KEYS].join(', ')})`);
    } else if (BOOLEAN_KEYS.has(key) && value !== 'true' && value !== 'false') {
      warn('EPOLICY_BAD_VALUE', key, `listenerMetadata ${key}="${shown(value)}" is not "true" or "false": taken as false`);
    }
  }

  const tmpl = entries.MKDIR_TMPL;
  if (tmpl !== undefined) {
    if (tmpl === '') {
      warn('EPOLICY_BAD_VALUE', 'MKDIR_TMPL', 'listenerMetadata MKDIR_TMPL is empty: mkdir is not rewritten for this container');
    } else {
      try {
        mkdirTemplate = parseMkdirTemplate(tmpl);
      } catch (err) {
        const error = err as AgentError;
        warn(error.code ?? 'EMKDIR_TEMPLATE', 'MKDIR_TMPL', error.message);
      }
    }
  }

  const action = entries.DEFAULT_ACTION;
  if (action === 'kill-container' || action === 'freeze-container') defaultAction = action;
  else if (action !== undefined) {
    warn('EPOLICY_BAD_VALUE', 'DEFAULT_ACTION', `listenerMetadata DEFAULT_ACTION="${shown(action)}" is not kill-container or freeze-container: ignored`);
  }

  if (entries.MOUNT_PROC === 'true') filesystems.push('proc');
  if (entries.MOUNT_SYSFS === 'true') filesystems.push('sysfs');
  if (entries.MOUNT_OTHER_FS_LIST !== undefined) {
    for (const name of entries.MOUNT_OTHER_FS_LIST.split(',')) {
      const fs = name.trim();
      if (fs !== '' && !filesystems.includes(fs)) filesystems.push(fs);
    }
  }
  const needCapAdmin = entries.MOUNT_NEED_CAP_ADMIN === 'true';
  if (needCapAdmin && filesystems.length === 0) {
    warn('EPOLICY_BAD_VALUE', 'MOUNT_NEED_CAP_ADMIN', 'listenerMetadata MOUNT_NEED_CAP_ADMIN=true without any filesystem allowed: no mount is emulated');
  }

  // A Go duration from 0 to MAX_WAIT_MS; null (with a warning) otherwise. Absent: 0, as kinvolk.
  const waitOf = (key: string): number | null => {
    const text = entries[key];
    if (text === undefined) return 0;
    const ms = parseGoDuration(text.trim());
    if (ms === null || ms < 0 || ms > MAX_WAIT_MS) {
      warn('EPOLICY_BAD_VALUE', key, `listenerMetadata ${key}="${shown(text)}" is not a Go duration from 0 to ${MAX_WAIT_MS / 1000}s (e.g. "2s", "500ms"): ignored, nothing waits`);
      return null;
    }
    return ms;
  };
  let exec: ListenerPolicy['exec'] = null;
  if (entries.EXEC_PATTERN !== undefined) {
    const durationMs = waitOf('EXEC_DURATION');
    if (entries.EXEC_PATTERN === '') warn('EPOLICY_BAD_VALUE', 'EXEC_PATTERN', 'listenerMetadata EXEC_PATTERN is empty: no execve is held');
    else if (durationMs !== null) exec = Object.freeze({ pattern: entries.EXEC_PATTERN, durationMs });
  } else if (entries.EXEC_DURATION !== undefined) {
    warn('EPOLICY_BAD_VALUE', 'EXEC_DURATION', 'listenerMetadata EXEC_DURATION without EXEC_PATTERN: ignored');
  }
  let sidecars: ListenerPolicy['sidecars'] = null;
  if (entries.SIDECARS !== undefined) {
    const delayMs = waitOf('SIDECARS_DELAY');
    // kinvolk's form is "a,b"; "[a,b]" is read as the same list.
    const names = entries.SIDECARS.trim().replace(/^\[|\]$/g, '').split(',').map((n) => n.trim()).filter((n) => n !== '');
    if (delayMs !== null) sidecars = Object.freeze({ names: Object.freeze(names), delayMs });
  } else if (entries.SIDECARS_DELAY !== undefined) {
    warn('EPOLICY_BAD_VALUE', 'SIDECARS_DELAY', 'listenerMetadata SIDECARS_DELAY without SIDECARS: ignored');
  }
  const middleware = { falco: false, prometheus: false };
  if (entries.MIDDLEWARE !== undefined) {
    const unknown: string[] = [];
    for (const raw of entries.MIDDLEWARE.split(',')) {
      const name = raw.trim();
      if (name === '') continue;
      if ((MIDDLEWARES as readonly string[]).includes(name)) middleware[name as (typeof MIDDLEWARES)[number]] = true;
      else unknown.push(name);
    }
    if (unknown.length > 0) {
      warn('EPOLICY_BAD_VALUE', 'MIDDLEWARE', `listenerMetadata MIDDLEWARE names ${unknown.map((u) => `"${shown(u)}"`).slice(0, 8).join(', ')}, not ${MIDDLEWARES.join(' or ')}: ignored`);
    }
  }

  const policy: ListenerPolicy = Object.freeze({
    mkdirTemplate,
    defaultAction,
    mount: filesystems.length === 0 ? null : Object.freeze({ filesystems: Object.freeze(filesystems), needCapAdmin }),
    exec,
    sidecars,
    middleware: middleware.falco || middleware.prometheus ? Object.freeze(middleware) : NO_MIDDLEWARE,
    entries: Object.freeze(entries),
  });
  return Object.freeze({ policy, warnings: Object.freeze(warnings) });
}
