// seccomp-controlplane: all policy. Attaches to the data plane, learns its containers, resolves
// them to pods, and decides each notification. Stateless: it can be killed or replaced at any time.
import { handleFromProto } from '../common/container-handle';
import { formatDefaultAction } from '../common/default-action';
import { AgentError } from '../common/errors';
import { createLogger } from '../common/logger';
import { startMetricsServer } from '../common/metrics-server';
import { helpText, parseCommandLine } from '../common/options';
import { VERSION } from '../common/version';
import type { Container, Welcome } from '../proto/gen/seccompagent/v1/dataplane';
import { ContainerRegistry } from './container-registry';
import { DataPlaneLink } from './link/dataplane-link';
import { controlPlaneHealth, controlPlaneMetrics } from './metrics';
import { CONTROLPLANE_OPTIONS } from './options';
import { controlSocketPath } from '../common/shared-options';
import { ctlSocketPath } from '../common/ctl-protocol';
import { startCtlServer } from './ctl-server';
import { connectKube, type KubeConnection } from './kube/informer';
import { NodeState } from './kube/node-state';
import { PodCache } from './kube/pod-cache';
import { PolicyEngine } from './policy/engine';
import { ExecHolds } from './policy/listener-metadata/exec-hold';
import { FALCO_LIMITS, FalcoPublisher } from './policy/listener-metadata/falco-publisher';
import { MiddlewareWatch, requestDurationHistogram } from './policy/listener-metadata/middleware-watch';
import { POLICY_FEATURE } from '../common/policy-feature';
import { CONTROLPLANE_FEATURES, dataplaneForms, skewWarning } from './link/hello-features';
import { PolicyPusher } from './policy/pusher';
import { resourceRules } from './policy/compiler';
import { PolicySet } from './policy/resources/set';
import { PolicySources } from './policy/resources/sources';
import { nodeReports, PolicyStatusWriter } from './policy/resources/status';
import { ResourcePolicy } from './policy/resources/decision';
import type { DataplaneForms } from './policy/rule-matcher';
import { ProfileLintLog } from './profile-lint-log';
import { createDataPlaneClient, getStatus } from '../common/dataplane-client';

const SUMMARY = 'Control plane of the seccomp notify agent: Kubernetes-aware policy for the notifications of the data plane.';

