// Prometheus /metrics of both planes and the control plane's /healthz, scraped for real.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import { startControlPlane } from '../support/controlplane';
import { startDataPlane } from '../support/dataplane';
import { metricsUrl } from '../support/processes';
import { waitUntil } from '../support/wait';
import { runUnderFilter } from '../support/workload';

test('seccomp-dataplane --metrics-addr: notifications by syscall, answers by who answered, latency, containers, control plane attached, listener sockets, start origin', async (t) => {
  const dp = await startDataPlane(t, ['--metrics-addr', '127.0.0.1:0']);
  const url = await metricsUrl(dp.proc);
  const result = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'] }, ['/bin/mkdir', path.join(dp.dir, 'm1')]);
  assert.equal(result.code, 0, result.stderr);
  const body = await (await fetch(`${url}/metrics`)).text();
  assert.match(body, /^seccomp_agent_notifications_total\{syscall="mkdir"\} 1$/m);
  assert.match(body, /^seccomp_agent_answers_total\{answered_by="default_no_control_plane"\} 1$/m);
  assert.match(body, /^seccomp_agent_decision_latency_seconds_count\{answered_by="default_no_control_plane"\} 1$/m);
  assert.match(body, /^seccomp_agent_control_plane_attached 0$/m);
  assert.match(body, /^seccomp_agent_containers \d+$/m);
  assert.ok(body.split('\n').includes(`seccomp_agent_listener_sockets{path="${dp.listenerSocket}"} 1`), 'the listener socket served');
  assert.match(body, /^seccomp_agent_dataplane_start_time_seconds\{origin="fresh"\} \d+(\.\d+)?$/m);
  assert.equal((await fetch(`${url}/nothing`)).status, 404);
});

test('seccomp-controlplane --metrics-addr: /healthz says ok once attached, and metrics count decisions (the data plane\'s too)', async (t) => {
  const dp = await startDataPlane(t, ['--metrics-addr', '127.0.0.1:0']);
  const dpUrl = await metricsUrl(dp.proc);
  // --fast-path=false: with policy.v1 the data plane answers the continue natively, and this
  // counts the control plane's own decisions.
  const cp = await startControlPlane(t, dp, ['--no-kubernetes', '--fast-path=false', '--metrics-addr', '127.0.0.1:0']);
  const url = await metricsUrl(cp);
  const health = await fetch(`${url}/healthz`);
  assert.equal(health.status, 200);
  assert.deepEqual({ ...((await health.json()) as Record<string, unknown>), session: undefined }, { status: 'ok', attached: true, session: undefined, kubernetes: 'disabled', containers: 0, unresolved: 0 });
  await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'] }, ['/bin/mkdir', path.join(dp.dir, 'm2')]);
  const body = await (await fetch(`${url}/metrics`)).text();
  assert.match(body, /^seccomp_agent_controlplane_decisions_total\{action="continue"\} 1$/m);
  assert.match(body, /^seccomp_agent_controlplane_attached 1$/m);
  // The data plane counts the same notification and answer once, after its events' batch delay.
  let dpBody = '';
  await waitUntil(async () => {
    dpBody = await (await fetch(`${dpUrl}/metrics`)).text();
    return /^seccomp_agent_answers_total\{answered_by="control_plane"\} /m.test(dpBody);
  }, 5000, () => `the data plane's control_plane answers in its metrics:\n${dpBody}`);
  assert.match(dpBody, /^seccomp_agent_answers_total\{answered_by="control_plane"\} 1$/m);
  assert.match(dpBody, /^seccomp_agent_notifications_total\{syscall="mkdir"\} 1$/m);
  assert.match(dpBody, /^seccomp_agent_decision_latency_seconds_count\{answered_by="control_plane"\} 1$/m);
});
