// Typed shell over the C++ addon (native/addon). The interfaces below list exactly what the
// `.node` file exports; keep them in step with native/addon/*.cpp.
import { builtPath, loadBuiltAddon } from '../common/built-addon';
import type { ContainerHandle } from '../common/container-handle';
import type { FallbackAction } from '../common/default-action';
import type { EmulationName, PathCallName } from '../common/emulations';
import type { SyscallTables } from '../common/syscall-abi';
import type { AnsweredBy } from '../proto/gen/seccompagent/v1/dataplane';
import type { EventBatchHandler, EventLayout } from './event-decoder';

/** What the data plane answers by itself (no control plane, deadline passed, detach). */
export type NativeDefaultAction = FallbackAction;

/** Answers the engine sends at once. */
export type NativeImmediateDecision =
  | { kind: 'continue' }
  | { kind: 'error'; errno: number }
  | { kind: 'value'; value: bigint };

/**
 * Emulations: the data plane does the operation as the target would (see docs/emulation.md)
 * and answers with its result. respond() returns 'accepted'; an 'answered' event with
 * by CONTROL_PLANE follows once done.
 */
export type NativeEmulatedDecision =
  /**
   * mkdir/mkdirat of `path` (dirfd from the notification's args for mkdirat), confined to the
   * target's root. Paths are bytes: a Uint8Array is used exactly; a string is taken as UTF-8.
   */
  | { kind: PathCallName; path: NativeBytes; mode: number }
  | { kind: 'mount'; source: NativeBytes; target: NativeBytes; fstype: NativeBytes; flags: bigint; data: NativeBytes; requireCapSysAdmin: boolean }
  /** Kill the container through a pidfd of its init (`initPid`, the runtime's state.pid); the syscall gets `errno` if it survives. */
  | { kind: 'kill'; signal: number; initPid: number; errno: number }
  /** Freeze the target's cgroup; the syscall gets `errno` once thawed. */
  | { kind: 'freeze'; errno: number };

/** Bytes for the kernel (no NUL): exact when a Uint8Array, UTF-8 when a string. */
export type NativeBytes = Uint8Array | string;

/** A control plane's decision as the native side applies it. */
export type NativeDecision = NativeImmediateDecision | NativeEmulatedDecision;

export interface NativeEngineOptions {
  /** Path of build/Release/seccomp-nshelper, the emulation helper. */
  helperPath: string;
  /**
   * Receives batches of events on the JS thread: makeEventDecoder(addon.eventLayout, onEvents)
   * (dataplane/event-decoder.ts), where onEvents must not throw.
   */
  onBatch: EventBatchHandler;
  defaultAction: NativeDefaultAction;
  /** Forwarded notifications not answered within this many ms get the default action. */
  decisionTimeoutMs: number;
  /** How long events that need no reaction (default answers) may wait to be batched, in µs. */
  batchDelayUs?: number;
  /** While a control plane holds notifications, poll this long (µs) after the last event instead of sleeping; a kept emulation helper polls as long after each answer (0: off). */
  busyPollUs?: number;
  /** Threads that receive and answer (engine_lanes.cpp), at least 1, at most 64 (1). */
  lanes?: number;
  /**
   * Whether lanes 1.. serve with a file table of their own (engine_fd_tables.cpp), so that a
   * syscall naming an fd takes no reference on its file (true).
   */
  laneFdTables?: boolean;
  /** Ingest: a runtime connection that has not reached EOF by then is dropped, in ms. */
  ingestTimeoutMs?: number;
  /** Ingest: largest runtime message accepted, in bytes (1 MiB). */
  ingestMaxBytes?: number;
  /** Upper bound of queued events; past it events are dropped and counted (never blocks). */
  maxQueuedEvents?: number;
}

export interface PeerCredentials {
  pid: number;
  uid: number;
  gid: number;
}

/** A runtime connection read to EOF, waiting for JS to adopt one of its fds or reject it. */
export interface ConnectionEvent {
  type: 'connection';
  conn: number;
  /** The message bytes as UTF-8 text. */
  json: string;
  /** One entry per fd received, in order: whether it is a seccomp notify fd. */
  fds: Array<{ seccomp: boolean }>;
  peer: PeerCredentials;
}

