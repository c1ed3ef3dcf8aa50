// Issue 17, defect 6: does a container flooding the agent move another container's latency more
// than the same load moves it on bare C responders? Two containers run at once: the neighbour
// floods with N threads on one path, the victim makes one thread of getppid and is measured.
//   bare            each workload against its own seccomp-bench-responder (the reference pair)
//   bare-shared     both against one seccomp-bench-responder (context: one thread serving both)
//   default         one data plane, no control plane: both answered by the default action
//   fast-path       + the real control plane: both containers' compiled policies answer natively
//   control-plane   + the real control plane against the loopback Kubernetes API stand-in: the
//                   neighbour's getppid is an ask rule (a `when`), decided by the control plane;
//                   the victim's namespace has no policy resource, its policy compiles to continue
//   emulated-mkdir  + the real control plane: the neighbour's mkdir is MKDIR_TMPL, emulated by
//                   the helper of its mount namespace; the victim answered by the fast path
// The victim is always on the native path of its configuration (default without a control plane,
// else the fast path): the question is what the neighbour does to another container, and only a
// native path can be compared with a bare C responder (a control-plane decision alone is ~5×).
// neighbourPollingThreads (bare only): the neighbour's responder keeps threads busy-polling beside
// its answering one, as the agent's planes do while decisions are in flight between them: what
// always-runnable threads alone cost the victim on this machine.
// victimOwnResponder: the neighbour floods the agent as in the row of its path, the victim is on a
// bare C responder of its own: what the agent's CPU load alone does to another container's answers.
// The neighbour floods until the victim is done (SIGTERM ends its measured seconds).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Container } from '../proto/gen/seccompagent/v1/dataplane';
import { FakeKubeApiServer } from '../test/cmd/fake-kube-apiserver/server';
import type { Children } from './children';
import { BENCH_POD, containerRecord, freePort, MKDIR_TMPL_RUN_ARGS, startKubeControlPlane, startRealControlPlane, waitForPolicy } from './controlplane-process';
import { startDataPlane, type DataPlaneProcess } from './dataplane-process';
import { runScenario, type NeighbourPath, type ScenarioParams } from './scenario-process';
import { checkTools, startResponder, startWorkload, type WorkloadResult } from './tools';

const VICTIM = 'bench-victim';
const NEIGHBOUR = 'bench-neighbour';
/** control-plane: the neighbour's pod and namespace (with its `when` rule) and the victim's (none). */
const NODE = 'bench-node';
const NOISY = { namespace: 'noisy', pod: 'flood' } as const;
const QUIET = { namespace: 'bench', pod: 'victim' } as const;
/** Longest a neighbour floods (it is stopped when the victim is done). */
const NEIGHBOUR_MAX_SECONDS = 120;
/** Longest the victim's container outlives its measured seconds (it is stopped once its record is read). */
const VICTIM_LINGER_MS = 60_000;

function annotations(pod: { namespace: string; pod: string }): string[] {
  return [
    '--annotation', `io.kubernetes.cri.sandbox-namespace=${pod.namespace}`,
    '--annotation', `io.kubernetes.cri.sandbox-name=${pod.pod}`,
    '--annotation', 'io.kubernetes.cri.container-name=app',
  ];
}

/** Where the two containers connect, and what proves the path afterwards. */
interface Setup {
  victimSocket: string;
  neighbourSocket: string;
  neighbourRunArgs: string[];
  victimRunArgs: string[];
  dataplane?: DataPlaneProcess;
  /** A control plane pushes policies: both must be in force before they are measured. */
  pushes: boolean;
  stop(): Promise<void>;
}

