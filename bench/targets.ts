// The figures the issues promise, checked on this run. A target names the scenario row it judges;
// `value` gets one run of that row and the reference run paired with it (pairing.ts), and the
// target judges the median of those values over the runs.
import { medianOverPairs, pairedRatio, type PairedRuns } from './pairing';
import type { Metrics } from './scenario-process';

export interface Target {
  scenario: string;
  variant: string;
  /** What is compared, as printed: "p50 vs (a)". */
  name: string;
  /** How the value is printed: '×' for ratios, else a unit. */
  unit: string;
  limit: number;
  /** true: value <= limit passes; false: value >= limit passes. */
  atMost: boolean;
  /** Undefined when a figure it needs is missing. */
  value(row: Metrics, reference: Metrics | undefined): number | undefined;
}

export interface TargetResult {
  scenario: string;
  variant: string;
  name: string;
  value: number | null;
  limit: number;
  atMost: boolean;
  unit: string;
  pass: boolean;
  text: string;
}

const ratio = pairedRatio;

const inverseRatio = (key: string) => (row: Metrics, reference: Metrics | undefined) =>
  reference && row[key] && reference[key] !== undefined ? reference[key] / row[key] : undefined;

// containers: the latency beside M against beside 1, paired within each run (containers.ts says why).
const besideVsAlone = (row: Metrics) => row.besideVsAlone;

