// `when` conditions of the policy resources: CEL (github.com/google/cel-spec) compiled once per
// policy generation with @bufbuild/cel, and evaluated on the notification path against what the
// data plane read (syscall, args, paths) and the container's identity (pod, container).
//
// Why @bufbuild/cel (docs/policy.md, "Policy resources", has the comparison): it passes the
// cel-spec conformance suite it ships (814 of the 846 scalar-result conformance tests here, against
// 705 for @marcbachmann/cel-js and 230 for cel-js), its AST is the standard cel.expr protobuf Expr
// (so the cost estimate below walks the same tree cel-go's estimator walks), it ships CommonJS
// (no require(esm) on Node 20), is Apache-2.0 and maintained by Buf, and its one peer dependency
// is @bufbuild/protobuf, which the project already has.
//
// Cost, in the manner of ValidatingAdmissionPolicy: every expression gets a worst-case cost
// estimate at compile time, from the declared bounds of its variables (a path is at most 4096
// bytes, a pod has at most 256 labels, ...): one unit per node, a tenth of a unit per byte a string
// function traverses, and a comprehension's body times the size of its range. An expression whose
// estimate exceeds the limit is refused at compile time (ECEL_COST) and its policy's previous
// generation stays in force. The bounds are checked again on every evaluation: an input outside
// them is an evaluation error (the rule does not match), so no evaluation costs more than its
// estimate.
//
// Regexes: `matches` runs RE2 (linear in input × compiled program size), so its cost is the input's
// bytes / 10 times the compiled program's instruction count, not the pattern's length (a counted
// repetition multiplies the program: `[a-z]{1000}` is 1,002 instructions from 11 characters). The
// pattern must be a string constant, compiled once at admission. At run time every `matches` is
// metered against what is left of its evaluation's budget (the estimate) before it runs: an
// evaluation that would exceed it stops with a budget error (ECEL_BUDGET), which the rule's
// failurePolicy answers (decision.ts), as it does a decision whose deadline has passed.
import { RE2JS } from '@bufbuild/re2';
import { celEnv, CelScalar, celUint, isCelError, listType, mapType, parse, plan, type CelEnv, type CelInput } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { AgentError } from '../../../common/errors';
import { CEL_ERROR, compileDirect } from './cel-direct';

/** The default --cel-cost-limit: per evaluation, a notification's worth of work. */
export const DEFAULT_CEL_COST_LIMIT = 100_000;

/** What a condition sees. `paths`: argument index -> the path the data plane read. */
export interface ConditionInput {
  readonly syscall: string;
  /** The caller's ABI: "x86_64" (also when absent), "i386" or "x32" (common/syscall-abi.ts). */
  readonly arch?: string;
  readonly args: readonly bigint[];
  readonly paths: ReadonlyMap<number, string>;
  readonly pod: {
    readonly namespace: string;
    readonly name: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: Readonly<Record<string, string>>;
  };
  readonly container: string;
}

/** The worst-case size of a value: string length, or entries of a list or map. */
interface Bound {
  readonly size: number;
  /** List element, or map value. */
  readonly elem?: Bound;
  /** Map key. */
  readonly key?: Bound;
  /** Known fields of a map (pod.labels, ...). */
  readonly fields?: Readonly<Record<string, Bound>>;
}

/** The declared bounds, checked on every input (boundsProblem). */
export const LIMITS = Object.freeze({
  syscall: 64,
  args: 6,
  path: 4096,
  namespace: 63,
  podName: 253,
  container: 63,
  labelEntries: 256,
  labelKey: 317,
  labelValue: 63,
  annotationEntries: 256,
  /** Kubernetes caps all annotations of an object together at 256 KiB. */
  annotationValue: 262_144,
});

