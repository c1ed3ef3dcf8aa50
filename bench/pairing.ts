// Which run goes beside which. Every row compared with a reference row is measured right after a
// run of that reference made for it: the two share the machine's speed of that minute (the bench's
// VM swings 1.2-1.3x between phases, sometimes inside one round), so a ratio is judged on pairs
// measured seconds apart, never on a reference measured many minutes earlier. A row's comparisons
// and targets are the median over its pairs.
import type { Metrics } from './scenario-process';
import type { Scenario, Variant } from './scenarios';
import { median } from './stats';

export interface RunStep {
  scenario: Scenario;
  variant: Variant;
  /** The variant's index in its scenario (names the run's folder). */
  index: number;
  /** The reference row measured right before this one, for this one. */
  reference?: { scenario: Scenario; variant: Variant; index: number };
}

/** The row a variant is compared with, looked up in every scenario (it need not be selected); none for the reference row itself. */
export function referenceOf(scenario: Scenario, variant: Variant, all: Scenario[]): RunStep['reference'] {
  const label = variant.referenceVariant ?? variant.label;
  if (!scenario.reference || (scenario.reference === scenario.id && label === variant.label)) return undefined;
  const referenceScenario = all.find((s) => s.id === scenario.reference);
  const index = referenceScenario?.variants.findIndex((v) => v.label === label) ?? -1;
  if (!referenceScenario || index < 0) {
    throw new Error(`bench scenario "${scenario.id} / ${variant.label}" names a reference "${scenario.reference} / ${label}" that does not exist`);
  }
  return { scenario: referenceScenario, variant: referenceScenario.variants[index], index };
}

/** Pairs (a reference run, then the row's) made each round for `variant`. */
export function pairsPerRound(variant: Variant): number {
  return variant.pairsPerRound ?? 1;
}

/** One round: every row of the selected scenarios in order, each with the reference it is paired with. */
export function roundSteps(selected: Scenario[], all: Scenario[]): RunStep[] {
  return selected.flatMap((scenario) => scenario.variants.map((variant, index) => ({
    scenario, variant, index, reference: referenceOf(scenario, variant, all),
  })));
}

/** A row's runs beside the reference runs paired with them (a pair whose reference run failed has none). */
export interface PairedRuns {
  runs: Metrics[];
  /** Same length as runs when the row has a reference; absent when it has none. */
  references?: Array<Metrics | null>;
}

/** The median over a row's runs of `value(run, its paired reference run)`; undefined when no run gives one. */
export function medianOverPairs(row: PairedRuns, value: (run: Metrics, reference: Metrics | undefined) => number | undefined): number | undefined {
  const values = row.runs
    .map((run, i) => value(run, row.references?.[i] ?? undefined))
    .filter((v): v is number => v !== undefined && Number.isFinite(v));
  return values.length > 0 ? median(values) : undefined;
}

/** The paired reference runs' median of one metric (what a table prints as "bare C"). */
export function referenceMedian(row: PairedRuns, key: string): number | undefined {
  return medianOverPairs(row, referenceValue(key));
}

/** A pair's reference run's figure (for medianOverPairs). */
export const referenceValue = (key: string) => (_run: Metrics, reference: Metrics | undefined): number | undefined => reference?.[key];

export const pairedRatio = (key: string) => (run: Metrics, reference: Metrics | undefined): number | undefined =>
  reference && run[key] !== undefined && reference[key] ? run[key] / reference[key] : undefined;

export const pairedDifference = (key: string) => (run: Metrics, reference: Metrics | undefined): number | undefined =>
  reference && run[key] !== undefined && reference[key] !== undefined ? run[key] - reference[key] : undefined;
