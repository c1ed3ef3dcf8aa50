// The control plane's Prometheus metrics and its /healthz, read from its parts when scraped.
import { Counter, Gauge, Registry } from 'prom-client';
import type { ContainerRegistry } from './container-registry';
import type { DataPlaneLink } from './link/dataplane-link';
import type { ExecHolds } from './policy/listener-metadata/exec-hold';
import type { FalcoPublisher } from './policy/listener-metadata/falco-publisher';
import type { MiddlewareWatch } from './policy/listener-metadata/middleware-watch';
import type { PodCache } from './kube/pod-cache';
import type { PolicyEngine } from './policy/engine';
import type { PolicySet } from './policy/resources/set';
import type { ResourcePolicy } from './policy/resources/decision';

export interface ControlPlaneParts {
  link: DataPlaneLink;
  registry: ContainerRegistry;
  policy: PolicyEngine;
  /** null with --no-kubernetes. */
  pods: PodCache | null;
  resources?: ResourcePolicy;
  policySet?: PolicySet;
  falco?: FalcoPublisher;
  middleware?: MiddlewareWatch;
  holds?: ExecHolds;
}

export function controlPlaneMetrics(parts: ControlPlaneParts): Registry {
  const registry = new Registry();
  new Counter({
    name: 'seccomp_agent_controlplane_decisions_total',
    help: 'Decisions made, by action',
    labelNames: ['action'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [action, n] of parts.policy.counts) this.inc({ action }, n);
    },
  });
  new Gauge({
    name: 'seccomp_agent_controlplane_attached',
    help: '1 while attached to the data plane',
    registers: [registry],
    collect() {
      this.set(parts.link.state === 'attached' ? 1 : 0);
    },
  });
  new Gauge({
    name: 'seccomp_agent_controlplane_handed_over',
    help: '1 while handed over to a successor (watching it for --resume-grace, or idle after it)',
    registers: [registry],
    collect() {
      this.set(parts.link.idle || parts.link.state === 'handed-over' ? 1 : 0);
    },
  });
  new Counter({
    name: 'seccomp_agent_controlplane_resumed_total',
    help: 'Times this control plane attached again after its successor went away within --resume-grace',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(parts.link.resumed);
    },
  });
  new Gauge({
    name: 'seccomp_agent_controlplane_containers',
    help: 'Containers known, by resolution',
    labelNames: ['resolution'],
    registers: [registry],
    collect() {
      this.reset();
      for (const entry of parts.registry.values()) this.inc({ resolution: entry.resolution });
    },
  });
  new Gauge({
    name: 'seccomp_agent_kubernetes_api_reachable',
    help: '1 while the Kubernetes API server answers (0 with --no-kubernetes)',
    registers: [registry],
    collect() {
      if (parts.pods) this.set(parts.pods.reachable ? 1 : 0);
    },
  });
  new Gauge({
    name: 'seccomp_agent_pod_cache_size',
    help: 'Pods of this node in the informer cache',
    registers: [registry],
    collect() {
      this.set(parts.pods?.size ?? 0);
    },
  });
  countersFromMap(registry, 'seccompagent_policy_audit_total', 'Notifications an Audit policy\'s rule would have answered (the syscall continued), by policy, rule and namespace', ['policy', 'rule', 'namespace'], () => parts.resources?.audits);
  countersFromMap(registry, 'seccompagent_policy_answers_total', 'Notifications answered by a rule of an Enforce policy resource, by policy, rule and action', ['policy', 'rule', 'action'], () => parts.resources?.answers);
  countersFromMap(registry, 'seccompagent_policy_when_errors_total', 'Evaluations of a rule\'s when that failed (no such key, not a bool): the rule did not match', ['policy', 'rule'], () => parts.resources?.evalErrors);
  new Gauge({
    name: 'seccompagent_policies',
    help: 'Policy resources known, by scope and Ready',
    labelNames: ['scope', 'ready'],
    registers: [registry],
    collect() {
      this.reset();
      for (const entry of parts.policySet?.values() ?? []) this.inc({ scope: entry.object.scope, ready: entry.error ? 'False' : 'True' });
    },
  });
  if (parts.middleware) registry.registerMetric(parts.middleware.histogram);
  new Counter({
    name: 'seccompagent_falco_events_published_total',
    help: 'MIDDLEWARE=falco events the Falco plugin took',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(parts.falco?.published ?? 0);
    },
  });
  new Counter({
    name: 'seccompagent_falco_events_dropped_total',
    help: 'MIDDLEWARE=falco events not delivered, by reason: queue-full (the plugin is not keeping up), failed (absent, an error, or past the call deadline)',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, n] of parts.falco?.dropped ?? []) this.inc({ reason }, n);
    },
  });
  new Gauge({
    name: 'seccompagent_exec_held',
    help: 'Execves held now by EXEC_PATTERN or SIDECARS (each answered when its wait ends)',
    registers: [registry],
    collect() {
      this.set(parts.holds?.active ?? 0);
    },
  });
  return registry;
}

/** A counter read from a Map whose keys are the label values joined by NUL (policy/resources/decision.ts). */
function countersFromMap(registry: Registry, name: string, help: string, labelNames: string[], counts: () => ReadonlyMap<string, number> | undefined): void {
  new Counter({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, n] of counts() ?? []) {
        const values = key.split('\u0000');
        this.inc(Object.fromEntries(labelNames.map((label, i) => [label, values[i] ?? ''])), n);
      }
    },
  });
}

/**
 * /healthz: 200 ok, 200 degraded (API server unreachable), 503 while not attached; handed over,
 * 503 "handed-over" (watching the successor, attaching again if it goes within the resume grace)
 * or "handed-over-idle" (past the grace: idle until SIGTERM), naming the successor.
 */
export function controlPlaneHealth(parts: ControlPlaneParts): { httpStatus: number; body: Record<string, unknown> } {
  const link = parts.link;
  const attached = link.state === 'attached';
  const kubernetes = parts.pods ? parts.pods.state : 'disabled';
  const handedOver = link.idle ? 'handed-over-idle' : link.state === 'handed-over' || link.state === 'drained' ? 'handed-over' : null;
  const status = handedOver ?? (!attached ? 'not-attached' : kubernetes === 'unreachable' || kubernetes === 'connecting' ? 'degraded' : 'ok');
  const body: Record<string, unknown> = { status, attached, session: link.sessionId, kubernetes, containers: parts.registry.size, unresolved: parts.registry.unresolvedCount };
  if (handedOver) {
    body.successor = link.successor;
    if (link.resumeUntil > 0) body.resumeGraceLeftMs = Math.max(0, link.resumeUntil - Date.now());
  }
  if (link.resumed > 0) body.resumed = link.resumed;
  return { httpStatus: attached ? 200 : 503, body };
}