const SCALAR: Bound = { size: 1 };
const VARIABLES: Readonly<Record<string, Bound>> = Object.freeze({
  syscall: { size: LIMITS.syscall },
  arch: { size: 8 },
  args: { size: LIMITS.args, elem: SCALAR },
  paths: { size: LIMITS.args, key: SCALAR, elem: { size: LIMITS.path } },
  container: { size: LIMITS.container },
  pod: {
    size: 4,
    key: { size: 11 },
    elem: { size: LIMITS.annotationValue },
    fields: {
      namespace: { size: LIMITS.namespace },
      name: { size: LIMITS.podName },
      labels: { size: LIMITS.labelEntries, key: { size: LIMITS.labelKey }, elem: { size: LIMITS.labelValue } },
      annotations: { size: LIMITS.annotationEntries, key: { size: LIMITS.labelKey }, elem: { size: LIMITS.annotationValue } },
    },
  },
});
/** A value whose size nothing bounds better: the largest string an input can hold. */
const UNKNOWN: Bound = { size: LIMITS.annotationValue, elem: { size: LIMITS.annotationValue }, key: { size: LIMITS.annotationValue } };

/** The budget of the evaluation that runs now (evaluation is synchronous: one at a time). */
let meter: { left: number } | null = null;

/** An evaluation that would cost more than its budget: its rule's failurePolicy answers. */
export const BUDGET_ERROR_PREFIX = 'evaluation budget exceeded';

/** Patterns compiled at admission (a `matches` pattern must be a constant), shared by every evaluation. */
const REGEXES = new Map<string, { readonly re: RE2JS; readonly program: number }>();

function compileRegex(pattern: string): { readonly re: RE2JS; readonly program: number } {
  let compiled = REGEXES.get(pattern);
  if (!compiled) {
    const re = RE2JS.compile(pattern);
    const program = (re as unknown as { re2Input: { prog: { inst: unknown[] } } }).re2Input.prog.inst.length;
    compiled = Object.freeze({ re, program });
    if (REGEXES.size > 4096) REGEXES.clear();
    REGEXES.set(pattern, compiled);
  }
  return compiled;
}

/** RE2's work for one match: input bytes / 10 times the program's instructions. */
const regexCost = (inputBytes: number, program: number) => traversal(inputBytes) * Math.max(1, program);

const ENV: CelEnv = celEnv({
  re2: {
    compile(pattern: string) {
      const { re, program } = compileRegex(pattern);
      return {
        test(input: string): boolean {
          const cost = regexCost(Buffer.byteLength(input), program);
          if (meter) {
            if (cost > meter.left) throw new Error(`${BUDGET_ERROR_PREFIX}: matches on ${Buffer.byteLength(input)} bytes with a ${program}-instruction program costs ${cost}, ${meter.left} left`);
            meter.left -= cost;
          }
          return re.test(input);
        },
      };
    },
  },
  variables: {
    syscall: CelScalar.STRING,
    arch: CelScalar.STRING,
    args: listType(CelScalar.UINT),
    paths: mapType(CelScalar.UINT, CelScalar.STRING),
    container: CelScalar.STRING,
    pod: mapType(CelScalar.STRING, CelScalar.DYN),
  },
  funcs: strings,
});

/** Operators and macro internals the planner implements itself (not in the function resolver). */
const BUILTIN_CALLS = new Set(['_&&_', '_||_', '_?_:_', '!_', '@not_strictly_false', '_[_]', '@in', 'in']);

/** A tenth of a unit per byte traversed, as cel-go's StringTraversalCostFactor. */
const traversal = (bytes: number) => Math.ceil(bytes * 0.1);

type Expr = ReturnType<typeof parse>['expr'];

interface Estimate {
  cost: number;
  bound: Bound;
}

