// The rollout proof's workloads and moves, shared by test/e2e/rollout-proof.test.ts (one build) and
// test/e2e/release-skew.test.ts (the previous release and this tree): three containers whose every
// syscall checks its answer against the policy (getppid: continue; MKDIR_TMPL with a pod: the
// suffix; MKDIR_TMPL without one: --unresolved-action's EACCES), a kill-container victim, the data
// plane handoff (a new keeper + data plane with --takeover), the control plane handover, and a
// data plane SIGKILL under its keeper.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { getStatus } from '../../common/dataplane-client';
import type { Container, Counters, DataPlaneClient } from '../../proto/gen/seccompagent/v1/dataplane';
import { startControlPlane } from './controlplane';
import { keeperChild, startDataPlane, type RunningDataPlane } from './dataplane';
import { CURRENT_BUILD, SOAK_WORKLOAD, type AgentBuild } from './paths';
import { containerd } from './policy';
import { run, stop, type Started } from './processes';
import { runcExec, sleepingContainer, type Bundle } from './runc';
import { waitUntil } from './wait';
import { startUnderFilter } from './workload';

/** One 100 ms window of the soak workload's report. */
export interface Window {
  mono: number;
  calls: number;
  maxUs: number;
  oldestInFlightUs: number;
  errors: Record<string, number>;
  wrong: number;
}
/** The soak workload's last report. */
export interface Final {
  final: true;
  calls: number;
  errors: Record<string, number>;
  wrong: number;
  maxUs: number;
  stuckThreads: number;
}

/** Every control plane of the proofs: no API server; a pod identity that is not known gives EACCES. */
export const CP_ARGS = ['--no-kubernetes', '--unresolved-action', 'errno:EACCES'];
export const EACCES = 13;
const DEFAULT_COUNTERS = ['answeredDefaultNoControlPlane', 'answeredDefaultDeadline', 'answeredDefaultDetached', 'answeredDefaultRecovered'] as const;
/** Every answer by the default action. */
export const defaults = (c: Counters) => DEFAULT_COUNTERS.reduce((sum, k) => sum + c[k], 0n);
/** Notifications a data plane answered by default because no control plane was there. */
export const gapDefaults = (c: Counters) => c.answeredDefaultNoControlPlane + c.answeredDefaultDeadline + c.answeredDefaultDetached;
/** How many times a control plane attached. */
export const attaches = (cp: Started) => (cp.output().match(/attached to the data plane/g) ?? []).length;

export function listContainers(client: DataPlaneClient): Promise<Container[]> {
  return new Promise((resolve, reject) => client.listContainers({}, (err, r) => (err ? reject(err) : resolve(r!.containers))));
}

export async function stopped(bundle: Bundle, id: string): Promise<boolean> {
  const state = await run('runc', ['--root', bundle.stateRoot, 'state', id]);
  return state.code !== 0 || /"status": "stopped"/.test(state.stdout);
}

/** Every JSON line the soak workload printed. */
export function reportsOf(workload: Started): Array<Window | Final> {
  return workload.output().trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Window | Final);
}

export function finalOf(workload: Started): Final {
  const final = reportsOf(workload).find((l): l is Final => 'final' in l);
  assert.ok(final, `no final report from the workload:\n${workload.output().slice(-2000)}`);
  return final;
}

/** The three workloads whose every answer is checked, started on `listenerSocket` and running. */
export interface PolicyWorkloads {
  soak: Started;
  /** By what each proves. */
  byName: Record<string, Started>;
  /** Container ids whose policy the control plane knows (victims are added as they start). */
  known: Set<string>;
}