async function setUp(children: Children, dir: string, kind: NeighbourPath, neighbourPollingThreads: number): Promise<Setup> {
  if (kind === 'bare' || kind === 'bare-shared') {
    const victimSocket = path.join(dir, 'victim-responder.sock');
    const neighbourSocket = kind === 'bare' ? path.join(dir, 'neighbour-responder.sock') : victimSocket;
    await startResponder(children, victimSocket, 'victim responder');
    if (kind === 'bare') await startResponder(children, neighbourSocket, 'neighbour responder', { pollingThreads: neighbourPollingThreads });
    return { victimSocket, neighbourSocket, neighbourRunArgs: [], victimRunArgs: [], pushes: false, stop: async () => undefined };
  }
  const dataplane = await startDataPlane(children, dir);
  const common = { victimSocket: dataplane.listenerSocket, neighbourSocket: dataplane.listenerSocket, dataplane };
  let api: FakeKubeApiServer | undefined;
  try {
    switch (kind) {
      case 'default':
        return { ...common, neighbourRunArgs: [], victimRunArgs: [], pushes: false, stop: async () => dataplane.close() };
      case 'fast-path':
      case 'emulated-mkdir':
        await startRealControlPlane(children, dataplane, dir, []);
        return {
          ...common, neighbourRunArgs: kind === 'emulated-mkdir' ? [...MKDIR_TMPL_RUN_ARGS] : [], victimRunArgs: [], pushes: true,
          stop: async () => dataplane.close(),
        };
      case 'control-plane': {
        const started = await FakeKubeApiServer.create();
        api = started;
        for (const pod of [NOISY, QUIET]) {
          api.addNamespace(pod.namespace);
          api.addPod({ name: pod.pod, namespace: pod.namespace, nodeName: NODE, labels: { app: pod.pod }, containers: [{ name: 'app' }] });
        }
        // A `when` makes the rule an ask rule: each of the neighbour's getppid is a control-plane decision.
        api.applyPolicy('seccompnotifypolicies', {
          name: 'flood-getppid', namespace: NOISY.namespace,
          spec: { rules: [{ name: 'allow', syscalls: ['getppid'], when: 'args[0] == 0u', allow: {} }] },
        });
        const kubeconfig = api.writeKubeconfig(path.join(dir, 'kubeconfig'));
        await startKubeControlPlane(children, dataplane, dir, { kubeconfig, nodeName: NODE, metricsPort: await freePort(), policies: 1 });
        return {
          ...common, neighbourRunArgs: annotations(NOISY), victimRunArgs: annotations(QUIET), pushes: true,
          stop: async () => {
            dataplane.close();
            await started.stop();
          },
        };
      }
    }
  } catch (err) {
    dataplane.close();
    await api?.stop();
    throw err;
  }
  throw new Error(`unknown neighbour path "${kind as string}"`);
}

/** Throws unless each container was answered on the path the row names. */
async function checkPaths(kind: NeighbourPath, setup: Setup, dir: string, victim: WorkloadResult, neighbour: WorkloadResult,
  victimRecord: Container | undefined, neighbourRecord: Container | undefined, victimApart: boolean): Promise<Record<string, number>> {
  if (!setup.dataplane) return {};
  const { counters } = await setup.dataplane.status();
  const byControlPlane = Number(counters?.answeredControlPlane ?? 0n);
  const byDefault = Number((counters?.answeredDefaultDeadline ?? 0n) + (counters?.answeredDefaultDetached ?? 0n) + (counters?.answeredDefaultNoControlPlane ?? 0n));
  const victimFast = Number(victimRecord?.answeredFastPath ?? 0n);
  const victimDefault = Number(victimRecord?.answeredDefault ?? 0n);
  const neighbourFast = Number(neighbourRecord?.answeredFastPath ?? 0n);
  const seen = `victim: ${victimFast} fast-path and ${victimDefault} default answers for ${victim.calls} calls; neighbour: ${neighbourFast} fast-path answers for ${neighbour.calls} calls; `
    + `all: ${byControlPlane} by the control plane, ${byDefault} by default`;
  // The per-container counts come from the engine's tallies, read once the victim's measured
  // seconds were over: they prove the path (the last batch delay's may be missing), not the exact count.
  if (victimApart) {
    // Only the neighbour is the agent's.
  } else if (kind === 'default') {
    if (victimDefault === 0 || victimFast !== 0 || byControlPlane !== 0) throw new Error(`not the default path: ${seen}`);
  } else if (victimFast < victim.calls / 2 || victimDefault !== 0 || byDefault !== 0) {
    throw new Error(`the victim was not answered by the fast path: ${seen}`);
  }
  if (kind === 'default') {
    if (byControlPlane !== 0) throw new Error(`the neighbour was not on the default path: ${seen}`);
  } else {
    if (kind === 'control-plane') {
      if (byControlPlane < neighbour.calls || neighbourFast !== 0) throw new Error(`the neighbour was not decided by the control plane: ${seen}`);
    } else if (neighbourFast < neighbour.calls / 2) {
      throw new Error(`the neighbour was not answered by the fast path: ${seen}`);
    }
  }
  if (kind === 'emulated-mkdir') {
    const suffixed = path.join(dir, `mkdir-${NEIGHBOUR}-0-${BENCH_POD.namespace}-${BENCH_POD.pod}`);
    if (!fs.existsSync(suffixed)) throw new Error(`${suffixed} was not created: the neighbour's mkdir was not emulated with the MKDIR_TMPL suffix`);
  }
  return { byControlPlane, defaultAnswers: byDefault, victimFastPath: victimFast };
}

