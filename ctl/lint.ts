// seccompctl lint PROFILE...: the linter's findings for people (a block per profile) and scripts
// (--json); exit 1 when any finding is an error. Reads files only: no data plane needed.
import * as fs from 'node:fs';
import { AgentError } from '../common/errors';
import { readProfileDocuments } from '../common/profile/document';
import { lintProfile, type LintFinding, type LintRuntime } from '../common/profile/lint';

export interface LintReport {
  profiles: Array<{ name: string; findings: LintFinding[] }>;
  errors: number;
  warnings: number;
  infos: number;
}

export function lintFiles(files: readonly string[], options: { metadata: string | null; runtime: LintRuntime | null }): LintReport {
  if (files.length === 0) throw new AgentError('EUSAGE', 'usage: seccompctl lint PROFILE.json|SECCOMPPROFILE.yaml... [--metadata TEXT] [--runtime runc|crun] [--json]');
  const report: LintReport = { profiles: [], errors: 0, warnings: 0, infos: 0 };
  for (const file of files) {
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (err) {
      throw new AgentError('EPROFILE', `cannot read ${file}: ${(err as Error).message}`);
    }
    for (const doc of readProfileDocuments(text, file)) {
      const findings = lintProfile(doc.section, { spo: doc.spo, metadata: options.metadata ?? undefined, runtime: options.runtime ?? undefined });
      report.profiles.push({ name: doc.name, findings });
      for (const f of findings) {
        if (f.severity === 'error') report.errors++;
        else if (f.severity === 'warning') report.warnings++;
        else report.infos++;
      }
    }
  }
  return report;
}

export function formatLintReport(report: LintReport): string {
  const lines: string[] = [];
  for (const { name, findings } of report.profiles) {
    lines.push(`${name}: ${findings.length === 0 ? 'no findings' : `${findings.length} finding(s)`}`);
    for (const f of findings) {
      lines.push(`  ${f.severity.padEnd(8)} ${f.rule.padEnd(15)} ${f.message}`);
      lines.push(`  ${''.padEnd(24)} why: ${f.why}`);
      lines.push(`  ${''.padEnd(24)} fix: ${f.fix}`);
    }
  }
  lines.push(`${report.errors} error(s), ${report.warnings} warning(s), ${report.infos} info`);
  return lines.join('\n');
}
