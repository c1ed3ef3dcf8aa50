// The policy a seccomp profile carries in listenerMetadata, as KEY=VALUE lines read the way
// kinvolk/seccompagent reads them, so profiles written for it work unchanged:
//   - lines split on "\n"; the key is what precedes the first "=", the value all that follows
//     (verbatim); a line without "=" is a key with an empty value; a later line wins;
//   - booleans are on only when the value is exactly "true";
//   - DEFAULT_ACTION is kill-container or freeze-container; any other value is ignored.
// Differences, all in the direction of telling the operator: each ignored or unknown thing is a
// warning (logged once per container by the caller), keys are trimmed, a trailing "\r" is dropped,
// and empty names in MOUNT_OTHER_FS_LIST are skipped rather than allowing the empty type.
import type { AgentError } from '../common/errors';
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
  /** Every key and value as read, for `seccompctl containers` and logs. */
  readonly entries: Readonly<Record<string, string>>;
}

export interface PolicyWarning {
  /** EPOLICY_UNKNOWN_KEY, EPOLICY_UNSUPPORTED_KEY, EPOLICY_BAD_VALUE, EPOLICY_DUPLICATE_KEY, EMKDIR_TEMPLATE */
  readonly code: string;
  readonly key: string;
  readonly message: string;
}

export interface ParsedListenerMetadata {
  readonly policy: ListenerPolicy;
  readonly warnings: readonly PolicyWarning[];
}

const KNOWN_KEYS = new Set(['MKDIR_TMPL', 'DEFAULT_ACTION', 'MOUNT_PROC', 'MOUNT_SYSFS', 'MOUNT_OTHER_FS_LIST', 'MOUNT_NEED_CAP_ADMIN']);
// kinvolk/seccompagent reads these too; this agent does not implement them.
const UNSUPPORTED_KEYS = new Set(['EXEC_PATTERN', 'EXEC_DURATION', 'SIDECARS', 'SIDECARS_DELAY']);
const BOOLEAN_KEYS = new Set(['MOUNT_PROC', 'MOUNT_SYSFS', 'MOUNT_NEED_CAP_ADMIN']);

/** Parses listenerMetadata. Never throws: whatever cannot be used becomes a warning. */
export function parseListenerMetadata(text: string): ParsedListenerMetadata {
  // No prototype: a key such as "__proto__" from a profile is just an unknown key.
  const entries: Record<string, string> = Object.create(null);
  const warnings: PolicyWarning[] = [];
  const warn = (code: string, key: string, message: string) => warnings.push(Object.freeze({ code, key, message }));

  for (const rawLine of text.split('\n')) {
    const line = rawLine.endsWith('\r') ? rawLine.slice(0, -1) : rawLine;
    if (line.trim() === '') continue;
    const eq = line.indexOf('=');
    const key = (eq === -1 ? line : line.slice(0, eq)).trim();
    const value = eq === -1 ? '' : line.slice(eq + 1);
    if (key === '') {
      warn('EPOLICY_BAD_VALUE', '', `listenerMetadata line "${line}" has no key before "=": ignored`);
      continue;
    }
    if (key in entries) {
      warn('EPOLICY_DUPLICATE_KEY', key, `listenerMetadata sets ${key} more than once: the last value, "${value}", is used`);
    }
    entries[key] = value;
  }

  let mkdirTemplate: MkdirTemplate | null = null;
  let defaultAction: ContainerAction | null = null;
  const filesystems: string[] = [];
  for (const [key, value] of Object.entries(entries)) {
    if (UNSUPPORTED_KEYS.has(key)) {
      warn('EPOLICY_UNSUPPORTED_KEY', key, `listenerMetadata key ${key} (a kinvolk/seccompagent feature) is not supported by this agent: ignored`);
    } else if (!KNOWN_KEYS.has(key)) {
      warn('EPOLICY_UNKNOWN_KEY', key, `unknown listenerMetadata key ${key}: ignored (known keys: ${[...KNOWN_KEYS].join(', ')})`);
    } else if (BOOLEAN_KEYS.has(key) && value !== 'true' && value !== 'false') {
      warn('EPOLICY_BAD_VALUE', key, `listenerMetadata ${key}="${value}" is not "true" or "false": taken as false`);
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
    warn('EPOLICY_BAD_VALUE', 'DEFAULT_ACTION', `listenerMetadata DEFAULT_ACTION="${action}" is not kill-container or freeze-container: ignored`);
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

  const policy: ListenerPolicy = Object.freeze({
    mkdirTemplate,
    defaultAction,
    mount: filesystems.length === 0 ? null : Object.freeze({ filesystems: Object.freeze(filesystems), needCapAdmin }),
    entries: Object.freeze(entries),
  });
  return Object.freeze({ policy, warnings: Object.freeze(warnings) });
}
