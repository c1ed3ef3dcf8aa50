// The previous release (test/testdata/previous-release.json), built from this clone's git history
// beside the current tree, for the version-skew test: `git archive <commit>` into a temp folder,
// `npm ci` there (the addon and the TypeScript), then kept in a cache keyed by the commit so the
// next run only verifies it. A commit missing from the clone is an error, never a skip.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { agentBuild, ROOT, type AgentBuild } from './paths';
import { run } from './processes';

export interface PreviousRelease {
  version: string;
  /** Full commit hash: a tag may not reach every clone, a commit of main does. */
  commit: string;
}

export const PREVIOUS_RELEASE_FILE = path.join(ROOT, 'test', 'testdata', 'previous-release.json');
/** The built previous release of a commit; /var/tmp outlives reboots' /tmp cleaning and is the CI image's scratch. */
export const cacheDirOf = (commit: string) => path.join(process.env.SECCOMP_AGENT_PREV_CACHE ?? '/var/tmp', `seccomp-agent-prev-${commit}`);
/** What a usable build holds; the marker records their hashes. */
const BUILT_FILES = ['package.json', 'dist/dataplane/main.js', 'dist/controlplane/main.js', 'dist/common/version.js', 'build/Release/seccomp_agent.node', 'build/Release/seccomp-keeper'];
const MARKER = '.previous-release.json';
const BUILD_TIMEOUT_MS = 15 * 60_000;

interface Marker extends PreviousRelease {
  tree: string;
  files: Record<string, string>;
}

export function readPreviousRelease(): PreviousRelease {
  const r = JSON.parse(fs.readFileSync(PREVIOUS_RELEASE_FILE, 'utf8')) as PreviousRelease;
  if (!/^\d+\.\d+\.\d+$/.test(r.version) || !/^[0-9a-f]{40}$/.test(r.commit)) {
    throw new Error(`${PREVIOUS_RELEASE_FILE}: "version" must be x.y.z and "commit" a full 40-hex commit hash`);
  }
  return r;
}

/** The commit's tree hash; a clear error when the clone lacks the commit (a shallow clone). */
async function treeOf(release: PreviousRelease): Promise<string> {
  const r = await run('git', ['-C', ROOT, 'rev-parse', '--verify', '--quiet', `${release.commit}^{tree}`]);
  if (r.code !== 0) {
    const shallow = (await run('git', ['-C', ROOT, 'rev-parse', '--is-shallow-repository'])).stdout.trim();
    throw new Error(
      `the previous release ${release.version} (commit ${release.commit}, named in ${path.relative(ROOT, PREVIOUS_RELEASE_FILE)}) is not in this clone` +
      `${shallow === 'true' ? ' (a shallow clone)' : ''}: the version-skew test builds it from git. Fetch the full history ` +
      '(git fetch --unshallow origin, or clone without --depth) and run the test again',
    );
  }
  return r.stdout.trim();
}

function hashFiles(root: string): Record<string, string> {
  const files: Record<string, string> = {};
  for (const f of BUILT_FILES) files[f] = createHash('sha256').update(fs.readFileSync(path.join(root, f))).digest('hex');
  return files;
}

/** Why the build at `dir` is not the release's (null when it is). */
function problemOf(dir: string, release: PreviousRelease, tree: string): string | null {
  const markerPath = path.join(dir, MARKER);
  if (!fs.existsSync(markerPath)) return `${dir} has no ${MARKER} (an unfinished build)`;
  const marker = JSON.parse(fs.readFileSync(markerPath, 'utf8')) as Marker;
  if (marker.commit !== release.commit || marker.tree !== tree) return `${dir} was built from ${marker.commit} (tree ${marker.tree})`;
  const missing = BUILT_FILES.filter((f) => !fs.existsSync(path.join(dir, f)));
  if (missing.length > 0) return `${dir} lacks ${missing.join(', ')}`;
  const changed = Object.entries(hashFiles(dir)).filter(([f, h]) => marker.files[f] !== h).map(([f]) => f);
  if (changed.length > 0) return `${dir}: ${changed.join(', ')} changed since it was built`;
  const version = (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }).version;
  if (version !== release.version) return `${dir} is version ${version}, not ${release.version}`;
  return null;
}

/** Runs a build step; its output in the error when it fails. */
async function step(what: string, command: string, args: string[], cwd: string): Promise<void> {
  const r = await run(command, args, { cwd, timeout: BUILD_TIMEOUT_MS, env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false' } });
  if (r.code !== 0) throw new Error(`building the previous release: ${what} failed (exit ${r.code}):\n${(r.stdout + r.stderr).slice(-4000)}`);
}

/**
 * The previous release, built and verified. `log` hears what it does (a first build takes minutes).
 * Builds in a temp folder under os.tmpdir() and moves it into the cache when it is complete, so an
 * interrupted build is never taken for a good one; a cached build whose files differ from what the
 * marker recorded is built again.
 */
export async function previousReleaseBuild(
  log: (line: string) => void = () => undefined, release: PreviousRelease = readPreviousRelease(),
): Promise<{ release: PreviousRelease; build: AgentBuild; cached: boolean }> {
  const tree = await treeOf(release);
  const label = `${release.version} (${release.commit.slice(0, 7)})`;
  const cache = cacheDirOf(release.commit);
  const problem = fs.existsSync(cache) ? problemOf(cache, release, tree) : `no build in ${cache}`;
  if (problem === null) return { release, build: agentBuild(cache, label), cached: true };
  log(`building the previous release ${label}: ${problem}`);
  fs.rmSync(cache, { recursive: true, force: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `seccomp-agent-prev-${release.commit.slice(0, 7)}-`));
  try {
    const began = Date.now();
    await step('git archive', 'bash', ['-c', 'set -o pipefail; git -C "$1" archive "$2" | tar -x -C "$3"', 'archive', ROOT, release.commit, tmp], tmp);
    await step('npm ci', 'npm', ['ci', '--no-audit', '--no-fund'], tmp);
    if (!fs.existsSync(path.join(tmp, 'dist', 'dataplane', 'main.js'))) await step('npm run build', 'npm', ['run', 'build'], tmp);
    const missing = BUILT_FILES.filter((f) => !fs.existsSync(path.join(tmp, f)));
    if (missing.length > 0) throw new Error(`building the previous release: npm ci left no ${missing.join(', ')} in ${tmp}`);
    const marker: Marker = { ...release, tree, files: hashFiles(tmp) };
    fs.writeFileSync(path.join(tmp, MARKER), JSON.stringify(marker, null, 2));
    moveInto(tmp, cache);
    log(`built ${label} in ${((Date.now() - began) / 1000).toFixed(0)} s; cached in ${cache}`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const after = problemOf(cache, release, tree);
  if (after !== null) throw new Error(`the previous release's build does not verify: ${after}`);
  return { release, build: agentBuild(cache, label), cached: false };
}

/** Renames (same file system) or copies `from` to `to`; a build another run finished first is kept. */
function moveInto(from: string, to: string): void {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  try {
    fs.renameSync(from, to);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTEMPTY' || code === 'EEXIST') return;
    if (code !== 'EXDEV') throw err;
    const partial = `${to}.partial-${process.pid}`;
    fs.cpSync(from, partial, { recursive: true, verbatimSymlinks: true });
    fs.renameSync(partial, to);
  }
}
