import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentError } from '../../../common/errors';
import { compileCondition, DEFAULT_CEL_COST_LIMIT, LIMITS, type ConditionInput } from './cel-condition';

const input: ConditionInput = {
  syscall: 'mkdirat',
  args: [0xffffff9cn, 0n, 0o755n],
  paths: new Map([[1, '/etc/cron.d']]),
  pod: { namespace: 'shop', name: 'web-1', labels: { app: 'web', tier: 'front' }, annotations: { note: 'x' } },
  container: 'app',
};
const evaluate = (source: string, over: Partial<ConditionInput> = {}) => {
  const i = { ...input, ...over };
  return compileCondition(source, DEFAULT_CEL_COST_LIMIT).evaluate(i);
};
const code = (c: string) => (err: unknown) => err instanceof AgentError && err.code === c;

test('cel when: the variables the issue names, with pod.namespace for the reserved word', () => {
  assert.deepEqual(evaluate('paths[1].startsWith("/etc") && syscall == "mkdirat"'), { matched: true, error: null });
  assert.deepEqual(evaluate('args[2] == 493u && size(args) == 3'), { matched: true, error: null });
  assert.deepEqual(evaluate('pod.namespace == "shop" && pod.name == "web-1" && container == "app"'), { matched: true, error: null });
  assert.deepEqual(evaluate('pod.labels["app"] == "web" && has(pod.annotations.note) && !("db" in pod.labels)'), { matched: true, error: null });
  assert.deepEqual(evaluate('pod.labels.exists(k, k.startsWith("ti"))'), { matched: true, error: null });
  assert.deepEqual(evaluate('paths[1].matches("^/etc/cron")'), { matched: true, error: null });
  assert.deepEqual(evaluate('paths[1].lowerAscii() == "/etc/cron.d"'), { matched: true, error: null }, 'the strings extension');
  assert.throws(() => compileCondition('namespace == "shop"', 1000), (e) => code('ECEL_COMPILE')(e) && /use pod\.namespace/.test((e as Error).message));
});

test('cel when: compile errors: syntax, undeclared names, unknown functions', () => {
  assert.throws(() => compileCondition('paths[0].startsWith(', 1000), code('ECEL_COMPILE'));
  assert.throws(() => compileCondition('nosuch == 1', 1000), (e) => code('ECEL_COMPILE')(e) && /undeclared reference to "nosuch"/.test((e as Error).message));
  assert.throws(() => compileCondition('paths[0].startWith("/")', 1000), (e) => code('ECEL_COMPILE')(e) && /unknown function "startWith"/.test((e as Error).message));
  assert.doesNotThrow(() => compileCondition('args.all(a, a >= 0u)', 1000), 'comprehension variables are declared');
});

test('cel when: a false, absent or non-bool result does not match and says why', () => {
  assert.deepEqual(evaluate('paths[1].startsWith("/tmp")'), { matched: false, error: null });
  const absent = evaluate('paths[0] == "/etc"');
  assert.equal(absent.matched, false);
  assert.ok(absent.error);
  assert.deepEqual(evaluate('syscall'), { matched: false, error: 'the expression gave a string, not a bool' });
});

test('cel when: worst-case cost estimated from the declared bounds; over the limit is ECEL_COST', () => {
  const cheap = compileCondition('paths[0].startsWith("/etc")', 1000);
  assert.ok(cheap.cost > 0 && cheap.cost < 20, String(cheap.cost));
  const scan = compileCondition('pod.labels.exists(k, k.startsWith("team"))', DEFAULT_CEL_COST_LIMIT);
  assert.ok(scan.cost >= LIMITS.labelEntries, `a comprehension costs its range times its body: ${scan.cost}`);
  const contains = compileCondition('paths[0].contains("x")', DEFAULT_CEL_COST_LIMIT);
  assert.ok(contains.cost >= LIMITS.path / 10, `contains traverses the path: ${contains.cost}`);
  assert.throws(() => compileCondition('pod.annotations.exists(k, pod.annotations[k].contains(paths[0]))', DEFAULT_CEL_COST_LIMIT), (e) => code('ECEL_COST')(e) && /exceeds the limit 100000/.test((e as Error).message));
  assert.throws(() => compileCondition('args.all(a, args.all(b, args.all(c, a + b + c > 0u)))', 100), code('ECEL_COST'));
});

test('cel when: an input outside the declared bounds is an error, not a costlier evaluation', () => {
  const labels = Object.fromEntries(Array.from({ length: LIMITS.labelEntries + 1 }, (_, i) => [`k${i}`, 'v']));
  const result = evaluate('pod.labels.exists(k, k == "k1")', { pod: { ...input.pod, labels } });
  assert.equal(result.matched, false);
  assert.match(result.error ?? '', /outside the declared bounds: the pod has 257 labels/);
});

test('cel when: matches is costed by the compiled RE2 program, not the pattern text: counted repetition is refused at admission (issue 17)', () => {
  const heavy = `paths[0].matches("${'[a-z]{1000}'.repeat(8)}")`;
  assert.throws(() => compileCondition(heavy, DEFAULT_CEL_COST_LIMIT), (err: unknown) => code('ECEL_COST')(err) && /exceeds the limit/.test((err as Error).message));
  assert.throws(() => compileCondition('paths[0].matches("[a-z]{1000}")', DEFAULT_CEL_COST_LIMIT), code('ECEL_COST'));
  // A short pattern stays cheap; the estimate follows the program (1,002 instructions) times the input.
  const light = compileCondition('paths[1].matches("^/etc/[a-z]+")', DEFAULT_CEL_COST_LIMIT);
  assert.ok(light.cost < 10_000, `cost ${light.cost}`);
  assert.deepEqual(light.evaluate(input), { matched: true, error: null });
  assert.ok(compileCondition('paths[1].matches("[a-z]{1000}")', 10_000_000).cost > 400_000);
  assert.throws(() => compileCondition('paths[1].matches(pod.annotations["re"])', DEFAULT_CEL_COST_LIMIT), (err: unknown) => code('ECEL_COST')(err) && /string constant/.test((err as Error).message));
  assert.throws(() => compileCondition('paths[1].matches("(")', DEFAULT_CEL_COST_LIMIT), code('ECEL_COMPILE'));
});

test('cel when: each evaluation is metered at run time: a matches that would exceed the evaluation\'s budget stops as overBudget', () => {
  const c = compileCondition('paths[1].matches("^/etc/[a-z.]+$") || paths[1].matches("x")', DEFAULT_CEL_COST_LIMIT);
  assert.deepEqual(c.evaluate(input), { matched: true, error: null });
  const r = c.evaluate(input, 3);
  assert.equal(r.overBudget, true);
  assert.equal(r.matched, false);
  assert.match(r.error ?? '', /^evaluation budget exceeded: matches on 11 bytes/);
});
