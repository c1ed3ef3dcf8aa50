// The data plane's Prometheus metrics. Counters are read from the data plane when scraped, so
// the notification path pays for one histogram observation per answer JS sees, and nothing for
// those the engine tallies (their buckets are added per batch).
import { Counter, Gauge, Registry } from 'prom-client';
import { answeredByLabel, ANSWERED_BY_LABELS } from '../common/answer-labels';
import type { AnsweredBy, Counters } from '../proto/gen/seccompagent/v1/dataplane';
import type { DataPlane } from './dataplane';
import { LatencyHistogram } from './latency-histogram';

/** answers_total by answered_by; answers whose target was gone count apart, as target_gone. */
const ANSWER_COUNTERS: Array<[keyof Counters, string]> = [
  ...ANSWERED_BY_LABELS.map((l): [keyof Counters, string] => [l.counter, l.metric]),
  ['targetGone', 'target_gone'],
];

export class DataPlaneMetrics {
  readonly registry = new Registry();
  /** Seconds from receipt to answer, by who answered. */
  readonly latency: LatencyHistogram;

  constructor(dataplane: DataPlane) {
    const registry = this.registry;
    const latency = new LatencyHistogram(
      'seccomp_agent_decision_latency_seconds', 'Time from receiving a notification to answering it', 'answered_by',
      dataplane.latencyBucketsNs, registry,
    );
    this.latency = latency;
    const labelOf = (by: AnsweredBy) => answeredByLabel(by)?.metric ?? 'unknown';
    dataplane.ledger.latency = {
      observe: (by, latencyNs) => latency.observe(labelOf(by), latencyNs),
      add: (by, buckets, sumNs, count) => latency.add(labelOf(by), buckets, sumNs, count),
    };
    new Counter({
      name: 'seccomp_agent_notifications_total',
      help: 'Notifications received, by syscall',
      labelNames: ['syscall'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [syscall, n] of dataplane.ledger.notificationsBySyscall) this.inc({ syscall }, n);
      },
    });
    new Counter({
      name: 'seccomp_agent_answers_total',
      help: 'Notifications answered, by who answered',
      labelNames: ['answered_by'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [key, label] of ANSWER_COUNTERS) this.inc({ answered_by: label }, dataplane.counters[key] as number);
      },
    });
    new Counter({
      name: 'seccomp_agent_decisions_dropped_total',
      help: 'Control plane decisions not applied, by reason',
      labelNames: ['reason'],
      registers: [registry],
      collect() {
        this.reset();
        this.inc({ reason: 'late' }, dataplane.counters.decisionsLate as number);
        this.inc({ reason: 'unknown' }, dataplane.counters.decisionsUnknown as number);
        this.inc({ reason: 'invalid' }, dataplane.counters.decisionsInvalid as number);
      },
    });
    new Counter({
      name: 'seccomp_agent_ingest_rejected_total',
      help: 'Runtime connections refused (bad message, wrong fd, too large, timeout)',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(dataplane.counters.ingestRejected as number);
      },
    });
    new Counter({
      name: 'seccomp_agent_read_stalls_total',
      help: 'Reads of a container task\'s memory that outlived the read watch (50 ms): its engine thread went on with a new thread',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(dataplane.readStalls);
      },
    });
    new Counter({
      name: 'seccomp_agent_ingest_connections_dropped_total',
      help: 'Runtime connections closed to stay within the listener limits, by reason (per_pid, per_uid, total: caps on connections being read; fd_reserve: fds kept free below RLIMIT_NOFILE)',
      labelNames: ['reason'],
      registers: [registry],
      collect() {
        this.reset();
        const dropped = dataplane.ingestDropped;
        this.inc({ reason: 'per_pid' }, dropped.perPid);
        this.inc({ reason: 'per_uid' }, dropped.perUid);
        this.inc({ reason: 'total' }, dropped.total);
        this.inc({ reason: 'fd_reserve' }, dropped.fdReserve);
      },
    });
    new Gauge({
      name: 'seccomp_agent_containers',
      help: 'Live containers (notify fds) served',
      registers: [registry],
      collect() {
        this.set(dataplane.containers.size);
      },
    });
    new Gauge({
      name: 'seccomp_agent_spread_wake_containers',
      help: 'Containers whose callers are woken on any CPU, not the engine thread\'s (SYNC_WAKE_UP cleared: many of their threads call at once, and no other container calls)',
      registers: [registry],
      collect() {
        this.set(dataplane.wakeModes.spread);
      },
    });
    new Counter({
      name: 'seccomp_agent_wake_mode_switches_total',
      help: 'Changes of a container\'s wake-up mode (sync to spread, or back)',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(dataplane.wakeModes.switches);
      },
    });
    new Gauge({
      name: 'seccomp_agent_pending_notifications',
      help: 'Notifications waiting for the control plane',
      registers: [registry],
      collect() {
        this.set(dataplane.pendingCount);
      },
    });
    new Gauge({
      name: 'seccomp_agent_control_plane_attached',
      help: '1 while a control plane is attached',
      registers: [registry],
      collect() {
        this.set(dataplane.attached ? 1 : 0);
      },
    });
    new Gauge({
      name: 'seccomp_agent_fd_store_up',
      help: '1 while every fd is kept in a live fd store (a crash loses no container); 0 with none, or once its keeper died',
      registers: [registry],
      collect() {
        this.set(dataplane.fdStore.up ? 1 : 0);
      },
    });
    const started = Date.now() / 1000;
    new Gauge({
      name: 'seccomp_agent_dataplane_start_time_seconds',
      help: 'When this data plane process started, by how it got its containers (fresh, fd-store: restarted by the keeper or systemd, handoff: took over by --takeover): each change is a restart or a handoff',
      labelNames: ['origin'],
      registers: [registry],
      collect() {
        this.reset();
        this.set({ origin: dataplane.startOrigin }, started);
      },
    });
    new Gauge({
      name: 'seccomp_agent_listener_sockets',
      help: 'The runtime listener sockets served (1 each), by path: the listenerPath profiles may name',
      labelNames: ['path'],
      registers: [registry],
      collect() {
        this.reset();
        for (const socket of dataplane.listenerSockets()) this.set({ path: socket }, 1);
      },
    });
    new Gauge({
      name: 'seccomp_agent_watchers',
      help: 'Watch streams open',
      registers: [registry],
      collect() {
        this.set(dataplane.hub.size);
      },
    });
  }
}