async function measure(children: Children, dir: string, params: ScenarioParams): Promise<Record<string, number>> {
  const kind: NeighbourPath = params.neighbourPath ?? 'default';
  checkTools(kind === 'bare' || kind === 'bare-shared' ? ['seccompRun', 'workload', 'responder'] : ['seccompRun', 'workload', 'dataplaneMain', 'controlplaneMain']);
  if (params.neighbourPollingThreads && kind !== 'bare') throw new Error('neighbourPollingThreads is for the bare pair only');
  const setup = await setUp(children, dir, kind, params.neighbourPollingThreads ?? 0);
  const victimApart = params.victimOwnResponder === true && kind !== 'bare' && kind !== 'bare-shared';
  if (victimApart) {
    // The agent's CPU load without its sharing: the victim on a bare C responder of its own.
    setup.victimSocket = path.join(dir, 'victim-responder.sock');
    setup.victimRunArgs = [];
    await startResponder(children, setup.victimSocket, 'victim responder');
  }
  try {
    // The same timing on every row, bare or not: each warm-up covers a policy push.
    const warmupMs = Math.max(params.warmupMs, 1000);
    const neighbour = startWorkload(children, {
      listenerSocket: setup.neighbourSocket, threads: params.threads, seconds: NEIGHBOUR_MAX_SECONDS, warmupMs,
      syscall: params.syscall, workDir: dir, id: NEIGHBOUR, runArgs: setup.neighbourRunArgs,
    });
    const neighbourFailed = neighbour.result.then(() => { throw new Error('the neighbour ended before the victim was measured'); });
    neighbourFailed.catch(() => undefined);
    const neighbourStarted = Date.now();
    if (setup.pushes && setup.dataplane && (await waitForPolicy(setup.dataplane, NEIGHBOUR, warmupMs + 5000)) === '') {
      throw new Error(`the neighbour's policy was not pushed within ${warmupMs + 5000} ms`);
    }
    // The victim starts once the neighbour floods.
    await Promise.race([sleep(Math.max(0, neighbourStarted + warmupMs - Date.now())), neighbourFailed]);
    const victim = startWorkload(children, {
      listenerSocket: setup.victimSocket, threads: 1, seconds: params.seconds, warmupMs,
      syscall: 'getppid', workDir: dir, id: VICTIM, runArgs: setup.victimRunArgs, lingerMs: VICTIM_LINGER_MS,
    });
    const victimPushedBy = Date.now() + warmupMs;
    if (setup.pushes && setup.dataplane && !victimApart) {
      const version = await waitForPolicy(setup.dataplane, VICTIM, warmupMs + 5000);
      if (version === '' || Date.now() > victimPushedBy) throw new Error(`the victim's policy was not in force by the end of its ${warmupMs} ms warm-up`);
    }
    // Both records are read after the victim's measured seconds, while both containers still run
    // (a record goes with its workload): asked for during them, the gRPC work would be a load on
    // the CPUs that the bare C rows, which have no agent to ask, do not carry.
    await Promise.race([victim.printed, neighbourFailed]);
    const victimRecord = setup.dataplane ? await containerRecord(setup.dataplane, VICTIM) : undefined;
    const neighbourRecord = setup.dataplane ? await containerRecord(setup.dataplane, NEIGHBOUR) : undefined;
    await children.stop(victim.child, 15_000);
    const victimResult = await Promise.race([victim.result, neighbourFailed]);
    await children.stop(neighbour.child, 15_000);
    const neighbourResult = await neighbour.result;
    const checked = await checkPaths(kind, setup, dir, victimResult, neighbourResult, victimRecord, neighbourRecord, victimApart);
    return {
      callsPerSec: victimResult.callsPerSec, p50Us: victimResult.p50Us, p90Us: victimResult.p90Us, p99Us: victimResult.p99Us, maxUs: victimResult.maxUs,
      neighbourCallsPerSec: neighbourResult.callsPerSec, neighbourP50Us: neighbourResult.p50Us, neighbourP99Us: neighbourResult.p99Us,
      ...checked,
    };
  } finally {
    await setup.stop();
  }
}

runScenario(({ params, dir, children }) => measure(children, dir, params));
