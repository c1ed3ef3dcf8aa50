// The common `when` expressions compiled straight to JavaScript closures, with CEL's meaning:
// comparisons of args, paths, syscall, arch, container and the pod's names, labels and
// annotations with constants, joined by &&, ||, ! and ?:, and the string tests startsWith,
// endsWith and contains. @bufbuild/cel's interpreter spends about 1.5 µs on such an expression
// (an activation built per notification, a generic walk of the plan); a closure reads the input
// as it is (docs/benchmarks.md, "when rules without the interpreter").
//
// Anything outside that subset (macros, regexes, arithmetic, doubles, lists, string ordering, mixed
// kinds, a non-constant index) is not compiled here: compileDirect returns null and the
// interpreter evaluates it. Within the subset the closures follow the interpreter, which a
// differential test (cel-direct.test.ts) checks over generated expressions and inputs:
// - an index out of range, a missing path or a missing label is an error, not false;
// - && and || are commutative over errors: false && error is false, true || error is true, and
//   any other error makes the whole an error (its message is the interpreter's: the caller asks it);
// - int and uint compare by value (1 == 1u), as CEL's heterogeneous equality does.
import type { parse } from '@bufbuild/cel';
import type { ConditionInput } from './cel-condition';

type Expr = ReturnType<typeof parse>['expr'];

/** An evaluation error; the caller asks the interpreter for its message. */
export const CEL_ERROR: unique symbol = Symbol('cel error');

type Value = boolean | bigint | string | typeof CEL_ERROR;
type Kind = 'bool' | 'number' | 'string';
type Eval = (input: ConditionInput) => Value;

interface Compiled {
  readonly kind: Kind;
  readonly run: Eval;
}

/** A closure that gives true, false or CEL_ERROR; null when the expression is outside the subset. */
export function compileDirect(expr: Expr): ((input: ConditionInput) => boolean | typeof CEL_ERROR) | null {
  const compiled = compile(expr);
  if (compiled === null || compiled.kind !== 'bool') return null;
  return compiled.run as (input: ConditionInput) => boolean | typeof CEL_ERROR;
}

const STRING_VARIABLES: Readonly<Record<string, (input: ConditionInput) => string>> = {
  syscall: (input) => input.syscall,
  arch: (input) => input.arch ?? 'x86_64',
  container: (input) => input.container,
};

const POD_STRINGS: Readonly<Record<string, (input: ConditionInput) => string>> = {
  namespace: (input) => input.pod.namespace,
  name: (input) => input.pod.name,
};

type PodMap = 'labels' | 'annotations';

/** A name's reader, never Object.prototype's (`toString` is no variable). */
function own(readers: Readonly<Record<string, (input: ConditionInput) => string>>, name: string): ((input: ConditionInput) => string) | undefined {
  return Object.hasOwn(readers, name) ? readers[name] : undefined;
}

function compile(expr: Expr): Compiled | null {
  const kind = expr.exprKind;
  switch (kind.case) {
    case 'constExpr': {
      const c = kind.value.constantKind;
      switch (c.case) {
        case 'boolValue': return constant('bool', c.value);
        case 'stringValue': return constant('string', c.value);
        case 'int64Value':
        case 'uint64Value': return constant('number', BigInt(c.value));
        default: return null;
      }
    }
    case 'identExpr': {
      const read = own(STRING_VARIABLES, kind.value.name);
      return read ? { kind: 'string', run: read } : null;
    }
    case 'selectExpr': {
      const { operand, field, testOnly } = kind.value;
      if (!operand) return null;
      const map = podMapOf(operand);
      if (map !== null) return testOnly ? { kind: 'bool', run: (input) => Object.hasOwn(input.pod[map], field) } : podMapEntry(map, field);
      if (testOnly || !isIdent(operand, 'pod')) return null;
      const read = own(POD_STRINGS, field);
      return read ? { kind: 'string', run: read } : null;
    }
    case 'callExpr':
      return call(kind.value.function, kind.value.target, kind.value.args);
    default:
      return null;
  }
}

function call(name: string, target: Expr | undefined, args: readonly Expr[]): Compiled | null {
  if (target) return args.length === 1 ? stringTest(name, target, args[0]) : null;
  switch (name) {
    case '_&&_':
    case '_||_':
      return args.length === 2 ? logical(name === '_&&_', args[0], args[1]) : null;
    case '!_': {
      const operand = args.length === 1 ? compile(args[0]) : null;
      if (operand?.kind !== 'bool') return null;
      const run = operand.run;
      return { kind: 'bool', run: (input) => { const v = run(input); return v === CEL_ERROR ? v : !v; } };
    }
    case '_?_:_':
      return args.length === 3 ? conditional(args[0], args[1], args[2]) : null;
    case '_==_':
    case '_!=_':
      return args.length === 2 ? equality(name === '_==_', args[0], args[1]) : null;
    case '_<_':
    case '_<=_':
    case '_>_':
    case '_>=_':
      return args.length === 2 ? ordering(name, args[0], args[1]) : null;
    case '_[_]':
      return args.length === 2 ? index(args[0], args[1]) : null;
    case '@in':
      return args.length === 2 ? inPodMap(args[0], args[1]) : null;
    default:
      return null;
  }
}

function constant(kind: Kind, value: boolean | bigint | string): Compiled {
  return { kind, run: () => value };
}

