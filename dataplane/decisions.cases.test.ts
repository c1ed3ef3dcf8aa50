// The API's decisions as the native engine applies them, each refused with a reason when it
// cannot be applied, and what an answer reports back to the API.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AnswerKind, Decision } from '../proto/gen/seccompagent/v1/dataplane';
import { DATAPLANE_FEATURES, outcomeOf, toNativeDecision } from './decisions';

const decide = (action: Decision['action'], initPid = 4242) => toNativeDecision(Decision.fromPartial({ handle: 1n, id: 2n, action }), initPid);

test('decisions: continue, error and value pass through; errno outside 1..4095 is refused', () => {
  assert.deepEqual(decide({ $case: 'continue', continue: {} }), { kind: 'continue' });
  assert.deepEqual(decide({ $case: 'error', error: { errno: 13 } }), { kind: 'error', errno: 13 });
  assert.deepEqual(decide({ $case: 'error', error: { errno: 4095 } }), { kind: 'error', errno: 4095 });
  for (const errno of [0, -1, 4096, 1.5]) assert.match(String(decide({ $case: 'error', error: { errno } })), /is not between 1 and 4095/, String(errno));
  assert.deepEqual(decide({ $case: 'value', value: { value: -5n } }), { kind: 'value', value: -5n });
  assert.equal(decide(undefined), 'the decision has no action');
});

test('decisions: kill defaults to SIGKILL of the runtime\'s init pid, refuses bad signals and a container without init', () => {
  assert.deepEqual(decide({ $case: 'kill', kill: { signal: 0 } }), { kind: 'kill', signal: 9, initPid: 4242, errno: 1 });
  assert.deepEqual(decide({ $case: 'kill', kill: { signal: 15 } }), { kind: 'kill', signal: 15, initPid: 4242, errno: 1 });
  for (const signal of [-1, 65]) assert.match(String(decide({ $case: 'kill', kill: { signal } })), /not between 1 and 64/);
  assert.match(String(decide({ $case: 'kill', kill: { signal: 9 } }, 0)), /no init pid/);
});

test('decisions: freeze answers EPERM once thawed unless told otherwise; a bad errno is refused', () => {
  assert.deepEqual(decide({ $case: 'freeze', freeze: { errno: 0 } }), { kind: 'freeze', errno: 1 });
  assert.deepEqual(decide({ $case: 'freeze', freeze: { errno: 16 } }), { kind: 'freeze', errno: 16 });
  assert.match(String(decide({ $case: 'freeze', freeze: { errno: 5000 } })), /is not between 1 and 4095/);
});

test('decisions: an answer reports its kind, errno and value; a gone target is TARGET_GONE whatever was decided', () => {
  assert.deepEqual(outcomeOf({ kind: 'continue' }, false), { kind: AnswerKind.ANSWER_KIND_CONTINUE, errno: 0, value: 0n });
  assert.deepEqual(outcomeOf({ kind: 'error', errno: 13 }, false), { kind: AnswerKind.ANSWER_KIND_ERROR, errno: 13, value: 0n });
  assert.deepEqual(outcomeOf({ kind: 'value', value: 7n }, false), { kind: AnswerKind.ANSWER_KIND_VALUE, errno: 0, value: 7n });
  assert.deepEqual(outcomeOf({ kind: 'mkdir', errno: 17, value: 0n }, false), { kind: AnswerKind.ANSWER_KIND_MKDIR, errno: 17, value: 0n });
  assert.deepEqual(outcomeOf({ kind: 'freeze', errno: 1 }, false), { kind: AnswerKind.ANSWER_KIND_FREEZE, errno: 1, value: 0n });
  assert.deepEqual(outcomeOf({ kind: 'kill', signal: 9, initPid: 1, errno: 1 }, true), { kind: AnswerKind.ANSWER_KIND_TARGET_GONE, errno: 0, value: 0n });
});

test('decisions: the data plane offers one feature per decision kind, and converts each (defaults filled in)', () => {
  const kinds = ['continue', 'error', 'value', 'mkdir', 'mount', 'kill', 'freeze'];
  assert.deepEqual(DATAPLANE_FEATURES, [...kinds.map((k) => `decision.${k}`), 'policy.v1']);
  for (const k of kinds) assert.ok(decide({ $case: k, [k]: {} } as never), k);
});