/** Walks a parsed expression: undeclared names and unknown functions are compile errors; returns the worst-case cost. */
function estimate(expr: Expr, scope: ReadonlyMap<string, Bound>): Estimate {
  const kind = expr.exprKind;
  switch (kind.case) {
    case 'constExpr': {
      const c = kind.value.constantKind;
      return { cost: 0, bound: { size: c.case === 'stringValue' ? Buffer.byteLength(c.value) : c.case === 'bytesValue' ? c.value.length : 1 } };
    }
    case 'identExpr': {
      const name = kind.value.name;
      const bound = scope.get(name) ?? VARIABLES[name];
      if (!bound) {
        throw new AgentError('ECEL_COMPILE', `undeclared reference to "${name}" (declared: ${Object.keys(VARIABLES).join(', ')}, and pod.namespace, pod.name, pod.labels, pod.annotations)`);
      }
      return { cost: 1, bound };
    }
    case 'selectExpr': {
      const operand = estimate(kind.value.operand!, scope);
      const field = kind.value.field;
      const bound = operand.bound.fields?.[field] ?? operand.bound.elem ?? UNKNOWN;
      return { cost: operand.cost + 1, bound: kind.value.testOnly ? SCALAR : bound };
    }
    case 'callExpr': {
      const call = kind.value;
      const name = call.function;
      if (!BUILTIN_CALLS.has(name) && !ENV.funcs.find(name)) throw new AgentError('ECEL_COMPILE', `unknown function "${name}"`);
      const target = call.target ? estimate(call.target, scope) : null;
      const args = call.args.map((a) => estimate(a, scope));
      const operands = [...(target ? [target] : []), ...args];
      const sum = operands.reduce((n, e) => n + e.cost, 0);
      const sizes = operands.map((e) => e.bound.size);
      const [a = 1, b = 1] = sizes;
      switch (name) {
        case '_[_]':
          return { cost: sum + 1, bound: operands[0]?.bound.elem ?? UNKNOWN };
        case '@in':
          return { cost: sum + 1 + (b > 1 && !operands[1]?.bound.key ? b : 0), bound: SCALAR };
        case '_==_':
        case '_!=_':
        case '_<_':
        case '_<=_':
        case '_>_':
        case '_>=_':
        case 'startsWith':
        case 'endsWith':
          return { cost: sum + 1 + traversal(Math.min(a, b)), bound: SCALAR };
        case 'matches': {
          const pattern = args[0] && call.args[0]?.exprKind.case === 'constExpr' ? call.args[0].exprKind.value.constantKind : null;
          if (!pattern || pattern.case !== 'stringValue') {
            throw new AgentError('ECEL_COST', 'the pattern of matches() must be a string constant, so that the program it compiles to can be bounded at admission');
          }
          let program: number;
          try {
            program = compileRegex(pattern.value).program;
          } catch (err) {
            throw new AgentError('ECEL_COMPILE', `matches(): ${(err as Error).message}`);
          }
          return { cost: sum + 1 + regexCost(a, program), bound: SCALAR };
        }
        case 'contains':
        case 'indexOf':
        case 'lastIndexOf':
        case 'replace':
        case 'split':
          return { cost: sum + 1 + traversal(a) * Math.max(1, traversal(sizes.slice(1).reduce((n, s) => n + s, 0))), bound: { size: a, elem: { size: a } } };
        case '_+_':
          return { cost: sum + 1 + traversal(a + b), bound: { size: a + b, elem: operands[0]?.bound.elem ?? UNKNOWN } };
        case '_&&_':
        case '_||_':
        case '!_':
        case '@not_strictly_false':
        case 'size':
          return { cost: sum + 1, bound: SCALAR };
        case '_?_:_':
          return { cost: sum + 1, bound: args[1] && args[2] && args[1].bound.size >= args[2].bound.size ? args[1].bound : args[2]?.bound ?? UNKNOWN };
        default:
          // Conversions, arithmetic and the strings extension: proportional to what they read.
          return { cost: sum + 1 + traversal(sizes.reduce((n, s) => n + s, 0)), bound: { size: Math.max(1, ...sizes) } };
      }
    }
    case 'listExpr': {
      const elements = kind.value.elements.map((e) => estimate(e, scope));
      return { cost: elements.reduce((n, e) => n + e.cost, 0) + 1, bound: { size: elements.length, elem: { size: Math.max(1, ...elements.map((e) => e.bound.size)) } } };
    }
    case 'structExpr': {
      const entries = kind.value.entries.map((e) => {
        const key = e.keyKind.case === 'mapKey' ? estimate(e.keyKind.value, scope) : { cost: 0, bound: SCALAR };
        const value = estimate(e.value!, scope);
        return { cost: key.cost + value.cost, key: key.bound, value: value.bound };
      });
      return {
        cost: entries.reduce((n, e) => n + e.cost, 0) + 1,
        bound: { size: entries.length, key: { size: Math.max(1, ...entries.map((e) => e.key.size)) }, elem: { size: Math.max(1, ...entries.map((e) => e.value.size)) } },
      };
    }
    case 'comprehensionExpr': {
      const c = kind.value;
      const range = estimate(c.iterRange!, scope);
      const init = estimate(c.accuInit!, scope);
      const inner = new Map(scope);
      const isMap = range.bound.key !== undefined;
      inner.set(c.iterVar, (isMap ? range.bound.key : range.bound.elem) ?? UNKNOWN);
      if (c.iterVar2) inner.set(c.iterVar2, range.bound.elem ?? UNKNOWN);
      inner.set(c.accuVar, { size: range.bound.size, elem: range.bound.elem ?? UNKNOWN });
      const condition = estimate(c.loopCondition!, inner);
      const step = estimate(c.loopStep!, inner);
      const result = estimate(c.result!, inner);
      return {
        cost: range.cost + init.cost + range.bound.size * (condition.cost + step.cost) + result.cost,
        bound: { size: range.bound.size, elem: UNKNOWN },
      };
    }
    default:
      throw new AgentError('ECEL_COMPILE', `unsupported expression (${kind.case ?? 'empty'})`);
  }
}

