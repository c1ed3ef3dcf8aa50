// The promise of issues 4 and 9, proven: under a 4-thread workload that never pauses and a
// container start every second (seccomp-run and real runc), 5 control plane handovers, 3 control
// plane SIGKILLs, 3 more that stay down 2 s, 3 data plane handoffs (the rolling update of the
// DaemonSet: a new keeper + data plane with --takeover, then the old pod's keeper is stopped) and
// 3 data plane SIGKILLs under the keeper. Beside the getppid workload run containers whose policy
// the control plane compiles and pushes (issue 9): MKDIR_TMPL with a known pod (mkdir suffixed),
// MKDIR_TMPL without one (the --unresolved-action errno), and, in each long control plane gap, a
// fresh DEFAULT_ACTION=kill-container container (each is killed).
// Required: no syscall fails (ENOSYS or other), none hangs, every container starts; every answer
// equals what an attached control plane gives (each workload checks every call); containers whose
// policy is known never get the default action; the kill-container ones are killed with no control
// plane up; a planned control plane handover leaves nothing to the default action, nor does a data
// plane handoff or restart (the new data plane holds notifications for the control plane).
// Reported: who answered how many, the mismatches, and the longest pause of each phase.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import { createDataPlaneClient, getStatus } from '../../common/dataplane-client';
import type { Container, Counters, DataPlaneClient } from '../../proto/gen/seccompagent/v1/dataplane';
import * as fs from 'node:fs';
import { startControlPlane } from '../support/controlplane';
import { keeperChild, startDataPlane, type RunningDataPlane } from '../support/dataplane';
import { SOAK_WORKLOAD } from '../support/paths';
import { containerd } from '../support/policy';
import { run, stop, type Started } from '../support/processes';
import { makeBundle, runContainer, runcExec, sleepingContainer, type Bundle } from '../support/runc';
import { scratchDir } from '../support/scratch';
import { runUnderFilter, startUnderFilter } from '../support/workload';
import { sleep, waitUntil } from '../support/wait';

interface Window {
  mono: number;
  calls: number;
  maxUs: number;
  oldestInFlightUs: number;
  errors: Record<string, number>;
  wrong: number;
}
interface Final {
  final: true;
  calls: number;
  errors: Record<string, number>;
  wrong: number;
  maxUs: number;
  stuckThreads: number;
}
interface Phase {
  name: string;
  start: number;
  end: number;
}

const monoMs = () => Number(process.hrtime.bigint() / 1_000_000n);
const DEFAULT_COUNTERS = ['answeredDefaultNoControlPlane', 'answeredDefaultDeadline', 'answeredDefaultDetached', 'answeredDefaultRecovered'] as const;
const defaults = (c: Counters) => DEFAULT_COUNTERS.reduce((sum, k) => sum + c[k], 0n);
const attaches = (cp: Started) => (cp.output().match(/attached to the data plane/g) ?? []).length;
/** Notifications a data plane answered by default because no control plane was there. */
const gapDefaults = (c: Counters) => c.answeredDefaultNoControlPlane + c.answeredDefaultDeadline + c.answeredDefaultDetached;
/** Every control plane of the proof: no API server; a pod identity that is not known gives EACCES. */
const CP_ARGS = ['--no-kubernetes', '--unresolved-action', 'errno:EACCES'];
const EACCES = 13;

function listContainers(client: DataPlaneClient): Promise<Container[]> {
  return new Promise((resolve, reject) => client.listContainers({}, (err, r) => (err ? reject(err) : resolve(r!.containers))));
}

async function stopped(bundle: Bundle, id: string): Promise<boolean> {
  const state = await run('runc', ['--root', bundle.stateRoot, 'state', id]);
  return state.code !== 0 || /"status": "stopped"/.test(state.stdout);
}

function finalOf(workload: Started): Final {
  const lines = workload.output().trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Window | Final);
  const final = lines.find((l): l is Final => 'final' in l);
  assert.ok(final, `no final report from the workload:\n${workload.output().slice(-2000)}`);
  return final;
}

