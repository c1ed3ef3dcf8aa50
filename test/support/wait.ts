// Waiting in tests: for a condition no event reports (a counter, a file, a process state), never
// a fixed time where a condition exists. The one polling helper and the one sleep of the tests.
import { setTimeout as delay } from 'node:timers/promises';

/** Resolves after `ms`: only where the time itself is what the test is about (backoff, restart delays). */
export function sleep(ms: number): Promise<void> {
  return delay(ms);
}

/** Polls `check` every `intervalMs` until it returns true; throws naming `what` after `timeoutMs`. */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what = 'condition',
  intervalMs = 20,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(intervalMs);
  }
}