export async function startPolicyWorkloads(t: TestContext, dir: string, listenerSocket: string, client: DataPlaneClient): Promise<PolicyWorkloads> {
  const soak = startUnderFilter(t, { socket: listenerSocket, syscalls: ['getppid'], id: 'soak' }, [SOAK_WORKLOAD, '--threads', '4']);
  // Containers with a policy of their own, one mkdir every 2 ms each, every answer checked.
  const mkdirWorkload = (id: string, metadata: string, annotations: Record<string, string>, expect: string[]) => {
    const target = path.join(dir, id);
    fs.mkdirSync(target);
    return startUnderFilter(t, { socket: listenerSocket, syscalls: ['mkdir', 'mkdirat'], id, metadata, annotations },
      [SOAK_WORKLOAD, '--threads', '1', '--pause-us', '2000', '--mkdir', target, ...expect]);
  };
  const suffixed = mkdirWorkload('mkdir-tmpl', 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', containerd('shop', 'web-1', 'app'), ['--expect-suffix', '-shop-web-1']);
  const refused = mkdirWorkload('mkdir-errno', 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}', {}, ['--expect-errno', String(EACCES)]);
  const byName = { 'getppid (no keys: continue)': soak, 'MKDIR_TMPL suffix': suffixed, 'MKDIR_TMPL unresolved: errno EACCES': refused };
  const known = new Set(['soak', 'mkdir-tmpl', 'mkdir-errno']);
  for (const w of Object.values(byName)) await w.waitFor(/"calls":[1-9]/, 10_000);
  await waitPolicies(client, known, 'the three workloads to have their policy in force');
  return { soak, byName, known };
}

/** Until every container of `ids` lists a policy version. */
export async function waitPolicies(client: DataPlaneClient, ids: Iterable<string>, what: string): Promise<void> {
  await waitUntil(async () => {
    const listed = await listContainers(client);
    return [...ids].every((id) => listed.some((c) => c.containerId === id && c.policyVersion !== ''));
  }, 15_000, what);
}

/** What the workloads reported once stopped: each one's exit code and last report. */
export interface WorkloadResults {
  codes: Map<string, number | string>;
  finals: Record<string, Final>;
}

/** Stops the workloads; their figures go to the test's diagnostics (checked by assertPolicyAnswers). */
export async function endPolicyWorkloads(t: TestContext, w: PolicyWorkloads): Promise<WorkloadResults> {
  const codes = new Map<string, number | string>();
  for (const [name, p] of Object.entries(w.byName)) {
    p.child.kill('SIGTERM');
    codes.set(name, await p.exited);
  }
  const finals = Object.fromEntries(Object.entries(w.byName).map(([name, p]) => [name, finalOf(p)]));
  for (const [name, f] of Object.entries(finals)) t.diagnostic(`${name}: ${f.calls} calls, ${f.wrong} not the policy's answer, errors ${JSON.stringify(f.errors)}`);
  return { codes, finals };
}

/** Every syscall of every workload returned, none failed, each got the policy's answer. */
export function assertPolicyAnswers({ codes, finals }: WorkloadResults): void {
  for (const [name, c] of codes) assert.equal(c, 0, `the ${name} workload exited ${c}`);
  for (const [name, f] of Object.entries(finals)) {
    assert.equal(f.stuckThreads, 0, `${name}: every syscall returned`);
    assert.deepEqual(f.errors, {}, `${name}: no syscall failed (38 = ENOSYS)`);
    assert.equal(f.wrong, 0, `${name}: ${f.wrong} answer(s) differ from what an attached control plane gives`);
  }
}

/**
 * Samples, every 100 ms, each data plane process's counters and the default answers of every
 * container whose policy is known (a SIGKILLed process loses its last 100 ms, hence per pid).
 */
export function trackAnswers(t: TestContext, client: DataPlaneClient, known: Set<string>) {
  const countersByPid = new Map<number, Counters>();
  const knownDefaults = new Map<string, bigint>(); // "pid/handle" -> answered by default
  const sample = async () => {
    const [s, containers] = await Promise.all([getStatus(client), listContainers(client)]);
    countersByPid.set(s.pid, s.counters!);
    for (const c of containers) if (known.has(c.containerId)) knownDefaults.set(`${s.pid}/${c.handle}`, c.answeredDefault);
  };
  const poll = setInterval(() => void sample().catch(() => undefined), 100);
  t.after(() => clearInterval(poll));
  return {
    countersByPid,
    /** The last sample, taken now (while the workloads still run), then no more. */
    async finish(): Promise<void> {
      clearInterval(poll);
      await sample();
    },
    defaultsForKnown: () => [...knownDefaults.values()].reduce((sum, n) => sum + n, 0n),
    totals(): Map<string, bigint> {
      const totals = new Map<string, bigint>();
      for (const c of countersByPid.values()) {
        for (const [k, v] of Object.entries(c)) totals.set(k, (totals.get(k) ?? 0n) + BigInt(v as bigint));
      }
      return totals;
    },
  };
}

/** A fresh DEFAULT_ACTION=kill-container container (added to `known`), its policy in force. */
export async function killContainerVictim(t: TestContext, dir: string, listenerSocket: string, client: DataPlaneClient, known: Set<string>) {
  const victim = await sleepingContainer(t, dir, listenerSocket, 'DEFAULT_ACTION=kill-container', ['mkdir', 'mkdirat']);
  known.add(victim.id);
  await waitPolicies(client, [victim.id], `${victim.id}'s policy to be in force`);
  return victim;
}

/** Makes the victim's notified mkdir: true when it was killed for it (and never got past it). */
export async function killedByMkdir(victim: { bundle: Bundle; id: string }): Promise<boolean> {
  const exec = await runcExec(victim.bundle, victim.id, ['/bin/sh', '-c', 'mkdir /tmp/z; echo survived']);
  if (/survived/.test(exec.stdout)) return false;
  return waitUntil(() => stopped(victim.bundle, victim.id), 10_000, `${victim.id} to be killed`).then(() => true, () => false);
}

/**
 * The DaemonSet's rolling update of the data plane: a new keeper + data plane of `build` with
 * --takeover; the old one hands over and exits; the old keeper is stopped (its pod goes away).
 * Resolves with the new data plane and the pause the old one reported (park to the successor's ack).
 */
export async function handOffDataPlane(t: TestContext, old: RunningDataPlane, build: AgentBuild = CURRENT_BUILD): Promise<{ dp: RunningDataPlane; pauseMs: number }> {
  const oldPid = keeperChild(old.proc.child.pid!);
  const dp = await startDataPlane(t, ['--log-level', 'info', '--takeover'], old.dir, true, build).catch((err: Error) => {
    // A refused handoff is the serving one's to explain (a successor of another release may not say).
    const said = old.proc.output().split('\n').filter((l) => /handoff|successor/i.test(l)).slice(-5).join('\n');
    throw new Error(`${err.message}\nthe serving data plane ${oldPid} said:\n${said}`);
  });
  await waitUntil(() => keeperChild(old.proc.child.pid!) === 0, 10_000, `data plane ${oldPid} to exit after handing over to ${build.label}`);
  assert.match(old.proc.output(), /child handed over|not restarting/i);
  const pauseMs = Number(/"pauseMs":([\d.]+)/.exec(old.proc.output())?.[1] ?? NaN);
  await stop(old.proc.child); // the old pod goes away: its keeper drops its copies
  return { dp, pauseMs };
}

/** A control plane of `build` attaches with --takeover; the old one hands over and is stopped. */
export async function handOverControlPlane(t: TestContext, old: Started, dp: RunningDataPlane, build: AgentBuild = CURRENT_BUILD): Promise<Started> {
  const next = await startControlPlane(t, dp, [...CP_ARGS, '--takeover'], build);
  await old.waitFor(/handed over to seccomp-controlplane \S+: attaching again if it goes away/);
  old.child.kill('SIGTERM');
  assert.equal(await old.exited, 0, old.output());
  return next;
}

/** SIGKILLs the data plane under `dp`'s keeper; resolves once the keeper's new one serves. */
export async function killDataPlaneUnderKeeper(dp: RunningDataPlane, client: DataPlaneClient): Promise<void> {
  const victim = keeperChild(dp.proc.child.pid!);
  process.kill(victim, 'SIGKILL');
  await waitUntil(async () => {
    const s = await getStatus(client).catch(() => null);
    return s !== null && s.pid !== victim;
  }, 15_000, 'the keeper to restart the data plane');
}

/** Until `cp` has attached more often than `before`. */
export async function reattached(cp: Started, before: number): Promise<void> {
  const said = () => cp.output().split('\n').filter((l) => /attach|refused/i.test(l)).slice(-3).join('\n');
  await waitUntil(() => attaches(cp) > before, 15_000, () => `the control plane to attach again; it said:\n${said()}`);
}

/**
 * After a data plane handoff or restart the new data plane held notifications for the control
 * plane that was attached: none got the default while it came back.
 */
export async function assertPolicyHeld(client: DataPlaneClient, phase: string): Promise<void> {
  const s = await getStatus(client);
  assert.equal(gapDefaults(s.counters!), 0n, `${phase}: data plane ${s.pid} answered ${gapDefaults(s.counters!)} notification(s) by default while the control plane reattached`);
}
