// `npm run bench`: runs every scenario of scenarios.ts R times, each run of each row a fresh
// process in its own process group, rounds interleaved, and each row compared with a reference
// measured right after a run of that reference made for it (pairing.ts); prints the machine, one
// table of medians per scenario with the median of its runs' ratios to their paired reference
// runs, and the targets.
//   node dist/bench/run.js [--quick] [--json] [--runs N] [--seconds S] [--only id,id] [--containers N] [--scale M]
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describeMachine, machineLine } from './machine';
import { renderReport, type BenchReport, type RowResult, type ScenarioResult } from './report';
import type { Metrics, ScenarioParams } from './scenario-process';
import { comparisonKey, SCENARIOS, type Scenario } from './scenarios';
import { medianOverPairs, pairedDifference, pairedRatio, pairsPerRound, referenceMedian, roundSteps } from './pairing';
import { medianMetrics } from './stats';
import { evaluate, TARGETS, type TargetResult } from './targets';

interface RunOptions {
  quick: boolean;
  json: boolean;
  runs: number;
  seconds: number;
  warmupMs: number;
  containers: number;
  scale: number;
  only: string[];
}

const USAGE = `usage: node dist/bench/run.js [--quick] [--json] [--runs N] [--seconds S] [--only ID,ID] [--containers N] [--scale M]
  --quick         1 run, short durations: a smoke check of every scenario, not a measurement
  --json          print one JSON document instead of the tables
  --runs N        runs per row, medians quoted (env BENCH_RUNS, default 5)
  --seconds S     measured seconds per workload (env BENCH_SECONDS, default 2)
  --containers N  live containers of the handoff scenario, and where the containers scenario reads RSS (env BENCH_CONTAINERS, default 1000)
  --scale M       the containers scenario's most live containers, its latency beside them (env BENCH_SCALE, default 10000; --quick: N)
  --only IDS      only these scenarios (${SCENARIOS.map((s) => s.id).join(', ')});
                  the reference each one is compared with runs too`;

function positiveNumber(text: string | undefined, what: string): number {
  const value = Number(text);
  if (text === undefined || !Number.isFinite(value) || value <= 0) {
    process.stderr.write(`bench: ${what} must be a positive number, got "${text}"\n${USAGE}\n`);
    process.exit(2);
  }
  return value;
}

function parseOptions(argv: string[]): RunOptions {
  const env = process.env;
  const options: RunOptions = {
    quick: false, json: false, only: [],
    runs: env.BENCH_RUNS ? positiveNumber(env.BENCH_RUNS, 'BENCH_RUNS') : 5,
    seconds: env.BENCH_SECONDS ? positiveNumber(env.BENCH_SECONDS, 'BENCH_SECONDS') : 2,
    warmupMs: 300,
    containers: env.BENCH_CONTAINERS ? positiveNumber(env.BENCH_CONTAINERS, 'BENCH_CONTAINERS') : 1000,
    scale: env.BENCH_SCALE ? positiveNumber(env.BENCH_SCALE, 'BENCH_SCALE') : 0,
  };
  let runsGiven = false;
  let secondsGiven = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--quick') options.quick = true;
    else if (arg === '--json') options.json = true;
    else if (arg === '--runs') { options.runs = positiveNumber(argv[++i], '--runs'); runsGiven = true; }
    else if (arg === '--seconds') { options.seconds = positiveNumber(argv[++i], '--seconds'); secondsGiven = true; }
    else if (arg === '--containers') options.containers = positiveNumber(argv[++i], '--containers');
    else if (arg === '--scale') options.scale = positiveNumber(argv[++i], '--scale');
    else if (arg === '--only') options.only = (argv[++i] ?? '').split(',').filter(Boolean);
    else if (arg === '--help' || arg === '-h') { process.stdout.write(`${USAGE}\n`); process.exit(0); }
    else { process.stderr.write(`bench: unknown argument "${arg}"\n${USAGE}\n`); process.exit(2); }
  }
  if (options.quick) {
    if (!runsGiven) options.runs = 1;
    if (!secondsGiven) options.seconds = 0.5;
    options.warmupMs = 100;
  }
  options.runs = Math.floor(options.runs);
  options.containers = Math.floor(options.containers);
  // 0: not given. Never below N: RSS is read on the way up.
  options.scale = Math.max(options.containers, Math.floor(options.scale || (options.quick ? options.containers : 10_000)));
  for (const id of options.only) {
    if (!SCENARIOS.some((s) => s.id === id)) {
      process.stderr.write(`bench: no scenario "${id}"; known: ${SCENARIOS.map((s) => s.id).join(', ')}\n`);
      process.exit(2);
    }
  }
  return options;
}

