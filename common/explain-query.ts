// What `seccompctl explain CONTAINER SYSCALL [ARGS]` names, read the same way by both answers to
// it: the data plane's rules (ExplainRule) and the control plane's resource policies (ctl-server).
import { AgentError } from './errors';

/** Who a container is, as far as explain needs it. */
export interface NamedContainer {
  containerId: string;
  identity: { namespace: string; pod: string; container: string | null } | null;
}

/** The container by id, id prefix, or NAMESPACE/POD[/CONTAINER]. Throws AgentError ENOCONTAINER. */
export function matchContainer<T extends NamedContainer>(all: readonly T[], spec: string): T {
  const parts = spec.split('/');
  const matches =
    parts.length >= 2
      ? all.filter((e) => e.identity && e.identity.namespace === parts[0] && e.identity.pod === parts[1] && (parts.length < 3 || e.identity.container === parts[2]))
      : all.filter((e) => e.containerId === spec || e.containerId.startsWith(spec));
  const ids = [...new Set(matches.map((e) => e.containerId))];
  if (ids.length === 0) throw new AgentError('ENOCONTAINER', `no container ${spec} on this node (seccompctl containers lists them)`);
  if (ids.length > 1) throw new AgentError('ENOCONTAINER', `${spec} names ${ids.length} containers (${ids.slice(0, 4).join(', ')}): give more of the id`);
  return matches[0];
}

/** ARGS: numbers (decimal, 0x, 0o, 0b) are raw arguments, anything else a path at that position; six at most. */
export function parseExplainArgs(args: readonly string[]): { raw: bigint[]; paths: Map<number, string> } {
  const raw: bigint[] = [];
  const paths = new Map<number, string>();
  args.slice(0, 6).forEach((a, i) => {
    if (/^(0x[0-9a-f]+|0o[0-7]+|0b[01]+|\d+)$/i.test(a)) raw.push(BigInt(a));
    else {
      raw.push(0n);
      paths.set(i, a);
    }
  });
  while (raw.length < 6) raw.push(0n);
  return { raw, paths };
}
