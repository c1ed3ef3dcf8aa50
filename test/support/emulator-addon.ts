// Typed shell over the test-only addon build/Release/seccomp_emulator_addon.node
// (test/cmd/emulator-addon): the interfaces below list exactly what it exports. For the
// emulation tests and bench/; the shipped addon (dataplane/native.ts) has none of it.
import { loadBuiltAddon } from '../../common/built-addon';

/** What an emulated action did (native/addon/action_result.hpp ActionResult). */
export interface EmulatorActionResult {
  outcome: 'done' | 'stale' | 'refused' | 'failed';
  errno: number;
  cause: number;
  answered: boolean;
  sendErrno: number;
  stage: string;
  detail: string;
  latencyNs: bigint;
  helperNs: bigint;
}

/** The notification an emulated action answers: the notify fd JS holds (tests only), its id and target pid. */
export interface EmulatorRef {
  notifyFd: number;
  id: bigint;
  pid: number;
  /** Owner tag for forget() (the engine uses the container handle). */
  owner?: number;
}

export interface EmulatorOptions {
  helperPath?: string;
  spawnPerCall?: boolean;
  maxHelpers?: number;
  requestTimeoutMs?: number;
  idleTimeoutMs?: number;
  /** A kept helper polls this long (µs) for its next request after answering one (0: sleeps at once). */
  busyPollUs?: number;
  failureErrno?: number;
}

/** benchMkdir's figures, in µs from NOTIF_RECV's return to the emulator's result. */
export interface EmulatorBenchResult {
  n: number;
  p50Us: number;
  p99Us: number;
  maxUs: number;
  helperP50Us: number;
  helperP99Us: number;
  unanswered: number;
  continued: number;
}

/**
 * The emulated actions without the engine, for tests and the benchmark: the data plane never uses
 * it (its engine calls the C++ emulator with the fds it owns). `respond`: the emulator answers the
 * notification itself with the result.
 */
export interface NativeEmulator {
  /** `replyMayWait` (with respond): as a rule's emulation, the helper may ring for its response with later ones (every fourth, or when idle). */
  mkdir(a: EmulatorRef & { path: string; dirfd?: number; mode?: number; respond?: boolean; replyMayWait?: boolean }): Promise<EmulatorActionResult>;
  mount(a: EmulatorRef & { source?: string; target: string; fstype: string; flags?: bigint; data?: string; requireCapSysAdmin?: boolean; respond?: boolean }): Promise<EmulatorActionResult>;
  kill(a: EmulatorRef & { initPid?: number; signal?: number; answerErrno?: number }): Promise<EmulatorActionResult>;
  freeze(a: EmulatorRef & { answerErrno?: number }): Promise<EmulatorActionResult>;
  thaw(pid: number): Promise<EmulatorActionResult>;
  forget(owner: number): void;
  stats(): { helpers: number; spawned: number; died: number; timedOut: number; inFlight: number; direct: number; doorbells: number };
  /** Answers up to `count` mkdir/mkdirat notifications of `notifyFd` through the emulator; others get CONTINUE. */
  benchMkdir(a: { notifyFd: number; count: number; timeoutMs?: number; owner?: number }): Promise<EmulatorBenchResult>;
  close(): void;
}

/** One NOTIF_RECV as emulatorTestSupport reads it: path-like arguments of mkdir, mkdirat and mount by index ('' elsewhere). */
export interface RawNotification {
  id: bigint;
  pid: number;
  nr: number;
  args: bigint[];
  strings: string[];
  /** NOTIF_ID_VALID after the strings were read. */
  valid: boolean;
}

/** Raw seccomp calls for tests and the benchmark only; JS holds notify fd numbers here. */
export interface EmulatorTestSupport {
  /** Listens on socketPath, accepts one runtime connection (listenerPath protocol), keeps its fds. */
  receiveNotifyFd(socketPath: string, timeoutMs: number): Promise<{ fds: number[]; json: string }>;
  /** null when nothing arrived within timeoutMs. */
  recvNotification(fd: number, timeoutMs: number): Promise<RawNotification | null>;
  /** NOTIF_SEND: errno -1 continues, 0 succeeds with 0; returns 0 or NOTIF_SEND's errno. */
  answer(fd: number, id: bigint, errno: number): number;
  /** 0 or close's errno. */
  closeFd(fd: number): number;
}

export interface EmulatorAddon {
  Emulator: new (options?: EmulatorOptions) => NativeEmulator;
  emulatorTestSupport: EmulatorTestSupport;
}

/** Loads the test-only addon; the error lists every path tried. */
export function loadEmulatorAddon(): EmulatorAddon {
  return loadBuiltAddon('seccomp_emulator_addon.node') as EmulatorAddon;
}
