// Durations written the way Go's time.ParseDuration reads them ("2s", "1m30s", "1.5s", "300ms",
// "0"), because kinvolk/seccompagent profiles give EXEC_DURATION and SIDECARS_DELAY in that syntax.
// A sign, then one or more decimal numbers each with a unit (ns, us, µs, μs, ms, s, m, h); "0"
// alone is zero. Returns milliseconds (fractions kept), or null when the text is not a duration.
const UNIT_MS: Readonly<Record<string, number>> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

export function parseGoDuration(text: string): number | null {
  let at = 0;
  let sign = 1;
  if (text[0] === '-' || text[0] === '+') {
    sign = text[0] === '-' ? -1 : 1;
    at = 1;
  }
  if (text.slice(at) === '0') return 0;
  if (at === text.length) return null;
  let total = 0;
  while (at < text.length) {
    PART.lastIndex = at;
    const m = PART.exec(text);
    if (!m) return null;
    total += Number(m[1]) * UNIT_MS[m[2]];
    at = PART.lastIndex;
  }
  return sign * total;
}