/** A runtime connection the native side refused by itself; every fd it sent is closed. */
export interface IngestErrorEvent {
  type: 'ingest-error';
  /**
   * 'too-large' | 'timeout' | 'read-error' | 'too-many-fds', or 'dropped': one line for every
   * connection closed to stay within the limits in the last 5 s (peer: the pid that lost most).
   */
  code: string;
  message: string;
  peer: PeerCredentials;
}

export interface NotificationEvent {
  type: 'notification';
  handle: ContainerHandle;
  id: bigint;
  pid: number;
  nr: number;
  arch: number;
  ip: bigint;
  args: bigint[];
  /**
   * Path-like arguments read from the target (then NOTIF_ID_VALID), by argument index: `raw`, the
   * exact bytes (paths are bytes), and `value`, their lossy UTF-8 reading (for display).
   */
  strings: Array<{ index: number; value: string; truncated: boolean; raw: Buffer }>;
  /** True: waiting for a decision of `session`; false: already answered natively (an 'answered' follows). */
  forwarded: boolean;
  /** The session that owns it (0 when answered natively). */
  session: number;
  /** True when it went to the session's decision channel: JS only reports it (Watch), never forwards it. */
  viaChannel: boolean;
  /** CLOCK_MONOTONIC ns at receipt. */
  receivedNs: bigint;
}

export interface AnsweredEvent {
  type: 'answered';
  handle: ContainerHandle;
  id: bigint;
  /**
   * The API's number, as the engine sends it: DEFAULT_NO_CONTROL_PLANE, DEFAULT_DEADLINE,
   * DEFAULT_DETACHED or FAST_PATH when the native side answered by itself, DEFAULT_RECOVERED for one a
   * predecessor (crashed, or handed over) had received and not answered, CONTROL_PLANE for a
   * finished emulation or a decision from a decision channel.
   */
  by: AnsweredBy;
  /**
   * The default action (by != CONTROL_PLANE), or the emulation's kind and outcome. A decision
   * from a decision channel (by CONTROL_PLANE) reports what was sent: continue, error, or
   * `{ kind: 'value', value: bigint }` (not yet in this type). An invalid channel decision is
   * answered with the default action at once, by DEFAULT_NO_CONTROL_PLANE, after its 'decision-dropped'.
   */
  action: NativeDefaultAction | { kind: 'continue' | 'error' | 'value' | EmulationName; errno: number; value: bigint };
  /** True when the target was gone (SEND said ENOENT, or the emulation found it stale). */
  gone: boolean;
  latencyNs: bigint;
  /**
   * Set when no 'notification' event was sent for it (setDetailedEvents(false) and answered
   * natively): this event counts as its notification too.
   */
  notified: { nr: number; arch: number } | null;
  /** by FAST_PATH: the index of the rule of the container's policy that answered (-1 otherwise). */
  rule: number;
}

/**
 * Answers the engine thread gave by itself (by DEFAULT_NO_CONTROL_PLANE or FAST_PATH) while nobody
 * watches (setDetailedEvents(false)), counted natively instead of one 'answered' event each: per
 * batch, one of these per container, syscall, who answered and whether the target was gone. Each
 * stands for `count` notifications and their answers.
 */
export interface TallyEvent {
  type: 'tally';
  handle: ContainerHandle;
  nr: number;
  arch: number;
  /** DEFAULT_NO_CONTROL_PLANE or FAST_PATH. */
  by: AnsweredBy;
  gone: boolean;
  count: number;
  latencySumNs: bigint;
  /** latencyBuckets[i]: answers with latency in (latencyBucketsNs[i-1], latencyBucketsNs[i]]; the rest are above the last bound. */
  latencyBuckets: number[];
}

/** The notify fd hung up (no task left in the filter); the fd is closed. */
export interface RemovedEvent {
  type: 'removed';
  handle: ContainerHandle;
}

/** A decision the engine did not apply (from the channel, or respond() with the wrong session). */
export interface DecisionDroppedEvent {
  type: 'decision-dropped';
  session: number;
  handle: ContainerHandle;
  id: bigint;
  /**
   * 'unknown' (never pending or already answered), 'late' (its deadline answered it, among the
   * last 1024 it answered), 'wrong-session', 'invalid' (bad kind, or errno outside 1..4095: the
   * notification gets the default action at once). Only channel decisions emit this event.
   */
  reason: 'unknown' | 'late' | 'wrong-session' | 'invalid';
}