async function main(): Promise<void> {
  let parsed;
  try {
    parsed = parseCommandLine(CONTROLPLANE_OPTIONS, process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`seccomp-controlplane: ${(err as Error).message}\n`);
    process.exit(2);
  }
  if (parsed.help) {
    process.stdout.write(`${helpText('seccomp-controlplane', SUMMARY, CONTROLPLANE_OPTIONS)}\n`);
    return;
  }
  const options = parsed.options;
  const log = createLogger('seccomp-controlplane', options.logLevel);
  const unresolvedAction = formatDefaultAction(options.unresolvedAction);

  let pods: PodCache | null = null;
  if (options.noKubernetes) {
    log.info('--no-kubernetes: pod identity comes from runtime annotations only; containers without them are unresolved');
  } else {
    pods = new PodCache({
      logger: log,
      nodeName: options.nodeName,
      kubeconfig: options.kubeconfig,
      unresolvedAction,
      resyncPeriodMs: options.resyncPeriodMs,
      retryMaxMs: options.reconnectMaxMs,
    });
  }
  let pusher: PolicyPusher | null = null;
  const registry = new ContainerRegistry({ logger: log, pods, unresolvedAction, onChange: (entry) => pusher?.markDirty(entry.handle) });
  // The policy resources (SeccompNotifyPolicy, ClusterSeccompNotifyPolicy): answer before listenerMetadata.
  const policySet = new PolicySet(options.celCostLimit, log);
  let sources: PolicySources | null = null;
  // What the attached data plane takes beyond the oldest decisions: set from each Welcome.
  const forms: DataplaneForms = dataplaneForms([]);
  const resources = new ResourcePolicy(
    policySet,
    {
      podLabels: (namespace, name, uid) => (uid ? pods?.lookup(uid) : undefined) ?? pods?.byName(namespace, name),
      namespaceLabels: (name) => sources?.namespaceLabels(name),
    },
    log,
    forms,
  );
  if (pods) {
    const bump = () => {
      resources.identityEpoch++;
      pusher?.markAllDirty();
    };
    pods.on('pod', bump);
    pods.informer.on('delete', bump);
    sources = new PolicySources(policySet, { resyncPeriodMs: options.resyncPeriodMs, retryMaxMs: options.reconnectMaxMs }, log, bump);
  }
  const reports = () => nodeReports(policySet, registry.values(), resources);
  // MIDDLEWARE=falco / prometheus: fed from the data plane's Watch stream (the observer socket), never on the answer path.
  const falco = new FalcoPublisher(options.falcoSocket, log, { ...FALCO_LIMITS, queue: options.falcoQueue });
  const middleware = new MiddlewareWatch(options.grpcSocket, falco, requestDurationHistogram(), log);
  // The linter's findings, once per distinct profile, against the listener paths the data plane serves.
  const statusClient = createDataPlaneClient(options.grpcSocket);
  const lintLog = new ProfileLintLog(log, () =>
    Promise.race([getStatus(statusClient).then((s) => s.listenerSockets), new Promise<string[]>((_, reject) => setTimeout(() => reject(new Error('timeout')), 3000).unref())]));
  const lint = (container: Container) => void lintLog.check(container).catch((err: Error) => log.debug({ err }, 'profile lint failed'));
  let link: DataPlaneLink | null = null;
  const holds = new ExecHolds((n, ms) => link?.hold(n, ms) ?? false, log);
  const policy = new PolicyEngine(registry, options.unresolvedAction, log, resources, holds, forms);
  link = new DataPlaneLink(
    {
      grpcSocket: options.grpcSocket, controlSocket: controlSocketPath(options.controlSocket, options.grpcSocket), name: 'seccomp-controlplane', features: CONTROLPLANE_FEATURES,
      reconnectMaxMs: options.reconnectMaxMs, takeover: options.takeover, busyPollMs: options.busyPollMs, resumeGraceMs: options.resumeGraceMs, decisionBudgetMs: options.decisionBudgetMs,
    },
    {
      knows: (handle) => registry.get(handle) !== undefined,
      onSnapshot: (containers) => {
        registry.replaceAll(containers);
        for (const container of containers) lint(container);
        pusher?.onSnapshot(containers);
        middleware.reset(registry.values());
      },
      onContainerAdded: (container) => {
        middleware.added(registry.add(container));
        lint(container);
        pusher?.onContainerAdded(container);
      },
      onContainerRemoved: (removed) => {
        registry.remove(handleFromProto(removed.handle));
        resources.forget(handleFromProto(removed.handle));
        pusher?.onContainerRemoved(handleFromProto(removed.handle));
        middleware.removed(handleFromProto(removed.handle));
      },
      decide: (notification, deadline) => policy.answer(notification, deadline),
      // One queue per namespace (containers not resolved yet: one each), served round robin.
      sourceOf: (notification) => {
        const handle = handleFromProto(notification.handle);
        const namespace = registry.get(handle)?.identity?.namespace;
        return namespace ? `namespace ${namespace}` : `container ${handle}`;
      },
      onPolicyAcks: (acks) => pusher?.onAcks(acks),
    },
    log,
  );
  pusher = new PolicyPusher({
    registry, unresolvedAction: options.unresolvedAction, send: (policies) => link.pushPolicies(policies), log,
    rulesBefore: (entry) => resourceRules(resources.nativeRules(entry), entry),
  });
  // A policy resource or a pod's labels changed: each container's compiled policy may differ.
  policySet.on('changed', () => pusher?.markAllDirty());
  // Before the snapshot that follows it: an older data plane gets decisions only, as before.
  link.on('welcome', (welcome: Welcome) => {
    pusher!.enabled = options.fastPath && welcome.features.includes(POLICY_FEATURE);
    Object.assign(forms, dataplaneForms(welcome.features));
    const skew = skewWarning(CONTROLPLANE_FEATURES, welcome.features, welcome.dataplaneVersion);
    if (skew !== null) log.warn({ dataplaneVersion: welcome.dataplaneVersion, features: welcome.features }, skew);
  });

  let statusWriter: PolicyStatusWriter | null = null;
  let nodeState: NodeState | null = null;
  if (pods) {
    try {
      const connection: KubeConnection = await connectKube(options.kubeconfig);
      if (options.stateDir !== '' && sources) {
        nodeState = new NodeState(options.stateDir, options.nodeName, pods, sources, policySet, log);
        nodeState.load(connection.url);
        nodeState.start();
      }
      await pods.start(connection);
      sources?.start(connection);
      statusWriter = new PolicyStatusWriter(connection, policySet, options.nodeName, reports, log, options.statusPeriodMs);
      statusWriter.start();
    } catch (err) {
      // No usable kubeconfig is a setup error, not an outage: say so and keep deciding without it.
      const code = err instanceof AgentError ? err.code : 'EKUBE_CONFIG';
      log.error({ err, code }, `${(err as Error).message}; running without Kubernetes: containers without pod annotations are unresolved and get --unresolved-action (${unresolvedAction})`);
      pods = null;
    }
  }
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, `stopping on ${signal}: the data plane's default action answers until a control plane attaches again`);
    link!.stop();
    registry.close();
    statusWriter?.stop();
    middleware.stop();
    falco.close();
    statusClient.close();
    void Promise.all([pods?.stop(), sources?.stop(), nodeState?.stop()]).finally(() => {
      log.flush();
      process.exit(0);
    });
  };
  // Registered before the link starts: a client can take over the session as soon as it attaches.
  // Handed over: the link watches the successor for --resume-grace and attaches again if it goes
  // away (a crash, or a client that took over and left). Past the grace: stay, idle, until
  // SIGTERM. Exiting would let a supervisor (kubelet, systemd) start this one again, and with
  // --takeover it would take the session back from its successor.
  link.on('handed-over', () => {
    if (!stopping) log.info({ successor: link.successor, resumeGraceMs: options.resumeGraceMs }, `handed over to ${link.successor || 'the successor control plane'}: ${options.resumeGraceMs > 0 ? `attaching again if it goes away within ${options.resumeGraceMs} ms, else idle until SIGTERM` : 'idle until SIGTERM'}`);
  });
  link.on('idle', () => {
    if (stopping) return;
    log.info('handed over for good: idle until SIGTERM');
    link.stop();
    registry.close();
    void pods?.stop();
    setInterval(() => undefined, 1 << 30);
  });
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  link.start();
  const parts = { link, registry, policy, pods, resources, policySet, falco, middleware, holds };
  const ctlSocket = ctlSocketPath(options.ctlSocket, options.grpcSocket);
  if (ctlSocket !== 'off') {
    try {
      await startCtlServer(ctlSocket, { registry, set: policySet, resources, reports }, log);
    } catch (err) {
      log.error({ err, socket: ctlSocket }, `cannot serve seccompctl policies and explain on ${ctlSocket} (${(err as Error).message}); deciding without it`);
    }
  }
  if (options.metricsAddr) await startMetricsServer(controlPlaneMetrics(parts), options.metricsAddr, log, () => controlPlaneHealth(parts));
  log.info({ version: VERSION, grpcSocket: options.grpcSocket, controlSocket: controlSocketPath(options.controlSocket, options.grpcSocket), node: options.nodeName, kubernetes: pods !== null }, 'control plane started');
}

void main();
