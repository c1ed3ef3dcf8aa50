// Turns the medians of a bench run into the printed tables: one per scenario, beside the figures
// the median of each run's ratio to the reference run paired with it, PASS/FAIL beside each target.
import type { Machine } from './machine';
import { machineLine } from './machine';
import type { ScenarioParams, Metrics } from './scenario-process';
import { comparisonKey, type Ratio, type Scenario } from './scenarios';
import type { TargetResult } from './targets';
import { pairsPerRound } from './pairing';

export interface RowResult {
  variant: string;
  params: ScenarioParams;
  runs: Metrics[];
  /** The reference run paired with each run (pairing.ts); absent for a row with no reference. */
  references?: Array<Metrics | null>;
  errors: string[];
  median: Metrics;
  ratios: Record<string, number>;
  targets: TargetResult[];
}

export interface ScenarioResult {
  id: string;
  title: string;
  about: string;
  reference: string | null;
  rows: RowResult[];
}

export interface BenchReport {
  machine: Machine;
  runs: number;
  quick: boolean;
  seconds: number;
  /** 1-minute load average when the last run ended. */
  loadAverageAtEnd: number;
  scenarios: ScenarioResult[];
  targets: TargetResult[];
}

function formatNumber(value: number | undefined, digits: number): string {
  if (value === undefined) return '-';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** A row shorter than the header (an error) is printed beside its label, outside the columns. */
function renderTable(header: string[], rows: string[][]): string[] {
  const full = rows.filter((row) => row.length === header.length);
  const widths = header.map((title, i) =>
    Math.max(title.length, ...(i === 0 ? rows : full).map((row) => row[i].length)));
  // Labels and text (targets, errors) are left-aligned, figures right-aligned.
  const line = (cells: string[], numeric: boolean) =>
    cells.map((cell, i) => (i === 0 || !numeric || /[A-Za-z]{3}/.test(cell) ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ').trimEnd();
  return [line(header, false), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map((row) => line(row, true))];
}

function formatComparison(ratio: Ratio, value: number | undefined): string {
  if (value === undefined) return '-';
  if (ratio.kind === 'difference') return `${value >= 0 ? '+' : ''}${formatNumber(value, ratio.digits ?? 1)}`;
  if (ratio.kind === 'reference') return formatNumber(value, ratio.digits ?? 1);
  return `${value.toFixed(2)}×`;
}

export function renderScenario(scenario: Scenario, result: ScenarioResult): string[] {
  const ratios = scenario.ratios ?? [];
  const header = ['', ...scenario.columns.map((c) => c.title), ...ratios.map((r) => r.title)];
  const hasTargets = result.rows.some((row) => row.targets.length > 0);
  if (hasTargets) header.push('targets');
  const rows = result.rows.map((row) => {
    if (row.runs.length === 0) return [row.variant, `error: ${row.errors[0] ?? 'no run'}`];
    const cells = [
      row.variant,
      ...scenario.columns.map((c) => formatNumber(row.median[c.key], c.digits)),
      ...ratios.map((r) => formatComparison(r, row.ratios[comparisonKey(r)])),
    ];
    if (hasTargets) cells.push(row.targets.map((t) => t.text).join('; '));
    return cells;
  });
  const lines = [`${result.title}`, `  ${result.about}`, ...renderTable(header, rows).map((l) => `  ${l}`)];
  for (const row of result.rows) {
    if (row.errors.length > 0 && row.runs.length > 0) {
      lines.push(`  ${row.variant}: ${row.errors.length} of ${row.runs.length + row.errors.length} runs failed: ${row.errors[0]}`);
    }
    const variant = scenario.variants.find((v) => v.label === row.variant);
    const pairs = variant ? pairsPerRound(variant) : 1;
    if (pairs > 1) lines.push(`  ${row.variant}: medians of ${row.runs.length} runs (${pairs} pairs a round: its target is within a few percent of its reference)`);
  }
  return lines;
}

export function renderReport(report: BenchReport, scenarios: Scenario[]): string {
  const lines = [
    machineLine(report.machine),
    `median of ${report.runs} run${report.runs === 1 ? '' : 's'} per row, ${report.seconds} s measured per run, each run a fresh process; a row compared with a reference runs right after a run of that reference made for it, its × columns the median of those pairs' ratios; load ${report.loadAverageAtEnd} at end${report.quick ? ' (--quick: a smoke check, not a measurement)' : ''}`,
    '',
  ];
  for (const result of report.scenarios) {
    const scenario = scenarios.find((s) => s.id === result.id);
    if (scenario) lines.push(...renderScenario(scenario, result), '');
  }
  if (report.targets.length > 0) {
    const passed = report.targets.filter((t) => t.pass).length;
    lines.push(`targets: ${passed} PASS, ${report.targets.length - passed} FAIL`);
    for (const t of report.targets) lines.push(`  ${t.pass ? 'PASS' : 'FAIL'}  ${t.scenario} / ${t.variant}: ${t.text}`);
  }
  return lines.join('\n');
}
