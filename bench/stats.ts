// Medians across runs: this machine is noisy, so every figure quoted is the median of R runs.
import type { Metrics } from './scenario-process';

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** The median of each metric over the runs that reported it. */
export function medianMetrics(runs: Metrics[]): Metrics {
  const keys = new Set(runs.flatMap((run) => Object.keys(run)));
  const result: Metrics = {};
  for (const key of keys) {
    const values = runs.map((run) => run[key]).filter((value): value is number => typeof value === 'number' && Number.isFinite(value));
    if (values.length > 0) result[key] = median(values);
  }
  return result;
}
