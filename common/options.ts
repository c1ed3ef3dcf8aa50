// One table of options per process: flag, env var, default and meaning side by side, parsed and
// validated once, then frozen. Precedence: command line, then environment, then default.
import { AgentError } from './errors';

export interface OptionSpec<T> {
  /** Long flag without dashes: "grpc-socket". */
  flag: string;
  /** Environment variable, or undefined when the option has none. */
  env?: string;
  /** Shown in --help. */
  description: string;
  /** Default, as the text a user would type ("" for none). */
  default: string;
  /** Boolean flags take no value ("--no-kubernetes"). */
  boolean?: boolean;
  /** May be given more than once: the values reach `parse` joined with commas (as the env var holds them). */
  repeatable?: boolean;
  /** Turns the text into the value; throws AgentError with a clear message when it cannot. */
  parse: (text: string, flag: string) => T;
}

export type OptionTable = Record<string, OptionSpec<unknown>>;
export type OptionValues<T extends OptionTable> = { readonly [K in keyof T]: ReturnType<T[K]['parse']> };

export interface ParsedCommandLine<T extends OptionTable> {
  options: OptionValues<T>;
  /** Words that are not options (subcommands, arguments). */
  positional: string[];
  /** Everything after "--". */
  rest: string[];
  help: boolean;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j];
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1));
      previous = current;
    }
  }
  return row[b.length];
}

/** The candidate closest to `word` when it is close enough to be a misspelling of it, else null. */
export function nearestWord(word: string, candidates: Iterable<string>): string | null {
  let best = '';
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const distance = editDistance(word, candidate);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = candidate;
    }
  }
  return bestDistance <= Math.max(2, Math.floor(word.length / 3)) ? best : null;
}

function suggestion(flag: string, table: OptionTable): string {
  const best = nearestWord(flag, Object.values(table).map((spec) => spec.flag));
  return best !== null ? ` (did you mean --${best}?)` : '';
}

/** Parses argv and the environment against the table; unknown flags get a suggestion. */
export function parseCommandLine<T extends OptionTable>(
  table: T,
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): ParsedCommandLine<T> {
  const byFlag = new Map<string, [keyof T, OptionSpec<unknown>]>();
  for (const key of Object.keys(table) as Array<keyof T>) byFlag.set(table[key].flag, [key, table[key]]);
  const texts = new Map<keyof T, string>();
  const positional: string[] = [];
  let rest: string[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i];
    if (word === '--') {
      rest = argv.slice(i + 1);
      break;
    }
    if (word === '--help' || word === '-h') {
      help = true;
      continue;
    }
    if (!word.startsWith('--')) {
      positional.push(word);
      continue;
    }
    const eq = word.indexOf('=');
    const flag = word.slice(2, eq === -1 ? undefined : eq);
    const entry = byFlag.get(flag);
    if (!entry) throw new AgentError('EUNKNOWN_FLAG', `unknown option --${flag}${suggestion(flag, table)}; see --help`);
    const [key, spec] = entry;
    if (spec.boolean) {
      texts.set(key, eq === -1 ? 'true' : word.slice(eq + 1));
      continue;
    }
    let value: string | undefined = eq === -1 ? argv[++i] : word.slice(eq + 1);
    if (value === undefined) throw new AgentError('EMISSING_VALUE', `option --${flag} needs a value`);
    const earlier = texts.get(key);
    texts.set(key, spec.repeatable && earlier !== undefined ? `${earlier},${value}` : value);
  }
  const options = {} as Record<keyof T, unknown>;
  for (const key of Object.keys(table) as Array<keyof T>) {
    const spec = table[key];
    const text = texts.get(key) ?? (spec.env !== undefined ? env[spec.env] : undefined) ?? spec.default;
    options[key] = spec.parse(text, spec.flag);
  }
  return { options: Object.freeze(options) as OptionValues<T>, positional, rest, help };
}

/** The --help text: one line per option with its env var and default. */
export function helpText(command: string, summary: string, table: OptionTable): string {
  const lines = [`Usage: ${command} [options]`, '', summary, '', 'Options (each also read from its environment variable):'];
  for (const spec of Object.values(table)) {
    const name = spec.boolean ? `--${spec.flag}` : `--${spec.flag} VALUE${spec.repeatable ? ' ...' : ''}`;
    const extra = [spec.env ? `env ${spec.env}` : '', spec.default !== '' ? `default ${spec.default}` : ''].filter(Boolean).join(', ');
    lines.push(`  ${name.padEnd(30)} ${spec.description}${extra ? ` (${extra})` : ''}`);
  }
  return lines.join('\n');
}

// Parsers shared by the tables.
export const parseString = (text: string): string => text;

export function parseBoolean(text: string, flag: string): boolean {
  if (/^(1|true|yes|on)$/i.test(text)) return true;
  if (/^(|0|false|no|off)$/i.test(text)) return false;
  throw new AgentError('EBAD_OPTION', `--${flag}: "${text}" is not a boolean (true or false)`);
}

/** "2s", "500ms", "1m" or a bare number of milliseconds, into milliseconds. */
export function parseDurationMs(text: string, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)(us|ms|s|m)?$/.exec(text.trim());
  if (!match) throw new AgentError('EBAD_OPTION', `--${flag}: "${text}" is not a duration such as 200us, 500ms, 2s or 1m`);
  const scale = match[2] === 'us' ? 0.001 : match[2] === 's' ? 1000 : match[2] === 'm' ? 60_000 : 1;
  const ms = Number(match[1]) * scale;
  if (ms <= 0) throw new AgentError('EBAD_OPTION', `--${flag}: the duration must be greater than zero`);
  return ms;
}

/** A duration that may also be 0 (off): "0", "200us", "1ms". */
export function parseDurationOrOffMs(text: string, flag: string): number {
  return /^0+(\.0+)?(us|ms|s|m)?$/.test(text.trim()) ? 0 : parseDurationMs(text, flag);
}

export function parsePositiveInteger(text: string, flag: string): number {
  if (!/^\d+$/.test(text.trim()) || Number(text) < 1) throw new AgentError('EBAD_OPTION', `--${flag}: "${text}" is not a positive integer`);
  return Number(text);
}

export function parseChoice<T extends string>(choices: readonly T[]) {
  return (text: string, flag: string): T => {
    if ((choices as readonly string[]).includes(text)) return text as T;
    throw new AgentError('EBAD_OPTION', `--${flag}: "${text}" is not one of ${choices.join(', ')}`);
  };
}
