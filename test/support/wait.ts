// Waiting in tests: for a condition no event reports (a counter, a file, a process state), never
// a fixed time where a condition exists. The one polling helper and the one sleep of the tests.
import { setTimeout as delay } from 'node:timers/promises';

/** Resolves after `ms`: only where the time itself is what the test is about (backoff, restart delays). */
export function sleep(ms: number): Promise<void> {
  return delay(ms);
}

/**
 * Polls `check` every `intervalMs` until it returns true; throws naming `what` after `timeoutMs`.
 * `what` as a function is read at the timeout: a process's output then, not when the wait began.
 */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what: string | (() => string) = 'condition',
  intervalMs = 20,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'function' ? what() : what}`);
    await delay(intervalMs);
  }
}

/** What arrives from a stream (Watch events, PublishEvent calls), and a wait for the first that matches. */
export function collector<T>(what: string) {
  const items: T[] = [];
  const waiters: Array<() => void> = [];
  const push = (item: T) => {
    items.push(item);
    for (const w of waiters.splice(0)) w();
  };
  const waitFor = (predicate: (item: T) => boolean, timeoutMs = 10_000) =>
    new Promise<T>((resolve, reject) => {
      const deadline = setTimeout(() => reject(new Error(`no matching ${what} within ${timeoutMs} ms; saw ${items.length}`)), timeoutMs);
      const check = () => {
        const found = items.find(predicate);
        if (found) {
          clearTimeout(deadline);
          resolve(found);
        } else waiters.push(check);
      };
      check();
    });
  return { items, push, waitFor };
}
