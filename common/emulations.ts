// The emulated actions (docs/emulation.md): the TypeScript twin of the native table
// (native/addon/emulation_table.cpp), one row each, in the same order. test/unit/emulations.test.ts
// holds this twin against the addon's emulations(), so names, features and syscalls cannot drift;
// the feature lists, the answer labels and the decision kinds elsewhere derive from it.
import { AnswerKind } from '../proto/gen/seccompagent/v1/dataplane';

export interface Emulation {
  /** The native EmulatedKind (1, 2, ...; 0 is no emulation). */
  readonly kind: number;
  /** The decision's and the 'answered' event's kind; the proto's oneof case. */
  readonly name: string;
  /** For people: messages and logs. */
  readonly title: string;
  /** The Hello/Welcome feature that says a plane speaks it. */
  readonly feature: string;
  /** The syscalls it answers, by name (each ABI's call of that name: x86_64, i386, x32); none: any notification. */
  readonly syscalls: readonly string[];
  /** Where each of those syscalls keeps its arguments (-1: none); the control plane reads a mkdir's path and mode here. */
  readonly calls: readonly EmulatedCall[];
  /** Who performs it in the data plane. */
  readonly executor: 'helper-pool' | 'action-worker';
  /**
   * What its decision carries: 'path' a path and a mode (the proto's MkdirDecision shape: path,
   * path_bytes, mode; dirfd and the rest from the notification), else its own message.
   */
  readonly shape: 'path' | 'mount' | 'kill' | 'freeze';
  /** What an answer by it reports in the API (Counters, seccompctl, metrics). */
  readonly answerKind: AnswerKind;
}

/** One syscall an emulation answers, with its arguments' positions (native EmulatedCall). */
export interface EmulatedCall {
  readonly syscall: string;
  readonly dirfd: number;
  readonly path: number;
  readonly mode: number;
}

export const EMULATIONS = Object.freeze([
  { kind: 1, name: 'mkdir', title: 'mkdir', feature: 'decision.mkdir', syscalls: ['mkdir', 'mkdirat'],
    calls: [{ syscall: 'mkdir', dirfd: -1, path: 0, mode: 1 }, { syscall: 'mkdirat', dirfd: 0, path: 1, mode: 2 }], executor: 'helper-pool', shape: 'path', answerKind: AnswerKind.ANSWER_KIND_MKDIR },
  { kind: 2, name: 'mount', title: 'mount', feature: 'decision.mount', syscalls: ['mount'], calls: [{ syscall: 'mount', dirfd: -1, path: 1, mode: -1 }], executor: 'helper-pool', shape: 'mount', answerKind: AnswerKind.ANSWER_KIND_MOUNT },
  { kind: 3, name: 'kill', title: 'kill-container', feature: 'decision.kill', syscalls: [], calls: [], executor: 'action-worker', shape: 'kill', answerKind: AnswerKind.ANSWER_KIND_KILL },
  { kind: 4, name: 'freeze', title: 'freeze-container', feature: 'decision.freeze', syscalls: [], calls: [], executor: 'action-worker', shape: 'freeze', answerKind: AnswerKind.ANSWER_KIND_FREEZE },
] as const satisfies readonly Emulation[]);

/** The name of an emulated action ('mkdir' | 'mount' | 'kill' | 'freeze'). */
export type EmulationName = (typeof EMULATIONS)[number]['name'];

/** The name of an emulation whose decision is a path and a mode ('mkdir'). */
export type PathCallName = Extract<(typeof EMULATIONS)[number], { shape: 'path' }>['name'];

/** Every emulation's feature, in table order. */
export const EMULATION_FEATURES: readonly string[] = Object.freeze(EMULATIONS.map((e) => e.feature));

const BY_NAME: ReadonlyMap<string, Emulation> = new Map(EMULATIONS.map((e) => [e.name, e]));

/** The row named `name`; undefined for 'continue', 'error' and the like. */
export function emulationNamed(name: string): Emulation | undefined {
  return BY_NAME.get(name);
}

/** Whether `name` is an emulated action's. */
export function isEmulationName(name: string): name is EmulationName {
  return BY_NAME.has(name);
}

/** Where emulation `name` finds the arguments of `syscall`; undefined when it does not answer it. */
export function emulatedCall(name: EmulationName, syscall: string): EmulatedCall | undefined {
  return BY_NAME.get(name)?.calls.find((c) => c.syscall === syscall);
}
