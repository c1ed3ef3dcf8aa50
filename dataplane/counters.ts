// The data plane's Counters (GetStatus), counted as plain numbers and turned into the API's bigints when read.
import type { Counters } from '../proto/gen/seccompagent/v1/dataplane';

export type MutableCounters = { -readonly [K in keyof Counters]: number };

export function zeroCounters(): MutableCounters {
  return {
    notifications: 0, answeredControlPlane: 0, answeredDefaultNoControlPlane: 0, answeredDefaultDeadline: 0,
    answeredDefaultDetached: 0, answeredFastPath: 0, targetGone: 0, decisionsLate: 0, decisionsUnknown: 0,
    decisionsInvalid: 0, ingestRejected: 0, watchersDropped: 0, containersAdded: 0, containersRemoved: 0,
    eventsDropped: 0, answeredDefaultRecovered: 0, policiesAccepted: 0, policiesRefused: 0,
    emulationHelpersDied: 0, emulationsRetried: 0, readStalls: 0, wakeModeSwitches: 0,
  };
}

export function countersToProto(counters: MutableCounters): Counters {
  return Object.fromEntries(Object.entries(counters).map(([k, v]) => [k, BigInt(v)])) as unknown as Counters;
}
