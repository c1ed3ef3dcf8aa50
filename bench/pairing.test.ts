// The bench pairs each compared row with a reference run made right before it, and judges the
// median of the pairs' ratios: a machine that changes speed between the two rows' runs must not
// move the ratio.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { medianOverPairs, pairedDifference, pairedRatio, pairsPerRound, referenceMedian, referenceOf, roundSteps } from './pairing';
import { SCENARIOS, type Scenario } from './scenarios';
import { evaluate, TARGETS } from './targets';

const scenario = (id: string): Scenario => {
  const found = SCENARIOS.find((s) => s.id === id);
  assert.ok(found, id);
  return found;
};

test('pairing: every row with a reference is measured right after a run of that reference row', () => {
  const steps = roundSteps(SCENARIOS, SCENARIOS);
  assert.equal(steps.length, SCENARIOS.reduce((n, s) => n + s.variants.length, 0));
  for (const step of steps) {
    const self = step.scenario.reference === step.scenario.id && (step.variant.referenceVariant ?? step.variant.label) === step.variant.label;
    if (!step.scenario.reference || self) {
      assert.equal(step.reference, undefined, step.variant.label);
      continue;
    }
    assert.ok(step.reference, `${step.scenario.id} / ${step.variant.label}`);
    assert.equal(step.reference.scenario.id, step.scenario.reference);
    assert.equal(step.reference.variant.label, step.variant.referenceVariant ?? step.variant.label);
    assert.equal(step.reference.scenario.variants[step.reference.index], step.reference.variant);
  }
  const fast = steps.find((s) => s.scenario.id === 'fast-path' && s.variant.label === '(d) getppid, 1 thread');
  assert.equal(fast?.reference?.variant.label, 'getppid, 1 thread');
  // A row that is its own reference (emulated-mkdir's "spawn per call") is not run twice.
  assert.equal(steps.find((s) => s.variant.label === 'spawn per call')?.reference, undefined);
  const noisy = steps.find((s) => s.scenario.id === 'noisy-neighbour' && s.variant.label === 'control-plane path, neighbour 8 threads');
  assert.deepEqual([noisy?.reference?.scenario.id, noisy?.reference?.variant.label], ['noisy-neighbour-reference', 'neighbour getppid × 8']);
});

test('pairing: the rows judged within 5-10% of bare C run three pairs a round, the rest one', () => {
  const tight = SCENARIOS.flatMap((s) => s.variants.filter((v) => pairsPerRound(v) > 1).map((v) => `${s.id} / ${v.label} × ${v.pairsPerRound}`));
  assert.deepEqual(tight, [
    'reference-threaded / getppid, 1 thread × 3', 'reference-threaded / getppid, 1 thread, own fd table × 3',
    'dataplane-default / getppid, 1 thread × 3', 'fast-path / (d) getppid, 1 thread × 3',
  ]);
  // The reference's own rows and (c) share dataplane-default's variant list: untouched.
  assert.equal(scenario('reference').variants[0].pairsPerRound, undefined);
  assert.equal(scenario('dataplane-attached').variants[0].pairsPerRound, undefined);
});

test('pairing: an --only selection still pairs with a reference scenario it did not select', () => {
  const steps = roundSteps([scenario('fast-path')], SCENARIOS);
  assert.deepEqual(steps.map((s) => s.reference?.scenario.id), ['reference', 'reference', 'reference']);
});

test('pairing: a variant naming a reference row that does not exist is refused by name', () => {
  const broken: Scenario = { ...scenario('fast-path'), variants: [{ label: 'x', params: {}, referenceVariant: 'no such row' }] };
  assert.throws(() => referenceOf(broken, broken.variants[0], SCENARIOS), /"fast-path \/ x" names a reference "reference \/ no such row"/);
});

test('pairing: a machine changing speed between rounds leaves the median pair ratio at the row\'s own cost; a row slower than its paired reference still fails', () => {
  // Rounds 1-2 on a fast phase (reference 5 µs), rounds 3-5 on a slow one (7 µs); the row costs
  // 0.2 µs more than its reference in every round.
  const references = [5, 5, 7, 7, 7].map((p50Us) => ({ p50Us, callsPerSec: 1e6 / p50Us }));
  const row = { runs: references.map((r) => ({ p50Us: r.p50Us + 0.2, callsPerSec: 1e6 / (r.p50Us + 0.2) })), references };
  assert.equal(medianOverPairs(row, pairedRatio('p50Us'))?.toFixed(3), (7.2 / 7).toFixed(3));
  assert.equal(medianOverPairs(row, pairedDifference('p50Us'))?.toFixed(3), '0.200');
  assert.equal(referenceMedian(row, 'p50Us'), 7);
  // A row slower than the reference beside it still fails: references that stayed fast while
  // the row's runs went slow read 7.2 / 5 in the median pair.
  const shifted = { runs: row.runs, references: [5, 5, 5, 5, 5].map((p50Us) => ({ p50Us })) };
  assert.ok((medianOverPairs(shifted, pairedRatio('p50Us')) ?? 0) > 1.4);
  const target = TARGETS.find((t) => t.scenario === 'fast-path' && t.name === 'p50 vs (a), issue 18');
  assert.ok(target);
  assert.equal(evaluate(target, row).pass, true, evaluate(target, row).text);
  assert.equal(evaluate(target, shifted).pass, false, evaluate(target, shifted).text);
});

test('pairing: a pair whose reference run failed counts for the row\'s own figures, not for its ratios', () => {
  const row = { runs: [{ p50Us: 10 }, { p50Us: 6 }, { p50Us: 6.3 }], references: [null, { p50Us: 6 }, { p50Us: 6 }] };
  assert.equal(medianOverPairs(row, pairedRatio('p50Us')), 1.025);
  assert.equal(medianOverPairs(row, (run) => run.p50Us), 6.3);
  assert.equal(medianOverPairs({ runs: [{ p50Us: 6 }], references: [null] }, pairedRatio('p50Us')), undefined);
  const target = TARGETS.find((t) => t.scenario === 'fast-path' && t.name === 'p50 vs (a), issue 18');
  assert.ok(target);
  assert.match(evaluate(target, { runs: [{ p50Us: 6 }], references: [null] }).text, /no figure/);
});