/** A session that is no longer the active one owns no notification any more (handover done). */
export interface SessionDrainedEvent {
  type: 'session-drained';
  session: number;
}

/**
 * A session's decision channel connected or closed. A closed channel only detaches: what the
 * session owns stays pending, and the same token may connect again (one connection at a time).
 */
export interface ChannelEvent {
  type: 'channel';
  session: number;
  state: 'connected' | 'closed';
  /** Why it closed ('' when connected). */
  reason: string;
}

/** A successor data plane connected to the handoff socket (same user); pass `conn` to handOff(). */
export interface HandoffEvent {
  type: 'handoff';
  conn: number;
  peer: PeerCredentials;
}

/**
 * A lane's read of a task's memory (its path arguments) took longer than the read watch allows (a
 * page that a userfaultfd or FUSE server of the container holds): the lane got a new thread and the
 * container waits, out of its lane, until the read returns (`returned`: it has, after `stalledNs`).
 */
export interface ReadStallEvent {
  type: 'read-stall';
  handle: ContainerHandle;
  pid: number;
  lane: number;
  stalledNs: bigint;
  returned: boolean;
  /** The call (returned only; else nr 0, arch 0). */
  nr: number;
  arch: number;
}

/** The native thread hit a problem it survived. */
export interface ErrorEvent {
  type: 'error';
  message: string;
}

export type NativeEvent =
  | ConnectionEvent
  | IngestErrorEvent
  | NotificationEvent
  | AnsweredEvent
  | TallyEvent
  | RemovedEvent
  | DecisionDroppedEvent
  | SessionDrainedEvent
  | ChannelEvent
  | HandoffEvent
  | ReadStallEvent
  | ErrorEvent;

/**
 * 'accepted': an emulation started; its 'answered' event follows. 'late': no longer pending
 * because its deadline answered it (among the engine's last 1,024 deadline answers).
 */
export type RespondStatus = 'ok' | 'unknown' | 'late' | 'gone' | 'accepted';

export interface RespondResult {
  status: RespondStatus;
  latencyNs: bigint;
}

export interface NativeStats {
  containers: number;
  pending: number;
  pendingConnections: number;
  eventsDropped: number;
  syncWakeUp: boolean;
  /** Emulation helpers alive (one per target mount namespace). */
  emulationHelpers: number;
  /** Decisions received on decision channels, and those dropped (by any path). */
  channelDecisions: number;
  decisionsDropped: number;
  /** Calls a signal restarted, answered with the outcome of the emulation already done for them. */
  emulationsReplayed: number;
  /** Emulation helpers that died unasked (OOM, a kill), and the requests they had in hand that a fresh helper served. */
  emulationHelpersDied: number;
  /** Reads of a task's memory that outlived the read watch (a lane taken over, or a bounded read handed on). */
  readStalls: number;
  emulationsRetried: number;
  /** Containers whose callers are woken where the scheduler likes (many threads call at once, alone), and how often one changed mode. */
  spreadWakeContainers: number;
  wakeModeSwitches: number;
  /** A predecessor's emulations found with its helpers at restore: waiting, answered by them, decided anew, timed out. */
  predecessorEmulations: { waiting: number; answered: number; redecided: number; timedOut: number };
  /** Whether every fd is kept in an fd store ($NOTIFY_SOCKET: systemd or seccomp-keeper). */
  fdStore: boolean;
  /**
   * Runtime connections the ingest closed to stay within its limits, since the start, by reason:
   * over the per-pid, per-uid or total cap of connections being read, or to keep the fd reserve.
   */
  ingestDropped: { perPid: number; perUid: number; total: number; fdReserve: number };
  /**
   * Per engine thread (the engine thread first): containers it serves, notifications it received,
   * whether it serves with a file table of its own.
   */
  lanes: Array<{ containers: number; received: number; ownFdTable: boolean }>;
}

/** An fd with its fd-store name: listener, journal, n<handle> (notify fd), r<handle> (its record). */
export interface NamedFd {
  fd: number;
  name: string;
}

