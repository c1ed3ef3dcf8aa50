// The Welcome feature for holds (proto/seccompagent/v1/dataplane.proto HoldBatch): a data plane
// that lists it moves a held notification's decision deadline, so a control plane that answers
// later on purpose (EXEC_DURATION, SIDECARS_DELAY) is not cut short by the default answer.
export const HOLD_FEATURE = 'hold.v1';
/** The longest hold a data plane grants (beyond it, its decision timeout applies as usual). */
export const MAX_HOLD_MS = 60_000;
