import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ANSWERED_BY_LABELS } from '../common/answer-labels';
import { AnswerKind, AnsweredBy, type PolicyFinding } from '../proto/gen/seccompagent/v1/dataplane';
import { AnswerLedger, type AnswerLatencySink } from './answer-ledger';
import { ContainerTable } from './container-table';
import { zeroCounters } from './counters';
import type { AnswerOutcome } from './decisions';
import type { EventBody, EventTags } from './watch-hub';

const PEER = { pid: 1, uid: 0, gid: 0 };
const CONTINUE: AnswerOutcome = { kind: AnswerKind.ANSWER_KIND_CONTINUE, errno: 0, value: 0n };
const GONE: AnswerOutcome = { kind: AnswerKind.ANSWER_KIND_TARGET_GONE, errno: 0, value: 0n };
const FINDINGS: PolicyFinding[] = [
  { policy: 'SeccompNotifyPolicy shop/audit-mkdir', rule: 'rules[0]', mode: 'Audit', action: 'errno EPERM', kind: AnswerKind.ANSWER_KIND_ERROR, errno: 1 },
];

function ledger(watched = false) {
  const counters = zeroCounters();
  const containers = new ContainerTable();
  containers.add(1, { containerId: 'c1', status: 'creating', pid: 10, processPid: 10, bundle: '/b', annotations: {}, metadata: '', ociVersion: '0.2.0', seccompFdIndex: 0 }, PEER);
  const published: Array<{ body: EventBody; tags: EventTags | null }> = [];
  const hub = { active: watched, publish: (body: EventBody, tags: EventTags | null) => void published.push({ body, tags }) };
  const latencies: string[] = [];
  const sink: AnswerLatencySink = {
    observe: (by, ns) => void latencies.push(`observe ${by} ${ns}`),
    add: (by, buckets, sumNs, count) => void latencies.push(`add ${by} [${buckets.join(',')}] ${sumNs} ${count}`),
  };
  const answers = new AnswerLedger(counters, containers, hub);
  answers.latency = sink;
  const perContainer = () => {
    const c = containers.list()[0];
    return { default: c.answeredDefault, fastPath: c.answeredFastPath };
  };
  return { answers, counters, containers, hub, published, latencies, perContainer };
}

test('answer ledger: notifications are counted in total and by syscall name', () => {
  const { answers, counters } = ledger();
  answers.countNotifications('mkdir');
  answers.countNotifications('mkdir', 3);
  answers.countNotifications('getppid');
  assert.equal(counters.notifications, 5);
  assert.deepEqual([...answers.notificationsBySyscall], [['mkdir', 4], ['getppid', 1]]);
});

test('answer ledger: each answer counts in its answerer\'s Counters field, and default answers per container', () => {
  const { answers, counters, perContainer } = ledger();
  for (const { by } of ANSWERED_BY_LABELS) answers.record(1, 1n, 'c1', '', by, CONTINUE, 5n);
  for (const { counter } of ANSWERED_BY_LABELS) assert.equal(counters[counter], 1, counter);
  // no-control-plane, deadline, detached and recovered are default answers; control-plane is neither.
  assert.deepEqual(perContainer(), { default: 4n, fastPath: 1n });
  assert.equal(counters.targetGone, 0);
  assert.equal(counters.notifications, 0, 'an answer is not a notification');
});

test('answer ledger: an answer whose target was gone counts as target gone only, its latency still observed', () => {
  const { answers, counters, perContainer, latencies } = ledger();
  answers.record(1, 1n, 'c1', '', AnsweredBy.ANSWERED_BY_DEFAULT_DEADLINE, GONE, 7n);
  assert.equal(counters.targetGone, 1);
  assert.equal(counters.answeredDefaultDeadline, 0);
  assert.deepEqual(perContainer(), { default: 0n, fastPath: 0n });
  assert.deepEqual(latencies, [`observe ${AnsweredBy.ANSWERED_BY_DEFAULT_DEADLINE} 7`]);
});

