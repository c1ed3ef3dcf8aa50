// The profile linter: what in a seccomp profile (OCI JSON, a runtime config.json, or a Security
// Profiles Operator SeccompProfile) will hang, break or quietly weaken the containers that use it
// with this agent. One module for `seccompctl lint` and for the control plane, which logs the
// same findings once per distinct profile when a container arrives (profile-lint-log.ts).
import { nearestWord } from '../options';
import { SHIPPED_LISTENER_SOCKETS, SPO_LISTENER_PATH, SPO_LISTENER_PATH_PATTERN } from '../shared-options';
import { KNOWN_KEYS, parseListenerMetadata, type PolicyWarning } from './listener-metadata';

export type Severity = 'error' | 'warning' | 'info';
export type LintRuntime = 'runc' | 'crun';

export interface LintFinding {
  severity: Severity;
  /** Rule id (LINT_RULES). */
  rule: string;
  /** What was found, naming the syscalls, keys or paths. */
  message: string;
  /** Why it matters. */
  why: string;
  /** What to change. */
  fix: string;
}

/** The seccomp section of a profile, as runtime-spec and SPO's SeccompProfile spell it. */
export interface SeccompSection {
  defaultAction?: string;
  architectures?: string[];
  /** Docker/containerd profiles: archMap instead of architectures. */
  archMap?: Array<{ architecture?: string; subArchitectures?: string[] }>;
  listenerPath?: string;
  listenerMetadata?: string;
  flags?: string[];
  syscalls?: Array<{ names?: string[]; name?: string; action?: string; args?: unknown[] }>;
}

export interface LintOptions {
  /** The runtime the profile runs under; omitted: every runtime measured (the findings name which). */
  runtime?: LintRuntime;
  /**
   * Listener paths served (default: the shipped DaemonSet's and systemd units', SHIPPED_LISTENER_SOCKETS);
   * null: unknown (the data plane could not be asked), so "not served" is not judged.
   */
  servedPaths?: readonly string[] | null;
  /** Replaces the profile's listenerMetadata (seccompctl lint --metadata). */
  metadata?: string;
  /** The profile is an SPO SeccompProfile: its listenerPath must match SPO's pattern too. */
  spo?: boolean;
  /** What each runtime hangs on or refuses (default: RUNTIME_NOTIFY_LIMITS, as measured). */
  limits?: typeof RUNTIME_NOTIFY_LIMITS;
  /** Only listenerMetadata is known (the control plane could not read the container's profile): its own rules only. */
  metadataOnly?: boolean;
}

/**
 * What each runtime does with a profile that notifies one syscall, FOUND BY EXPERIMENT on this
 * project's machines (test/cmd/self-hang-probe: a busybox container per candidate, a data plane
 * answering `continue` on the listener, 5 s timeout, with and without no_new_privs; 112
 * candidates: read, write, close, fcntl, sendmsg, recvmsg, futex, epoll_pwait, openat, mmap,
 * rt_sigprocmask, capset, prctl, setresuid, setgroups, clone, execve, seccomp, pidfd_getfd ...).
 * `hangs`: the start never ends (the runtime makes the syscall before the fd reaches the agent).
 * `refuses`: the runtime refuses the profile and the container does not start.
 * test/e2e/lint-self-hang.test.ts re-checks entries of this table against the installed runtimes.
 */
export const RUNTIME_NOTIFY_LIMITS: Readonly<Record<LintRuntime, { readonly measured: string; readonly hangs: readonly string[]; readonly refuses: Readonly<Record<string, string>> }>> = Object.freeze({
  // runc hands the fd over with pidfd_getfd from its parent (outside the filter); its init only
  // writes the fd number to the parent after the filter is in place, and runc refuses to notify
  // that write. Nothing else hangs, early (no no_new_privs) or late filter alike.
  runc: Object.freeze({
    measured: 'runc 1.1.5 (Debian 12)',
    hangs: Object.freeze([]),
    refuses: Object.freeze({ write: 'runc run failed: unable to init seccomp: SCMP_ACT_NOTIFY cannot be used for the write syscall' }),
  }),
  crun: Object.freeze({
    measured: 'crun 1.8.1 (Debian 12)',
    hangs: Object.freeze([]),
    refuses: Object.freeze({}),
  }),
});

