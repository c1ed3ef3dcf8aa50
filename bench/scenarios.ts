// The list of scenarios `npm run bench` runs, in order. To add one: write bench/<name>.ts with
// runScenario() (it prints flat metrics), then add an entry here and, if it has one, its target
// in targets.ts. Each run of each variant is a fresh process, interleaved with the others.
import type { ScenarioParams } from './scenario-process';

export interface Column {
  /** Metric key the scenario prints. */
  key: string;
  title: string;
  digits: number;
}

export interface Variant {
  /** Row label; also how a variant finds its reference row in the reference scenario. */
  label: string;
  params: Partial<ScenarioParams>;
  /** The reference row it is compared with, when not the one of the same label. */
  referenceVariant?: string;
  /**
   * Pairs (a reference run, then this row's) made each round; 1 unless told. A row whose target is
   * within a few percent of its reference needs more than five: on the bench's VM two bare C runs
   * a minute apart differ by up to 15% (which CPUs a fresh process's threads land on), so the
   * median of five pairs' ratios still moves by more than the target's margin.
   */
  pairsPerRound?: number;
}

export interface Ratio {
  /** Metric compared with the same metric of the reference scenario's row of the same label. */
  key: string;
  title: string;
  /**
   * Each over the row's runs and the reference runs paired with them (pairing.ts): 'ratio' (the
   * default): the median of run / reference run; 'difference': the median of run minus reference
   * run (printed signed, with `digits`); 'reference': the paired reference runs' median itself.
   */
  kind?: 'ratio' | 'difference' | 'reference';
  digits?: number;
}

/** Where a comparison is kept in RowResult.ratios: a ratio under its metric's key, the others prefixed. */
export function comparisonKey(ratio: Ratio): string {
  return !ratio.kind || ratio.kind === 'ratio' ? ratio.key : `${ratio.kind}:${ratio.key}`;
}

export interface Scenario {
  id: string;
  title: string;
  /** One line saying what is measured. */
  about: string;
  /** Compiled file: dist/bench/<script>.js. */
  script: string;
  variants: Variant[];
  columns: Column[];
  /** Id of the scenario this one is compared with, row by row. */
  reference?: string;
  ratios?: Ratio[];
  /** Extra time a run may take beyond its measured seconds (start-up, many processes). */
  slackSeconds?: number;
}

/** Pairs a round for the rows judged within 5-10% of bare C ((b), (d) and (b)'s context rows). */
const TIGHT_PAIRS = 3;
const tight = (variant: Variant): Variant => ({ ...variant, pairsPerRound: TIGHT_PAIRS });

/** The per-syscall rows: the notify round trip (getppid) and the path-string one (mkdir). */
const WORKLOAD_VARIANTS: Variant[] = [
  { label: 'getppid, 1 thread', params: { threads: 1, syscall: 'getppid' } },
  { label: 'getppid, 8 threads', params: { threads: 8, syscall: 'getppid' } },
  { label: 'mkdir, 1 thread', params: { threads: 1, syscall: 'mkdir' } },
];

const LATENCY_COLUMNS: Column[] = [
  { key: 'p50Us', title: 'p50 µs', digits: 1 },
  { key: 'p90Us', title: 'p90 µs', digits: 1 },
  { key: 'p99Us', title: 'p99 µs', digits: 1 },
  { key: 'maxUs', title: 'max µs', digits: 0 },
];

const LATENCY_RATIOS: Ratio[] = [
  { key: 'p50Us', title: 'p50 ×(a)' },
  { key: 'p99Us', title: 'p99 ×(a)' },
  { key: 'callsPerSec', title: 'rate ×(a)' },
];

/** (c): the control-plane path through the decision channel. */
const ATTACHED: Scenario = {
  id: 'dataplane-attached',
  title: '(c) data plane + minimal control plane (continue over Attach, decision channel)',
  about: 'every notification goes engine -> decision channel -> bench/continue-control-plane.ts (the real DataPlaneLink) -> decision -> engine -> NOTIF_SEND',
  script: 'dataplane-attached',
  variants: WORKLOAD_VARIANTS,
  columns: [
    { key: 'decisionsPerSec', title: 'decisions/s', digits: 0 }, ...LATENCY_COLUMNS,
    { key: 'perBatch', title: 'per batch', digits: 1 }, { key: 'defaultAnswers', title: 'by default', digits: 0 },
    { key: 'rssMiB', title: 'RSS MiB', digits: 1 },
  ],
  reference: 'reference',
  ratios: LATENCY_RATIOS,
};