/**
 * A container restore() took back: the handle it had, the record JSON given to adopt() ('' if
 * lost), and the policy in force for it, applied again natively before any notification is read
 * (null: none).
 */
export interface RestoredContainer {
  handle: ContainerHandle;
  record: string;
  /** Why `record` is '' when it could not be read (absent: read, none was handed over, or the container has left). */
  recordError?: string;
  policy: NativePolicyState | null;
}

/** What restore() took back from a predecessor (its containers: takeRestoredContainers()). */
export interface RestoreResult {
  containerCount: number;
  listener: boolean;
  /** The path of each listening socket taken back (once per socket, however often it was passed). */
  listenerPaths: string[];
  journal: boolean;
  /** The predecessor had a control plane attached when it stopped. */
  controlPlaneAttached: boolean;
  /** Ids the predecessor had in flight (journaled), answered with the default action. */
  inFlightAnswered: number;
  /** ... or, when it had a control plane attached, held for the next one (forwarded once it attaches). */
  inFlightHeld: number;
  /** Ids it had received but not journaled (found past each container's last id), answered likewise. */
  lostAnswered: number;
  /** Ids it had in flight that the container's own policy answered. */
  inFlightByRules: number;
  /**
   * Ids it had handed to its emulation helpers: waited for while one of them lives (it answers
   * the target itself), decided anew once none does (docs/emulation.md, "Exactly once").
   */
  inFlightWithHelper: number;
  /** Fds refused and closed, with why. */
  problems: string[];
}

/** pausedMs: how long nothing was answered, from parking the engine to the successor's ack. */
export type HandOffResult = { ok: true; summary: string; pausedMs: number } | { ok: false; error: string };

/** A container's policy as the engine holds it. */
export interface NativePolicyState {
  version: string;
  rules: number;
  labels: Record<string, string>;
}

/** The engine's answer to applyPolicy (the PolicyAck, less the handle). */
export interface NativePolicyVerdict {
  accepted: boolean;
  /** The version in force now ('' none). */
  version: string;
  /** NACK: the refused rule (-1: the policy as a whole). */
  ruleIndex: number;
  reason: string;
  detail: string;
}