/**
 * The pod part of the inputs, as CEL sees it and checked against the bounds, once per pod object:
 * the caller (decision.ts) keeps one object per container until a pod or policy changes,
 * so a notification pays only for its own syscall, args and paths.
 */
const PODS = new WeakMap<ConditionInput['pod'], { readonly value: CelInput; readonly problem: string | null }>();

function podOf(pod: ConditionInput['pod']): { readonly value: CelInput; readonly problem: string | null } {
  let cached = PODS.get(pod);
  if (!cached) {
    const stringMap = (record: Readonly<Record<string, string>>) => new Map(Object.entries(record));
    const value = new Map<string, CelInput>([
      ['namespace', pod.namespace],
      ['name', pod.name],
      ['labels', stringMap(pod.labels)],
      ['annotations', stringMap(pod.annotations)],
    ]) as CelInput;
    cached = { value, problem: podBoundsProblem(pod) };
    PODS.set(pod, cached);
  }
  return cached;
}

function podBoundsProblem(pod: ConditionInput['pod']): string | null {
  const labels = Object.entries(pod.labels);
  if (labels.length > LIMITS.labelEntries) return `the pod has ${labels.length} labels (at most ${LIMITS.labelEntries})`;
  for (const [k, v] of labels) if (k.length > LIMITS.labelKey || v.length > LIMITS.labelValue) return `label ${k.slice(0, 64)} is longer than Kubernetes allows`;
  const annotations = Object.entries(pod.annotations);
  if (annotations.length > LIMITS.annotationEntries) return `the pod has ${annotations.length} annotations (at most ${LIMITS.annotationEntries})`;
  for (const [k, v] of annotations) if (k.length > LIMITS.labelKey || v.length > LIMITS.annotationValue) return `annotation ${k.slice(0, 64)} is longer than Kubernetes allows`;
  if (pod.namespace.length > LIMITS.namespace || pod.name.length > LIMITS.podName) return 'a name is longer than Kubernetes allows';
  return null;
}

/** What is outside the declared bounds in an input, or null. */
export function boundsProblem(input: ConditionInput): string | null {
  if (input.args.length > LIMITS.args) return `${input.args.length} args (at most ${LIMITS.args})`;
  for (const [index, path] of input.paths) if (index >= LIMITS.args || path.length > LIMITS.path) return `path argument ${index} is longer than ${LIMITS.path} bytes`;
  const pod = podOf(input.pod).problem;
  if (pod !== null) return pod;
  if (input.container.length > LIMITS.container || input.syscall.length > LIMITS.syscall) {
    return 'a name is longer than Kubernetes allows';
  }
  return null;
}

