// Human-readable views of the data plane's answers for seccompctl.
import { answeredByLabel, answerKindName, ANSWERED_BY_LABELS } from '../common/answer-labels';
import { defaultActionFromProto, formatDefaultAction } from '../common/default-action';
import { errnoName } from '../common/errors';
import { abiOf } from '../common/syscall-abi';
import { durationToMs } from '../common/duration';
import {
  AnswerKind,
  type Container,
  type DefaultAction,
  type Event,
  FdStoreState,
  NotificationWait,
  type GetStatusResponse,
} from '../proto/gen/seccompagent/v1/dataplane';

const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;
const SHORT_ESCAPES: Record<number, string> = { 7: '\\a', 8: '\\b', 9: '\\t', 10: '\\n', 11: '\\v', 12: '\\f', 13: '\\r', 34: '\\"', 92: '\\\\' };

/** The code point of the well-formed UTF-8 sequence at `at` and its length, or null (an invalid byte). */
function utf8At(b: Uint8Array, at: number): { cp: number; length: number } | null {
  const first = b[at];
  if (first < 0x80) return { cp: first, length: 1 };
  const length = first >= 0xc2 && first <= 0xdf ? 2 : first >= 0xe0 && first <= 0xef ? 3 : first >= 0xf0 && first <= 0xf4 ? 4 : 0;
  if (length === 0 || at + length > b.length) return null;
  let cp = first & (0xff >> (length + 1));
  for (let i = 1; i < length; i++) {
    if ((b[at + i] & 0xc0) !== 0x80) return null;
    cp = (cp << 6) | (b[at + i] & 0x3f);
  }
  const min = length === 2 ? 0x80 : length === 3 ? 0x800 : 0x10000;
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return null;
  return { cp, length };
}

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');

/**
 * Bytes as a double-quoted string the way Go's strconv.Quote writes them, for display only:
 * printable UTF-8 as is, `\n`-style escapes, `\xff` for each byte that is not UTF-8 (so
 * `bad\xff\xfe` and `bad\xff\xfd` read differently), `\u2028` for other non-printable runes.
 */
export function quoteBytes(bytes: Uint8Array): string {
  let out = '"';
  for (let at = 0; at < bytes.length;) {
    const rune = utf8At(bytes, at);
    if (rune === null) {
      out += `\\x${hex(bytes[at], 2)}`;
      at++;
      continue;
    }
    at += rune.length;
    const short = SHORT_ESCAPES[rune.cp];
    const char = String.fromCodePoint(rune.cp);
    if (short !== undefined) out += short;
    else if (PRINTABLE.test(char)) out += char;
    else if (rune.cp < 0x80) out += `\\x${hex(rune.cp, 2)}`;
    else if (rune.cp < 0x10000) out += `\\u${hex(rune.cp, 4)}`;
    else out += `\\U${hex(rune.cp, 8)}`;
  }
  return `${out}"`;
}

/** Aligns rows of cells into columns under a header. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]))).join('  ');
  return [line(header), ...rows.map(line)].join('\n');
}

export function describeDefaultAction(action: DefaultAction | undefined): string {
  return formatDefaultAction(defaultActionFromProto(action));
}

const ORIGIN_TEXT: Record<string, string> = {
  fresh: 'started fresh',
  'fd-store': 'restarted from the fd store',
  handoff: 'took over by handoff',
};

/** "yes"/"no"/"LOST", then the data plane's own line about it (a data plane before fdStoreStatus: the bool alone). */
function formatFdStore(s: GetStatusResponse): string {
  const store = s.fdStoreStatus;
  if (!store) return s.fdStore ? 'yes: a crash loses no container' : 'no: a crash gives ENOSYS to every notified syscall';
  const word = store.state === FdStoreState.FD_STORE_STATE_UP ? 'yes' : store.state === FdStoreState.FD_STORE_STATE_LOST ? 'LOST' : 'no';
  return `${word}: ${store.detail}`;
}

export function formatStatus(s: GetStatusResponse): string {
  const c = s.counters;
  const cp = s.controlPlane ? `${s.controlPlane.name} ${s.controlPlane.version} (session ${s.controlPlane.sessionId})` : 'none: the default action answers';
  const rows: Array<[string, string]> = [
    ['version', s.version],
    ['pid', `${s.pid} (${ORIGIN_TEXT[s.origin] ?? s.origin})`],
    ['fd store', formatFdStore(s)],
    ['uptime', `${Math.round(durationToMs(s.uptime) / 1000)} s`],
    [s.listenerSockets.length > 1 ? 'listener sockets' : 'listener socket', s.listenerSockets.length > 0 ? s.listenerSockets.join(', ') : s.listenerSocket],
    ['control plane', cp],
    ['default action', describeDefaultAction(s.defaultAction)],
    ['decision timeout', `${durationToMs(s.decisionTimeout)} ms`],
    ['sync wake-up', s.syncWakeUp ? `yes (${s.spreadWakeContainers} containers spread: many callers at once, alone)` : 'no (kernel < 6.6)'],
    ['containers', String(s.containers)],
    ...(s.engineThreads.length > 0 ? [['engine threads', s.engineThreads.map((t) => `${t.containers} containers, ${t.received} received`).join('; ')] as [string, string]] : []),
    ['pending', String(s.pending)],
    ['watchers', String(s.watchers)],
  ];
  if (c) {
    rows.push(
      ['notifications', String(c.notifications)],
      ['answered by control plane', String(c.answeredControlPlane)],
      ['answered by default', ANSWERED_BY_LABELS.filter((l) => l.defaultReason !== '').map((l) => `${c[l.counter]} ${l.defaultReason}`).join(', ')],
      ['target gone', String(c.targetGone)],
      ['decisions dropped', `${c.decisionsLate} late, ${c.decisionsUnknown} unknown, ${c.decisionsInvalid} invalid`],
      ['ingest rejected', String(c.ingestRejected)],
      ['read stalls', String(c.readStalls)],
      ['wake mode switches', String(c.wakeModeSwitches)],
    );
  }
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}

