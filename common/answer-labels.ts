// Who answered a notification and what kind of answer it was: one row per value of the API's
// enums, with the names each consumer shows. Metrics labels, seccompctl's text, the Counters
// field and the native decision kind all come from here.
import { AnswerKind, AnsweredBy, type Counters } from '../proto/gen/seccompagent/v1/dataplane';
import { EMULATIONS } from './emulations';

export interface AnsweredByLabel {
  by: AnsweredBy;
  /** The Counters field counting these answers. */
  counter: keyof Counters;
  /** Prometheus label value (answered_by). */
  metric: string;
  /** For a default answer, why the default answered ('' otherwise). */
  defaultReason: string;
  /** seccompctl's text. */
  text: string;
}

function row(by: AnsweredBy, counter: keyof Counters, metric: string, defaultReason: string, text?: string): AnsweredByLabel {
  return { by, counter, metric, defaultReason, text: text ?? `default(${defaultReason})` };
}

export const ANSWERED_BY_LABELS: readonly AnsweredByLabel[] = Object.freeze([
  row(AnsweredBy.ANSWERED_BY_CONTROL_PLANE, 'answeredControlPlane', 'control_plane', '', 'control-plane'),
  row(AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE, 'answeredDefaultNoControlPlane', 'default_no_control_plane', 'no control plane'),
  row(AnsweredBy.ANSWERED_BY_DEFAULT_DEADLINE, 'answeredDefaultDeadline', 'default_deadline', 'deadline'),
  row(AnsweredBy.ANSWERED_BY_DEFAULT_DETACHED, 'answeredDefaultDetached', 'default_detached', 'detached'),
  row(AnsweredBy.ANSWERED_BY_FAST_PATH, 'answeredFastPath', 'fast_path', '', 'fast-path'),
  row(AnsweredBy.ANSWERED_BY_DEFAULT_RECOVERED, 'answeredDefaultRecovered', 'default_recovered', 'recovered'),
]);

const BY_ANSWERED_BY = new Map(ANSWERED_BY_LABELS.map((l) => [l.by, l]));

/** The row of an AnsweredBy value; undefined for UNSPECIFIED and values this build does not know. */
export function answeredByLabel(by: AnsweredBy): AnsweredByLabel | undefined {
  return BY_ANSWERED_BY.get(by);
}

export interface AnswerKindLabel {
  kind: AnswerKind;
  /** The native decision kind ('continue', 'mkdir', ...), also seccompctl's and the metrics' text. */
  name: string;
}

export const ANSWER_KIND_LABELS: readonly AnswerKindLabel[] = Object.freeze([
  { kind: AnswerKind.ANSWER_KIND_CONTINUE, name: 'continue' },
  { kind: AnswerKind.ANSWER_KIND_ERROR, name: 'error' },
  { kind: AnswerKind.ANSWER_KIND_VALUE, name: 'value' },
  // One per emulation, from its row (common/emulations.ts).
  ...EMULATIONS.map((e) => ({ kind: e.answerKind, name: e.name })),
  { kind: AnswerKind.ANSWER_KIND_TARGET_GONE, name: 'target-gone' },
]);

const KIND_BY_NAME = new Map(ANSWER_KIND_LABELS.map((l) => [l.name, l.kind]));
const NAME_BY_KIND = new Map(ANSWER_KIND_LABELS.map((l) => [l.kind, l.name]));

/** The AnswerKind of a native decision kind; UNSPECIFIED for a name this build does not know. */
export function answerKindOf(name: string): AnswerKind {
  return KIND_BY_NAME.get(name) ?? AnswerKind.ANSWER_KIND_UNSPECIFIED;
}

/** The name of an AnswerKind; undefined for UNSPECIFIED and unknown values. */
export function answerKindName(kind: AnswerKind): string | undefined {
  return NAME_BY_KIND.get(kind);
}