/** Issue 17, defect 6: the neighbour's load (its syscall and threads), the victim always one thread of getppid. */
const NEIGHBOUR_LOADS = [
  { load: 'getppid × 2', params: { threads: 2, syscall: 'getppid' } },
  { load: 'getppid × 8', params: { threads: 8, syscall: 'getppid' } },
  { load: 'mkdir × 2', params: { threads: 2, syscall: 'mkdir' } },
  { load: 'mkdir × 8', params: { threads: 8, syscall: 'mkdir' } },
] as const;

const NEIGHBOUR_ROWS: Array<{ path: 'default' | 'fast-path' | 'control-plane' | 'emulated-mkdir'; title: string; syscall: 'getppid' | 'mkdir' }> = [
  { path: 'default', title: 'default', syscall: 'getppid' },
  { path: 'fast-path', title: 'fast path', syscall: 'getppid' },
  { path: 'control-plane', title: 'control-plane path', syscall: 'getppid' },
  { path: 'emulated-mkdir', title: 'emulated MKDIR_TMPL mkdir', syscall: 'mkdir' },
];

const NOISY_REFERENCE: Scenario = {
  id: 'noisy-neighbour-reference',
  title: 'noisy neighbour, reference: the same two workloads, each against its own bare C responder (issue 17)',
  about: 'two seccomp-bench-responders; the neighbour floods its own with N threads while the victim (one thread of getppid) is measured against the other ("one responder for both": a single responder thread serves both, as one engine thread would (the data plane with --engine-threads 1); "victim\'s own responder": the neighbour floods the agent\'s path, the victim has a bare C responder: the agent\'s CPU load without its sharing; "polling thread": threads of the neighbour\'s responder that busy-poll as the agent\'s do (a look, then sched_yield) and answer nothing)',
  script: 'noisy-neighbour',
  variants: [
    ...NEIGHBOUR_LOADS.map(({ load, params }): Variant => ({ label: `neighbour ${load}`, params: { ...params, neighbourPath: 'bare' } })),
    // Context, not a denominator: what serving both containers from one thread costs a bare C responder.
    ...NEIGHBOUR_LOADS.filter(({ params }) => params.syscall === 'getppid')
      .map(({ load, params }): Variant => ({ label: `neighbour ${load}, one responder for both`, params: { ...params, neighbourPath: 'bare-shared' } })),
    // Context: what always-runnable threads alone cost the victim on this machine. Under a flood the
    // agent's control-plane path keeps two (lane 0 and the control plane polling their rings).
    ...[1, 2].map((polling): Variant => ({
      label: `neighbour getppid × 8, its responder with ${polling} polling thread${polling === 1 ? '' : 's'}`,
      params: { threads: 8, syscall: 'getppid', neighbourPath: 'bare', neighbourPollingThreads: polling },
    })),
    // Context: the agent's CPU load without its sharing. The neighbour floods the agent's path, the victim has a responder of its own.
    ...NEIGHBOUR_ROWS.map((row): Variant => ({
      label: `neighbour on the agent's ${row.title} × 8, victim's own responder`,
      params: { threads: 8, syscall: row.syscall, neighbourPath: row.path, victimOwnResponder: true },
    })),
  ],
  columns: [
    { key: 'p50Us', title: 'victim p50 µs', digits: 1 }, { key: 'p99Us', title: 'victim p99 µs', digits: 1 },
    { key: 'callsPerSec', title: 'victim calls/s', digits: 0 }, { key: 'neighbourCallsPerSec', title: 'neighbour calls/s', digits: 0 },
  ],
};