function isIdent(expr: Expr, name: string): boolean {
  return expr.exprKind.case === 'identExpr' && expr.exprKind.value.name === name;
}

/** `pod.labels` or `pod.annotations`: which one, or null. */
function podMapOf(expr: Expr): PodMap | null {
  if (expr.exprKind.case !== 'selectExpr') return null;
  const { operand, field, testOnly } = expr.exprKind.value;
  if (testOnly || !operand || !isIdent(operand, 'pod')) return null;
  return field === 'labels' || field === 'annotations' ? field : null;
}

function podMapEntry(map: PodMap, key: string): Compiled {
  // Own properties only: a label named "constructor" is not Object.prototype's.
  return { kind: 'string', run: (input) => (Object.hasOwn(input.pod[map], key) ? input.pod[map][key] : CEL_ERROR) };
}

function constantKey(expr: Expr): bigint | string | null {
  if (expr.exprKind.case !== 'constExpr') return null;
  const c = expr.exprKind.value.constantKind;
  if (c.case === 'int64Value' || c.case === 'uint64Value') return BigInt(c.value);
  if (c.case === 'stringValue') return c.value;
  return null;
}

/** args[K], paths[K] (K an int or uint constant), pod.labels["k"], pod.annotations["k"]. */
function index(operand: Expr, key: Expr): Compiled | null {
  const k = constantKey(key);
  if (k === null) return null;
  const map = podMapOf(operand);
  if (map !== null) return typeof k === 'string' ? podMapEntry(map, k) : null;
  if (typeof k !== 'bigint') return null;
  if (isIdent(operand, 'args')) {
    const at = Number(k);
    return { kind: 'number', run: (input) => (k >= 0n && at < input.args.length ? input.args[at] : CEL_ERROR) };
  }
  if (isIdent(operand, 'paths')) {
    const at = Number(k);
    return { kind: 'string', run: (input) => input.paths.get(at) ?? CEL_ERROR };
  }
  return null;
}

/** `"k" in pod.labels` (or annotations). */
function inPodMap(key: Expr, operand: Expr): Compiled | null {
  const k = constantKey(key);
  const map = podMapOf(operand);
  if (typeof k !== 'string' || map === null) return null;
  return { kind: 'bool', run: (input) => Object.hasOwn(input.pod[map], k) };
}

function logical(and: boolean, left: Expr, right: Expr): Compiled | null {
  const a = compile(left);
  const b = compile(right);
  if (a?.kind !== 'bool' || b?.kind !== 'bool') return null;
  const runA = a.run;
  const runB = b.run;
  // The value that decides alone (false for &&, true for ||) wins over an error on either side.
  const decisive = !and;
  return {
    kind: 'bool',
    run: (input) => {
      const x = runA(input);
      if (x === decisive) return decisive;
      const y = runB(input);
      if (y === decisive) return decisive;
      return x === CEL_ERROR || y === CEL_ERROR ? CEL_ERROR : !decisive;
    },
  };
}

function conditional(test: Expr, then: Expr, otherwise: Expr): Compiled | null {
  const c = compile(test);
  const a = compile(then);
  const b = compile(otherwise);
  if (c?.kind !== 'bool' || !a || !b || a.kind !== b.kind) return null;
  const [runC, runA, runB] = [c.run, a.run, b.run];
  return { kind: a.kind, run: (input) => { const v = runC(input); return v === CEL_ERROR ? v : v ? runA(input) : runB(input); } };
}

/** Operands of one kind only: CEL's false for "x" == 1 is left to the interpreter. */
function equality(equal: boolean, left: Expr, right: Expr): Compiled | null {
  const a = compile(left);
  const b = compile(right);
  if (!a || !b || a.kind !== b.kind) return null;
  return strict(a.run, b.run, (x, y) => (x === y) === equal);
}

/** Numbers only: strings order by code point in CEL, by UTF-16 unit in JavaScript. */
function ordering(name: string, left: Expr, right: Expr): Compiled | null {
  const a = compile(left);
  const b = compile(right);
  if (a?.kind !== 'number' || b?.kind !== 'number') return null;
  const holds: (x: bigint, y: bigint) => boolean =
    name === '_<_' ? (x, y) => x < y : name === '_<=_' ? (x, y) => x <= y : name === '_>_' ? (x, y) => x > y : (x, y) => x >= y;
  return strict(a.run, b.run, holds as Test);
}

/** s.startsWith(t), s.endsWith(t), s.contains(t). */
function stringTest(name: string, target: Expr, arg: Expr): Compiled | null {
  if (name !== 'startsWith' && name !== 'endsWith' && name !== 'contains') return null;
  const s = compile(target);
  const t = compile(arg);
  if (s?.kind !== 'string' || t?.kind !== 'string') return null;
  const test: (x: string, y: string) => boolean =
    name === 'startsWith' ? (x, y) => x.startsWith(y) : name === 'endsWith' ? (x, y) => x.endsWith(y) : (x, y) => x.includes(y);
  return strict(s.run, t.run, test as Test);
}

type Test = (x: Value, y: Value) => boolean;

/** A bool from both operands, the left evaluated first; an error in either is the result. */
function strict(runA: Eval, runB: Eval, test: Test): Compiled {
  return {
    kind: 'bool',
    run: (input) => {
      const x = runA(input);
      if (x === CEL_ERROR) return x;
      const y = runB(input);
      if (y === CEL_ERROR) return y;
      return test(x, y);
    },
  };
}