/** Every rule: id, severity, and one line for `seccompctl lint --help` and docs. */
export const LINT_RULES = Object.freeze({
  'self-hang': 'a notified syscall the runtime itself makes before it hands the fd over (the start hangs), or one it refuses to notify (the start fails)',
  'default-notify': 'defaultAction SCMP_ACT_NOTIFY: every syscall, the runtime\'s own included, waits for the agent',
  'compat-arch': 'SCMP_ARCH_X86 or SCMP_ARCH_X32 beside notified names: decided by the same rules (info); a warning when i386 makes a notified call under a name the profile does not notify (chown32, stat64)',
  'notify-overlap': 'a syscall both notified and denied (errno, kill, trap) by another rule',
  'signal-window': 'emulation keys (MKDIR_TMPL, MOUNT_*) without SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, or flags the runtime refuses',
  'listener-path': 'listenerPath missing, not served by this agent, or refused by the Security Profiles Operator',
  'metadata-key': 'a listenerMetadata key this agent does not know (nearest known key suggested)',
  'metadata-value': 'a listenerMetadata value this agent cannot use, or a key whose syscalls the profile does not notify',
  'io-uring-open': 'io_uring_setup/io_uring_enter allowed beside notified file syscalls: io_uring does them without a syscall the filter sees',
} satisfies Record<string, string>);

const NOTIFY = 'SCMP_ACT_NOTIFY';
const DENY_ACTIONS = new Set(['SCMP_ACT_ERRNO', 'SCMP_ACT_KILL', 'SCMP_ACT_KILL_PROCESS', 'SCMP_ACT_KILL_THREAD', 'SCMP_ACT_TRAP']);
const ALLOW_ACTIONS = new Set(['SCMP_ACT_ALLOW', 'SCMP_ACT_LOG']);
const WAIT_KILLABLE = 'SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV';
const COMPAT_ARCHES = ['SCMP_ARCH_X86', 'SCMP_ARCH_X32'];
// x86_64 names whose call i386 programs (glibc, musl) make under another name, in i386's own table:
// a rule for the x86_64 name does not cover these (names are matched as the kernel's tables spell them).
const I386_ALIASES: Readonly<Record<string, readonly string[]>> = {
  stat: ['stat64', 'oldstat'], lstat: ['lstat64', 'oldlstat'], fstat: ['fstat64', 'oldfstat'], newfstatat: ['fstatat64'],
  chown: ['chown32'], lchown: ['lchown32'], fchown: ['fchown32'], truncate: ['truncate64'], ftruncate: ['ftruncate64'],
  fcntl: ['fcntl64'], lseek: ['_llseek'], mmap: ['mmap2'], statfs: ['statfs64'], fstatfs: ['fstatfs64'],
  select: ['_newselect'], sendfile: ['sendfile64'], umount2: ['umount'], getdents: ['getdents64'],
  setuid: ['setuid32'], setgid: ['setgid32'], setreuid: ['setreuid32'], setregid: ['setregid32'],
  setresuid: ['setresuid32'], setresgid: ['setresgid32'], setgroups: ['setgroups32'], setfsuid: ['setfsuid32'], setfsgid: ['setfsgid32'],
};
/** Syscalls io_uring has an opcode for (IORING_OP_*): notified, they are still done through a ring. */
const IO_URING_DOES = new Set([
  'open', 'openat', 'openat2', 'creat', 'close', 'statx', 'stat', 'lstat', 'newfstatat', 'mkdir', 'mkdirat', 'unlink', 'unlinkat', 'rmdir',
  'rename', 'renameat', 'renameat2', 'link', 'linkat', 'symlink', 'symlinkat', 'read', 'write', 'readv', 'writev', 'pread64', 'pwrite64',
  'fsync', 'fdatasync', 'fallocate', 'fadvise64', 'madvise', 'sendmsg', 'recvmsg', 'sendto', 'recvfrom', 'accept', 'accept4', 'connect',
  'socket', 'bind', 'listen', 'setxattr', 'fsetxattr', 'getxattr', 'fgetxattr', 'splice', 'tee', 'ftruncate', 'epoll_ctl', 'shutdown',
]);
const MKDIR_SYSCALLS = ['mkdir', 'mkdirat'];
const MOUNT_KEYS = ['MOUNT_PROC', 'MOUNT_SYSFS', 'MOUNT_OTHER_FS_LIST'];

