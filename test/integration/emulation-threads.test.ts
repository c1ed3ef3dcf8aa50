// Conformance of the emulated mkdir for threads (docs/emulation.md, "Threads"): a thread that is not
// its process's leader, with its own cwd, root or umask (unshare(CLONE_FS)), fsuid/fsgid,
// supplementary groups or effective capabilities, must get from the agent exactly what the kernel
// gives it: the helper acts as the notifying thread (/proc/<tid>), never as its leader. The
// workload (test/cmd/thread-views) runs each case in a fresh thread, bare and under the agent (a
// real filter from seccomp-run, the real data and control planes, MKDIR_TMPL), on the same layout;
// per case the same rc and errno, and the same directories made (where, mode, owner), the agent's
// suffixed.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test, type TestContext } from 'node:test';
import { AnswerKind, AnsweredBy, type Answer } from '../../proto/gen/seccompagent/v1/dataplane';
import { agent, finished, MKDIR_TMPL_METADATA, runBare, SUFFIX, underAgent } from '../support/conformance';
import { watchEvents } from '../support/dataplane';
import { THREAD_VIEWS_WORKLOAD } from '../support/paths';
import { scratchDir } from '../support/scratch';
import { waitUntil } from '../support/wait';

interface Made {
  where: string;
  mode: number;
  uid: number;
  gid: number;
}

interface CaseResult {
  case: string;
  rc: number;
  errno: number;
  made: Made[];
}

/** The cases the workload runs, in its order, and what the kernel gives each (checked on the bare run too). */
const EXPECTED: Record<string, { errno: number; where?: string }> = {
  'cwd': { errno: 0, where: '/cwd/rel' },
  'root': { errno: 0, where: '/root/abs' },
  'root-cwd': { errno: 0, where: '/root/rel' },
  'umask': { errno: 0, where: '/umask/own' },
  'umask-shared': { errno: 0, where: '/umask/shared' },
  'fsuid': { errno: 0, where: '/open/fs' },
  'fsuid-denied': { errno: 13 },
  'groups': { errno: 0, where: '/group/member' },
  'groups-missing': { errno: 13 },
  'caps-dropped': { errno: 13 },
  'caps-leader': { errno: 0, where: '/private/leader' },
  'caps-raised': { errno: 0, where: '/closed/raised' },
  'mkdirat-dirfd': { errno: 0, where: '/dirfd/sub/at' },
  'mkdirat-cwd': { errno: 0, where: '/dirfd/cwdat' },
  'cwd-below-unsearchable': { errno: 0, where: '/hidden/work/made' },
};

/**
 * The layout both runs get (the workload chroots into it): folders owned and opened as each case
 * needs. mkdtemp's folder is 0700: the whole way down must be searchable by fsuid 1000.
 */
function layout(t: TestContext, name: string): string {
  const scratch = scratchDir(t);
  fs.chmodSync(scratch, 0o755);
  const dir = fs.mkdtempSync(path.join(scratch, `${name}-`));
  const folders: Array<[string, number, number, number]> = [
    ['', 0o755, 0, 0],
    ['leader', 0o755, 0, 0],
    ['cwd', 0o755, 0, 0],
    ['root', 0o755, 0, 0],
    ['umask', 0o755, 0, 0],
    ['open', 0o777, 0, 0],
    ['closed', 0o755, 0, 0],
    ['group', 0o770, 0, 2000],
    ['private', 0o700, 1000, 1000],
    ['dirfd', 0o755, 0, 0],
    ['dirfd/sub', 0o755, 0, 0],
    ['hidden', 0o700, 0, 0],
    ['hidden/work', 0o777, 0, 0],
  ];
  for (const [rel, mode, uid, gid] of folders) {
    const p = path.join(dir, rel);
    fs.mkdirSync(p, { recursive: true });
    fs.chownSync(p, uid, gid);
    fs.chmodSync(p, mode);
  }
  return dir;
}

function parse(output: string): CaseResult[] {
  const results = output.split('\n').filter((l) => l.startsWith('{"case"')).map((l) => JSON.parse(l) as CaseResult);
  assert.deepEqual(results.map((r) => r.case), Object.keys(EXPECTED), `the workload's cases:\n${output}`);
  return results;
}