export const SCENARIOS: Scenario[] = [
  {
    id: 'reference',
    title: '(a) bare C responder (reference)',
    about: 'seccomp-bench-responder: one thread, epoll + NOTIF_RECV + NOTIF_SEND(CONTINUE), SYNC_WAKE_UP on',
    script: 'reference',
    variants: WORKLOAD_VARIANTS,
    columns: [{ key: 'callsPerSec', title: 'calls/s', digits: 0 }, ...LATENCY_COLUMNS],
  },
  {
    id: 'reference-threaded',
    title: 'context for (b): the bare C responder in a multi-threaded process',
    about: 'the same responder with one more thread that only sleeps, as every Node process has several: what a multi-threaded agent may pay on each syscall before any of its own work; '
      + '"own fd table": its answering thread unshares its file table (unshare(CLONE_FILES)), so the kernel takes no reference on the file of each epoll_wait and ioctl, as for a single-threaded process',
    script: 'reference',
    variants: [
      tight({ label: 'getppid, 1 thread', params: { threads: 1, syscall: 'getppid', idleThreads: 1 } }),
      tight({ label: 'getppid, 1 thread, own fd table', params: { threads: 1, syscall: 'getppid', idleThreads: 1, ownFdTable: true }, referenceVariant: 'getppid, 1 thread' }),
    ],
    columns: [{ key: 'callsPerSec', title: 'calls/s', digits: 0 }, ...LATENCY_COLUMNS],
    reference: 'reference',
    ratios: LATENCY_RATIOS,
  },
  {
    id: 'reference-spread',
    title: 'context for the 8-thread rows: the bare C responder without SYNC_WAKE_UP',
    about: 'the same responder leaving the flag off, so the kernel wakes each answered caller where the scheduler likes, as the data plane does for a container with many threads calling at once (native/addon/wake_mode.hpp); the reference keeps it on',
    script: 'reference',
    variants: [{ label: 'getppid, 8 threads', params: { threads: 8, syscall: 'getppid', spreadWakeUps: true } }],
    columns: [{ key: 'callsPerSec', title: 'calls/s', digits: 0 }, ...LATENCY_COLUMNS],
    reference: 'reference',
    ratios: LATENCY_RATIOS,
  },
  {
    id: 'dataplane-default',
    title: '(b) data plane, default path (no control plane)',
    about: 'seccomp-dataplane answers continue natively on its epoll thread; JS hears of it afterwards',
    script: 'dataplane-default',
    variants: WORKLOAD_VARIANTS.map((v) => (v.label === 'getppid, 1 thread' ? tight(v) : v)),
    columns: [
      { key: 'callsPerSec', title: 'calls/s', digits: 0 }, ...LATENCY_COLUMNS,
      { key: 'eventsDropped', title: 'events dropped', digits: 0 }, { key: 'rssMiB', title: 'RSS MiB', digits: 1 },
    ],
    reference: 'reference',
    ratios: LATENCY_RATIOS,
  },
  ATTACHED,
  {
    ...ATTACHED,
    id: 'dataplane-attached-grpc',
    title: 'context for (c): the same over gRPC only (control plane without the channel feature)',
    about: 'every notification goes native -> JS -> gRPC -> control plane -> gRPC -> JS -> NOTIF_SEND',
    variants: WORKLOAD_VARIANTS.map((v) => ({ ...v, params: { ...v.params, channel: false } })),
  },
  {
    id: 'grpc-floor',
    title: 'context for (c): bare gRPC round trip between two Node processes',
    about: '@grpc/grpc-js bidi echo on a Unix socket, one 100-byte message in flight, no seccomp: the floor of any per-notification round trip to a Node control plane',
    script: 'grpc-floor',
    variants: [{ label: 'echo, 1 in flight', params: {}, referenceVariant: 'getppid, 1 thread' }],
    columns: [{ key: 'callsPerSec', title: 'round trips/s', digits: 0 }, ...LATENCY_COLUMNS],
    reference: 'reference',
    ratios: LATENCY_RATIOS,
  },
  {
    id: 'emulated-mkdir',
    title: 'emulated mkdir round trip (issue 3)',
    about: 'Emulator.benchMkdir answers each mkdir of the workload (NOTIF_RECV, read path, helper mkdirat as the target, NOTIF_SEND); no data plane; target side p50/p99, agent side from NOTIF_RECV to result',
    script: 'emulated-mkdir',
    variants: [
      // Compared with the spawn-per-call row of the same run (targets.ts).
      { label: 'helper kept per mount ns', params: { threads: 1, syscall: 'mkdir', spawnPerCall: false }, referenceVariant: 'spawn per call' },
      { label: 'spawn per call', params: { threads: 1, syscall: 'mkdir', spawnPerCall: true } },
    ],
    reference: 'emulated-mkdir',
    columns: [
      { key: 'callsPerSec', title: 'calls/s', digits: 0 }, ...LATENCY_COLUMNS,
      { key: 'agentP50Us', title: 'agent p50 µs', digits: 1 }, { key: 'agentP99Us', title: 'agent p99 µs', digits: 1 },
      { key: 'helperP50Us', title: 'in helper p50 µs', digits: 1 },
    ],
  },
  {
    id: 'controlplane-policy',
    title: 'data plane + the real control plane (policy engine, MKDIR_TMPL, issue 3)',
    about: 'seccomp-controlplane --no-kubernetes attached; getppid: continue over the decision channel; mkdir: emulated with the "-bench-pod" suffix (over gRPC)',
    script: 'controlplane-policy',
    variants: [
      { label: 'getppid, 1 thread', params: { threads: 1, syscall: 'getppid' } },
      { label: 'mkdir, 1 thread', params: { threads: 1, syscall: 'mkdir' } },
    ],
    columns: [
      { key: 'decisionsPerSec', title: 'decisions/s', digits: 0 }, ...LATENCY_COLUMNS,
      { key: 'defaultAnswers', title: 'by default', digits: 0 }, { key: 'rssMiB', title: 'RSS MiB', digits: 1 },
    ],
    reference: 'reference',
    ratios: LATENCY_RATIOS,
  },
  {
    id: 'fast-path',
    title: '(d), (e) data plane + the real control plane with its fast path (issue 9)',
    about: 'seccomp-controlplane --no-kubernetes pushes each container\'s compiled policy; the engine thread answers from it: getppid of a container without policy keys (continue), mkdir of a MKDIR_TMPL container (emulated by the helper, "-bench-pod" suffix); no JS, no gRPC per call',
    script: 'fast-path',
    variants: [
      tight({ label: '(d) getppid, 1 thread', params: { threads: 1, syscall: 'getppid' }, referenceVariant: 'getppid, 1 thread' }),
      { label: '(d) getppid, 8 threads', params: { threads: 8, syscall: 'getppid' }, referenceVariant: 'getppid, 8 threads' },
      { label: '(e) MKDIR_TMPL mkdir, 1 thread', params: { threads: 1, syscall: 'mkdir' }, referenceVariant: 'mkdir, 1 thread' },
    ],
    columns: [
      { key: 'callsPerSec', title: 'calls/s', digits: 0 }, ...LATENCY_COLUMNS,
      { key: 'byControlPlane', title: 'by control plane', digits: 0 }, { key: 'defaultAnswers', title: 'by default', digits: 0 },
      { key: 'rssMiB', title: 'RSS MiB', digits: 1 },
    ],
    reference: 'reference',
    ratios: LATENCY_RATIOS,
  },
  {
    id: 'controlplane-when',
    title: 'a policy resource\'s when rule decides, 100 policies loaded (issue 10)',
    about: 'seccomp-controlplane against the loopback API stand-in with 100 SeccompNotifyPolicy/ClusterSeccompNotifyPolicy objects; getppid is an ask rule: decision channel -> selection (cached per container) -> CEL when -> allow',
    script: 'controlplane-when',
    variants: [{ label: 'getppid, 1 thread', params: { threads: 1, syscall: 'getppid' } }],
    columns: [
      { key: 'decisionsPerSec', title: 'decisions/s', digits: 0 }, ...LATENCY_COLUMNS,
      { key: 'defaultAnswers', title: 'by default', digits: 0 }, { key: 'rssMiB', title: 'RSS MiB', digits: 1 },
    ],
    reference: 'reference',
    ratios: LATENCY_RATIOS,
  },
  NOISY_REFERENCE,
  {
    id: 'noisy-neighbour',
    title: 'noisy neighbour: another container\'s latency while one floods the agent, beside the bare C pair (issue 17)',
    about: 'one data plane serves both (--engine-threads auto: each container on its own engine thread when there are two or more); the neighbour floods one path with N threads, the victim (one thread of getppid) is measured on the native path of that configuration '
      + '(default without a control plane, else the fast path: the path a container without ask rules is on, and the only one a bare C responder can be compared with), '
      + 'so the row says what the neighbour\'s path does to another container; control-plane path: the neighbour\'s getppid is a `when` rule of its namespace (loopback Kubernetes API)',
    script: 'noisy-neighbour',
    variants: NEIGHBOUR_ROWS.flatMap((row) => [2, 8].map((threads) => ({
      label: `${row.title}, neighbour ${threads} threads`,
      params: { threads, syscall: row.syscall, neighbourPath: row.path },
      referenceVariant: `neighbour ${row.syscall} × ${threads}`,
    }))),
    columns: [
      { key: 'p50Us', title: 'victim p50 µs', digits: 1 }, { key: 'p99Us', title: 'victim p99 µs', digits: 1 },
      { key: 'neighbourCallsPerSec', title: 'neighbour calls/s', digits: 0 },
    ],
    reference: 'noisy-neighbour-reference',
    ratios: [
      { key: 'p50Us', title: 'bare C p50 µs', kind: 'reference', digits: 1 },
      { key: 'p99Us', title: 'bare C p99 µs', kind: 'reference', digits: 1 },
      { key: 'p50Us', title: 'p50 ×C' },
      { key: 'p99Us', title: 'p99 ×C' },
      { key: 'p99Us', title: 'p99 +µs', kind: 'difference', digits: 1 },
    ],
    slackSeconds: 30,
  },
  {
    id: 'containers',
    title: 'data plane with many live containers (default path)',
    about: 'idle seccomp-run\'d processes each hold a notify fd; RSS of the data plane at 1 and at N, and the latency of one getppid workload beside 1 and beside M',
    script: 'containers',
    // N is --containers (1,000 unless told otherwise), M is --scale (10,000).
    variants: [{ label: '1 vs N containers', params: { threads: 1, syscall: 'getppid' } }],
    columns: [
      { key: 'containers', title: 'N', digits: 0 },
      { key: 'rss1MiB', title: 'RSS@1 MiB', digits: 1 },
      { key: 'rssNMiB', title: 'RSS@N MiB', digits: 1 },
      { key: 'scale', title: 'M', digits: 0 },
      { key: 'rssMMiB', title: 'RSS@M MiB', digits: 1 },
      { key: 'aloneP50Us', title: 'p50@1 µs', digits: 1 },
      { key: 'besideP50Us', title: 'p50@M µs', digits: 1 },
      { key: 'besideVsAlone', title: 'p50@M/p50@1', digits: 2 },
      { key: 'aloneP99Us', title: 'p99@1 µs', digits: 1 },
      { key: 'besideP99Us', title: 'p99@M µs', digits: 1 },
      { key: 'startSeconds', title: 'M start s', digits: 1 },
    ],
    slackSeconds: 240,
  },
  {
    id: 'handoff',
    title: 'data plane handoff with many live containers (issue 18)',
    about: 'N idle containers and one getppid workload; a successor started with --takeover takes every fd; the old one\'s pause (engine parked to the successor\'s ack, as logged), the workload\'s longest call across it, the handoff from the successor\'s start',
    script: 'handoff',
    // N is --containers (1,000 unless told otherwise).
    variants: [{ label: 'N containers', params: { threads: 1, syscall: 'getppid' } }],
    columns: [
      { key: 'containers', title: 'N', digits: 0 },
      { key: 'pauseMs', title: 'pause ms', digits: 1 },
      { key: 'workloadMaxMs', title: 'workload max ms', digits: 1 },
      { key: 'workloadP99Us', title: 'workload p99 µs', digits: 1 },
      { key: 'handoffMs', title: 'handoff ms', digits: 0 },
    ],
    slackSeconds: 240,
  },
  {
    id: 'runtime-start',
    title: 'container start time under a real engine, with and without the agent (issue 11)',
    about: 'containerd 1.6 CRI StartContainer, or a whole podman run --detach, runc; with: a seccomp profile whose listenerPath is the data plane (no control plane), without: the same profile minus the listener; alternating, medians',
    script: 'runtime-start',
    variants: [
      { label: 'CRI StartContainer', params: { engine: 'containerd' } },
      { label: 'podman run', params: { engine: 'podman' } },
    ],
    columns: [
      { key: 'starts', title: 'starts', digits: 0 },
      { key: 'withoutAgentMs', title: 'without ms', digits: 1 },
      { key: 'withAgentMs', title: 'with agent ms', digits: 1 },
      { key: 'overheadMs', title: 'overhead ms', digits: 1 },
    ],
    slackSeconds: 120,
  },
];