/** /var/run is /run: the path the kernel binds either way. */
function hostPath(p: string): string {
  return p.replace(/^\/var\/run\//, '/run/');
}

/** Each syscall name with the actions of the rules that name it. */
function actionsByName(section: SeccompSection): Map<string, Set<string>> {
  const byName = new Map<string, Set<string>>();
  // A profile is input: fields of the wrong type count as absent, never as a crash.
  for (const rule of arrayOf(section.syscalls)) {
    if (typeof rule !== 'object' || rule === null) continue;
    const names = [...arrayOf(rule.names), ...(typeof rule.name === 'string' ? [rule.name] : [])].filter((n): n is string => typeof n === 'string');
    for (const name of names) {
      const set = byName.get(name) ?? new Set<string>();
      set.add(typeof rule.action === 'string' ? rule.action : '');
      byName.set(name, set);
    }
  }
  return byName;
}

function arrayOf<T>(value: T[] | undefined): T[] {
  return Array.isArray(value) ? value : [];
}

function architecturesOf(section: SeccompSection): string[] {
  const list: unknown[] = [...arrayOf(section.architectures)];
  for (const entry of arrayOf(section.archMap)) if (typeof entry === 'object' && entry !== null) list.push(entry.architecture, ...arrayOf(entry.subArchitectures));
  return list.filter((a): a is string => typeof a === 'string');
}

const list = (names: readonly string[]) => names.join(', ');

type Add = (severity: Severity, rule: keyof typeof LINT_RULES, message: string, why: string, fix: string) => void;

/** metadata-key and metadata-value from the metadata parser's own warnings (one reading of the metadata). */
function lintMetadataKeys(warnings: readonly PolicyWarning[], add: Add): void {
  for (const warning of warnings) {
    if (warning.code === 'EPOLICY_UNKNOWN_KEY') {
      const near = nearestWord(warning.key, KNOWN_KEYS);
      add('warning', 'metadata-key', `unknown listenerMetadata key ${warning.key}${near ? ` (did you mean ${near}?)` : ''}`,
        'the agent ignores it: the policy it was meant to set does not apply',
        near ? `rename it ${near}` : `remove it; known keys: ${list([...KNOWN_KEYS])}`);
    } else {
      add('warning', 'metadata-value', warning.message, 'the agent reads the metadata as this says, which is not what it asks for', 'correct the line');
    }
  }
}

/** Every finding for one profile, errors first. */
export function lintProfile(section: SeccompSection, options: LintOptions = {}): LintFinding[] {
  const findings: LintFinding[] = [];
  const add: Add = (severity, rule, message, why, fix) => findings.push({ severity, rule, message, why, fix });
  const byName = actionsByName(section);
  const notified = [...byName].filter(([, actions]) => actions.has(NOTIFY)).map(([name]) => name).sort();
  const defaultNotify = section.defaultAction === NOTIFY;
  const notifies = defaultNotify || notified.length > 0;
  const runtimes: LintRuntime[] = options.runtime ? [options.runtime] : ['runc', 'crun'];
  const metadata = options.metadata ?? (typeof section.listenerMetadata === 'string' ? section.listenerMetadata : '');
  const flags = arrayOf(section.flags);

  const parsed = parseListenerMetadata(metadata);
  if (options.metadataOnly) {
    lintMetadataKeys(parsed.warnings, add);
    return findings;
  }
  // self-hang
  for (const runtime of runtimes) {
    const limits = (options.limits ?? RUNTIME_NOTIFY_LIMITS)[runtime];
    const hangs = notified.filter((n) => limits.hangs.includes(n));
    if (hangs.length > 0) {
      add('error', 'self-hang', `${runtime} makes ${list(hangs)} itself after installing the filter and before handing the fd over: the container start hangs (${limits.measured})`,
        'nobody holds the notify fd yet, so nobody can answer; the runtime waits for itself', `do not notify ${list(hangs)}; notify the syscalls of the workload only`);
    }
    const refused = notified.filter((n) => n in limits.refuses);
    if (refused.length > 0) {
      add('error', 'self-hang', `${runtime} refuses to notify ${list(refused)}: the container does not start (${limits.measured}: "${limits.refuses[refused[0]]}")`,
        `${runtime} makes ${list(refused)} itself while handing the fd over, so it refuses the profile rather than hang`, `remove ${list(refused)} from the SCMP_ACT_NOTIFY rules`);
    }
  }
  // default-notify
  if (defaultNotify) {
    add('error', 'default-notify', 'defaultAction is SCMP_ACT_NOTIFY: every syscall the profile does not name is notified',
      'the runtime\'s own syscalls after the filter (runc refuses to notify write) and every syscall of the workload wait for the agent; while none answers, nothing in the container runs',
      'use defaultAction SCMP_ACT_ALLOW (or ERRNO) and list the syscalls to notify in an SCMP_ACT_NOTIFY rule');
  }
  // compat-arch
  const compat = architecturesOf(section).filter((a) => COMPAT_ARCHES.includes(a));
  if (compat.length > 0 && notified.length > 0) {
    const notifiedSet = new Set(notified);
    const missing = compat.includes('SCMP_ARCH_X86')
      ? notified.flatMap((n) => (I386_ALIASES[n] ?? []).filter((a) => !notifiedSet.has(a)).map((a) => `${a} (${n})`))
      : [];
    if (missing.length > 0) {
      add('warning', 'compat-arch', `architectures lists SCMP_ARCH_X86, and i386 programs make notified calls under names the profile does not notify: ${list(missing)}`,
        'the filter matches i386 calls by i386\'s own names, and so does the agent: an i386 program\'s chown is chown32, its stat stat64, and those pass the filter unseen (by the default action) while only the old 16-bit or rarely used numbers are notified',
        `notify ${list(missing.map((m) => m.split(' ')[0]))} too (a rule for the x86_64 name does not cover them; name both), or list SCMP_ARCH_X86_64 only`);
    } else {
      add('info', 'compat-arch', `architectures lists ${list(compat)} beside the notified names ${list(notified)}: their ${compat.includes('SCMP_ARCH_X86') ? 'i386 (int $0x80)' : ''}${compat.length > 1 ? ' and ' : ''}${compat.includes('SCMP_ARCH_X32') ? 'x32' : ''} calls are notified too`,
        'the agent decides them as the x86_64 ones: a rule\'s syscall names cover every ABI (MKDIR_TMPL, mount rules, errno rules, kill-container), CEL sees the ABI\'s own name; i386\'s arguments are 32-bit (the low halves are compared); on a kernel without CONFIG_X86_X32_ABI the kernel fails x32 calls with ENOSYS after the filter, but the agent\'s emulations (MKDIR_TMPL, mount) still perform them',
        'nothing to do; list SCMP_ARCH_X86_64 only if the containers need no 32-bit calls');
    }
  }
  // notify-overlap
  for (const [name, actions] of byName) {
    const denied = [...actions].filter((a) => DENY_ACTIONS.has(a));
    if (actions.has(NOTIFY) && denied.length > 0) {
      add('warning', 'notify-overlap', `${name} is both notified and denied (${list(denied)})`,
        'which rule a call meets depends on the argument filters and libseccomp\'s order: the agent may never see the calls meant for it, or the deny may never apply',
        `keep one action for ${name}, or make the argument filters of the two rules exclusive`);
    }
  }
  // signal-window
  const entries = parsed.policy.entries;
  const emulationKeys = ['MKDIR_TMPL', ...MOUNT_KEYS].filter((k) => k in entries);
  if (emulationKeys.length > 0 && !flags.includes(WAIT_KILLABLE)) {
    const runcOnly = options.runtime === 'runc';
    add(runcOnly ? 'info' : 'warning', 'signal-window', `listenerMetadata ${list(emulationKeys)} asks for emulation, and flags lacks ${WAIT_KILLABLE}`,
      'a signal (Go\'s SIGURG, a timer) that reaches the caller while the agent emulates abandons the call; with SA_RESTART it comes again as a new notification. The agent keeps each emulation exactly-once across that, but the program may see EINTR, and the emulated call waits in an interruptible state',
      runcOnly
        ? `nothing to do under runc 1.1 (it refuses any flags); with crun or runc >= 1.5 add "flags": ["${WAIT_KILLABLE}"]`
        : `add "flags": ["${WAIT_KILLABLE}"] (crun, runc >= 1.5; kernel 5.19+). Debian's runc 1.1 refuses any flags: keep such profiles flag-free there`);
  }
  if (flags.length > 0 && runtimes.includes('runc')) {
    add(options.runtime === 'runc' ? 'error' : 'info', 'signal-window', `flags ${list(flags)}: runc 1.1 refuses any seccomp flags ("seccomp flags are not yet supported by runc")`,
      'under runc before 1.5 a profile with flags does not start', 'drop flags for nodes running runc 1.1, or run those containers with crun');
  }
  // listener-path
  const served = options.servedPaths === undefined ? SHIPPED_LISTENER_SOCKETS : options.servedPaths;
  if (notifies && !section.listenerPath) {
    add('error', 'listener-path', 'the profile notifies but has no listenerPath',
      'the runtime has nowhere to send the notify fd; notified syscalls would wait for nobody, so runtimes refuse the profile',
      `set listenerPath to ${served?.[0] ?? SHIPPED_LISTENER_SOCKETS[0]}`);
  } else if (section.listenerPath) {
    const p = section.listenerPath;
    if (served !== null && !served.some((s) => hostPath(s) === hostPath(p))) {
      add('error', 'listener-path', `listenerPath ${p} is not a socket this agent serves (${list(served)})`,
        'the runtime cannot connect and the container fails to start (or another process gets its syscalls)',
        `use one of ${list(served)}, or start the data plane with --listener-socket ${p}`);
    }
    if (options.spo && !SPO_LISTENER_PATH.test(p)) {
      add('error', 'listener-path', `listenerPath ${p} does not match the Security Profiles Operator's ${SPO_LISTENER_PATH_PATTERN}`,
        'a current operator (v1 and v1beta1 since 2026-06) refuses the SeccompProfile', `use ${SHIPPED_LISTENER_SOCKETS[1]}, which the DaemonSet and the systemd units serve`);
    }
    if (!notifies) {
      add('info', 'listener-path', `listenerPath ${p} is set but no rule says SCMP_ACT_NOTIFY`, 'no fd is ever sent there', 'drop listenerPath, or add the SCMP_ACT_NOTIFY rule it is meant for');
    }
  }
  // metadata-key, metadata-value
  lintMetadataKeys(parsed.warnings, add);
  if ('MKDIR_TMPL' in entries && !MKDIR_SYSCALLS.some((n) => notified.includes(n)) && !defaultNotify) {
    add('warning', 'metadata-value', 'MKDIR_TMPL is set but neither mkdir nor mkdirat is notified', 'the template never applies', 'add mkdir and mkdirat to the SCMP_ACT_NOTIFY rule');
  }
  const mountKeys = MOUNT_KEYS.filter((k) => k in entries);
  if (mountKeys.length > 0 && !notified.includes('mount') && !defaultNotify) {
    add('warning', 'metadata-value', `${list(mountKeys)} set but mount is not notified`, 'the mount emulation never runs', 'add mount to the SCMP_ACT_NOTIFY rule');
  }
  // io-uring-open
  const viaRing = notified.filter((n) => IO_URING_DOES.has(n));
  const allowed = (name: string) => {
    const actions = byName.get(name);
    if (actions && [...actions].some((a) => DENY_ACTIONS.has(a))) return false;
    if (actions && [...actions].some((a) => ALLOW_ACTIONS.has(a))) return true;
    return ALLOW_ACTIONS.has(section.defaultAction ?? '');
  };
  const open = ['io_uring_setup', 'io_uring_enter'].filter(allowed);
  if (viaRing.length > 0 && open.length > 0) {
    add('warning', 'io-uring-open', `${list(open)} left allowed beside notified ${list(viaRing)}`,
      `io_uring does ${list(viaRing)} as ring operations, which no seccomp filter sees: the agent's rules are bypassed`,
      'deny io_uring_setup, io_uring_enter and io_uring_register (SCMP_ACT_ERRNO, errnoRet 1), as runtimes\' default profiles now do');
  }
  const order: Record<Severity, number> = { error: 0, warning: 1, info: 2 };
  return findings.sort((a, b) => order[a.severity] - order[b.severity]);
}