export interface NativeEngine {
  /**
   * Validates a serialized ContainerPolicy (proto/seccompagent/v1/policy.proto) and, when good,
   * answers that container's notifications from it natively from now on, keeping it with the
   * container in the fd store (and in a handoff). A NACK leaves the policy in force as it was.
   */
  applyPolicy(handle: ContainerHandle, policy: Uint8Array, initPid: number): NativePolicyVerdict;
  /** The policy that answers a handle natively (pushed for it, or inherited from its container's first fd), or null. */
  policyOf(handle: ContainerHandle): NativePolicyState | null;
  /**
   * The rule the engine's matcher picks for syscall `nr` of `arch` (AUDIT_ARCH_*, x86_64 when
   * absent; x32: nr with its bit) with these arguments and path
   * bytes, from the policy in force for `handle` (index -1: none matches), with that policy as
   * pushed (a serialized ContainerPolicy); null when the handle has no policy. Read-only.
   */
  explainRule(handle: ContainerHandle, nr: number, args: bigint[], paths: Array<{ index: number; bytes: Uint8Array }>, arch?: number): { version: string; index: number; wire: Uint8Array } | null;
  /** Starts the epoll thread; returns once it runs. */
  start(): void;
  /** Creates the listener socket (removes a stale socket file first), chmod `mode`; kept in the fd store as "listener". */
  listen(socketPath: string, mode: number): void;
  /** Uses an already bound and listening socket (systemd, handoff). */
  listenFd(fd: number): void;
  /** The path every listening socket served is bound to (getsockname), in the order added. */
  listenerPaths(): string[];
  /**
   * Keeps fd `fdIndex` of connection `conn` as a container notify fd; closes its other fds.
   * `record` (JSON) is kept beside it for a successor (restore() gives it back); `containerId`
   * goes with each of its notifications on the decision channel ('' when omitted).
   */
  adopt(conn: number, fdIndex: number, record: string, containerId?: string): number;
  /**
   * After restore() and before any session is opened (start() may have run): the container id of
   * a restored container (from its record). False when the engine has no such container (one that
   * left since start()); throws (RangeError) once a session was opened.
   */
  nameContainer(handle: number, containerId: string): boolean;
  /**
   * Before start(): takes what a predecessor left (fd store or handoff), keeping its handles.
   * `handoff`: from a live predecessor (keep everything in this process's fd store too); else from
   * the fd store after a crash or restart. Its ids in flight are answered with the default action
   * ('answered' events, by DEFAULT_RECOVERED), or, with `hold` and a control plane attached before, held
   * for the next one (see holdForControlPlane).
   */
  restore(fds: NamedFd[], handoff: boolean, hold: boolean): RestoreResult;
  /** The containers the last restore() took back, once (later calls: []). */
  takeRestoredContainers(): RestoredContainer[];
  /** Serves the handoff socket (SOCK_SEQPACKET, `mode`): successors arrive as 'handoff' events. */
  listenHandoff(socketPath: string, mode: number): void;
  /** Stops or resumes accepting runtime connections (they wait in the backlog). */
  setAccepting(accepting: boolean): void;
  /**
   * true (the default): every notification gets a 'notification' event. false: one answered
   * natively gets only its 'answered' event (with `notified`): for when nobody watches.
   */
  setDetailedEvents(detailed: boolean): void;
  /**
   * For `ms`, while no control plane is attached, new notifications wait for one (each at most the
   * decision timeout; the one that attaches gets them as forwarded 'notification' events) instead
   * of the default action. Ends when a control plane attaches.
   */
  holdForControlPlane(ms: number): void;
  /**
   * Blocks until the successor on `conn` has everything and acked (then this engine answers
   * nothing more; stop() leaves the pending ones to the successor and closes `conn`), or fails
   * (receiving resumes). Takes `conn`.
   */
  handOff(conn: number, timeoutMs: number): HandOffResult;
  /** Closes every fd of connection `conn`. */
  reject(conn: number): void;
  /** Serves the decision channel socket (docs/decision-channel.md), mode applied before listen. */
  listenChannel(socketPath: string, mode: number): void;
  /** Registers control-plane session `session` (> 0) and the 16-byte token its channel presents. */
  openSession(session: number, token: Uint8Array): void;
  /**
   * New notifications are owned by this session and wait for its decision (0: none; the engine
   * answers them with the default action itself). A session with a connected channel gets them
   * there; otherwise they are 'notification' events with forwarded: true for JS to send.
   * Throws RangeError for a session that is not open. The session that stops being active gets
   * 'session-drained' at once if it owns nothing already.
   */
  setActiveSession(session: number): void;
  /**
   * Ends a session: closes its channel, answers what it owns with the default (DEFAULT_DETACHED); returns how many
   * (0 for a session not open). Closing the active session makes the active session 0.
   */
  closeSession(session: number): number;
  /** Notifications `session` owns and has not answered. */
  sessionPending(session: number): number;
  setDefaultAction(action: NativeDefaultAction): void;
  setDecisionTimeout(ms: number): void;
  /**
   * Answers a notification owned by `session` (0: any owner, for the data plane's own default
   * answers). 'late': its deadline answered it; 'unknown': not pending (never, already) or owned
   * by another session.
   * `session` is required (TypeError without it).
   */
  respond(handle: ContainerHandle, id: bigint, decision: NativeDecision, session: number): RespondResult;
  /**
   * A hold (HoldBatch): the deadline of a notification `session` owns moves to now + holdMs (0 to
   * 60000) + the decision timeout; nothing is answered. 'late' / 'unknown' as respond().
   */
  extendDeadline(handle: ContainerHandle, id: bigint, holdMs: number, session: number): 'ok' | 'late' | 'unknown';
  stats(): NativeStats;
  /** How each container's tasks wait for an answer, for those an emulation has seen. */
  targetWaits(): Array<[ContainerHandle, 'killable' | 'interruptible']>;
  /** Stops the thread and closes every fd it owns. Idempotent. */
  stop(): void;
}

