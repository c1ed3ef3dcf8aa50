// seccompctl explain CONTAINER SYSCALL [ARGS]: which rule answers and why. The data plane is asked
// first (ExplainRule: its own matcher on the rules as pushed, the ones that answer whether a control
// plane is up or not); when that rule is "ask", or no rule answers, the control plane's
// resource-policy explanation (ctl-server.ts) says what it decides.
import { emulationNamed } from '../common/emulations';
import { errnoName } from '../common/errors';
import type { Abi } from '../common/syscall-abi';
import { AgentError } from '../common/errors';
import { listContainers } from '../common/dataplane-client';
import { type Container, type DataPlaneClient, ExplainRuleResponse } from '../proto/gen/seccompagent/v1/dataplane';
import { ArgOp, PathOp, type Rule } from '../proto/gen/seccompagent/v1/policy';
import { EXPLAIN_PATH, type Explanation } from '../common/ctl-protocol';
import { identityFromAnnotations } from '../common/pod-identity';
import { matchContainer, parseExplainArgs, type NamedContainer } from '../common/explain-query';
import { formatLabels, quoteBytes } from './format';
import { formatExplanation, getJson } from './policies';

const ARG_OP_TEXT: Record<number, string> = {
  [ArgOp.ARG_OP_EQ]: '==', [ArgOp.ARG_OP_NE]: '!=', [ArgOp.ARG_OP_LT]: '<', [ArgOp.ARG_OP_LE]: '<=',
  [ArgOp.ARG_OP_GT]: '>', [ArgOp.ARG_OP_GE]: '>=',
};

/** A rule's action in words ("mkdir with the suffix "-shop-web-1" (emulated)"). */
export function describeRuleAction(rule: Rule): string {
  const a = rule.action?.action;
  const emulation = a === undefined ? undefined : emulationNamed(a.$case);
  switch (a?.$case) {
    case 'continue': return 'continue';
    case 'error': return `errno ${errnoName(a.error.errno)}`;
    case 'value': return `return ${a.value.value}`;
    case 'mkdir': return `mkdir with the suffix ${quoteBytes(a.mkdir.suffix)} (emulated)`;
    case 'mount': return `mount (emulated${a.mount.requireCapSysAdmin ? ', the caller needs CAP_SYS_ADMIN' : ''})`;
    case 'kill': return 'kill the container';
    case 'freeze': return `freeze the container (errno ${errnoName(a.freeze.errno || 1)} once thawed)`;
    case 'ask': return 'ask the control plane';
    // An emulation with nothing more to say than its name (common/emulations.ts).
    default: return emulation !== undefined ? `${emulation.title} (emulated)` : 'no action';
  }
}

/** Why `rule` matches `syscall`: its conditions, each in words. */
export function whyRuleMatches(rule: Rule, syscall: string): string {
  const why = [rule.syscalls.length === 0 ? 'it names no syscall (every syscall)' : `${syscall} is one of its syscalls (${rule.syscalls.join(', ')})`];
  for (const m of rule.args) {
    why.push(m.op === ArgOp.ARG_OP_MASKED_EQ ? `args[${m.index}] & ${m.value} == ${m.valueTwo}` : `args[${m.index}] ${ARG_OP_TEXT[m.op] ?? '?'} ${m.value}`);
  }
  for (const p of rule.paths) why.push(`path argument ${p.index} ${p.op === PathOp.PATH_OP_PREFIX ? 'starts with' : 'is'} ${quoteBytes(p.value)}`);
  if (rule.args.length === 0 && rule.paths.length === 0) why.push('no argument or path condition');
  return why.join('; ');
}

/** What explain prints (or, with --json, returns). */
export interface ExplainResult {
  container: string;
  handle: string;
  identity: string;
  syscall: string;
  /** The caller's ABI the question was asked for: x86_64, i386 or x32. */
  arch: Abi;
  args: string[];
  /** The data plane's answer (ExplainRule), as JSON. */
  dataPlane: unknown;
  /** The control plane's explanation, when the data plane's rule asks it (or no rule answers). */
  controlPlane: Explanation | null;
  /** Why controlPlane is null although it was needed. */
  controlPlaneError: string | null;
  lines: string[];
}

