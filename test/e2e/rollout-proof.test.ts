// The promise of issue 4, proven: under a 4-thread workload that never pauses and a container
// start every second (seccomp-run and real runc), 5 control plane handovers, 3 control plane
// SIGKILLs, 3 data plane handoffs (the rolling update of the DaemonSet: a new keeper + data plane
// with --takeover, then the old pod's keeper is stopped) and 3 data plane SIGKILLs under the keeper.
// Required: no syscall fails (ENOSYS or other), none hangs, every container starts; a planned
// control plane handover leaves nothing to the default action, nor does a data plane handoff or
// restart (the new data plane holds notifications for the control plane). Reported: who answered
// how many, and the longest pause of each phase.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import { createDataPlaneClient, getStatus } from '../../common/dataplane-client';
import type { Counters } from '../../proto/gen/seccompagent/v1/dataplane';
import { startControlPlane } from '../support/controlplane';
import { keeperChild, startDataPlane, type RunningDataPlane } from '../support/dataplane';
import { SOAK_WORKLOAD } from '../support/paths';
import { stop, type Started } from '../support/processes';
import { makeBundle, runContainer } from '../support/runc';
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

test('zero-disruption proof: 5 CP handovers, 3 CP SIGKILLs, 3 DP handoffs, 3 DP SIGKILLs; nothing fails, nothing hangs', { timeout: 600_000 }, async (t) => {
  const dir = scratchDir(t);
  let dp: RunningDataPlane = await startDataPlane(t, ['--log-level', 'info'], dir, true);
  const { listenerSocket, grpcSocket } = dp;
  let cp = await startControlPlane(t, dp, ['--no-kubernetes', '--fast-path=false']);
  const client = createDataPlaneClient(grpcSocket);
  t.after(() => client.close());
  // Counters of each data plane process, as last seen (a SIGKILLed one loses its last 100 ms).
  const countersByPid = new Map<number, Counters>();
  const poll = setInterval(() => {
    getStatus(client).then((s) => countersByPid.set(s.pid, s.counters!), () => undefined);
  }, 100);
  t.after(() => clearInterval(poll));

  const soak = startUnderFilter(t, { socket: listenerSocket, syscalls: ['getppid'], id: 'soak' }, [SOAK_WORKLOAD, '--threads', '4']);
  await soak.waitFor(/"calls":[1-9]/, 10_000);

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
      const next = await startControlPlane(t, dp, ['--no-kubernetes', '--takeover', '--fast-path=false']);
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
      cp = await startControlPlane(t, dp, ['--no-kubernetes', '--fast-path=false']);
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
  soak.child.kill('SIGTERM');
  const code = await soak.exited;
  const lines = soak.output().trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Window | Final);
  const final = lines.find((l): l is Final => 'final' in l);
  assert.ok(final, `no final report from the workload:\n${soak.output().slice(-2000)}`);
  const windows = lines.filter((l): l is Window => !('final' in l));

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

  assert.equal(code, 0, `the workload exited ${code}`);
  assert.equal(final.stuckThreads, 0, 'every syscall returned');
  assert.deepEqual(final.errors, {}, 'no syscall failed (38 = ENOSYS)');
  assert.equal(final.wrong, 0);
  const failed = starts.filter((s) => !s.ok);
  assert.deepEqual(failed, [], 'every container started and ran');
  assert.ok(starts.length >= 20, `only ${starts.length} container starts`);
  // The workload's own figures above also hold the scheduler's preemptions (4 busy threads on this
  // machine's 2 vCPUs give pauses of tens of ms with no agent at all); the agent's pause is this one.
  for (const ms of handoffPausesMs) assert.ok(ms <= 100, `a data plane handoff answered nothing for ${ms} ms (target 100 ms)`);
});
