// The informers behind the policy resources: SeccompNotifyPolicy and ClusterSeccompNotifyPolicy
// (into the PolicySet) and the namespaces' labels (for namespaceSelector). Each says its own
// transitions once: synced, unreachable (the policies cached stay in force), not installed.
import type { Logger } from '../../../common/logger';
import { Informer, type InformerOptions, type KubeConnection } from '../../kube/informer';
import { namespaceKind, policyKind, POLICY_KINDS, type CachedNamespace, type PolicyObject, type PolicyScope } from './objects';
import type { PolicySet } from './set';

export class PolicySources {
  readonly policies: Readonly<Record<PolicyScope, Informer<PolicyObject>>>;
  readonly namespaces: Informer<CachedNamespace>;

  constructor(
    private readonly set: PolicySet,
    options: InformerOptions,
    private readonly log: Logger,
    /** A namespace's labels changed: selections that read them are stale. */
    onNamespace: () => void,
  ) {
    this.policies = {
      namespaced: new Informer(policyKind('namespaced'), options, log),
      cluster: new Informer(policyKind('cluster'), options, log),
    };
    for (const scope of ['namespaced', 'cluster'] as const) {
      const informer = this.policies[scope];
      informer.on('upsert', (p) => this.set.update(p));
      informer.on('delete', (p) => this.set.remove(p));
      this.describe(informer, POLICY_KINDS[scope].kind, scope === 'namespaced' ? 'seccompnotifypolicies' : 'clusterseccompnotifypolicies');
    }
    this.namespaces = new Informer(namespaceKind, options, log);
    this.namespaces.on('upsert', onNamespace);
    this.namespaces.on('delete', onNamespace);
    this.namespaces.on('unreachable', ({ reason, first }) => {
      if (!first) return;
      const forbidden = /^HTTP 403/.test(reason);
      this.log.warn(
        { kind: 'namespace', reason, namespaces: this.namespaces.size },
        `namespaces: list failed (${reason})${forbidden ? ': this service account may not list namespaces (deploy/kubernetes/rbac.yaml grants list and watch on namespaces)' : ''}; ` +
          `ClusterSeccompNotifyPolicy namespaceSelectors read the ${this.namespaces.size} namespaces' labels cached before (a namespace not among them is not selected); ` +
          'the node checkpoint is still written, with those; retrying with backoff',
      );
    });
    this.namespaces.on('synced', ({ first }) => {
      if (!first) this.log.info({ kind: 'namespace', namespaces: this.namespaces.size }, `namespaces: ${this.namespaces.size} cached (listing works again)`);
    });
  }

  /** Everything known before the first list (the node checkpoint): the generations in force first, then the latest objects. */
  seed(inForce: readonly PolicyObject[], latest: readonly PolicyObject[], namespaces: readonly CachedNamespace[]): void {
    for (const p of [...inForce, ...latest]) this.set.update(p);
    for (const p of latest) this.policies[p.scope].seed([p]);
    this.namespaces.seed(namespaces);
  }

  start(connection: KubeConnection): void {
    this.policies.namespaced.start(connection);
    this.policies.cluster.start(connection);
    this.namespaces.start(connection);
  }

  async stop(): Promise<void> {
    await Promise.all([this.policies.namespaced.stop(), this.policies.cluster.stop(), this.namespaces.stop()]);
  }

  /** True while the three informers' last lists succeeded. */
  get synced(): boolean {
    return this.policiesSynced && this.namespaces.state === 'synced';
  }

  /** Both policy kinds listed: what the checkpoint needs (the namespaces' labels may be the cached ones). */
  get policiesSynced(): boolean {
    return this.policies.namespaced.state === 'synced' && this.policies.cluster.state === 'synced';
  }

  namespaceLabels(name: string): Readonly<Record<string, string>> | undefined {
    return this.namespaces.get(name)?.labels;
  }

  private describe(informer: Informer<PolicyObject>, kind: string, plural: string): void {
    informer.on('synced', ({ first, count }) => {
      this.log.info({ kind, policies: count }, `${kind}: ${count} cached${first ? '' : ' (API server reachable again)'}`);
    });
    informer.on('unreachable', ({ reason, first }) => {
      if (!first) return;
      const notInstalled = /^HTTP 404/.test(reason);
      this.log.warn(
        { kind, reason, policies: informer.size },
        notInstalled
          ? `${kind}: the API server does not serve ${plural}.seccompagent.dev (is deploy/crds applied?); retrying; the ${informer.size} cached stay in force`
          : `${kind}: list failed (${reason}); the ${informer.size} cached stay in force; retrying with backoff`,
      );
    });
  }
}