function who(c: Container): NamedContainer {
  const l = c.labels;
  const identity = l.namespace && l.pod ? { namespace: l.namespace, pod: l.pod, container: l.container ?? null } : identityFromAnnotations(c.annotations);
  return { containerId: c.containerId, identity };
}

function explainRule(client: DataPlaneClient, request: Parameters<DataPlaneClient['explainRule']>[0]): Promise<ExplainRuleResponse> {
  return new Promise((resolve, reject) => client.explainRule(request, (err, r) => (err ? reject(new AgentError('EBAD_REQUEST', err.details || err.message)) : resolve(r))));
}

export async function explainCommand(client: DataPlaneClient, ctlSocket: string, spec: string, syscall: string, args: string[], timeout: number, arch: Abi = 'x86_64'): Promise<ExplainResult> {
  const containers = (await listContainers(client)).containers;
  const named = containers.map((c) => ({ ...who(c), c }));
  const found = matchContainer(named, spec);
  // The container's init fd when the spec names several fds of it (an exec inherits its rules).
  const fd = named.find((n) => n.containerId === found.containerId && n.c.status !== 'running') ?? found;
  const c = fd.c;
  const { raw, paths } = parseExplainArgs(args);
  const response = await explainRule(client, {
    handle: c.handle, syscall, args: raw, arch,
    stringArgs: [...paths].map(([index, value]) => ({ index, value, truncated: false, raw: Buffer.from(value) })),
  });
  const identity = fd.identity ? `${fd.identity.namespace}/${fd.identity.pod}${fd.identity.container ? `/${fd.identity.container}` : ''}` : 'no pod identity';
  // The ABI always shows: a rule's names cover every ABI, its arguments are the ABI's own.
  const lines = [`container ${c.containerId} (${identity}): ${syscall} (${arch})${args.length ? ` ${args.join(' ')}` : ''}`];
  const rule = response.ruleIndex >= 0 ? response.rules[response.ruleIndex] : undefined;
  let askControlPlane = true;
  if (response.version === '') {
    lines.push('data plane: no policy in force for this container: the control plane decides each call while one is attached, else the default action answers');
  } else if (!rule) {
    lines.push(`data plane: policy ${response.version} (${response.rules.length} rules, labels ${formatLabels(response.labels, 'none')}): no rule matches, so the control plane decides while attached, else the default action answers`);
  } else {
    const native = rule.action?.action?.$case !== 'ask';
    askControlPlane = !native;
    lines.push(`data plane: policy ${response.version} (${response.rules.length} rules, labels ${formatLabels(response.labels, 'none')}): rule ${response.ruleIndex} (${rule.origin || 'no origin'}) answers: ${describeRuleAction(rule)}${native ? ', natively, whether a control plane is attached or not' : ''}`);
    lines.push(`  why: ${whyRuleMatches(rule, syscall)}${response.ruleIndex > 0 ? `; rules 0 to ${response.ruleIndex - 1} do not match` : ''}`);
    if (!native) lines.push('  while no control plane is attached, or it misses its deadline, the default action answers');
  }
  let controlPlane: Explanation | null = null;
  let controlPlaneError: string | null = null;
  if (askControlPlane) {
    try {
      const query = new URLSearchParams({ container: c.containerId, syscall });
      for (const a of args) query.append('arg', a);
      controlPlane = await getJson<Explanation>(ctlSocket, `${EXPLAIN_PATH}?${query}`, timeout);
      lines.push('control plane:', ...formatExplanation(controlPlane).split('\n').slice(1));
    } catch (err) {
      controlPlaneError = (err as Error).message;
      lines.push(`control plane: not available (${controlPlaneError})`);
    }
  }
  return {
    container: c.containerId, handle: String(c.handle), identity, syscall, arch, args,
    dataPlane: ExplainRuleResponse.toJSON(response), controlPlane, controlPlaneError, lines,
  };
}
