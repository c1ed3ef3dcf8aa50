// The answer ledger: counts notifications and answers (by who, per container, latency) and tells Watch of each answer.
import { answeredByLabel } from '../common/answer-labels';
import { handleToProto, type ContainerHandle } from '../common/container-handle';
import { durationFromNs } from '../common/duration';
import { AnswerKind, AnsweredBy, type PolicyFinding } from '../proto/gen/seccompagent/v1/dataplane';
import type { ContainerTable } from './container-table';
import type { MutableCounters } from './counters';
import type { AnswerOutcome } from './decisions';
import type { WatchHub } from './watch-hub';

/** Where answer latencies go (the metrics' histogram): one answer, or a native tally's buckets. */
export interface AnswerLatencySink {
  observe(by: AnsweredBy, latencyNs: bigint): void;
  add(by: AnsweredBy, buckets: readonly number[], sumNs: bigint, count: number): void;
}

const inFlightKey = (handle: ContainerHandle, id: bigint) => `${handle}:${id}`;

export class AnswerLedger {
  /** Notifications received by syscall name, for metrics. */
  readonly notificationsBySyscall = new Map<string, number>();
  /** Takes every answer's latency, one by one or a native tally's buckets at once (metrics). */
  latency: AnswerLatencySink | null = null;
  /** Syscall names of notifications in flight, for the answers Watch shows (only while watched). */
  private readonly inFlightSyscalls = new Map<string, string>();
  /** Findings of control-plane decisions being emulated (mkdir, mount...), for their answer event. */
  private readonly emulatedFindings = new Map<string, PolicyFinding[]>();

  constructor(
    private readonly counters: MutableCounters,
    private readonly containers: ContainerTable,
    private readonly hub: Pick<WatchHub, 'active' | 'publish'>,
  ) {}

  countNotifications(syscall: string, count = 1): void {
    this.counters.notifications += count;
    this.notificationsBySyscall.set(syscall, (this.notificationsBySyscall.get(syscall) ?? 0) + count);
  }

  /** A watched notification's syscall name, kept until its answer is recorded. */
  rememberSyscall(handle: ContainerHandle, id: bigint, syscall: string): void {
    this.inFlightSyscalls.set(inFlightKey(handle, id), syscall);
  }

  /** The remembered syscall name of a notification in flight; '' when it was not watched. */
  syscallOf(handle: ContainerHandle, id: bigint): string {
    return this.inFlightSyscalls.get(inFlightKey(handle, id)) ?? '';
  }

  /** syscallOf, forgetting it: its answer is being recorded. */
  takeSyscall(handle: ContainerHandle, id: bigint): string {
    const syscall = this.syscallOf(handle, id);
    this.inFlightSyscalls.delete(inFlightKey(handle, id));
    return syscall;
  }

  /** An emulation answers later, in a native answered event: its decision's findings wait for it (only while watched). */
  rememberFindings(handle: ContainerHandle, id: bigint, findings: PolicyFinding[]): void {
    if (findings.length > 0 && this.hub.active) this.emulatedFindings.set(inFlightKey(handle, id), findings);
  }

  takeFindings(handle: ContainerHandle, id: bigint): PolicyFinding[] | undefined {
    const key = inFlightKey(handle, id);
    const findings = this.emulatedFindings.get(key);
    if (findings) this.emulatedFindings.delete(key);
    return findings;
  }

  /** Forgets what it remembered of a container's notifications. */
  forgetContainer(handle: ContainerHandle): void {
    for (const key of this.inFlightSyscalls.keys()) if (key.startsWith(`${handle}:`)) this.inFlightSyscalls.delete(key);
    for (const key of this.emulatedFindings.keys()) if (key.startsWith(`${handle}:`)) this.emulatedFindings.delete(key);
  }

  /** `count` notifications the engine answered by itself while nobody watched: counted, never shown. */
  recordTally(handle: ContainerHandle, syscall: string, by: AnsweredBy, gone: boolean, count: number, buckets: readonly number[], sumNs: bigint): void {
    this.countNotifications(syscall, count);
    this.countAnswers(handle, by, gone, count);
    this.latency?.add(by, buckets, sumNs, count);
  }

  /** One answer: counted, its latency observed, and shown to Watch. `rule` >= 0: the policy rule that answered. */
  record(
    handle: ContainerHandle, id: bigint, containerId: string, syscall: string, by: AnsweredBy, outcome: AnswerOutcome, latencyNs: bigint,
    rule = -1,
    findings: PolicyFinding[] = [],
  ): void {
    this.countAnswers(handle, by, outcome.kind === AnswerKind.ANSWER_KIND_TARGET_GONE, 1);
    this.latency?.observe(by, latencyNs);
    if (!this.hub.active) return;
    this.hub.publish({
      $case: 'answer',
      answer: { handle: handleToProto(handle), id, containerId, syscall, answeredBy: by, ...outcome, latency: durationFromNs(latencyNs),
        ruleIndex: rule >= 0 ? rule : 0, policyVersion: rule >= 0 ? (this.containers.recent(handle)?.policyVersion ?? '') : '', findings },
    }, { containerId, syscall });
  }

  private countAnswers(handle: ContainerHandle, by: AnsweredBy, gone: boolean, count: number): void {
    // A target that died first got no answer: counted apart from who gave it.
    if (gone) {
      this.counters.targetGone += count;
      return;
    }
    const label = answeredByLabel(by)!;
    this.counters[label.counter] += count;
    if (label.defaultReason !== '') this.containers.countAnswer(handle, 'default', count);
    else if (by === AnsweredBy.ANSWERED_BY_FAST_PATH) this.containers.countAnswer(handle, 'fast-path', count);
  }
}
