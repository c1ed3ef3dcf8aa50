// common/emulations.ts is the TypeScript twin of the native emulation table
// (native/addon/emulation_table.cpp): this test holds the two together, row by row, so a row added
// on one side only fails here. It also checks what derives from the twin (the feature lists, the
// answer labels). Loading the addon needs no root and no kernel feature.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { answerKindName, answerKindOf } from '../../common/answer-labels';
import { EMULATION_FEATURES, EMULATIONS, emulationNamed } from '../../common/emulations';
import { DATAPLANE_FEATURES } from '../../dataplane/decisions';
import { loadNative } from '../../dataplane/native';

test('emulations: the TypeScript twin has exactly the native table\'s rows (kind, name, title, feature, syscalls and their argument positions, executor)', () => {
  const native = loadNative().emulations();
  const twin = EMULATIONS.map(({ kind, name, title, feature, syscalls, calls, executor }) => ({ kind, name, title, feature, syscalls: [...syscalls], calls: calls.map((c) => ({ ...c })), executor }));
  const table = native.map(({ kind, name, title, feature, syscalls, calls, executor }) => ({ kind, name, title, feature, syscalls, calls, executor }));
  assert.deepEqual(twin, table);
});

test('emulations: the native rows are in kind order (1, 2, ...), each with a policy.proto action and, on the helper pool, a helper op', () => {
  const native = loadNative().emulations();
  assert.deepEqual(native.map((e) => e.kind), native.map((_, i) => i + 1));
  assert.equal(new Set(native.map((e) => e.ruleAction)).size, native.length, 'one RuleAction field each');
  for (const e of native) {
    assert.ok(e.ruleAction > 0, `${e.name}: ruleAction`);
    assert.equal(e.helperOp > 0, e.executor === 'helper-pool', `${e.name}: helperOp ${e.helperOp} on ${e.executor}`);
  }
});

test('emulations: the data plane offers every emulation\'s feature (the control plane\'s list spreads the same EMULATION_FEATURES), and each has its answer label', () => {
  for (const feature of EMULATION_FEATURES) {
    assert.ok(DATAPLANE_FEATURES.includes(feature), `data plane: ${feature}`);
  }
  for (const e of EMULATIONS) {
    assert.equal(answerKindOf(e.name), e.answerKind, e.name);
    assert.equal(answerKindName(e.answerKind), e.name);
    assert.equal(emulationNamed(e.name), e);
  }
  assert.equal(emulationNamed('continue'), undefined);
});