test('zero-disruption proof: 5 CP handovers, 3+3 CP SIGKILLs, 3 DP handoffs, 3 DP SIGKILLs; nothing fails, nothing hangs, every answer is the policy\'s', { timeout: 600_000 }, async (t) => {
  const dir = scratchDir(t);
  let dp: RunningDataPlane = await startDataPlane(t, ['--log-level', 'info'], dir, true);
  const { listenerSocket, grpcSocket } = dp;
  let cp = await startControlPlane(t, dp, CP_ARGS);
  const client = createDataPlaneClient(grpcSocket);
  t.after(() => client.close());
  // Counters of each data plane process, as last seen (a SIGKILLed one loses its last 100 ms),
  // and per process, the default answers each container whose policy is known got.
  const countersByPid = new Map<number, Counters>();
  const known = new Set<string>();
  const knownDefaults = new Map<string, bigint>(); // "pid/handle" -> answered by default
  const poll = setInterval(() => {
    Promise.all([getStatus(client), listContainers(client)]).then(([s, containers]) => {
      countersByPid.set(s.pid, s.counters!);
      for (const c of containers) if (known.has(c.containerId)) knownDefaults.set(`${s.pid}/${c.handle}`, c.answeredDefault);
    }, () => undefined);
  }, 100);
  t.after(() => clearInterval(poll));

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
  const policyWorkloads = { 'getppid (no keys: continue)': soak, 'MKDIR_TMPL suffix': suffixed, 'MKDIR_TMPL unresolved: errno EACCES': refused };
  for (const id of ['soak', 'mkdir-tmpl', 'mkdir-errno']) known.add(id);
  for (const w of Object.values(policyWorkloads)) await w.waitFor(/"calls":[1-9]/, 10_000);
  await waitUntil(async () => {
    const listed = await listContainers(client);
    return [...known].every((id) => listed.some((c) => c.containerId === id && c.policyVersion !== ''));
  }, 15_000, 'the three workloads to have their policy in force');

  // A container start every second, alternating seccomp-run and runc; each must run to its end.
  const bundle = makeBundle(path.join(dir, 'bundle'), ['/bin/sh', '-c', 'echo ppid $PPID'], { listenerPath: listenerSocket, syscalls: ['getppid'] });
  const starts: Array<{ kind: string; ok: boolean; detail: string }> = [];
  let starting = true;
  const starter = (async () => {
    for (let i = 0; starting; i++) {
      const began = Date.now();
      if (i % 2 === 0) {
        const r = await runUnderFilter({ socket: listenerSocket, syscalls: ['getppid'], id: `start-${i}` }, ['/bin/sh', '-c', 'echo ppid $PPID']);
        starts.push({ kind: 'seccomp-run', ok: r.code === 0 && /ppid \d+/.test(r.stdout), detail: `${r.code} ${r.stdout}${r.stderr}` });
      } else {
        const proc = runContainer(t, bundle, `proof-${i}`);
        const code = await proc.exited;
        starts.push({ kind: 'runc', ok: code === 0 && /ppid \d+/.test(proc.output()), detail: `${code} ${proc.output()}` });
      }
      await sleep(Math.max(0, 1000 - (Date.now() - began)));
    }
  })();

  const phases: Phase[] = [];
  /** Per data plane handoff: how long the old one answered nothing (park to the successor's ack), from its log. */
  const handoffPausesMs: number[] = [];
  const phase = async (name: string, action: () => Promise<void>) => {
    const start = monoMs();
    await action();
    await sleep(1000); // the workload runs on under the new arrangement
    phases.push({ name, start, end: monoMs() });
  };
  const reattached = async (before: number) => waitUntil(() => attaches(cp) > before, 15_000, 'the control plane to attach again');
  // After a data plane handoff or restart, the new data plane holds notifications for the control
  // plane that was attached: none of them gets the default while it comes back.
  const policyHeld = async (phase: string) => {
    const s = await getStatus(client);
    assert.equal(gapDefaults(s.counters!), 0n, `${phase}: data plane ${s.pid} answered ${gapDefaults(s.counters!)} notification(s) by default while the control plane reattached`);
  };

  for (let i = 1; i <= 5; i++) {
    await phase(`control plane handover ${i}`, async () => {
      const before = await getStatus(client);
      const next = await startControlPlane(t, dp, [...CP_ARGS, '--takeover']);
      await cp.waitFor(/handed over to seccomp-controlplane \S+: attaching again if it goes away/);
      cp.child.kill('SIGTERM');
      assert.equal(await cp.exited, 0, cp.output());
      cp = next;
      const after = await getStatus(client);
      assert.equal(after.pid, before.pid);
      assert.equal(defaults(after.counters!), defaults(before.counters!), 'a planned control plane handover leaves nothing to the default action');
    });
  }
  for (let i = 1; i <= 3; i++) {
    await phase(`control plane SIGKILL ${i}`, async () => {
      cp.child.kill('SIGKILL');
      await cp.exited;
      cp = await startControlPlane(t, dp, CP_ARGS);
    });
  }
  // Down 2 s each: a container whose policy says DEFAULT_ACTION=kill-container (a fresh one each
  // time, since each is killed) makes a notified syscall while no control plane is up.
  const kills: Array<{ id: string; killed: boolean; downMs: number }> = [];
  for (let i = 1; i <= 3; i++) {
    await phase(`control plane SIGKILL ${i}, down 2 s`, async () => {
      const victim = await sleepingContainer(t, dir, listenerSocket, 'DEFAULT_ACTION=kill-container', ['mkdir', 'mkdirat']);
      known.add(victim.id);
      await waitUntil(async () => (await listContainers(client)).some((c) => c.containerId === victim.id && c.policyVersion !== ''), 15_000, `${victim.id}'s policy to be in force`);
      cp.child.kill('SIGKILL');
      await cp.exited;
      const downAt = monoMs();
      await waitUntil(async () => (await getStatus(client)).controlPlane === undefined, 10_000, 'the data plane to see the control plane gone');
      const exec = await runcExec(victim.bundle, victim.id, ['/bin/sh', '-c', 'mkdir /tmp/z; echo survived']);
      const killed = !/survived/.test(exec.stdout) && (await waitUntil(() => stopped(victim.bundle, victim.id), 10_000, `${victim.id} to be killed`).then(() => true, () => false));
      const noneUp = (await getStatus(client)).controlPlane === undefined;
      kills.push({ id: victim.id, killed: killed && noneUp, downMs: monoMs() - downAt });
      await sleep(Math.max(0, 2000 - (monoMs() - downAt)));
      cp = await startControlPlane(t, dp, CP_ARGS);
    });
  }
  for (let i = 1; i <= 3; i++) {
    await phase(`data plane handoff ${i}`, async () => {
      const before = attaches(cp);
      const old = dp;
      const oldPid = keeperChild(old.proc.child.pid!);
      dp = await startDataPlane(t, ['--log-level', 'info', '--takeover'], dir, true);
      await waitUntil(() => keeperChild(old.proc.child.pid!) === 0, 10_000, `data plane ${oldPid} to exit after handing over`);
      assert.match(old.proc.output(), /child handed over|not restarting/i);
      handoffPausesMs.push(Number(/"pauseMs":([\d.]+)/.exec(old.proc.output())?.[1] ?? NaN));
      await stop(old.proc.child); // the old pod goes away: its keeper drops its copies
      await reattached(before);
      await policyHeld(`data plane handoff ${i}`);
    });
  }
  for (let i = 1; i <= 3; i++) {
    await phase(`data plane SIGKILL ${i}`, async () => {
      const before = attaches(cp);
      const victim = keeperChild(dp.proc.child.pid!);
      process.kill(victim, 'SIGKILL');
      await waitUntil(async () => {
        const s = await getStatus(client).catch(() => null);
        return s !== null && s.pid !== victim;
      }, 15_000, 'the keeper to restart the data plane');
      await reattached(before);
      await policyHeld(`data plane SIGKILL ${i}`);
    });
  }

  starting = false;
  await starter;
  // The last per-container figures, while the workloads still run.
  const lastStatus = await getStatus(client);
  for (const c of await listContainers(client)) if (known.has(c.containerId)) knownDefaults.set(`${lastStatus.pid}/${c.handle}`, c.answeredDefault);
  clearInterval(poll);
  const codes = new Map<string, number | string>();
  for (const [name, w] of Object.entries(policyWorkloads)) {
    w.child.kill('SIGTERM');
    codes.set(name, await w.exited);
  }
  const final = finalOf(soak);
  const lines = soak.output().trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Window | Final);
  const windows = lines.filter((l): l is Window => !('final' in l));
  const finals = Object.fromEntries(Object.entries(policyWorkloads).map(([name, w]) => [name, finalOf(w)]));
  const mismatches = Object.values(finals).reduce((sum, f) => sum + f.wrong, 0);
  const defaultsForKnown = [...knownDefaults.values()].reduce((sum, n) => sum + n, 0n);

  // Figures for the closing note, printed whether or not the checks below pass.
  const interval = windows.length > 1 ? windows[1].mono - windows[0].mono : 100;
  for (const p of phases) {
    const inside = windows.filter((w) => w.mono >= p.start && w.mono - interval <= p.end);
    const pauseMs = Math.max(0, ...inside.map((w) => Math.max(w.maxUs, w.oldestInFlightUs))) / 1000;
    t.diagnostic(`${p.name}: longest pause ${pauseMs.toFixed(1)} ms`);
  }
  t.diagnostic(`data plane handoffs: nothing answered for ${handoffPausesMs.map((ms) => ms.toFixed(1)).join(', ')} ms (the old one's park to the successor's ack)`);
  const totals = new Map<string, bigint>();
  for (const c of countersByPid.values()) {
    for (const [k, v] of Object.entries(c)) totals.set(k, (totals.get(k) ?? 0n) + BigInt(v as bigint));
  }
  t.diagnostic(`answered by the control plane ${totals.get('answeredControlPlane')}, default (no control plane) ${totals.get('answeredDefaultNoControlPlane')}, default (detached) ${totals.get('answeredDefaultDetached')}, default (deadline) ${totals.get('answeredDefaultDeadline')}, default (recovered after a handoff or crash) ${totals.get('answeredDefaultRecovered')}, fast path ${totals.get('answeredFastPath')}; data plane processes ${countersByPid.size}`);
  t.diagnostic(`workload: ${final.calls} syscalls, longest ${(final.maxUs / 1000).toFixed(1)} ms; container starts ${starts.length} (${starts.filter((s) => s.kind === 'runc').length} runc)`);
  for (const [name, f] of Object.entries(finals)) t.diagnostic(`${name}: ${f.calls} calls, ${f.wrong} not the policy's answer, errors ${JSON.stringify(f.errors)}`);
  t.diagnostic(`mismatches (an answer other than an attached control plane gives): ${mismatches}; default answers for containers whose policy is known: ${defaultsForKnown}`);
  t.diagnostic(`kill-container with no control plane up: ${kills.filter((k) => k.killed).length} of ${kills.length} killed (${kills.map((k) => `${k.downMs} ms down`).join(', ')})`);

  for (const [name, c] of codes) assert.equal(c, 0, `the ${name} workload exited ${c}`);
  for (const [name, f] of Object.entries(finals)) {
    assert.equal(f.stuckThreads, 0, `${name}: every syscall returned`);
    assert.deepEqual(f.errors, {}, `${name}: no syscall failed (38 = ENOSYS)`);
    assert.equal(f.wrong, 0, `${name}: ${f.wrong} answer(s) differ from what an attached control plane gives`);
  }
  assert.equal(defaultsForKnown, 0n, 'no container whose policy is known got the default action');
  assert.deepEqual(kills.filter((k) => !k.killed), [], 'every kill-container container was killed with no control plane up');
  assert.equal(kills.length, 3);
  const failed = starts.filter((s) => !s.ok);
  assert.deepEqual(failed, [], 'every container started and ran');
  assert.ok(starts.length >= 20, `only ${starts.length} container starts`);
  // The workload's own figures above also hold the scheduler's preemptions (4 busy threads on this
  // machine's 2 vCPUs give pauses of tens of ms with no agent at all); the agent's pause is this one.
  for (const ms of handoffPausesMs) assert.ok(ms <= 100, `a data plane handoff answered nothing for ${ms} ms (target 100 ms)`);
});
