// The control plane's read-only view for seccompctl (policies, explain): JSON over HTTP on a Unix
// socket (--ctl-socket, default /run/seccomp-agent/controlplane.sock, mode 0660).
// Why a Unix socket and not the metrics port: the metrics server listens on the pod network
// (0.0.0.0:9465 in the DaemonSet) and may be off, while these answers name pods, labels and
// policies; the socket sits beside the data plane's in the one hostPath directory, so whoever
// may observe the data plane (its socket's group) may ask this too, and nobody over the network.
// Nothing here changes state; each request is answered from the in-memory caches.
import { handleToProto } from '../common/container-handle';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { AgentError } from '../common/errors';
import type { Logger } from '../common/logger';
import type { Notification } from '../proto/gen/seccompagent/v1/dataplane';
import type { ContainerEntry, ContainerRegistry } from './container-registry';
import { EXPLAIN_PATH, POLICIES_PATH, type Explanation, type PoliciesAnswer, type PolicyRow } from '../common/ctl-protocol';
import { matchContainer, parseExplainArgs } from '../common/explain-query';
import { policyRef } from './policy/resources/objects';
import type { PolicySet } from './policy/resources/set';
import { readyOf, type NodeReport } from './policy/resources/status';
import { describeAction, type ResourcePolicy } from './policy/resources/decision';

export interface CtlParts {
  registry: ContainerRegistry;
  set: PolicySet;
  resources: ResourcePolicy;
  reports: () => Map<string, NodeReport>;
}

export function policyRows(parts: CtlParts): PolicyRow[] {
  const reports = parts.reports();
  return [...parts.set.values()]
    .map((entry) => {
      const ready = readyOf(entry, parts.set);
      const spec = entry.object.spec as { mode?: string; rules?: unknown[] } | null;
      return {
        scope: entry.object.scope,
        namespace: entry.object.namespace,
        name: entry.object.name,
        mode: entry.inForce?.mode ?? String(spec?.mode ?? 'Enforce'),
        ready: ready.status,
        reason: ready.reason,
        message: ready.message,
        generation: entry.object.generation,
        inForceGeneration: entry.inForce?.generation ?? null,
        rules: entry.inForce?.rules.length ?? 0,
        containers: reports.get(entry.key)?.containers ?? 0,
        conflicts: reports.get(entry.key)?.conflicts ?? [],
      };
    })
    .sort((a, b) => (a.scope !== b.scope ? (a.scope === 'namespaced' ? -1 : 1) : `${a.namespace}/${a.name}` < `${b.namespace}/${b.name}` ? -1 : 1));
}

/** The container by id, id prefix, or NAMESPACE/POD[/CONTAINER]. Throws AgentError ENOCONTAINER. */
export function findContainer(registry: ContainerRegistry, spec: string): ContainerEntry {
  return matchContainer([...registry.values()], spec);
}

/** Explains what answers SYSCALL with ARGS for a container: numbers are raw args, anything else a path. */
export function explain(parts: CtlParts, containerSpec: string, syscall: string, args: string[]): Explanation {
  const entry = findContainer(parts.registry, containerSpec);
  const { raw, paths } = parseExplainArgs(args);
  const notification: Notification = {
    handle: handleToProto(entry.handle),
    id: 0n,
    pid: entry.pid,
    syscallNr: 0,
    syscall,
    arch: 0,
    instructionPointer: 0n,
    args: raw,
    stringArgs: [...paths].map(([index, value]) => ({ index, value, truncated: false })),
    containerId: entry.containerId,
    receivedAt: undefined,
  };
  const result = parts.resources.evaluate(entry, syscall, raw, paths, notification);
  const a = result.answer;
  return {
    container: entry.containerId,
    identity: entry.identity ? { namespace: entry.identity.namespace, pod: entry.identity.pod, container: entry.identity.container } : null,
    syscall,
    args,
    answer: a ? { policy: policyRef(a.policy.object), rule: a.rule.name, index: a.rule.index, mode: a.policy.mode, action: describeAction(a.action), when: a.rule.when?.source ?? null } : null,
    audits: result.audits.map((x) => ({ policy: policyRef(x.policy.object), rule: x.rule.name, action: describeAction(x.action) })),
    errors: result.errors.map((x) => ({ policy: policyRef(x.policy.object), rule: x.rule.name, error: x.error })),
    fallback: a ? null : `no policy resource answers: the profile's listenerMetadata decides (${Object.keys(entry.policy.entries).join(', ') || 'no keys: continue'})`,
  };
}

export async function startCtlServer(socketPath: string, parts: CtlParts, log: Logger): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const reply = (code: number, body: unknown) => res.writeHead(code, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
    if (req.method !== 'GET') return reply(405, { code: 'EMETHOD', message: 'read-only: GET only' });
    try {
      if (url.pathname === POLICIES_PATH) return reply(200, { policies: policyRows(parts) } satisfies PoliciesAnswer);
      if (url.pathname === EXPLAIN_PATH) {
        const container = url.searchParams.get('container') ?? '';
        const syscall = url.searchParams.get('syscall') ?? '';
        if (!container || !syscall) return reply(400, { code: 'EUSAGE', message: 'explain needs container and syscall' });
        return reply(200, explain(parts, container, syscall, url.searchParams.getAll('arg')));
      }
      return reply(404, { code: 'ENOTFOUND', message: `try ${POLICIES_PATH} or ${EXPLAIN_PATH}` });
    } catch (err) {
      const e = err as AgentError;
      return reply(e instanceof AgentError ? 404 : 500, { code: e.code ?? 'EINTERNAL', message: e.message });
    }
  });
  fs.rmSync(socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  fs.chmodSync(socketPath, 0o660);
  log.info({ socket: socketPath }, `seccompctl policies and explain served on ${socketPath}`);
  return server;
}
