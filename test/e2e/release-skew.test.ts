// The skew policy (docs/upgrades.md), proven against the previous release built from git
// (test/testdata/previous-release.json): the previous release's keeper, data plane and control
// plane serve the rollout proof's workloads (getppid: continue; MKDIR_TMPL with a pod: suffixed;
// MKDIR_TMPL without one: EACCES), then this tree takes over both planes as the DaemonSet's
// rolling update does (keeper + data plane --takeover, control plane --takeover) and its data
// plane is SIGKILLed once under its keeper; then the same back to the previous release (rollback).
// Required: no syscall fails (ENOSYS or other), none hangs, every answer is the policy's (every
// MKDIR_TMPL mkdir suffixed), no container whose policy is known gets the default action, a
// DEFAULT_ACTION=kill-container container is killed after each direction.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as path from 'node:path';
import { createDataPlaneClient, getStatus } from '../../common/dataplane-client';
import { VERSION } from '../../common/version';
import type { DataPlaneClient } from '../../proto/gen/seccompagent/v1/dataplane';
import { startControlPlane } from '../support/controlplane';
import { keeperChild, startDataPlane, type RunningDataPlane } from '../support/dataplane';
import { CURRENT_BUILD, type AgentBuild } from '../support/paths';
import { previousReleaseBuild } from '../support/release';
import {
  assertPolicyAnswers, assertPolicyHeld, attaches, CP_ARGS, defaults, endPolicyWorkloads, handOffDataPlane, handOverControlPlane,
  killContainerVictim, killDataPlaneUnderKeeper, killedByMkdir, listContainers, reattached, startPolicyWorkloads, trackAnswers,
} from '../support/rollout';
import { requireRunc } from '../support/runc';
import { scratchDir } from '../support/scratch';
import { sleep, waitUntil } from '../support/wait';
import { start, type Started } from '../support/processes';
import { startUnderFilter } from '../support/workload';

/** Until the data plane that serves is of `version` and a control plane of `cpVersion` is attached to it. */
async function servedBy(client: DataPlaneClient, version: string, cpVersion: string, what: string): Promise<void> {
  await waitUntil(async () => {
    const s = await getStatus(client).catch(() => null);
    return s !== null && s.version === version && s.controlPlane?.version === cpVersion;
  }, 15_000, `${what}: data plane ${version} with control plane ${cpVersion} attached`);
}

test('release skew: previous release -> this tree -> previous release, both planes by handoff and takeover, one data plane SIGKILL each way; nothing fails, every answer is the policy\'s', { timeout: 25 * 60_000 }, async (t) => {
  requireRunc();
  const began = Date.now();
  const { release, build: previous, cached } = await previousReleaseBuild((line) => t.diagnostic(line));
  t.diagnostic(`previous release ${previous.label}: ${cached ? 'cached build verified' : 'built'} in ${((Date.now() - began) / 1000).toFixed(0)} s (${previous.root})`);
  assert.notEqual(release.version, VERSION, `test/testdata/previous-release.json names ${release.version}, this tree's own version: name the release before it`);

  const dir = scratchDir(t);
  let dp: RunningDataPlane = await startDataPlane(t, ['--log-level', 'info'], dir, true, previous);
  let cp: Started = await startControlPlane(t, dp, CP_ARGS, previous);
  const client = createDataPlaneClient(dp.grpcSocket);
  t.after(() => client.close());
  await servedBy(client, release.version, release.version, 'before the upgrade');
  const workloads = await startPolicyWorkloads(t, dir, dp.listenerSocket, client);
  const answers = trackAnswers(t, client, workloads.known);
  await sleep(1000); // the workloads run under the previous release

  const kills: Array<{ step: string; killed: boolean }> = [];
  const pausesMs: string[] = [];
  /** Both planes to `to`, as a rolling update does, then one crash of its data plane. */
  const roll = async (step: string, to: AgentBuild, version: string) => {
    const attachedBefore = attaches(cp);
    const handed = await handOffDataPlane(t, dp, to);
    dp = handed.dp;
    pausesMs.push(`${step} ${handed.pauseMs.toFixed(1)} ms`);
    await reattached(cp, attachedBefore); // the other release's control plane, on the new data plane
    await assertPolicyHeld(client, `${step}: data plane handoff to ${to.label}`);

    const before = await getStatus(client);
    cp = await handOverControlPlane(t, cp, dp, to);
    await servedBy(client, version, version, `${step}: both planes`);
    const after = await getStatus(client);
    assert.equal(after.pid, before.pid);
    assert.equal(defaults(after.counters!), defaults(before.counters!), `${step}: the control plane handover left nothing to the default action`);

    const attachedBeforeKill = attaches(cp);
    await killDataPlaneUnderKeeper(dp, client);
    await reattached(cp, attachedBeforeKill);
    await servedBy(client, version, version, `${step}: after the data plane SIGKILL`);
    await assertPolicyHeld(client, `${step}: data plane SIGKILL under ${to.label}'s keeper`);

    const victim = await killContainerVictim(t, dir, dp.listenerSocket, client, workloads.known);
    kills.push({ step, killed: await killedByMkdir(victim) });
    await sleep(1000); // the workloads run on under the new arrangement
  };
  await roll('upgrade', CURRENT_BUILD, VERSION);
  await roll('rollback', previous, release.version);

  await answers.finish();
  const results = await endPolicyWorkloads(t, workloads);
  const totals = answers.totals();
  t.diagnostic(`data plane handoffs: nothing answered for ${pausesMs.join(', ')} (the old one's park to the successor's ack)`);
  t.diagnostic(`answered by the control plane ${totals.get('answeredControlPlane')}, fast path ${totals.get('answeredFastPath')}, default ${[...answers.countersByPid.values()].reduce((sum, c) => sum + defaults(c), 0n)}; data plane processes ${answers.countersByPid.size}`);
  t.diagnostic(`kill-container: ${kills.map((k) => `${k.step} ${k.killed ? 'killed' : 'NOT killed'}`).join(', ')}; whole test ${((Date.now() - began) / 1000).toFixed(0)} s`);

  assertPolicyAnswers(results);
  assert.equal(answers.defaultsForKnown(), 0n, 'no container whose policy is known got the default action');
  assert.deepEqual(kills.filter((k) => !k.killed), [], 'a kill-container container is killed after the upgrade and after the rollback');
  assert.ok(Object.values(results.finals).every((f) => f.calls > 0));
});