export const TARGETS: Target[] = [
  // Issue 2: (b) <= 1.3x (a) per intercepted syscall. Judged twice: on the median round trip
  // (p50), and on the mean cost per call (1 / rate), which also counts the work the data plane
  // does after answering (JS event handling competes with the next call for the CPUs).
  { scenario: 'dataplane-default', variant: 'getppid, 1 thread', name: 'p50 vs (a)', unit: '×', limit: 1.3, atMost: true, value: ratio('p50Us') },
  { scenario: 'dataplane-default', variant: 'getppid, 1 thread', name: 'mean per call vs (a)', unit: '×', limit: 1.3, atMost: true, value: inverseRatio('callsPerSec') },
  { scenario: 'dataplane-default', variant: 'getppid, 8 threads', name: 'p50 vs (a)', unit: '×', limit: 1.3, atMost: true, value: ratio('p50Us') },
  { scenario: 'dataplane-default', variant: 'getppid, 8 threads', name: 'mean per call vs (a)', unit: '×', limit: 1.3, atMost: true, value: inverseRatio('callsPerSec') },
  // Issue 2: (c) p50 <= 5x (a), and >= 20,000 decisions/s with 8 threads.
  { scenario: 'dataplane-attached', variant: 'getppid, 1 thread', name: 'p50 vs (a)', unit: '×', limit: 5, atMost: true, value: ratio('p50Us') },
  { scenario: 'dataplane-attached', variant: 'getppid, 8 threads', name: 'p50 vs (a)', unit: '×', limit: 5, atMost: true, value: ratio('p50Us') },
  { scenario: 'dataplane-attached', variant: 'getppid, 8 threads', name: 'decisions/s', unit: '/s', limit: 20_000, atMost: false, value: (row) => row.decisionsPerSec },
  // Issue 10: a notification decided by a when rule with 100 policies loaded, p50 <= 5x (a).
  { scenario: 'controlplane-when', variant: 'getppid, 1 thread', name: 'p50 vs (a)', unit: '×', limit: 5, atMost: true, value: ratio('p50Us') },
  // Issue 9: (b) p50 <= 1.1x (a) with one thread.
  { scenario: 'dataplane-default', variant: 'getppid, 1 thread', name: 'p50 vs (a), issue 9', unit: '×', limit: 1.1, atMost: true, value: ratio('p50Us') },
  // Issue 9: (d) the fast path's continue p50 <= 1.15x (a) with one thread; with eight, rate >= 0.9x (a)'s.
  { scenario: 'fast-path', variant: '(d) getppid, 1 thread', name: 'p50 vs (a)', unit: '×', limit: 1.15, atMost: true, value: ratio('p50Us') },
  { scenario: 'fast-path', variant: '(d) getppid, 8 threads', name: 'rate vs (a)', unit: '×', limit: 0.9, atMost: false, value: ratio('callsPerSec') },
  // Issue 9: (e) a MKDIR_TMPL mkdir answered by the fast path, end to end, p50 <= 100 µs.
  { scenario: 'fast-path', variant: '(e) MKDIR_TMPL mkdir, 1 thread', name: 'p50', unit: ' µs', limit: 100, atMost: true, value: (row) => row.p50Us },
  // Issue 2: latency at 1,000 containers within 1.2x of one (measured at M, 10,000); RSS at 1,000 <= 120 MiB.
  {
    scenario: 'containers', variant: '1 vs N containers', name: 'p50@M vs p50@1', unit: '×', limit: 1.2, atMost: true, value: besideVsAlone,
  },
  { scenario: 'containers', variant: '1 vs N containers', name: 'RSS@N', unit: ' MiB', limit: 120, atMost: true, value: (row) => row.rssNMiB },
  // Issue 18: every path near the bare C floor, as ratios that must hold on a fast machine too.
  { scenario: 'dataplane-default', variant: 'getppid, 1 thread', name: 'p50 vs (a), issue 18', unit: '×', limit: 1.05, atMost: true, value: ratio('p50Us') },
  { scenario: 'fast-path', variant: '(d) getppid, 1 thread', name: 'p50 vs (a), issue 18', unit: '×', limit: 1.1, atMost: true, value: ratio('p50Us') },
  { scenario: 'fast-path', variant: '(d) getppid, 8 threads', name: 'rate vs (a), issue 18', unit: '×', limit: 0.95, atMost: false, value: ratio('callsPerSec') },
  { scenario: 'controlplane-when', variant: 'getppid, 1 thread', name: 'p50 vs (a), issue 18', unit: '×', limit: 4, atMost: true, value: ratio('p50Us') },
  { scenario: 'fast-path', variant: '(e) MKDIR_TMPL mkdir, 1 thread', name: 'p50 vs bare C mkdir', unit: '×', limit: 5, atMost: true, value: ratio('p50Us') },
  {
    scenario: 'containers', variant: '1 vs N containers', name: 'p50@M vs p50@1, issue 18', unit: '×', limit: 1.1, atMost: true, value: besideVsAlone,
  },
  { scenario: 'containers', variant: '1 vs N containers', name: 'RSS@N, issue 18', unit: ' MiB', limit: 64, atMost: true, value: (row) => row.rssNMiB },
  // Issue 18: a data plane handoff with 1,000 containers pauses answers at most 20 ms.
  { scenario: 'handoff', variant: 'N containers', name: 'pause', unit: ' ms', limit: 20, atMost: true, value: (row) => row.pauseMs },
  // Issue 3: emulated mkdir round trip p50 <= 300 µs with the helper kept per mount namespace.
  { scenario: 'emulated-mkdir', variant: 'helper kept per mount ns', name: 'p50', unit: ' µs', limit: 300, atMost: true, value: (row) => row.p50Us },
  // ... and a kept helper answers faster than one spawned per call (agent side, NOTIF_RECV to result).
  { scenario: 'emulated-mkdir', variant: 'helper kept per mount ns', name: 'agent p50 vs spawn per call', unit: '×', limit: 1, atMost: true, value: ratio('agentP50Us') },
  // Issue 17, defect 6: a noisy neighbour moves another container's p99 at most 1.2× beyond what
  // the same load does beside a bare C responder pair (noisy-neighbour-reference, same threads).
  ...['default', 'fast path', 'control-plane path', 'emulated MKDIR_TMPL mkdir'].flatMap((path) => [2, 8].map((threads): Target => ({
    scenario: 'noisy-neighbour', variant: `${path}, neighbour ${threads} threads`, name: 'victim p99 vs bare C pair', unit: '×', limit: 1.2, atMost: true, value: ratio('p99Us'),
  }))),
];

export function formatTargetValue(value: number, unit: string): string {
  if (unit === '×') return `${value.toFixed(2)}×`;
  if (unit === '/s') return `${Math.round(value).toLocaleString('en-US')}/s`;
  return `${value.toFixed(1)}${unit}`;
}

export function evaluate(target: Target, row: PairedRuns): TargetResult {
  const value = medianOverPairs(row, target.value);
  const pass = value !== undefined && (target.atMost ? value <= target.limit : value >= target.limit);
  const bound = `${target.atMost ? '≤' : '≥'} ${formatTargetValue(target.limit, target.unit)}`;
  const text = value === undefined
    ? `${target.name} ${bound}: no figure`
    : `${target.name} ${formatTargetValue(value, target.unit)} ${bound} ${pass ? 'PASS' : 'FAIL'}`;
  return {
    scenario: target.scenario, variant: target.variant, name: target.name, value: value ?? null,
    limit: target.limit, atMost: target.atMost, unit: target.unit, pass, text,
  };
}
