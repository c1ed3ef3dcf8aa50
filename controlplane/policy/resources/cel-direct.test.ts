// The closures of cel-direct.ts against @bufbuild/cel's interpreter: generated expressions, in the
// subset and outside it, over generated inputs, must give the same result, error messages included.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compileCondition, DEFAULT_CEL_COST_LIMIT, type ConditionInput } from './cel-condition';

/** mulberry32: the same cases on every run, so a failure names a reproducible seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Kind = 'bool' | 'number' | 'string';

class Generator {
  constructor(private readonly next: () => number) {}

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }

  expr(kind: Kind, depth: number): string {
    const leaf = depth <= 0 || this.next() < 0.3;
    if (kind === 'number') {
      if (leaf) return this.pick(['args[0]', 'args[1]', 'args[5]', 'args[6]', 'args[-1]', 'args[2u]', '0', '5u', '493u', '-1', '1', '18446744073709551615u', '9223372036854775807']);
      return this.pick([`(${this.expr('bool', depth - 1)} ? ${this.expr('number', depth - 1)} : ${this.expr('number', depth - 1)})`, 'args[0]']);
    }
    if (kind === 'string') {
      if (leaf) {
        return this.pick(['paths[0]', 'paths[1]', 'paths[2u]', 'paths[7]', 'syscall', 'arch', 'container', 'pod.namespace', 'pod.name', 'pod.labels["app"]', 'pod.labels.team',
          'pod.labels["constructor"]', 'pod.annotations["note"]', 'pod.annotations.toString', '"/etc"', '""', '"x"', '"mkdir"', '"é"', '"web"']);
      }
      return `(${this.expr('bool', depth - 1)} ? ${this.expr('string', depth - 1)} : ${this.expr('string', depth - 1)})`;
    }
    if (leaf) return this.pick(['true', 'false', '"app" in pod.labels', '"constructor" in pod.labels', 'has(pod.annotations.note)', 'has(pod.labels.toString)']);
    const a = () => this.expr('bool', depth - 1);
    const n = () => this.expr('number', depth - 1);
    const s = () => this.expr('string', depth - 1);
    const forms: Array<() => string> = [
      () => `${a()} && ${a()}`,
      () => `(${a()} || ${a()})`,
      () => `!(${a()})`,
      () => `(${a()} ? ${a()} : ${a()})`,
      () => `${a()} == ${a()}`,
      () => `${n()} ${this.pick(['==', '!=', '<', '<=', '>', '>='])} ${n()}`,
      () => `${s()} ${this.pick(['==', '!='])} ${s()}`,
      () => `${s()}.${this.pick(['startsWith', 'endsWith', 'contains'])}(${s()})`,
      // Outside the subset: the interpreter evaluates these, inside expressions the closures do not take.
      () => this.pick(['size(args) > 2', 'paths[0].matches("^/e")', 'args.exists(x, x == 0u)', `${s()} < ${s()}`, `${s()} == ${n()}`, 'args[0] + 1u == 2u', 'args[0] == 0.0']),
    ];
    return this.pick(forms)();
  }

  input(): ConditionInput {
    const numbers = [0n, 1n, 5n, 493n, 2n ** 63n, 2n ** 64n - 1n];
    const strings = ['/etc', '/etc/x', '', 'x', 'é/ü', 'a\u{1F600}b', 'web', 'mkdir'];
    const args = Array.from({ length: Math.floor(this.next() * 7) }, () => this.pick(numbers));
    const paths = new Map<number, string>();
    for (const index of [0, 1, 2]) if (this.next() < 0.6) paths.set(index, this.pick(strings));
    const labels: Record<string, string> = {};
    if (this.next() < 0.7) labels.app = this.pick(['web', 'x', '']);
    if (this.next() < 0.5) labels.team = this.pick(strings);
    if (this.next() < 0.2) Object.assign(labels, { constructor: 'own' });
    const annotations: Record<string, string> = this.next() < 0.5 ? { note: this.pick(strings) } : {};
    return {
      syscall: this.pick(['mkdir', 'mkdirat', 'getppid']),
      arch: this.pick([undefined, 'x86_64', 'i386']),
      args, paths,
      pod: { namespace: this.pick(['shop', 'web']), name: this.pick(['web-1', '/etc']), labels, annotations },
      container: this.pick(['app', '', 'x']),
    };
  }
}

test('cel-direct: generated expressions give what the interpreter gives, errors and their words included', () => {
  const generate = new Generator(random(0x5eccac));
  let direct = 0;
  const seen = { true: 0, false: 0, error: 0 };
  for (let i = 0; i < 1500; i++) {
    const source = generate.expr('bool', 1 + (i % 4));
    // Costs are not this test's subject: a string test on an annotation is dear by its bound.
    const fast = compileCondition(source, Number.MAX_SAFE_INTEGER);
    const reference = compileCondition(source, Number.MAX_SAFE_INTEGER, { direct: false });
    assert.equal(fast.cost, reference.cost);
    assert.equal(reference.direct, false);
    if (fast.direct) direct++;
    for (let j = 0; j < 8; j++) {
      const input = generate.input();
      const expected = reference.evaluate(input);
      assert.deepEqual(fast.evaluate(input), expected, `${source} on ${JSON.stringify({ ...input, paths: [...input.paths] }, (_, v) => (typeof v === 'bigint' ? `${v}u` : v))}`);
      if (fast.direct) seen[expected.error !== null ? 'error' : expected.matched ? 'true' : 'false']++;
    }
  }
  // Not vacuous: most expressions take the closures, and their results cover all three outcomes.
  assert.ok(direct > 900, `${direct} of 1500 expressions were compiled to closures`);
  for (const [outcome, count] of Object.entries(seen)) assert.ok(count > 500, `${count} direct evaluations gave ${outcome}`);
});

test('cel-direct: the common rules take the closures; macros, regexes and arithmetic the interpreter', () => {
  const compiled = (source: string) => compileCondition(source, DEFAULT_CEL_COST_LIMIT).direct;
  for (const source of [
    'pod.labels["app"] == "bench" && args[0] == 0u',
    'paths[0].startsWith("/etc") || paths[0].endsWith(".conf")',
    'syscall == "mount" && !has(pod.annotations.trusted) && container != "init"',
    '"debug" in pod.labels ? args[1] <= 493u : args[1] == 0u',
  ]) {
    assert.equal(compiled(source), true, source);
  }
  for (const source of ['size(args) == 3', 'paths[0].matches("^/etc")', 'pod.labels.exists(k, k == "a")', 'args[0] + 1u == 2u', 'paths[0] < "b"', 'syscall == 1', 'syscall']) {
    assert.equal(compiled(source), false, source);
  }
});

test('cel-direct: labels named after Object.prototype are only the pod\'s own', () => {
  const input: ConditionInput = { syscall: 'mkdir', args: [], paths: new Map(), pod: { namespace: 'n', name: 'p', labels: JSON.parse('{"__proto__":"x"}'), annotations: {} }, container: 'c' };
  const condition = compileCondition('pod.labels["__proto__"] == "x" && !("toString" in pod.labels) && !has(pod.annotations.constructor)', DEFAULT_CEL_COST_LIMIT);
  assert.equal(condition.direct, true);
  assert.deepEqual(condition.evaluate(input), { matched: true, error: null });
  assert.deepEqual(compileCondition('pod.labels.hasOwnProperty == "x"', DEFAULT_CEL_COST_LIMIT).evaluate(input), { matched: false, error: 'field not found: hasOwnProperty' });
});