test('release skew, upgrade by restart: the previous release\'s fd store (a memfd per container record) read by this tree after a SIGKILL under the keeper; every container keeps its id and annotations, across a second SIGKILL too', { timeout: 10 * 60_000 }, async (t) => {
  const { release, build: previous } = await previousReleaseBuild((line) => t.diagnostic(line));
  const dir = scratchDir(t);
  const listenerSocket = path.join(dir, 'listener.sock');
  const grpcSocket = path.join(dir, 'grpc', 'dataplane.sock');
  const args = ['--listener-socket', listenerSocket, '--grpc-socket', grpcSocket, '--control-socket', path.join(dir, 'grpc', 'control.sock'), '--log-level', 'info'];
  // The keeper (this tree's: the previous one's abstract socket is refused since) restarts the same
  // command: the previous release's data plane first, this tree's from the first restart on (what
  // a package upgrade and a crash do under systemd's fd store).
  const upgraded = path.join(dir, 'upgraded');
  const script = `if [ -e "${upgraded}" ]; then exec "$0" "${CURRENT_BUILD.dataplaneMain}" "$@"; fi; : > "${upgraded}"; exec "$0" "${previous.dataplaneMain}" "$@"`;
  const keeper = start(t, CURRENT_BUILD.keeper, ['--restart-delay-ms', '50', '--', '/bin/sh', '-c', script, process.execPath, ...args]);
  const client = createDataPlaneClient(grpcSocket);
  t.after(() => client.close());
  const servedByVersion = (version: string, what: string) => waitUntil(async () => {
    const s = await getStatus(client).catch(() => null);
    return s !== null && s.version === version && s.pid === keeperChild(keeper.child.pid!);
  }, 15_000, () => `${what}: a data plane of ${version}; keeper output:\n${keeper.output()}`);
  await servedByVersion(release.version, 'before the upgrade');

  const ids = ['restart-a', 'restart-b', 'restart-c'];
  for (const id of ids) {
    startUnderFilter(t, { socket: listenerSocket, syscalls: ['mkdir'], id, annotations: { 'io.kubernetes.pod.name': `pod-${id}` } }, ['/bin/sleep', '600']);
  }
  const named = async () => new Map((await listContainers(client)).map((c) => [c.containerId, c.annotations['io.kubernetes.pod.name'] ?? '']));
  const expected = new Map(ids.map((id) => [id, `pod-${id}`]));
  await waitUntil(async () => (await named()).size === ids.length, 15_000, 'the previous release to hold the three containers');
  assert.deepEqual(await named(), expected, 'the previous release knows them');

  process.kill(keeperChild(keeper.child.pid!), 'SIGKILL');
  await servedByVersion(VERSION, 'after the SIGKILL');
  assert.deepEqual(await named(), expected, 'this tree, restarted from the previous release\'s fd store, knows every container by its record');

  // The records were moved into this tree's records file and stored before the memfds left the
  // store: a second crash finds them there.
  const before = keeperChild(keeper.child.pid!);
  process.kill(before, 'SIGKILL');
  await waitUntil(async () => {
    const s = await getStatus(client).catch(() => null);
    return s !== null && s.pid !== before && s.pid === keeperChild(keeper.child.pid!);
  }, 15_000, 'the keeper to restart this tree\'s data plane');
  assert.deepEqual(await named(), expected, 'after a second SIGKILL, from this tree\'s own store');
});
