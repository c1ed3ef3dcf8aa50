// seccompctl policies and explain: read from the control plane's read-only socket
// (controlplane/ctl-server.ts; the JSON in common/ctl-protocol.ts), shown as a table or a few lines, or --json.
import * as http from 'node:http';
import { AgentError } from '../common/errors';
import type { Explanation, PolicyRow } from '../common/ctl-protocol';
import { table } from './format';

/** One GET on the control plane's socket. Throws AgentError ECONTROLPLANE_UNREACHABLE, or the server's own code. */
export function getJson<T>(socketPath: string, urlPath: string, timeoutSeconds: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const req = http.get({ socketPath, path: urlPath, timeout: timeoutSeconds * 1000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let body: { code?: string; message?: string };
        try {
          body = JSON.parse(text);
        } catch {
          reject(new AgentError('ECONTROLPLANE_UNREACHABLE', `the control plane at ${socketPath} answered something that is not JSON`));
          return;
        }
        if (res.statusCode === 200) resolve(body as T);
        else reject(new AgentError(body.code ?? 'ECONTROLPLANE', body.message ?? `HTTP ${res.statusCode}`));
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutSeconds} s`)));
    req.on('error', (err) => reject(new AgentError('ECONTROLPLANE_UNREACHABLE', `cannot reach the control plane at ${socketPath}: ${err.message}`)));
  });
}

export function formatPolicies(rows: PolicyRow[]): string {
  if (rows.length === 0) return 'no SeccompNotifyPolicy or ClusterSeccompNotifyPolicy is known to this control plane';
  const lines = table(
    ['NAME', 'SCOPE', 'MODE', 'READY', 'RULES', 'CONTAINERS HERE', 'GENERATION'],
    rows.map((r) => [
      r.scope === 'namespaced' ? `${r.namespace}/${r.name}` : r.name,
      r.scope === 'namespaced' ? 'Namespaced' : 'Cluster',
      r.mode,
      r.ready === 'True' ? 'True' : `False (${r.reason})`,
      String(r.rules),
      String(r.containers),
      r.inForceGeneration === r.generation ? String(r.generation) : `${r.generation} (in force: ${r.inForceGeneration ?? 'none'})`,
    ]),
  );
  const notes = rows.flatMap((r) => [
    ...(r.ready === 'True' ? [] : [`${r.scope === 'namespaced' ? `${r.namespace}/` : ''}${r.name}: ${r.message}`]),
    ...r.conflicts.map((c) => `conflict: ${c}`),
  ]);
  return notes.length ? `${lines}\n\n${[...new Set(notes)].join('\n')}` : lines;
}

export function formatExplanation(e: Explanation): string {
  const who = e.identity ? `${e.identity.namespace}/${e.identity.pod}${e.identity.container ? `/${e.identity.container}` : ''}` : 'no pod identity';
  const lines = [`container ${e.container} (${who}): ${e.syscall}${e.args.length ? ` ${e.args.join(' ')}` : ''}`];
  if (e.answer) {
    lines.push(`answered by ${e.answer.policy}, rule ${e.answer.rule} (rules[${e.answer.index}]${e.answer.when ? `, when ${e.answer.when}` : ', no when'}): ${e.answer.action}`);
  } else {
    lines.push(e.fallback ?? 'no policy resource answers');
  }
  for (const a of e.audits) lines.push(`audit: ${a.policy}, rule ${a.rule} would answer ${a.action} (Audit mode: it continues)`);
  for (const x of e.errors) lines.push(`not matched: ${x.policy}, rule ${x.rule}: when did not evaluate (${x.error})`);
  return lines.join('\n');
}
