// google.protobuf.Duration from the units the planes count in.
import type { Duration } from '../proto/gen/google/protobuf/duration';

export function durationFromMs(ms: number): Duration {
  return { seconds: BigInt(Math.floor(ms / 1000)), nanos: Math.round((ms % 1000) * 1_000_000) };
}

export function durationFromNs(ns: bigint): Duration {
  return { seconds: ns / 1_000_000_000n, nanos: Number(ns % 1_000_000_000n) };
}

export function durationToMs(duration: Duration | undefined): number {
  return duration ? Number(duration.seconds) * 1000 + duration.nanos / 1_000_000 : 0;
}