export interface NativeAddon {
  Engine: new (options: NativeEngineOptions) => NativeEngine;
  /** x86_64 syscall names by number (sparse array). */
  syscallNames(): string[];
  /** Each ABI's syscall names by its own number (sparse arrays; x32's without its bit). */
  syscallTables(): SyscallTables;
  /** Opens fds the process holds: for leak checks in tests and GetStatus. */
  openFdCount(): number;
  AUDIT_ARCH_X86_64: number;
  AUDIT_ARCH_I386: number;
  /** The event record's offsets and flags (native/addon/event_layout.hpp), for makeEventDecoder. */
  eventLayout: EventLayout;
  /** Upper bounds (ns, ascending) of the latency buckets of 'tally' events: the latency metric's. */
  latencyBucketsNs: number[];
  /**
   * One datagram to $NOTIFY_SOCKET (systemd or seccomp-keeper): "KEY=VALUE" lines, `fds` (≤ 253)
   * as SCM_RIGHTS. False when NOTIFY_SOCKET is unset; throws when it is unusable or the send fails.
   */
  sdNotify(message: string, fds?: number[]): boolean;
  /** FDSTORE=1 with FDNAME=`name` ([A-Za-z0-9_.-], 1..255): the store keeps copies of `fds`. False when NOTIFY_SOCKET is unset. */
  fdStoreStore(name: string, fds: number[]): boolean;
  /** FDSTOREREMOVE=1: the store closes every fd kept under `name`. False when NOTIFY_SOCKET is unset. */
  fdStoreRemove(name: string): boolean;
  /** The fds passed at start (LISTEN_FDS from 3, names from LISTEN_FDNAMES), now FD_CLOEXEC; the variables are unset, so a second call returns []. */
  takeListenFds(): Array<{ fd: number; name: string }>;
  /**
   * Watches process `pid` through a pidfd in the event loop: `onExit` runs once, on the JS thread,
   * as soon as it exits (it must not throw). Returns the watch id, or null when no process has
   * that pid. The watch does not keep the process alive.
   */
  watchProcessExit(pid: number, onExit: () => void): number | null;
  /** Ends a watch (nothing when it already fired). */
  unwatchProcess(id: number): void;
  /** Successor side of a handoff: a connection, or null when nobody serves `socketPath`. */
  handoffConnect(socketPath: string): number | null;
  /** Says hello and receives every fd up to the end frame (blocks up to timeoutMs). */
  handoffReceive(conn: number, timeoutMs: number): { fds: NamedFd[]; summary: string };
  handoffAck(conn: number): void;
  /** Whether the old data plane closed the connection (let go of its sockets) within timeoutMs; closes conn if so. */
  handoffWaitClosed(conn: number, timeoutMs: number): boolean;
  closeFd(fd: number): void;
  /**
   * What the running kernel offers, found by trying it in a throwaway child (a filter with
   * NEW_LISTENER, then NOTIF_SET_FLAGS): known at start, before any container. Blocks a few ms.
   */
  probeKernel(): { syncWakeUp: boolean; detail: string };
  /** The native emulation table (native/addon/emulation_table.cpp), one row per emulated action, in kind order. */
  emulations(): NativeEmulation[];
  /**
   * The engine's own SuffixedPath (native/addon/rule_arguments.hpp), for a mkdir decision that
   * names a suffix: the path to create, the errno the caller gets at once, or why the suffix is
   * refused. `path` null: the caller's path was not read.
   */
  suffixedPath: SuffixedPath;
}

/** addon.suffixedPath's shape (dataplane/decisions.ts takes it as a parameter, so it is tested without the addon). */
export type SuffixedPath = (path: Uint8Array | null, truncated: boolean, suffix: Uint8Array) => { path: Buffer } | { errno: number } | { invalid: string };

/** A row of the native emulation table, as emulations() gives it (common/emulations.ts is its twin). */
export interface NativeEmulation {
  kind: number;
  name: string;
  title: string;
  feature: string;
  /** policy.proto RuleAction's field number. */
  ruleAction: number;
  syscalls: string[];
  /** Each syscall's argument positions (-1: none). */
  calls: Array<{ syscall: string; dirfd: number; path: number; mode: number }>;
  executor: 'helper-pool' | 'action-worker';
  /** nshelper::Op (native/common/nshelper_protocol.h); 0 for the action worker. */
  helperOp: number;
}

/** The emulation helper built beside the addon. */
export function nshelperPath(): string {
  return builtPath('seccomp-nshelper');
}

/** Loads the addon; the error lists every path tried. */
export function loadNative(): NativeAddon {
  return loadBuiltAddon('seccomp_agent.node') as NativeAddon;
}
