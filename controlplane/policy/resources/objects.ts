// The policy resources and the namespaces as the informers keep them: SeccompNotifyPolicy
// (namespaced), ClusterSeccompNotifyPolicy (cluster-scoped), both seccompagent.dev/v1alpha1, and
// each namespace's labels (for namespaceSelector). Plain data, JSON-safe, so the node checkpoint
// stores exactly what the informers hold.
import type { InformerKind, KubeObject } from '../../kube/informer';
import { sameStrings } from '../../kube/pod-cache';

export const POLICY_GROUP = 'seccompagent.dev';
export const POLICY_VERSION = 'v1alpha1';

export type PolicyScope = 'namespaced' | 'cluster';

export const POLICY_KINDS: Readonly<Record<PolicyScope, { kind: string; plural: string }>> = Object.freeze({
  namespaced: { kind: 'SeccompNotifyPolicy', plural: 'seccompnotifypolicies' },
  cluster: { kind: 'ClusterSeccompNotifyPolicy', plural: 'clusterseccompnotifypolicies' },
});

/** One policy object: its identity, generation and spec as the API server gave them. */
export interface PolicyObject {
  readonly scope: PolicyScope;
  /** '' for the cluster kind. */
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly generation: number;
  /** The spec, unvalidated (the compiler checks it: an API server without the CRD's schema may hand anything). */
  readonly spec: unknown;
  /** status.conditions[Ready] as the API server has it (the status writer keeps its lastTransitionTime). */
  readonly ready: ReadyCondition | null;
}

export interface ReadyCondition {
  readonly status: string;
  readonly reason: string;
  readonly message: string;
  readonly lastTransitionTime: string;
  readonly observedGeneration?: number;
}

export interface CachedNamespace {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** "SeccompNotifyPolicy shop/deny-etc", "ClusterSeccompNotifyPolicy baseline": how logs and statuses name a policy. */
export function policyRef(p: Pick<PolicyObject, 'scope' | 'namespace' | 'name'>): string {
  return `${POLICY_KINDS[p.scope].kind} ${p.scope === 'namespaced' ? `${p.namespace}/` : ''}${p.name}`;
}

/** The key of a policy among both kinds: "namespaced/shop/deny-etc", "cluster//baseline". */
export function policyKey(p: Pick<PolicyObject, 'scope' | 'namespace' | 'name'>): string {
  return `${p.scope}/${p.namespace}/${p.name}`;
}

/** The short label value for metrics: "shop/deny-etc" or "baseline". */
export function policyLabel(p: Pick<PolicyObject, 'scope' | 'namespace' | 'name'>): string {
  return p.scope === 'namespaced' ? `${p.namespace}/${p.name}` : p.name;
}

function policyFrom(scope: PolicyScope, object: KubeObject): PolicyObject | null {
  const meta = object.metadata;
  if (!meta?.name) return null;
  if (scope === 'namespaced' && !meta.namespace) return null;
  return Object.freeze({
    scope,
    namespace: scope === 'namespaced' ? String(meta.namespace) : '',
    name: meta.name,
    uid: meta.uid ?? '',
    generation: typeof meta.generation === 'number' ? meta.generation : 0,
    spec: object.spec ?? null,
    ready: readyOf(object.status),
  });
}

function readyOf(status: unknown): ReadyCondition | null {
  const conditions = (status as { conditions?: unknown } | undefined)?.conditions;
  if (!Array.isArray(conditions)) return null;
  const ready = conditions.find((c) => c && typeof c === 'object' && (c as { type?: unknown }).type === 'Ready') as Record<string, unknown> | undefined;
  if (!ready) return null;
  return Object.freeze({
    status: String(ready.status ?? ''),
    reason: String(ready.reason ?? ''),
    message: String(ready.message ?? ''),
    lastTransitionTime: String(ready.lastTransitionTime ?? ''),
    ...(typeof ready.observedGeneration === 'number' ? { observedGeneration: ready.observedGeneration } : {}),
  });
}

export function policyKind(scope: PolicyScope): InformerKind<PolicyObject> {
  const { kind, plural } = POLICY_KINDS[scope];
  return {
    name: kind,
    path: `/apis/${POLICY_GROUP}/${POLICY_VERSION}/${plural}`,
    // Both kinds list across namespaces at /apis/GROUP/VERSION/PLURAL.
    list: (c, _fieldSelector, options) => c.custom.listClusterCustomObject({ group: POLICY_GROUP, version: POLICY_VERSION, plural }, options),
    convert: (object) => policyFrom(scope, object),
    key: policyKey,
    rawKey: (object) => (object.metadata?.name ? policyKey({ scope, namespace: scope === 'namespaced' ? String(object.metadata.namespace ?? '') : '', name: object.metadata.name }) : null),
    same: (a, b) => a.uid === b.uid && a.generation === b.generation && JSON.stringify(a.spec) === JSON.stringify(b.spec) && JSON.stringify(a.ready) === JSON.stringify(b.ready),
  };
}

export const namespaceKind: InformerKind<CachedNamespace> = {
  name: 'namespace',
  path: '/api/v1/namespaces',
  list: (c, _fieldSelector, options) => c.core.listNamespace({}, options),
  convert: (object) => {
    const meta = object.metadata as { name?: string; labels?: Record<string, string> } | undefined;
    return meta?.name ? Object.freeze({ name: meta.name, labels: Object.freeze({ ...(meta.labels ?? {}) }) }) : null;
  },
  key: (ns) => ns.name,
  rawKey: (object) => object.metadata?.name ?? null,
  same: (a, b) => sameStrings(a.labels, b.labels),
};