function selectScenarios(only: string[]): Scenario[] {
  if (only.length === 0) return SCENARIOS;
  const wanted = new Set(only);
  for (const s of SCENARIOS) if (wanted.has(s.id) && s.reference) wanted.add(s.reference);
  return SCENARIOS.filter((s) => wanted.has(s.id));
}

/** The process group of the scenario running now, killed on our own way out. */
let currentGroup: number | null = null;
let tempRoot: string | null = null;

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // ESRCH: the whole group is gone already.
  }
}

function cleanUp(): void {
  if (currentGroup !== null) killGroup(currentGroup);
  currentGroup = null;
  if (tempRoot !== null) fs.rmSync(tempRoot, { recursive: true, force: true });
  tempRoot = null;
}

/** One run of one row: a fresh `node dist/bench/<script>.js PARAMS` in its own process group. */
function runOnce(scenario: Scenario, params: ScenarioParams): Promise<{ metrics?: Metrics; error?: string }> {
  const timeoutMs = ((params.seconds + params.warmupMs / 1000) * 2 + 60 + (scenario.slackSeconds ?? 0)) * 1000;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(__dirname, `${scenario.script}.js`), JSON.stringify(params)], {
      detached: true, // its own process group: everything it starts dies with it
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const pgid = child.pid ?? null;
    currentGroup = pgid;
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { out += chunk; });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => { err += chunk; });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (pgid !== null) killGroup(pgid);
    }, timeoutMs);
    const finish = (code: number | null, signal: string | null) => {
      clearTimeout(timer);
      if (pgid !== null) killGroup(pgid); // stragglers of a scenario that failed to stop them
      currentGroup = null;
      const line = out.trim().split('\n').pop() ?? '';
      let parsed: { metrics?: Metrics; error?: string } = {};
      try {
        parsed = JSON.parse(line) as { metrics?: Metrics; error?: string };
      } catch {
        parsed = {};
      }
      if (parsed.metrics && code === 0) return resolve({ metrics: parsed.metrics });
      const why = timedOut ? `timed out after ${Math.round(timeoutMs / 1000)} s` : parsed.error ?? `exited ${code ?? signal}`;
      const detail = err.trim().split('\n').slice(-3).join(' | ');
      resolve({ error: detail && !parsed.error ? `${why}: ${detail}` : why });
    };
    child.on('error', (error) => finish(null, error.message));
    child.on('close', finish);
  });
}

