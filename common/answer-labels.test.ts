import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AnswerKind, AnsweredBy, Counters } from '../proto/gen/seccompagent/v1/dataplane';
import { answeredByLabel, answerKindName, answerKindOf, ANSWERED_BY_LABELS, ANSWER_KIND_LABELS } from './answer-labels';

const enumValues = (e: Record<string, string | number>) => Object.values(e).filter((v): v is number => typeof v === 'number' && v > 0);

test('answer labels: every AnsweredBy of the proto has one row, with its own counter and metric label', () => {
  assert.deepEqual(ANSWERED_BY_LABELS.map((l) => l.by).sort(), enumValues(AnsweredBy).sort());
  const answeredCounters = Object.keys(Counters.fromPartial({})).filter((k) => k.startsWith('answered'));
  assert.deepEqual(ANSWERED_BY_LABELS.map((l) => l.counter).sort(), answeredCounters.sort());
  assert.equal(new Set(ANSWERED_BY_LABELS.map((l) => l.metric)).size, ANSWERED_BY_LABELS.length);
  assert.equal(new Set(ANSWERED_BY_LABELS.map((l) => l.text)).size, ANSWERED_BY_LABELS.length);
  for (const l of ANSWERED_BY_LABELS) assert.match(l.metric, /^[a-z_]+$/, 'a Prometheus label value');
});

test('answer labels: default answers say why, others do not', () => {
  assert.equal(answeredByLabel(AnsweredBy.ANSWERED_BY_DEFAULT_DEADLINE)?.text, 'default(deadline)');
  assert.equal(answeredByLabel(AnsweredBy.ANSWERED_BY_CONTROL_PLANE)?.defaultReason, '');
  assert.equal(answeredByLabel(AnsweredBy.ANSWERED_BY_FAST_PATH)?.defaultReason, '');
  assert.equal(answeredByLabel(AnsweredBy.ANSWERED_BY_UNSPECIFIED), undefined);
  const defaults = ANSWERED_BY_LABELS.filter((l) => l.defaultReason !== '').map((l) => l.counter);
  assert.deepEqual(defaults, ['answeredDefaultNoControlPlane', 'answeredDefaultDeadline', 'answeredDefaultDetached', 'answeredDefaultRecovered']);
});

test('answer labels: every AnswerKind of the proto has one name, and names map back', () => {
  assert.deepEqual(ANSWER_KIND_LABELS.map((l) => l.kind).sort(), enumValues(AnswerKind).sort());
  for (const l of ANSWER_KIND_LABELS) {
    assert.equal(answerKindOf(l.name), l.kind);
    assert.equal(answerKindName(l.kind), l.name);
  }
  assert.equal(answerKindOf('explode'), AnswerKind.ANSWER_KIND_UNSPECIFIED);
  assert.equal(answerKindName(AnswerKind.ANSWER_KIND_UNSPECIFIED), undefined);
});