/** Activations already built, by input: the rules of one notification share one. */
const ACTIVATIONS = new WeakMap<ConditionInput, Record<string, CelInput>>();

/** The CEL activation of an input (built once per input object): uint args, uint-keyed paths, pod as a map. */
function activation(input: ConditionInput): Record<string, CelInput> {
  let bindings = ACTIVATIONS.get(input);
  if (!bindings) {
    bindings = buildActivation(input);
    ACTIVATIONS.set(input, bindings);
  }
  return bindings;
}

function buildActivation(input: ConditionInput): Record<string, CelInput> {
  return {
    syscall: input.syscall,
    arch: input.arch ?? 'x86_64',
    args: input.args.map((a) => celUint(a)),
    paths: new Map([...input.paths].map(([i, p]) => [celUint(BigInt(i)), p])),
    container: input.container,
    pod: podOf(input.pod).value,
  } as Record<string, CelInput>;
}

export type ConditionResult = {
  readonly matched: boolean;
  readonly error: string | null;
  /** The evaluation stopped at its budget: the rule's failurePolicy decides, not "no match". */
  readonly overBudget?: true;
};

function overBudget(message: string): ConditionResult {
  const at = message.indexOf(BUDGET_ERROR_PREFIX);
  return at >= 0 ? { matched: false, error: message.slice(at), overBudget: true } : { matched: false, error: message };
}

export interface CompiledCondition {
  readonly source: string;
  /** The worst-case cost of one evaluation. */
  readonly cost: number;
  /** Evaluated by a closure (cel-direct.ts) rather than the interpreter; same results. */
  readonly direct: boolean;
  /**
   * true/false, or an error (no such key, not a bool, an input outside the bounds): the rule does
   * not match; or over `budget` (default: the estimate): `overBudget`.
   */
  evaluate(input: ConditionInput, budget?: number): ConditionResult;
}

export interface CompileOptions {
  /** false: always the interpreter (the differential test's reference). Default true. */
  readonly direct?: boolean;
}

/**
 * Compiles a `when` expression. Throws AgentError ECEL_COMPILE (syntax, an undeclared name, an
 * unknown function) or ECEL_COST (the worst-case estimate exceeds costLimit).
 */
export function compileCondition(source: string, costLimit: number, options: CompileOptions = {}): CompiledCondition {
  let parsed;
  try {
    parsed = parse(source);
  } catch (err) {
    const why = (err as Error).message;
    const reserved = /reserved identifier/.test(why) && /\bnamespace\b/.test(source) ? ' (namespace is a reserved word in CEL: use pod.namespace)' : '';
    throw new AgentError('ECEL_COMPILE', `${why}${reserved}`, { cause: err });
  }
  const { cost } = estimate(parsed.expr, new Map());
  if (cost > costLimit) {
    throw new AgentError('ECEL_COST', `estimated worst-case cost ${cost} exceeds the limit ${costLimit} per evaluation (--cel-cost-limit); bound the comprehension, the strings it reads, or the regex's counted repetitions`);
  }
  const run = plan(ENV, parsed);
  // The subset it compiles has no `matches`, the one metered call: its cost never reaches a budget.
  const direct = options.direct === false ? null : compileDirect(parsed.expr);
  return Object.freeze({
    source,
    cost,
    direct: direct !== null,
    evaluate(input: ConditionInput, budget = cost): ConditionResult {
      const outside = boundsProblem(input);
      if (outside) return { matched: false, error: `input outside the declared bounds: ${outside}` };
      if (direct !== null) {
        const value = direct(input);
        // An error: the interpreter below gives it its words.
        if (value !== CEL_ERROR) return { matched: value, error: null };
      }
      let result;
      meter = { left: budget };
      try {
        result = run(activation(input) as never);
      } catch (err) {
        return overBudget((err as Error).message);
      } finally {
        meter = null;
      }
      if (isCelError(result)) return overBudget(result.message);
      if (typeof result !== 'boolean') return { matched: false, error: `the expression gave a ${typeof result}, not a bool` };
      return { matched: result, error: null };
    },
  });
}