const describe = (r: CaseResult) =>
  `rc ${r.rc} errno ${r.errno}${r.made.map((m) => `, made ${m.where} ${m.mode.toString(8).padStart(4, '0')} ${m.uid}:${m.gid}`).join('')}`;

/** The agent's directories as the kernel would name them: the suffix of the one made taken off. */
function unsuffixed(m: Made): Made {
  return { ...m, where: m.where.endsWith(SUFFIX) ? m.where.slice(0, -SUFFIX.length) : m.where };
}

test('emulated mkdir from threads: each thread\'s own cwd, root, umask, fsuid/fsgid, groups and capabilities, as without the agent', { timeout: 60_000 }, async (t) => {
  const bare = parse(await runBare(THREAD_VIEWS_WORKLOAD, layout(t, 'bare'), []));
  // The reference is the kernel's: the workload's setups did what each case means.
  for (const r of bare) {
    const want = EXPECTED[r.case];
    assert.equal(r.errno, want.errno, `${r.case} without the agent: ${describe(r)}`);
    assert.deepEqual(r.made.map((m) => m.where), want.where ? [want.where] : [], `${r.case} without the agent: ${describe(r)}`);
  }

  const dp = await agent(t);
  const watch = await watchEvents(t, dp.client);
  const answers = (): Answer[] => watch.events.flatMap((e) => (e.event?.$case === 'answer' ? [e.event.answer] : []));
  await waitUntil(async () => (await dp.status()).watchers >= 1, 5_000, 'the watch to be registered');
  const dir = layout(t, 'agent');
  const underTheAgent = parse(await finished(underAgent(t, dp, THREAD_VIEWS_WORKLOAD, dir, [], {
    syscalls: ['mkdir', 'mkdirat'], metadata: MKDIR_TMPL_METADATA, name: 'threads',
  })));

  const failures: string[] = [];
  for (const [i, r] of underTheAgent.entries()) {
    const ref = bare[i];
    const same = r.rc === ref.rc && r.errno === ref.errno && JSON.stringify(r.made.map(unsuffixed)) === JSON.stringify(ref.made);
    // Every directory it made, the agent made (MKDIR_TMPL's suffix), none the kernel did.
    const emulated = r.made.every((m) => m.where.endsWith(SUFFIX));
    t.diagnostic(`${r.case}: without the agent ${describe(ref)}; under the agent ${describe(r)}${same && emulated ? '' : '  <-- DIFFERS'}`);
    if (!same) failures.push(`${r.case}: without the agent ${describe(ref)}, under the agent ${describe(r)}`);
    if (!emulated) failures.push(`${r.case}: a directory without ${SUFFIX}: the kernel made it, not the agent`);
  }
  assert.deepEqual(failures, []);

  // The data plane emulated every call (one per case: the control plane's decision until the pod's
  // policy reaches the fast path, its rule after) and answered each with the errno the program saw.
  await waitUntil(() => answers().length >= underTheAgent.length, 10_000, 'an answer event per case');
  const seen = answers();
  assert.equal(seen.length, underTheAgent.length, 'one answer per mkdir');
  for (const a of seen) {
    const shown = `answer to ${a.syscall} (kind ${a.kind}, by ${a.answeredBy}, errno ${a.errno})`;
    assert.equal(a.kind, AnswerKind.ANSWER_KIND_MKDIR, shown);
    assert.ok([AnsweredBy.ANSWERED_BY_FAST_PATH, AnsweredBy.ANSWERED_BY_CONTROL_PLANE].includes(a.answeredBy), shown);
  }
  assert.deepEqual(seen.map((a) => a.errno).sort(), underTheAgent.map((r) => r.errno).sort());
  const calls = BigInt(underTheAgent.length);
  const counters = await dp.settledCounters();
  assert.equal(counters.notifications, calls);
  assert.equal(counters.answeredFastPath + counters.answeredControlPlane, calls);
  t.diagnostic(`data plane: ${seen.length} emulated mkdir answers (${seen.filter((a) => a.errno === 0).length} made, ${seen.filter((a) => a.errno !== 0).length} errno), ${counters.answeredFastPath} by fast-path rules, ${counters.answeredControlPlane} by control-plane decisions`);
});