/** One progress line on stderr per run, so a long bench shows it is alive. */
function summarize(m: Metrics): string {
  if (m.p50Us !== undefined) {
    return `p50 ${m.p50Us} µs, p99 ${m.p99Us} µs, ${Math.round(m.callsPerSec).toLocaleString('en-US')} calls/s`;
  }
  return Object.entries(m).map(([k, v]) => `${k} ${Math.round(v * 10) / 10}`).join(', ');
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const scenarios = selectScenarios(options.only);
  const machine = describeMachine();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'seccomp-bench-'));
  tempRoot = root;
  process.on('exit', cleanUp);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      cleanUp();
      process.exit(130);
    });
  }
  if (!options.json) process.stdout.write(`${machineLine(machine)}\n`);

  const rows = new Map<string, RowResult>();
  const key = (scenario: string, variant: string) => `${scenario}\u0000${variant}`;
  const paramsOf = (variant: Scenario['variants'][number]): ScenarioParams => ({
    threads: 1, syscall: 'getppid', channel: true, ...variant.params,
    seconds: options.seconds, warmupMs: options.warmupMs, containers: options.containers, scale: options.scale,
  });
  const steps = roundSteps(scenarios, SCENARIOS);
  for (const { scenario, variant, reference } of steps) {
    rows.set(key(scenario.id, variant.label), {
      variant: variant.label, params: paramsOf(variant), runs: [], references: reference ? [] : undefined, errors: [], median: {}, ratios: {}, targets: [],
    });
  }
  const measure = async (run: number, scenario: Scenario, variant: Scenario['variants'][number], folder: string, what: string) => {
    const outcome = await runOnce(scenario, { ...paramsOf(variant), dir: path.join(root, `${run}-${folder}`) });
    const label = `run ${run}/${options.runs}  ${scenario.id} / ${variant.label}${what}`;
    process.stderr.write(`${label}: ${outcome.metrics ? summarize(outcome.metrics) : `FAILED: ${outcome.error}`}\n`);
    return outcome;
  };
  for (let run = 1; run <= options.runs; run++) {
    for (const { scenario, variant, index, reference } of steps) {
      const row = rows.get(key(scenario.id, variant.label))!;
      for (let pair = 1; pair <= pairsPerRound(variant); pair++) {
        const folder = `${scenario.id}-${index}-${pair}`;
        const paired = reference
          ? await measure(run, reference.scenario, reference.variant, `${folder}-reference`, ` (paired with ${scenario.id} / ${variant.label})`)
          : undefined;
        const outcome = await measure(run, scenario, variant, folder, '');
        if (outcome.metrics) {
          row.runs.push(outcome.metrics);
          row.references?.push(paired?.metrics ?? null);
        } else {
          row.errors.push(outcome.error ?? 'failed');
        }
        if (paired?.error) row.errors.push(`its paired reference run: ${paired.error}`);
      }
    }
  }

  const results: ScenarioResult[] = [];
  const allTargets: TargetResult[] = [];
  for (const scenario of scenarios) {
    const scenarioRows = scenario.variants.map((variant) => rows.get(key(scenario.id, variant.label))!);
    for (const row of scenarioRows) row.median = medianMetrics(row.runs);
    results.push({ id: scenario.id, title: scenario.title, about: scenario.about, reference: scenario.reference ?? null, rows: scenarioRows });
  }
  for (const scenario of scenarios) {
    for (const variant of scenario.variants) {
      const row = rows.get(key(scenario.id, variant.label))!;
      for (const ratio of scenario.ratios ?? []) {
        const value = ratio.kind === 'difference' ? medianOverPairs(row, pairedDifference(ratio.key))
          : ratio.kind === 'reference' ? referenceMedian(row, ratio.key)
            : medianOverPairs(row, pairedRatio(ratio.key));
        if (value !== undefined) row.ratios[comparisonKey(ratio)] = value;
      }
      for (const target of TARGETS.filter((t) => t.scenario === scenario.id && t.variant === variant.label)) {
        const result = evaluate(target, row);
        row.targets.push(result);
        allTargets.push(result);
      }
    }
  }
  const report: BenchReport = {
    machine, runs: options.runs, quick: options.quick, seconds: options.seconds,
    loadAverageAtEnd: Math.round(os.loadavg()[0] * 100) / 100, scenarios: results, targets: allTargets,
  };
  if (options.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    process.stdout.write(`${renderReport(report, scenarios).split('\n').slice(1).join('\n')}\n`);
  }
  const failedRuns = [...rows.values()].reduce((n, row) => n + row.errors.length, 0);
  if (failedRuns > 0) {
    process.stderr.write(`bench: ${failedRuns} run(s) failed; see the errors above\n`);
    process.exitCode = 1;
  }
}

main().catch((err: Error) => {
  process.stderr.write(`bench: ${err.stack ?? err.message}\n`);
  cleanUp();
  process.exit(1);
});
