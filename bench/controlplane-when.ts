// Issue 10: a notification decided by a policy resource's `when` rule, with 100 policies loaded.
// The loopback Kubernetes API stand-in (test/cmd/fake-kube-apiserver, the one stand-in this
// project allows) serves 100 SeccompNotifyPolicy / ClusterSeccompNotifyPolicy objects: 97 select
// other pods, 2 select this one with rules for other syscalls, and one selects it with
// `getppid` allowed `when: pod.labels["app"] == "bench" && args[0] == 0u` (CEL, in the control
// plane). The rule has `when`, so it is an ask rule: every getppid goes engine -> decision channel
// -> seccomp-controlplane (selection cached per container, CEL) -> decision -> NOTIF_SEND.
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { FakeKubeApiServer } from '../test/cmd/fake-kube-apiserver/server';
import { freePort, startKubeControlPlane } from './controlplane-process';
import { startDataPlane } from './dataplane-process';
import { runScenario } from './scenario-process';
import { checkTools, runWorkload, workloadMetrics } from './tools';

const NODE = 'bench-node';
const NAMESPACE = 'bench';
const POD = 'pod';
const POLICIES = 100;
const DECIDING = 'zz-allow-getppid';

function loadPolicies(api: FakeKubeApiServer): void {
  api.addNamespace(NAMESPACE, { team: 'bench' });
  api.addPod({ name: POD, namespace: NAMESPACE, nodeName: NODE, labels: { app: 'bench' }, containers: [{ name: 'app' }] });
  for (let i = 0; i < POLICIES - 3; i++) {
    const rules = [{ name: 'deny-etc', syscalls: ['getppid', 'mkdir'], when: `pod.labels["app"] == "other-${i}"`, errno: 'EPERM' }];
    if (i % 2 === 0) api.applyPolicy('seccompnotifypolicies', { name: `other-${i}`, namespace: NAMESPACE, spec: { selector: { podSelector: { matchLabels: { app: `other-${i}` } } }, rules } });
    else api.applyPolicy('clusterseccompnotifypolicies', { name: `other-${i}`, spec: { selector: { podSelector: { matchLabels: { app: `other-${i}` } }, namespaceSelector: { matchLabels: { team: 'bench' } } }, rules } });
  }
  api.applyPolicy('clusterseccompnotifypolicies', { name: 'mkdir-audit', spec: { mode: 'Audit', rules: [{ syscalls: ['mkdir'], when: 'paths[0].startsWith("/etc")', errno: 'EPERM' }] } });
  api.applyPolicy('seccompnotifypolicies', { name: 'mount-deny', namespace: NAMESPACE, spec: { rules: [{ syscalls: ['mount'], errno: 'EPERM' }] } });
  api.applyPolicy('seccompnotifypolicies', {
    name: DECIDING, namespace: NAMESPACE,
    spec: { selector: { podSelector: { matchLabels: { app: 'bench' } } }, rules: [{ name: 'allow', syscalls: ['getppid'], when: 'pod.labels["app"] == "bench" && args[0] == 0u', allow: {} }] },
  });
}

async function answersOfDecidingRule(metricsPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const m = new RegExp(`^seccompagent_policy_answers_total\\{policy="${NAMESPACE}/${DECIDING}",rule="allow",action="allow"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

runScenario(async ({ params, dir, children }) => {
  checkTools(['seccompRun', 'workload', 'dataplaneMain', 'controlplaneMain']);
  const api = await FakeKubeApiServer.create();
  const dataplane = await startDataPlane(children, dir);
  try {
    loadPolicies(api);
    const kubeconfig = api.writeKubeconfig(path.join(dir, 'kubeconfig'));
    const metricsPort = await freePort();
    await startKubeControlPlane(children, dataplane, dir, { kubeconfig, nodeName: NODE, metricsPort, policies: POLICIES });
    const before = (await dataplane.status()).counters;
    const answeredBefore = await answersOfDecidingRule(metricsPort);
    const result = await runWorkload(children, {
      listenerSocket: dataplane.listenerSocket, threads: params.threads, seconds: params.seconds,
      warmupMs: params.warmupMs, syscall: 'getppid', workDir: dir, id: 'bench-when',
      runArgs: [
        '--annotation', `io.kubernetes.cri.sandbox-namespace=${NAMESPACE}`,
        '--annotation', `io.kubernetes.cri.sandbox-name=${POD}`,
        '--annotation', 'io.kubernetes.cri.container-name=app',
      ],
    });
    // The data plane counts answers from its engine's event batches: the last ones reach its
    // counters a moment after the workload ends, so wait (briefly) for them before comparing.
    let after = (await dataplane.status()).counters;
    const countedOf = (c: typeof after) => Number((c?.answeredControlPlane ?? 0n) - (before?.answeredControlPlane ?? 0n));
    for (const settleBy = Date.now() + 2000; countedOf(after) < result.calls && Date.now() < settleBy;) {
      await sleep(50);
      after = (await dataplane.status()).counters;
    }
    const answered = countedOf(after);
    const byRule = (await answersOfDecidingRule(metricsPort)) - answeredBefore;
    const byDefault = Number((after?.answeredDefaultDeadline ?? 0n) + (after?.answeredDefaultDetached ?? 0n) + (after?.answeredDefaultNoControlPlane ?? 0n));
    // Every measured call must have been decided by the control plane, by the when rule, or this is not the path.
    if (answered < result.calls || byRule < result.calls) {
      throw new Error(`${answered} control-plane answers and ${byRule} by ${DECIDING}/allow for ${result.calls} measured calls; ${byDefault} default answers`);
    }
    return { ...workloadMetrics(result), decisionsPerSec: result.callsPerSec, defaultAnswers: byDefault, rssMiB: dataplane.rssMiB() };
  } finally {
    dataplane.close();
    await api.stop();
  }
});