/** The labels the control plane pushed with a policy (kept by the data plane), sorted; `none` when there are none. */
export function formatLabels(labels: Record<string, string>, none: string): string {
  const entries = Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1));
  return entries.length ? entries.map(([k, v]) => `${k}=${v}`).join(',') : none;
}

export function formatContainers(containers: Container[]): string {
  const pod = (c: Container) => {
    const a = c.annotations;
    const ns = a['io.kubernetes.cri.sandbox-namespace'] ?? a['io.kubernetes.pod.namespace'];
    const name = a['io.kubernetes.cri.sandbox-name'] ?? a['io.kubernetes.pod.name'];
    return ns && name ? `${ns}/${name}` : '-';
  };
  const policy = (c: Container) => (c.policyVersion ? `${c.policyVersion} (${c.policyRules} rules)` : 'none');
  // WAIT: whether a signal can abandon a notification (docs/emulation.md, "Exactly once").
  const wait = (c: Container) => c.notificationWait === NotificationWait.NOTIFICATION_WAIT_KILLABLE ? 'killable'
    : c.notificationWait === NotificationWait.NOTIFICATION_WAIT_INTERRUPTIBLE ? 'interruptible' : '-';
  return table(
    ['HANDLE', 'CONTAINER', 'STATUS', 'PID', 'POD', 'POLICY', 'FAST PATH', 'DEFAULT', 'WAIT', 'SINCE', 'LABELS'],
    containers.map((c) => [
      String(c.handle), c.containerId, c.status === 'running' ? 'exec' : 'init', String(c.pid), pod(c), policy(c),
      String(c.answeredFastPath), String(c.answeredDefault), wait(c), c.registeredAt?.toISOString() ?? '', formatLabels(c.labels, '-'),
    ]),
  );
}

/** One line per event for `seccompctl watch`. */
export function formatEvent(event: Event): string {
  const time = event.time?.toISOString().slice(11, 23) ?? '';
  const e = event.event;
  switch (e?.$case) {
    case 'notification': {
      const n = e.notification;
      const strings = n.stringArgs.map((s) => quoteBytes(s.raw ?? Buffer.from(s.value, 'utf8'))).join(' ');
      // Another ABI than x86_64 says so: "mkdir(i386)".
      const abi = abiOf(n.arch, n.syscallNr);
      return `${time} notify   ${n.containerId} pid=${n.pid} ${n.syscall || `#${n.syscallNr}`}${abi === 'i386' || abi === 'x32' ? `(${abi})` : ''} ${strings} id=${n.id}`;
    }
    case 'answer': {
      const a = e.answer;
      const what = a.kind === AnswerKind.ANSWER_KIND_ERROR ? `error ${errnoName(a.errno)}` : answerKindName(a.kind) ?? 'unknown';
      // Audit and log findings: what Enforce would have done (docs/policy.md).
      const findings = (a.findings ?? []).map((f) => `; ${f.mode.toLowerCase()}: ${f.policy} rule ${f.rule} ${f.mode === 'Audit' ? 'would answer' : 'let it'} ${f.action}`).join('');
      return `${time} answer   ${a.containerId} ${a.syscall} id=${a.id} ${what} by ${answeredByLabel(a.answeredBy)?.text ?? 'unknown'} in ${(durationToMs(a.latency) * 1000).toFixed(0)} µs${findings}`;
    }
    case 'containerAdded':
      return `${time} added    ${e.containerAdded.containerId} handle=${e.containerAdded.handle} ${e.containerAdded.status} pid=${e.containerAdded.pid}`;
    case 'containerRemoved':
      return `${time} removed  ${e.containerRemoved.containerId} handle=${e.containerRemoved.handle} (${e.containerRemoved.reason})`;
    case 'controlPlaneAttached':
      return `${time} attached control plane ${e.controlPlaneAttached.name} ${e.controlPlaneAttached.version} session=${e.controlPlaneAttached.sessionId}`;
    case 'controlPlaneDetached':
      return `${time} detached control plane session=${e.controlPlaneDetached.sessionId} (${e.controlPlaneDetached.reason}), ${e.controlPlaneDetached.answeredByDefault} answered by default`;
    case 'decisionDropped':
      return `${time} dropped  decision id=${e.decisionDropped.id} (${e.decisionDropped.reason})`;
    case 'ingestRejected':
      return `${time} refused  runtime connection from pid ${e.ingestRejected.peer?.pid ?? '?'}: ${e.ingestRejected.reason}`;
    default:
      return `${time} event`;
  }
}
