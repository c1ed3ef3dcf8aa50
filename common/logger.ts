// pino JSON logs for both planes. Operators filter by these fields: container, pod, syscall, id,
// handle, session; keep their names when adding lines.
import pino, { type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

export const LOG_LEVELS: readonly LevelWithSilent[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** A logger for one process. Asynchronous destination: a log line never blocks the event loop. */
export function createLogger(name: string, level: string): Logger {
  return pino(
    { name, level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime },
    pino.destination({ dest: 2, sync: false, minLength: 0 }),
  );
}