test('answer ledger: a native tally counts its notifications, its answers and its latency buckets at once', () => {
  const { answers, counters, perContainer, latencies } = ledger();
  answers.recordTally(1, 'getppid', AnsweredBy.ANSWERED_BY_FAST_PATH, false, 3, [1, 2], 30n);
  answers.recordTally(1, 'getppid', AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE, true, 2, [2], 20n);
  assert.equal(counters.notifications, 5);
  assert.equal(answers.notificationsBySyscall.get('getppid'), 5);
  assert.equal(counters.answeredFastPath, 3);
  assert.equal(counters.answeredDefaultNoControlPlane, 0);
  assert.equal(counters.targetGone, 2);
  assert.deepEqual(perContainer(), { default: 0n, fastPath: 3n });
  assert.deepEqual(latencies, [`add ${AnsweredBy.ANSWERED_BY_FAST_PATH} [1,2] 30 3`, `add ${AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE} [2] 20 2`]);
});

test('answer ledger: unwatched, an answer is counted and published nowhere', () => {
  const { answers, published } = ledger(false);
  answers.record(1, 1n, 'c1', 'mkdir', AnsweredBy.ANSWERED_BY_CONTROL_PLANE, CONTINUE, 5n);
  answers.rememberFindings(1, 2n, FINDINGS);
  assert.deepEqual(published, []);
  assert.equal(answers.takeFindings(1, 2n), undefined, 'findings are kept only while watched');
});

test('answer ledger: watched, an answer event names its syscall, its rule and the policy version in force', () => {
  const { answers, containers, published } = ledger(true);
  containers.setPolicy(1, 'v7', 3, {});
  answers.rememberSyscall(1, 9n, 'mkdir');
  assert.equal(answers.syscallOf(1, 9n), 'mkdir');
  const syscall = answers.takeSyscall(1, 9n);
  assert.equal(answers.syscallOf(1, 9n), '', 'taken: forgotten');
  answers.record(1, 9n, 'c1', syscall, AnsweredBy.ANSWERED_BY_FAST_PATH, CONTINUE, 1_500n, 2);
  answers.record(1, 10n, 'c1', '', AnsweredBy.ANSWERED_BY_CONTROL_PLANE, CONTINUE, 1n);
  assert.equal(published.length, 2);
  const [byRule, byControlPlane] = published.map((p) => (p.body.$case === 'answer' ? p.body.answer : assert.fail('not an answer')));
  assert.deepEqual(published[0].tags, { containerId: 'c1', syscall: 'mkdir' });
  assert.equal(byRule.answeredBy, AnsweredBy.ANSWERED_BY_FAST_PATH);
  assert.equal(byRule.ruleIndex, 2);
  assert.equal(byRule.policyVersion, 'v7');
  assert.equal(byRule.handle, 1n);
  assert.equal(byRule.kind, AnswerKind.ANSWER_KIND_CONTINUE);
  assert.deepEqual(byRule.latency, { seconds: 0n, nanos: 1500 });
  assert.equal(byControlPlane.ruleIndex, 0);
  assert.equal(byControlPlane.policyVersion, '', 'no rule answered: no policy version');
});

test('answer ledger: an emulated decision\'s findings wait for its answer, once', () => {
  const { answers } = ledger(true);
  answers.rememberFindings(1, 2n, []);
  assert.equal(answers.takeFindings(1, 2n), undefined, 'no findings: nothing kept');
  answers.rememberFindings(1, 2n, FINDINGS);
  assert.equal(answers.takeFindings(1, 2n), FINDINGS);
  assert.equal(answers.takeFindings(1, 2n), undefined);
});

test('answer ledger: forgetting a container drops what it remembered of that container only', () => {
  const { answers } = ledger(true);
  answers.rememberSyscall(1, 1n, 'mkdir');
  answers.rememberSyscall(11, 1n, 'mount');
  answers.rememberFindings(1, 2n, FINDINGS);
  answers.forgetContainer(1);
  assert.equal(answers.syscallOf(1, 1n), '');
  assert.equal(answers.takeFindings(1, 2n), undefined);
  assert.equal(answers.syscallOf(11, 1n), 'mount', 'handle 11 is not handle 1');
});
