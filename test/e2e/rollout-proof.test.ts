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
import { startControlPlane } from '../support/controlplane';
import { startDataPlane, type RunningDataPlane } from '../support/dataplane';
import {
  assertPolicyAnswers, assertPolicyHeld, attaches, CP_ARGS, defaults, endPolicyWorkloads, finalOf, handOffDataPlane, handOverControlPlane, killContainerVictim,
  killDataPlaneUnderKeeper, killedByMkdir, reattached, reportsOf, startPolicyWorkloads, trackAnswers, type Window,
} from '../support/rollout';
import { makeBundle, runContainer } from '../support/runc';
import { scratchDir } from '../support/scratch';
import { runUnderFilter } from '../support/workload';
import { sleep, waitUntil } from '../support/wait';

interface Phase {
  name: string;
  start: number;
  end: number;
}

const monoMs = () => Number(process.hrtime.bigint() / 1_000_000n);

test('zero-disruption proof: 5 CP handovers, 3+3 CP SIGKILLs, 3 DP handoffs, 3 DP SIGKILLs; nothing fails, nothing hangs, every answer is the policy\'s', { timeout: 600_000 }, async (t) => {
  const dir = scratchDir(t);
  let dp: RunningDataPlane = await startDataPlane(t, ['--log-level', 'info'], dir, true);
  const { listenerSocket, grpcSocket } = dp;
  let cp = await startControlPlane(t, dp, CP_ARGS);
  const client = createDataPlaneClient(grpcSocket);
  t.after(() => client.close());
  const workloads = await startPolicyWorkloads(t, dir, listenerSocket, client);
  const { soak, known } = workloads;
  const answers = trackAnswers(t, client, known);

  // A container start every second, alternating seccomp-run and runc; each must run to its end.
  const bundle = makeBundle(path.join(dir, 'bundle'), ['/bin/sh', '-c', 'echo ppid $PPID'], { listenerPath: listenerSocket, syscalls: ['getppid'] });
  const starts: Array<{ kind: string; ok: boolean; detail: string }> = [];
  let starting = true;
  // A failed phase leaves the body before `starting = false` below: the starts end with the test,
  // not at the runner's timeout (a start a second, forever, kept the file alive for 4 minutes).
  t.after(() => { starting = false; });
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
  for (let i = 1; i <= 5; i++) {
    await phase(`control plane handover ${i}`, async () => {
      const before = await getStatus(client);
      cp = await handOverControlPlane(t, cp, dp);
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
      const victim = await killContainerVictim(t, dir, listenerSocket, client, known);
      cp.child.kill('SIGKILL');
      await cp.exited;
      const downAt = monoMs();
      await waitUntil(async () => (await getStatus(client)).controlPlane === undefined, 10_000, 'the data plane to see the control plane gone');
      const killed = await killedByMkdir(victim);
      const noneUp = (await getStatus(client)).controlPlane === undefined;
      kills.push({ id: victim.id, killed: killed && noneUp, downMs: monoMs() - downAt });
      await sleep(Math.max(0, 2000 - (monoMs() - downAt)));
      cp = await startControlPlane(t, dp, CP_ARGS);
    });
  }
  for (let i = 1; i <= 3; i++) {
    await phase(`data plane handoff ${i}`, async () => {
      const before = attaches(cp);
      const handed = await handOffDataPlane(t, dp);
      dp = handed.dp;
      handoffPausesMs.push(handed.pauseMs);
      await reattached(cp, before);
      await assertPolicyHeld(client, `data plane handoff ${i}`);
    });
  }
  for (let i = 1; i <= 3; i++) {
    await phase(`data plane SIGKILL ${i}`, async () => {
      const before = attaches(cp);
      await killDataPlaneUnderKeeper(dp, client);
      await reattached(cp, before);
      await assertPolicyHeld(client, `data plane SIGKILL ${i}`);
    });
  }

  starting = false;
  await starter;
  // The last per-container figures, while the workloads still run.
  await answers.finish();
  const results = await endPolicyWorkloads(t, workloads);
  const final = finalOf(soak);
  const windows = reportsOf(soak).filter((l): l is Window => !('final' in l));
  const { finals } = results;
  const mismatches = Object.values(finals).reduce((sum, f) => sum + f.wrong, 0);
  const defaultsForKnown = answers.defaultsForKnown();

  // Figures for the closing note, printed whether or not the checks below pass.
  const interval = windows.length > 1 ? windows[1].mono - windows[0].mono : 100;
  for (const p of phases) {
    const inside = windows.filter((w) => w.mono >= p.start && w.mono - interval <= p.end);
    const pauseMs = Math.max(0, ...inside.map((w) => Math.max(w.maxUs, w.oldestInFlightUs))) / 1000;
    t.diagnostic(`${p.name}: longest pause ${pauseMs.toFixed(1)} ms`);
  }
  t.diagnostic(`data plane handoffs: nothing answered for ${handoffPausesMs.map((ms) => ms.toFixed(1)).join(', ')} ms (the old one's park to the successor's ack)`);
  const totals = answers.totals();
  t.diagnostic(`answered by the control plane ${totals.get('answeredControlPlane')}, default (no control plane) ${totals.get('answeredDefaultNoControlPlane')}, default (detached) ${totals.get('answeredDefaultDetached')}, default (deadline) ${totals.get('answeredDefaultDeadline')}, default (recovered after a handoff or crash) ${totals.get('answeredDefaultRecovered')}, fast path ${totals.get('answeredFastPath')}; data plane processes ${answers.countersByPid.size}`);
  t.diagnostic(`workload: ${final.calls} syscalls, longest ${(final.maxUs / 1000).toFixed(1)} ms; container starts ${starts.length} (${starts.filter((s) => s.kind === 'runc').length} runc)`);
  t.diagnostic(`mismatches (an answer other than an attached control plane gives): ${mismatches}; default answers for containers whose policy is known: ${defaultsForKnown}`);
  t.diagnostic(`kill-container with no control plane up: ${kills.filter((k) => k.killed).length} of ${kills.length} killed (${kills.map((k) => `${k.downMs} ms down`).join(', ')})`);

  assertPolicyAnswers(results);
  assert.equal(defaultsForKnown, 0n, 'no container whose policy is known got the default action');
  assert.deepEqual(kills.filter((k) => !k.killed), [], 'every kill-container container was killed with no control plane up');
  assert.equal(kills.length, 3);
  const failed = starts.filter((s) => !s.ok);
  assert.deepEqual(failed, [], 'every container started and ran');
  assert.ok(starts.length >= 20, `only ${starts.length} container starts`);
  // The workload's own figures above also hold the scheduler's preemptions (4 busy threads on this
  // machine's 2 vCPUs give pauses of tens of ms with no agent at all); the agent's pause is this one.
  // Reported above (20-80 ms on a quiet 2-vCPU run); its speed is the bench's to hold, not this
  // test's (249 ms once on a machine at load 12). What the proof asserts is that a handoff never
  // leaves calls waiting past the decision deadline: nothing hangs.
  for (const ms of handoffPausesMs) assert.ok(ms <= 2000, `a data plane handoff answered nothing for ${ms} ms (past the 2 s decision deadline)`);
});
