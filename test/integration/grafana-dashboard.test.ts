// deploy/grafana/seccomp-agent.json against the real agent: every metric name its queries (and
// its variables) use is one the data plane or the control plane exports on a live /metrics; and
// it has the panels operators ask for: answers by who answered, latency, policy audits, the
// control plane attached, handoffs, the keeper.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { startControlPlane } from '../support/controlplane';
import { startDataPlane } from '../support/dataplane';
import { ROOT } from '../support/paths';
import { metricsUrl } from '../support/processes';
import { runUnderFilter } from '../support/workload';

const DASHBOARD = path.join(ROOT, 'deploy/grafana/seccomp-agent.json');

interface Panel {
  id: number;
  type: string;
  title: string;
  targets?: Array<{ expr: string; refId: string }>;
  gridPos: { h: number; w: number; x: number; y: number };
}

/** Every sample name a scrape can hold: each family's name, with _bucket/_sum/_count for histograms. */
function exposedNames(body: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of body.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(name);
    if (type === 'histogram' || type === 'summary') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
  }
  return names;
}

/** The agent's metric names a PromQL text uses (they all start with seccomp_agent_ or seccompagent_). */
export function metricNamesIn(expr: string): string[] {
  return [...expr.matchAll(/\b(seccomp_?agent_[a-zA-Z0-9_]+)\b/g)].map((m) => m[1]);
}

test('grafana dashboard: every metric name its queries use is exported on the live /metrics of the data plane or the control plane', async (t) => {
  const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8'));
  const panels = dashboard.panels as Panel[];
  const queries = [
    ...panels.flatMap((p) => (p.targets ?? []).map((q) => ({ where: `panel "${p.title}" ${q.refId}`, expr: q.expr }))),
    ...(dashboard.templating.list as Array<{ name: string; definition?: string }>).filter((v) => v.definition).map((v) => ({ where: `variable ${v.name}`, expr: v.definition! })),
  ];
  assert.ok(queries.length >= 15, `${queries.length} queries`);
  for (const q of queries) assert.ok(metricNamesIn(q.expr).length > 0, `${q.where} uses no agent metric: ${q.expr}`);

  const dp = await startDataPlane(t, ['--metrics-addr', '127.0.0.1:0']);
  const dpUrl = await metricsUrl(dp.proc);
  const cp = await startControlPlane(t, dp, ['--no-kubernetes', '--metrics-addr', '127.0.0.1:0']);
  const cpUrl = await metricsUrl(cp);
  const made = await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'] }, ['/bin/mkdir', path.join(dp.dir, 'seen')]);
  assert.equal(made.code, 0, made.stderr);
  const exposed = new Set([...exposedNames(await (await fetch(`${dpUrl}/metrics`)).text()), ...exposedNames(await (await fetch(`${cpUrl}/metrics`)).text())]);
  const missing = queries.flatMap((q) => metricNamesIn(q.expr).filter((n) => !exposed.has(n)).map((n) => `${q.where}: ${n}`));
  assert.deepEqual(missing, [], `names not on any live /metrics (exported: ${[...exposed].filter((n) => n.startsWith('seccomp')).sort().join(', ')})`);
});

test('grafana dashboard: the panels operators look for, each with a query; valid layout and ids', () => {
  const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8'));
  assert.equal(dashboard.uid, 'seccomp-agent');
  const panels = dashboard.panels as Panel[];
  assert.equal(new Set(panels.map((p) => p.id)).size, panels.length, 'unique panel ids');
  for (const p of panels) {
    assert.ok(p.gridPos.x + p.gridPos.w <= 24, `${p.title}: within the 24-column grid`);
    if (p.type !== 'row') assert.ok((p.targets ?? []).length > 0 && p.targets!.every((q) => q.expr.trim() !== ''), `${p.title}: has queries`);
  }
  const uses = (metric: string) => panels.filter((p) => (p.targets ?? []).some((q) => metricNamesIn(q.expr).includes(metric))).map((p) => p.title);
  for (const metric of [
    'seccomp_agent_answers_total', // answers by who answered
    'seccomp_agent_decision_latency_seconds_bucket', // latency histograms
    'seccompagent_policy_audit_total', // policy audit findings
    'seccomp_agent_control_plane_attached', // control plane attached
    'seccomp_agent_dataplane_start_time_seconds', // handoffs and restarts
    'seccomp_agent_fd_store_up', // keeper
    'seccomp_agent_listener_sockets', // the listener paths served
  ]) assert.ok(uses(metric).length > 0, `a panel shows ${metric}`);
  assert.ok(uses('seccomp_agent_answers_total').some((title) => /who answered/.test(title)));
  assert.ok(panels.some((p) => p.type === 'heatmap' && uses('seccomp_agent_decision_latency_seconds_bucket').includes(p.title)), 'a latency heatmap');
});
