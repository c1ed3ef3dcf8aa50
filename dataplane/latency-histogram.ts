// seccomp_agent_decision_latency_seconds: a Prometheus histogram that takes single answers (JS
// answered them) and whole tallies (the engine counted them natively, already bucketed by the
// same bounds: native latencyBucketsNs), which prom-client's Histogram cannot add in bulk.
// Registered as a custom metric: prom-client asks it for get() like any of its own.
import type { Registry } from 'prom-client';

interface Series {
  /** Per bucket, not cumulative: counts[i] for (bound[i-1], bound[i]]. */
  counts: number[];
  sumSeconds: number;
  count: number;
}

export class LatencyHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series = new Map<string, Series>();
  private readonly boundsSeconds: number[];

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelName: string,
    private readonly boundsNs: readonly number[],
    registry: Registry,
  ) {
    this.boundsSeconds = boundsNs.map((ns) => ns / 1e9);
    // A metric object of its own: Registry only asks for name, help, type and get().
    registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  observe(label: string, latencyNs: bigint): void {
    const series = this.seriesOf(label);
    const ns = Number(latencyNs);
    let i = 0;
    while (i < this.boundsNs.length && ns > this.boundsNs[i]) i++;
    if (i < this.boundsNs.length) series.counts[i]++;
    series.sumSeconds += ns / 1e9;
    series.count++;
  }

  /** `count` answers, `buckets` of them per bound (the rest above the last), summing `sumNs`. */
  add(label: string, buckets: readonly number[], sumNs: bigint, count: number): void {
    const series = this.seriesOf(label);
    for (let i = 0; i < series.counts.length && i < buckets.length; i++) series.counts[i] += buckets[i];
    series.sumSeconds += Number(sumNs) / 1e9;
    series.count += count;
  }

  get(): { name: string; help: string; type: string; aggregator: string; values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> } {
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
    for (const [label, series] of this.series) {
      let cumulative = 0;
      for (let i = 0; i < this.boundsSeconds.length; i++) {
        cumulative += series.counts[i];
        values.push({ labels: { le: this.boundsSeconds[i], [this.labelName]: label }, value: cumulative, metricName: `${this.name}_bucket` });
      }
      values.push({ labels: { le: '+Inf', [this.labelName]: label }, value: series.count, metricName: `${this.name}_bucket` });
      values.push({ labels: { [this.labelName]: label }, value: series.sumSeconds, metricName: `${this.name}_sum` });
      values.push({ labels: { [this.labelName]: label }, value: series.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  private seriesOf(label: string): Series {
    let series = this.series.get(label);
    if (!series) this.series.set(label, (series = { counts: new Array<number>(this.boundsNs.length).fill(0), sumSeconds: 0, count: 0 }));
    return series;
  }
}
