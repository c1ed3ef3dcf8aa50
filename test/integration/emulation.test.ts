// The emulated actions (native/addon/emulator.*, kill_freeze.*, native/tools/nshelper*.cpp) against real
// targets: processes under seccomp-run's real filters, in their own mount (and pid) namespaces
// and busybox roots, as uid 0 and 1000, in real v1 freezer and v2 cgroups of this hybrid host.
// The test itself plays the engine: it receives each notification and asks the Emulator to act.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { loadNative } from '../../dataplane/native';
import {
  loadEmulatorAddon, type EmulatorActionResult as ActionResult, type EmulatorBenchResult as BenchResult, type EmulatorOptions,
  type NativeEmulator as Emulator, type RawNotification as Notification,
} from '../support/emulator-addon';
import { ROOT, SECCOMP_RUN } from '../support/paths';
import { requireStrace, start, stop, type Started } from '../support/processes';
import { scratchDir } from '../support/scratch';
import { sleep, waitUntil } from '../support/wait';

const addon = loadEmulatorAddon();
const support = addon.emulatorTestSupport;
const { openFdCount } = loadNative();
const BENCH_WORKLOAD = path.join(ROOT, 'build', 'Release', 'seccomp-bench-workload');
const NR_MKDIR = 83;
const NR_MKDIRAT = 258;
const NR_MOUNT = 165;
const CONTINUE = -1;
const EPERM = 1;
const ENOENT = 2;
const EACCES = 13;
const EEXIST = 17;
const ELOOP = 40;
const MS_BIND = 4096n;

// ---- harness --------------------------------------------------------------------------------

function newEmulator(t: TestContext, options: EmulatorOptions = {}): Emulator {
  const emu = new addon.Emulator(options);
  t.after(() => emu.close());
  return emu;
}

/** A minimal busybox root: /bin, /tmp (1777), /proc, /mnt, /rootonly (root 0755), symlinks. */
function makeRootfs(dir: string): string {
  const root = path.join(dir, 'rootfs');
  for (const d of ['bin', 'tmp', 'proc', 'mnt', 'rootonly']) fs.mkdirSync(path.join(root, d), { recursive: true });
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
  fs.chmodSync(path.join(root, 'rootonly'), 0o755);
  fs.copyFileSync('/bin/busybox', path.join(root, 'bin', 'busybox'));
  fs.chmodSync(path.join(root, 'bin', 'busybox'), 0o755);
  for (const applet of ['sh', 'mkdir', 'ls', 'cat', 'sleep', 'mount', 'readlink', 'grep', 'id', 'wc']) {
    fs.symlinkSync('busybox', path.join(root, 'bin', applet));
  }
  fs.symlinkSync('/tmp', path.join(root, 'escape')); // absolute: must mean the root's /tmp
  fs.symlinkSync('../../../../../..', path.join(root, 'up')); // climbs: must stop at the root
  return root;
}

type Handler = (n: Notification, fd: number) => Promise<void> | void;

interface RunResult {
  exit: number | string;
  output: string;
}

/**
 * Runs `command` under seccomp-run notifying mkdir, mkdirat and mount; every notification goes to
 * `handler` (which must answer it), until the process exits. `prefix` runs before seccomp-run
 * in the same shell (to join a cgroup).
 */
async function runTarget(t: TestContext, dir: string, command: string[], handler: Handler, prefix = ''): Promise<RunResult> {
  const socket = path.join(dir, `agent-${Math.random().toString(36).slice(2)}.sock`);
  const received = support.receiveNotifyFd(socket, 10_000);
  await waitUntil(() => fs.existsSync(socket), 10_000, 'the emulator to listen');
  const started: Started = start(t, '/bin/sh', [
    '-c',
    `${prefix}exec "$@"`,
    'sh',
    SECCOMP_RUN,
    '--socket',
    socket,
    '--syscalls',
    'mkdir,mkdirat,mount',
    '--',
    ...command,
  ]);
  const { fds } = await received;
  assert.equal(fds.length, 1, 'seccomp-run sends one notify fd');
  const fd = fds[0];
  let exited = false;
  void started.exited.then(() => (exited = true));
  try {
    while (!exited) {
      const n = await support.recvNotification(fd, 50);
      if (n) await handler(n, fd);
    }
  } finally {
    support.closeFd(fd);
  }
  return { exit: await started.exited, output: started.output() };
}

function mkdirArgs(n: Notification): { path: string; dirfd: number; mode: number } {
  if (n.nr === NR_MKDIRAT) {
    return { path: n.strings[1], dirfd: Number(BigInt.asIntN(32, n.args[0])), mode: Number(n.args[2]) };
  }
  return { path: n.strings[0], dirfd: -100, mode: Number(n.args[1]) };
}

/** Emulates every mkdir/mkdirat, continues everything else; records each result by path. */
function emulateMkdirs(emu: Emulator, results: Map<string, ActionResult>, owner = 1): Handler {
  return async (n, fd) => {
    if (n.nr !== NR_MKDIR && n.nr !== NR_MKDIRAT) {
      assert.equal(support.answer(fd, n.id, CONTINUE), 0);
      return;
    }
    const a = mkdirArgs(n);
    const r = await emu.mkdir({ notifyFd: fd, id: n.id, pid: n.pid, owner, ...a });
    assert.equal(r.answered, true, `the emulator answered mkdir ${a.path}: ${JSON.stringify(r, bigints)}`);
    results.set(a.path, r);
  };
}

function bigints(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}

function exists(p: string): boolean {
  try {
    fs.lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/** Children of this process that are zombies (helpers never reaped). */
function zombieChildren(): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = fs.readFileSync(`/proc/${entry}/status`, 'utf8');
      if (new RegExp(`^PPid:\\s+${process.pid}$`, 'm').test(status) && /^State:\s+Z/m.test(status)) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The nice value of process `pid` (field 19 of /proc/<pid>/stat). */
function niceOf(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

/** Helpers (seccomp-nshelper) that are children of this process. */
function helperChildren(): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = fs.readFileSync(`/proc/${entry}/status`, 'utf8');
      if (new RegExp(`^PPid:\\s+${process.pid}$`, 'm').test(status) && /^Name:\s+seccomp-nshelpe/m.test(status)) {
        out.push(Number(entry));
      }
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

// ---- mkdir ------------------------------------------------------------------------------------

test('emulated mkdir: lands inside the target root of its own mount namespace; ../../../x and symlinks stay inside; EEXIST is real', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  const emu = newEmulator(t);
  const results = new Map<string, ActionResult>();
  const marker = `emu-${process.pid}-${Date.now()}`;
  const script = [
    'cd /tmp',
    `mkdir ../../../${marker}-climb; echo climb=$?`,
    `mkdir ${marker}-rel; echo rel=$?`,
    `mkdir ${marker}-rel; echo again=$?`,
    `mkdir /escape/${marker}-sym; echo sym=$?`,
    `mkdir /up/${marker}-up; echo up=$?`,
    `mkdir /tmp/../../${marker}-abs; echo abs=$?`,
  ].join('; ');
  const run = await runTarget(t, dir, ['unshare', '-m', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', script], emulateMkdirs(emu, results));
  assert.equal(run.exit, 0, run.output);
  assert.match(run.output, /climb=0/);
  assert.match(run.output, /rel=0/);
  assert.match(run.output, /again=1/);
  assert.match(run.output, /File exists/);
  assert.equal(results.get(`${marker}-rel`)?.outcome, 'done');
  assert.equal(results.get(`${marker}-rel`)?.errno, EEXIST, 'the second mkdir got the real EEXIST');
  // Inside the root:
  assert.ok(exists(path.join(root, `${marker}-climb`)), '../../../x from /tmp lands at the root');
  assert.ok(exists(path.join(root, 'tmp', `${marker}-rel`)));
  assert.ok(exists(path.join(root, 'tmp', `${marker}-sym`)), 'an absolute symlink resolves inside the root');
  assert.ok(exists(path.join(root, `${marker}-up`)), 'a climbing symlink stops at the root');
  assert.ok(exists(path.join(root, `${marker}-abs`)));
  // Never on the host:
  for (const name of ['climb', 'sym', 'up', 'abs']) {
    assert.ok(!exists(`/${marker}-${name}`), `/${marker}-${name} must not exist on the host`);
    assert.ok(!exists(`/tmp/${marker}-${name}`), `/tmp/${marker}-${name} must not exist on the host`);
  }
  assert.ok(!exists(path.join(dir, `${marker}-climb`)));
});

test('emulated mkdirat: the dirfd is the target fd, seen in the target mount namespace (a tmpfs only it has)', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const mnt = path.join(dir, 'mnt');
  fs.mkdirSync(mnt);
  const emu = newEmulator(t);
  const results = new Map<string, ActionResult>();
  const py = `import os; fd = os.open(${JSON.stringify(mnt)}, os.O_RDONLY); os.mkdir("sub", dir_fd=fd); print("inside:", sorted(os.listdir(${JSON.stringify(mnt)})))`;
  const script = `mount -t tmpfs none ${mnt} && /usr/bin/python3 -c '${py}'`;
  const run = await runTarget(t, dir, ['unshare', '-m', '--propagation', 'private', '/bin/sh', '-c', script], emulateMkdirs(emu, results));
  assert.equal(run.exit, 0, run.output);
  assert.match(run.output, /inside: \['sub'\]/, 'the target sees the directory in its own tmpfs');
  assert.equal(results.get('sub')?.outcome, 'done');
  assert.deepEqual(fs.readdirSync(mnt), [], 'the host directory under the tmpfs is untouched');
});

test('emulated mkdir: a task that moves to another mount namespace keeps its helper (its key is read once) and still makes its directory in its own namespace', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const mnt = path.join(dir, 'mnt');
  fs.mkdirSync(mnt);
  const before = path.join(dir, 'before');
  const after = path.join(mnt, 'after');
  // One task throughout: python makes the first directory and execs unshare, which execs sh, which
  // mounts a tmpfs only its new namespace has (the mount, a child, is continued) and execs python.
  const moved = path.join(dir, 'moved.sh');
  fs.writeFileSync(moved, [
    '#!/bin/sh',
    'mount -n -t tmpfs moved "$1" || exit 3',  // -n: no utab, so no mkdir of /run/mount by the mount child
    `exec /usr/bin/python3 -c 'import os, sys; os.mkdir(sys.argv[2]); print("inside:", sorted(os.listdir(sys.argv[1])), os.getpid())' "$1" "$2"`,
    '',
  ].join('\n'), { mode: 0o755 });
  const first = `import os, sys; os.mkdir(sys.argv[1]); print("first:", os.getpid(), flush=True); os.execvp("unshare", ["unshare", "-m", "--propagation", "private", sys.argv[2], sys.argv[3], sys.argv[4]])`;
  const emu = newEmulator(t);
  const results = new Map<string, ActionResult>();
  const pids = new Map<string, number>();
  const emulate = emulateMkdirs(emu, results, 7);
  const run = await runTarget(t, dir, ['/usr/bin/python3', '-c', first, before, moved, mnt, after], async (n, fd) => {
    if (n.nr === NR_MKDIR || n.nr === NR_MKDIRAT) pids.set(mkdirArgs(n).path, n.pid);
    await emulate(n, fd);
  });
  assert.equal(run.exit, 0, run.output);
  assert.equal(pids.get(before), pids.get(after), `one task made both directories: ${JSON.stringify([...pids])}`);
  assert.match(run.output, /inside: \['after'\]/, 'the task sees its directory in the tmpfs of its new namespace');
  assert.equal(results.get(after)?.outcome, 'done');
  assert.equal(results.get(after)?.errno, 0);
  assert.ok(exists(before));
  assert.deepEqual(fs.readdirSync(mnt), [], 'the host directory under the tmpfs is untouched');
  // The key of (container, task) was kept from the first mkdir: the second went to the same helper.
  assert.equal(emu.stats().spawned, 1, `one helper served the task in both namespaces: ${JSON.stringify([...pids])}`);
});

test('emulated mkdir: a target running as uid 1000 gets EACCES in a root-owned 0755 dir; its own dirs get its fsuid, fsgid and umask', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  const emu = newEmulator(t);
  const results = new Map<string, ActionResult>();
  const script = 'umask 027; mkdir /rootonly/denied; echo denied=$?; mkdir /tmp/mine; echo mine=$?';
  const run = await runTarget(
    t,
    dir,
    ['unshare', '-m', '--propagation', 'private', 'chroot', '--userspec=1000:1000', root, '/bin/sh', '-c', script],
    emulateMkdirs(emu, results),
  );
  assert.equal(run.exit, 0, run.output);
  assert.equal(results.get('/rootonly/denied')?.errno, EACCES, JSON.stringify(results.get('/rootonly/denied'), bigints));
  assert.match(run.output, /denied=1/);
  assert.match(run.output, /Permission denied/);
  assert.ok(!exists(path.join(root, 'rootonly', 'denied')));
  const st = fs.statSync(path.join(root, 'tmp', 'mine'));
  assert.equal(st.uid, 1000);
  assert.equal(st.gid, 1000);
  assert.equal(st.mode & 0o7777, 0o750, 'mode 0777 minus the target umask 027');
});

// The helper keeps the /proc directory of a task it served (native/tools/nshelper_target.cpp). A
// pid taken again by another task must be that other task: its root and credentials, never the
// ones seen before under the same number. ns_last_pid hands the number on; the host may take it
// first, so a few rounds are allowed.
test('emulated mkdir: a pid used again by another task (another root, uid 1000) is served as that task, not as the one the helper kept', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  const emu = newEmulator(t);
  const script = 'mkdir "$1/first"; mkdir "$1/go"; (exec chroot --userspec=1000:1000 "$2" /bin/mkdir /rootonly/second); echo second=$?';
  let reused = false;
  for (let round = 0; round < 8 && !reused; round++) {
    for (const name of ['first', 'go']) fs.rmSync(path.join(dir, name), { recursive: true, force: true });
    const pids = new Map<string, number>();
    const results = new Map<string, ActionResult>();
    const emulate = emulateMkdirs(emu, results);
    const run = await runTarget(t, dir, ['/bin/sh', '-c', script, 'sh', dir, root], async (n, fd) => {
      if (n.nr === NR_MKDIR) pids.set(n.strings[0], n.pid);
      // The first task has exited (the shell waited for it): its number is the next one given out.
      if (n.nr === NR_MKDIR && n.strings[0] === path.join(dir, 'go')) {
        fs.writeFileSync('/proc/sys/kernel/ns_last_pid', String((pids.get(path.join(dir, 'first')) ?? 2) - 1));
      }
      await emulate(n, fd);
    });
    assert.equal(run.exit, 0, run.output);
    assert.equal(results.get(path.join(dir, 'first'))?.errno, 0, 'the first task, root on the host, made its directory');
    const second = results.get('/rootonly/second');
    assert.ok(second, `the second task's mkdir was emulated: ${run.output}`);
    assert.equal(second.errno, EACCES, `served as uid 1000 in its own root: ${JSON.stringify(second, bigints)}`);
    assert.match(run.output, /second=1/);
    assert.ok(!exists(path.join(root, 'rootonly', 'second')));
    assert.ok(!exists('/rootonly'), 'nothing made on the host as the kept task would have');
    reused = pids.get('/rootonly/second') === pids.get(path.join(dir, 'first'));
  }
  assert.ok(reused, 'in 8 rounds the host never gave the second task the first one\'s pid');
  assert.equal(emu.stats().spawned, 1, 'one helper served both tasks (one mount namespace): its kept entry was the one tested');
});

test('emulated mkdir: /proc magic links are refused (ELOOP) and a cwd outside the root is refused (EPERM)', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  const emu = newEmulator(t);
  const results = new Map<string, ActionResult>();
  const marker = `emu-magic-${process.pid}-${Date.now()}`;
  // The container mounts a proc of the host pid namespace: /proc/self/root, looked up by the
  // helper, is the helper's (the host's) root; /proc/1/root is the host init's.
  const script = `mount -t proc proc /proc && mkdir /proc/self/root/tmp/${marker}; mkdir /proc/1/root/tmp/${marker}; echo magic=$?`;
  const run = await runTarget(t, dir, ['unshare', '-m', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', script], emulateMkdirs(emu, results));
  assert.equal(run.exit, 0, run.output);
  assert.equal(results.get(`/proc/self/root/tmp/${marker}`)?.errno, ELOOP);
  // ELOOP, or EACCES when the ptrace check on the host's pid 1 comes first (as on this host).
  assert.ok([ELOOP, EACCES].includes(results.get(`/proc/1/root/tmp/${marker}`)?.errno ?? 0));
  assert.ok(!exists(`/tmp/${marker}`), 'nothing on the host through /proc magic links');

  // chroot(2) without chdir: the cwd stays outside the new root; relative paths are refused.
  const outside = new Map<string, ActionResult>();
  const py = `import os; os.chroot(${JSON.stringify(root)})\ntry:\n  os.mkdir("${marker}-rel")\nexcept OSError as e:\n  print("errno", e.errno)`;
  const run2 = await runTarget(t, dir, ['/usr/bin/python3', '-c', py], emulateMkdirs(emu, outside));
  assert.equal(run2.exit, 0, run2.output);
  assert.equal(outside.get(`${marker}-rel`)?.outcome, 'refused');
  assert.equal(outside.get(`${marker}-rel`)?.stage, 'outside-root');
  assert.match(run2.output, /errno 1\b/);
  assert.ok(!exists(path.join(dir, `${marker}-rel`)) && !exists(path.join(root, `${marker}-rel`)));
});

test('emulated mkdir: a stale notification id is refused without acting (answered already, or the target killed)', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  const emu = newEmulator(t);
  const outcomes: ActionResult[] = [];
  const run = await runTarget(t, dir, ['unshare', '-m', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', 'mkdir /tmp/stale; echo stale=$?'], async (n, fd) => {
    if (n.nr === NR_MOUNT) return void support.answer(fd, n.id, CONTINUE);
    assert.equal(support.answer(fd, n.id, EPERM), 0);
    outcomes.push(await emu.mkdir({ notifyFd: fd, id: n.id, pid: n.pid, ...mkdirArgs(n) }));
  });
  assert.equal(run.exit, 0, run.output);
  assert.match(run.output, /stale=1/);
  assert.equal(outcomes.length, 1);
  assert.equal(outcomes[0].outcome, 'stale');
  assert.equal(outcomes[0].answered, false);
  assert.ok(!exists(path.join(root, 'tmp', 'stale')), 'nothing was created for a stale id');

  let killed: ActionResult | undefined;
  const run2 = await runTarget(t, dir, ['/bin/sh', '-c', `mkdir ${dir}/killed`], async (n, fd) => {
    process.kill(n.pid, 'SIGKILL');
    await waitUntil(() => {
      try {
        return /State:\s+[ZX]/.test(fs.readFileSync(`/proc/${n.pid}/status`, 'utf8'));
      } catch {
        return true; // reaped between two looks
      }
    }, 10_000, 'the target to die');
    killed = await emu.mkdir({ notifyFd: fd, id: n.id, pid: n.pid, ...mkdirArgs(n) });
  });
  assert.notEqual(run2.exit, 0);
  assert.equal(killed?.outcome, 'stale', JSON.stringify(killed, bigints));
  assert.ok(!exists(path.join(dir, 'killed')));
});

// ---- mount ----------------------------------------------------------------------------------

function mountHandler(
  emu: Emulator, results: ActionResult[],
  extra: { requireCapSysAdmin?: boolean; flags?: bigint; continueUnder?: string } = {},
): Handler {
  return async (n, fd) => {
    const [source, target, fstype] = n.strings;
    // unshare's own propagation change (no fstype) runs as it would without the agent, and so do
    // the mounts a test target makes for itself first (its own /proc, as a runtime would).
    const setup = extra.continueUnder !== undefined && (target === extra.continueUnder || target.startsWith(`${extra.continueUnder}/`));
    if (n.nr !== NR_MOUNT || fstype === '' || setup) return void support.answer(fd, n.id, CONTINUE);
    results.push(
      await emu.mount({
        notifyFd: fd,
        id: n.id,
        pid: n.pid,
        source,
        target,
        fstype,
        flags: extra.flags ?? n.args[3],
        data: n.strings[4],
        requireCapSysAdmin: extra.requireCapSysAdmin,
      }),
    );
  };
}

test('emulated mount: proc in the target mount and pid namespaces, inside its root, with its flags and the masks of its own /proc', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  const emu = newEmulator(t);
  const results: ActionResult[] = [];
  // The target mounts its own /proc and makes /proc/sys read-only, as runc's readonlyPaths do;
  // then asks for a new proc on /mnt, which the emulator mounts.
  const script = [
    'mount -t proc proc /proc && mount -o bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys || echo SETUP FAILED',
    'mount -t proc -o nosuid,nodev proc /mnt; echo rc=$?',
    'echo comm=$(cat /mnt/1/comm); echo self=$(readlink /mnt/self); grep " /mnt" /proc/mounts',
    '(: >> /mnt/sys/kernel/core_pattern) 2>/dev/null && echo CORE_PATTERN_WRITABLE || echo core_pattern read-only',
  ].join('; ');
  const run = await runTarget(
    t,
    dir,
    ['unshare', '-m', '-p', '-f', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', script],
    mountHandler(emu, results, { requireCapSysAdmin: true, continueUnder: '/proc' }),
  );
  assert.equal(run.exit, 0, run.output);
  assert.doesNotMatch(run.output, /SETUP FAILED/);
  assert.equal(results.length, 1, run.output);
  assert.equal(results[0].outcome, 'done', JSON.stringify(results[0], bigints));
  assert.equal(results[0].errno, 0);
  assert.match(run.output, /rc=0/);
  assert.match(run.output, /comm=sh\b/, 'pid 1 of the mounted proc is the container init: its own pid namespace');
  const self = /self=(\d+)/.exec(run.output);
  assert.ok(self && Number(self[1]) < 10, `pids in the mounted proc are the namespace's: ${run.output}`);
  assert.match(run.output, /proc \/mnt proc rw,nosuid,nodev,noexec/, 'the caller flags were honoured, noexec added');
  assert.match(run.output, /proc \/mnt\/sys proc ro,/, 'the read-only /proc/sys of the target is read-only in the new instance');
  assert.match(run.output, /core_pattern read-only/);
  assert.deepEqual(fs.readdirSync(path.join(root, 'mnt')), [], 'the host sees no mount on the rootfs');
  assert.ok(!fs.readFileSync('/proc/self/mountinfo', 'utf8').includes(path.join(root, 'mnt')));
});

test('emulated mount: proc for a target with no /proc of its own is refused (EPERM, stage confine): there are no masks to copy', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  const emu = newEmulator(t);
  const results: ActionResult[] = [];
  const run = await runTarget(
    t,
    dir,
    ['unshare', '-m', '-p', '-f', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', 'mount -t proc proc /mnt; echo rc=$?; ls /mnt | wc -l'],
    mountHandler(emu, results),
  );
  assert.match(run.output, /rc=[1-9]/, run.output);
  assert.equal(results.length, 1, run.output);
  assert.equal(results[0].outcome, 'refused', JSON.stringify(results[0], bigints));
  assert.equal(results[0].errno, EPERM);
  assert.equal(results[0].stage, 'confine');
  assert.match(run.output, /^0$/m, 'nothing was mounted');
});

test('emulated mount: refused with EPERM without CAP_SYS_ADMIN when asked, and for bind mounts', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  const emu = newEmulator(t);
  const results: ActionResult[] = [];
  const run = await runTarget(
    t,
    dir,
    ['unshare', '-m', '--propagation', 'private', 'chroot', '--userspec=1000:1000', root, '/bin/sh', '-c', 'mount -t proc proc /proc; echo rc=$?'],
    mountHandler(emu, results, { requireCapSysAdmin: true }),
  );
  assert.match(run.output, /rc=\d/);
  assert.ok(results.length >= 1);
  for (const r of results) {
    assert.equal(r.outcome, 'refused');
    assert.equal(r.errno, EPERM);
    assert.equal(r.stage, 'permission');
  }
  assert.deepEqual(fs.readdirSync(path.join(root, 'proc')), []);

  const bind: ActionResult[] = [];
  const run2 = await runTarget(
    t,
    dir,
    ['unshare', '-m', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', 'mount -t proc proc /proc; echo rc=$?; ls /proc | wc -l'],
    mountHandler(emu, bind, { flags: MS_BIND }),
  );
  assert.match(run2.output, /rc=\d/);
  assert.equal(bind[0]?.errno, EPERM);
  assert.equal(bind[0]?.outcome, 'refused');
  assert.match(run2.output, /^0$/m, 'nothing was mounted');
});

// ---- kill -----------------------------------------------------------------------------------

test('kill-container: SIGKILL through a pidfd to the init of the target pid namespace kills the container and nothing else', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const emu = newEmulator(t);
  const bystander = start(t, '/bin/sleep', ['300']);
  const tag = `${3000 + (process.pid % 1000)}.5`;
  let result: ActionResult | undefined;
  const run = await runTarget(t, dir, ['unshare', '-p', '-f', '/bin/sh', '-c', `sleep ${tag} & mkdir ${dir}/k; echo survived`], async (n, fd) => {
    result = await emu.kill({ notifyFd: fd, id: n.id, pid: n.pid, answerErrno: EPERM });
  });
  assert.equal(result?.outcome, 'done', JSON.stringify(result, bigints));
  // unshare reports its child's death by signal ("sigprocmask unblock failed" for SIGKILL here).
  assert.notEqual(run.exit, 0, run.output);
  assert.doesNotMatch(run.output, /survived/, 'the container init died before it could go on');
  await waitUntil(() => {
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        if (fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(tag)) return false;
      } catch {
        // gone
      }
    }
    return true;
  }, 10_000, 'the container sleep to be gone');
  assert.equal(bystander.child.exitCode, null, 'a process outside the container is untouched');
  assert.equal(bystander.child.signalCode, null);
});

test('kill-container: refused in the host pid namespace without the init pid; a stale id kills nothing', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const emu = newEmulator(t);
  const results: ActionResult[] = [];
  const run = await runTarget(t, dir, ['/bin/sh', '-c', `mkdir ${dir}/a; echo after-a=$?; mkdir ${dir}/b; echo after-b=$?`], async (n, fd) => {
    if (n.strings[0].endsWith('/a')) {
      results.push(await emu.kill({ notifyFd: fd, id: n.id, pid: n.pid, answerErrno: EPERM }));
    } else {
      support.answer(fd, n.id, EPERM);
      results.push(await emu.kill({ notifyFd: fd, id: n.id, pid: n.pid, initPid: n.pid }));
    }
  });
  assert.equal(run.exit, 0, run.output);
  assert.match(run.output, /after-a=1/);
  assert.match(run.output, /after-b=1/);
  assert.equal(results[0].outcome, 'refused');
  assert.equal(results[0].errno, EPERM);
  assert.equal(results[0].answered, true);
  assert.equal(results[1].outcome, 'stale');
  assert.equal(results[1].answered, false);
});

// ---- freeze ---------------------------------------------------------------------------------

interface CgroupCase {
  name: string;
  dir: string;
  file: string;
  frozen: (dir: string) => boolean;
}

const CGROUP_CASES: CgroupCase[] = [
  {
    name: 'v1 freezer',
    dir: '/sys/fs/cgroup/freezer',
    file: 'freezer.state',
    frozen: (d) => fs.readFileSync(path.join(d, 'freezer.state'), 'utf8').trim() === 'FROZEN',
  },
  {
    name: 'v2 (unified)',
    dir: fs.existsSync('/sys/fs/cgroup/cgroup.controllers') ? '/sys/fs/cgroup' : '/sys/fs/cgroup/unified',
    file: 'cgroup.freeze',
    frozen: (d) => /^frozen 1$/m.test(fs.readFileSync(path.join(d, 'cgroup.events'), 'utf8')),
  },
];

async function removeCgroup(cg: string, thawFile: string, thawValue: string): Promise<void> {
  if (!exists(cg)) return;
  try {
    fs.writeFileSync(path.join(cg, thawFile), thawValue);
  } catch {
    // already gone
  }
  const deadline = Date.now() + 5000;
  for (;;) {
    const pids = fs.readFileSync(path.join(cg, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
    for (const pid of pids) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone
      }
    }
    try {
      fs.rmdirSync(cg);
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(20);
    }
  }
}

for (const c of CGROUP_CASES) {
  test(`freeze-container: ${c.name} cgroup frozen (the target stops making progress), then thawed`, async (t) => {
    const dir = scratchDir(t, 'emulation-');
    const emu = newEmulator(t);
    const cg = path.join(c.dir, `seccomp-emu-test-${process.pid}-${Date.now()}`);
    fs.mkdirSync(cg);
    t.after(() => removeCgroup(cg, c.file, c.file === 'freezer.state' ? 'THAWED' : '0'));
    const counter = path.join(dir, 'counter');
    const script = `i=0; while :; do i=$((i+1)); echo $i > ${counter}; [ $i = 10 ] && mkdir ${dir}/freeze-me; sleep 0.02; done`;
    const killAll = () => {
      for (const pid of fs.readFileSync(path.join(cg, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          // exited meanwhile
        }
      }
    };
    let progress: Promise<void> | undefined;
    await runTarget(
      t,
      dir,
      ['/bin/sh', '-c', script],
      async (n, fd) => {
        // Later calls (v1: the frozen call restarts on thaw and is notified again) get EPERM.
        if (progress) return void support.answer(fd, n.id, EPERM);
        const result = await emu.freeze({ notifyFd: fd, id: n.id, pid: n.pid, answerErrno: EPERM });
        assert.equal(result.outcome, 'done', JSON.stringify(result, bigints));
        // v2 may let the answer in first; v1 interrupts the notified call at once.
        assert.ok(result.answered || result.sendErrno === ENOENT, JSON.stringify(result, bigints));
        assert.equal(result.detail, path.join(cg, c.file));
        await waitUntil(() => c.frozen(cg), 10_000, `${c.name} to report frozen`);
        const before = fs.readFileSync(counter, 'utf8');
        await sleep(300);
        assert.equal(fs.readFileSync(counter, 'utf8'), before, 'no progress while frozen');
        const thawed = await emu.thaw(n.pid);
        assert.equal(thawed.outcome, 'done', JSON.stringify(thawed, bigints));
        // Watched while this loop keeps answering the target's calls; then the target is stopped.
        progress = waitUntil(() => Number(fs.readFileSync(counter, 'utf8')) > Number(before) + 2, 10_000, 'the target to make progress again').finally(killAll);
      },
      `echo $$ > ${path.join(cg, 'cgroup.procs')} && `,
    );
    assert.ok(progress, 'the freeze notification was seen');
    await progress;
  });
}

test('freeze-container: refuses the root cgroup (which holds the data plane too)', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const emu = newEmulator(t);
  let result: ActionResult | undefined;
  const run = await runTarget(t, dir, ['/bin/sh', '-c', `mkdir ${dir}/f; echo rc=$?`], async (n, fd) => {
    result = await emu.freeze({ notifyFd: fd, id: n.id, pid: n.pid, answerErrno: EPERM });
  });
  assert.equal(run.exit, 0, run.output);
  assert.match(run.output, /rc=1/);
  assert.equal(result?.outcome, 'refused', JSON.stringify(result, bigints));
  assert.equal(result?.errno, EPERM);
  assert.equal(result?.answered, true);
});

// ---- helpers: kept, reaped, respawned; spawn per call ------------------------------------------

test('nshelper pool: one kept helper per mount namespace, respawned when it dies, gone on forget and close, no zombie or fd leak', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  const fdsBefore = openFdCount();
  const emu = new addon.Emulator();
  let closed = false;
  t.after(() => {
    if (!closed) emu.close();
  });
  const results = new Map<string, ActionResult>();
  let killedHelper = false;
  const handler = emulateMkdirs(emu, results, 7);
  const run = await runTarget(
    t,
    dir,
    ['unshare', '-m', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', 'mkdir /a; mkdir /b; mkdir /c; echo done'],
    async (n, fd) => {
      if (n.nr === NR_MKDIR && n.strings[0] === '/c') {
        assert.equal(emu.stats().spawned, 1, 'a and b shared one helper');
        assert.equal(emu.stats().direct, 1, 'b went straight to the helper a left idle');
        const helpers = helperChildren();
        assert.equal(helpers.length, 1);
        assert.equal(niceOf(helpers[0]), 10, 'a helper runs at nice 10: a busy CPU serves the lanes and other containers first');
        process.kill(helpers[0], 'SIGKILL');
        await waitUntil(() => emu.stats().died === 1, 10_000, 'the pool to notice the death');
        killedHelper = true;
      }
      await handler(n, fd);
    },
  );
  assert.equal(run.exit, 0, run.output);
  assert.ok(killedHelper);
  for (const name of ['a', 'b', 'c']) assert.equal(results.get(`/${name}`)?.errno, 0, name);
  assert.equal(emu.stats().spawned, 2, 'respawned after the death');
  emu.forget(7);
  await waitUntil(() => emu.stats().helpers === 0 && helperChildren().length === 0, 10_000, 'the forgotten helper to exit');
  emu.close();
  closed = true;
  await sleep(50);
  assert.deepEqual(zombieChildren(), []);
  // The target's stdio pipes close shortly after its exit: wait for them, then compare.
  await waitUntil(() => openFdCount() === fdsBefore, 10_000, `the fd count to return to ${fdsBefore} (now ${openFdCount()})`);
});

test('nshelper pool: a helper that stops answering is killed at the request timeout; the call gets failureErrno; the next one a new helper', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  const emu = newEmulator(t, { requestTimeoutMs: 300, failureErrno: EACCES });
  const results = new Map<string, ActionResult>();
  const tookMs = new Map<string, number>();
  const run = await runTarget(
    t,
    dir,
    ['unshare', '-m', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', 'mkdir /a; mkdir /b; echo b=$?; mkdir /c; echo c=$?'],
    async (n, fd) => {
      if (n.nr !== NR_MKDIR) return void support.answer(fd, n.id, CONTINUE);
      // A stopped helper stands for one stuck on a hung FUSE or NFS mount of the container.
      if (n.strings[0] === '/b') for (const pid of helperChildren()) process.kill(pid, 'SIGSTOP');
      const started = Date.now();
      results.set(n.strings[0], await emu.mkdir({ notifyFd: fd, id: n.id, pid: n.pid, ...mkdirArgs(n) }));
      tookMs.set(n.strings[0], Date.now() - started);
    },
  );
  assert.equal(run.exit, 0, run.output);
  const b = results.get('/b');
  assert.equal(b?.outcome, 'failed', JSON.stringify(b, bigints));
  assert.equal(b?.stage, 'helper-timeout');
  assert.equal(b?.answered, true);
  assert.equal(b?.errno, EACCES, 'answered with failureErrno');
  assert.match(run.output, /b=1/);
  assert.equal(results.get('/c')?.errno, 0);
  assert.match(run.output, /c=0/);
  assert.equal(emu.stats().timedOut, 1);
  assert.equal(emu.stats().spawned, 2);
  // b went straight to the stopped helper (nothing woke the pool thread for it): its timer
  // still fires at the request timeout, not at the helper's 60 s idle timeout.
  assert.equal(emu.stats().direct, 1);
  assert.ok(tookMs.get('/b')! < 5_000, `b failed after ${tookMs.get('/b')} ms`);
  assert.ok(!exists(path.join(root, 'b')), 'the stopped helper never acted');
  await waitUntil(() => zombieChildren().length === 0, 10_000, 'the killed helper to be reaped');
});

test('nshelper pool: a helper that polls rings for the responses nobody waits for once per four, and at once for one a caller awaits', { timeout: 60_000 }, async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  // It polls 1 s after each answer: it never goes idle inside the burst below.
  const emu = newEmulator(t, { busyPollUs: 1_000_000 });
  const names = Array.from({ length: 12 }, (_, i) => `/d${i}`);
  const calls: Promise<ActionResult>[] = [];
  let lastMs = -1;
  const run = await runTarget(
    t,
    dir,
    ['unshare', '-m', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', `mkdir ${names.join('; mkdir ')}; mkdir /last; echo last=$?`],
    async (n, fd) => {
      if (n.nr !== NR_MKDIR) return void support.answer(fd, n.id, CONTINUE);
      const args = { notifyFd: fd, id: n.id, pid: n.pid, ...mkdirArgs(n), respond: true };
      if (n.strings[0] !== '/last') return void calls.push(emu.mkdir({ ...args, replyMayWait: true }));
      const started = Date.now();
      await emu.mkdir(args);
      lastMs = Date.now() - started;
    },
  );
  assert.equal(run.exit, 0, run.output);
  assert.match(run.output, /last=0/);
  const results = await Promise.all(calls);
  assert.deepEqual(results.map((r) => [r.errno, r.answered]), names.map(() => [0, true]));
  for (const name of names) assert.ok(exists(path.join(root, name)), name);
  // Twelve responses nobody waited for: three doorbells; the awaited one rang at once (its caller
  // would otherwise have waited for the helper to go idle, a second later).
  assert.equal(emu.stats().doorbells, 12 / 4 + 1, JSON.stringify(emu.stats()));
  assert.ok(lastMs >= 0 && lastMs < 900, `the awaited call took ${lastMs} ms`);
  assert.equal(emu.stats().spawned, 1);
});

test('nshelper pool: a response posted and not rung for is taken before a request is called late: one that hangs after it strands none', { timeout: 60_000 }, async (t) => {
  requireStrace();
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  // It polls 1 s after each answer (a's response is not rung for before b comes in); b hangs past
  // the request timeout.
  const emu = newEmulator(t, { busyPollUs: 1_000_000, requestTimeoutMs: 1_500, failureErrno: EACCES });
  let a: Promise<ActionResult> | undefined;
  let aAt = 0;
  let bAt = 0;
  let b: ActionResult | undefined;
  let trace: Started | undefined;
  const run = await runTarget(
    t,
    dir,
    ['unshare', '-m', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', 'mkdir /w; mkdir /a; mkdir /b; echo b=$?'],
    async (n, fd) => {
      if (n.nr !== NR_MKDIR) return void support.answer(fd, n.id, CONTINUE);
      const args = { notifyFd: fd, id: n.id, pid: n.pid, ...mkdirArgs(n), respond: true };
      if (n.strings[0] === '/w') {
        await emu.mkdir(args);  // the helper started
        // Holds the helper's second mkdirat from here (b's: a's is the first) far past the timeout.
        trace = start(t, 'strace', ['-p', String(helperChildren()[0]), '-e', 'trace=mkdirat', '-e', 'inject=mkdirat:delay_enter=100000000:when=2']);
        t.after(() => stop(trace!.child));
        await trace.waitFor(/attached/i, 10_000);
      } else if (n.strings[0] === '/a') {
        // The helper answers the target, which goes on to b; the response waits in the ring.
        a = emu.mkdir({ ...args, replyMayWait: true }).then((r) => ((aAt = Date.now()), r));
      } else {
        b = await emu.mkdir(args);
        bAt = Date.now();
      }
    },
  );
  // The killed helper dies once strace lets it go (a traced stop outlasts SIGKILL here).
  trace!.child.kill('SIGKILL');
  await trace!.exited;
  assert.equal(run.exit, 0, run.output);
  assert.match(run.output, /b=1/, 'b got the failure errno at the timeout');
  const ra = await a!;
  assert.deepEqual([ra.outcome, ra.errno, ra.answered], ['done', 0, true], `a is what the helper did, not a timeout: ${JSON.stringify(ra, bigints)}`);
  assert.ok(aAt > 0 && aAt <= bAt, 'a was taken before b was called late');
  assert.equal(b?.stage, 'helper-timeout', JSON.stringify(b, bigints));
  assert.equal(b?.errno, EACCES);
  assert.ok(exists(path.join(root, 'a')) && !exists(path.join(root, 'b')), 'b was held before its mkdirat');
  assert.equal(emu.stats().timedOut, 1);
});

/** Responses `helper` has posted in its reply ring (its head index, read through the mapping it keeps). */
function postedResponses(helper: number): number {
  const line = fs.readFileSync(`/proc/${helper}/maps`, 'utf8').split('\n').find((l) => l.includes('seccomp-nshelper-replies'));
  if (line === undefined) return -1;
  const fd = fs.openSync(`/proc/${helper}/map_files/${line.split(' ')[0]}`, 'r');
  try {
    const head = Buffer.alloc(4);
    fs.readSync(fd, head, 0, 4, 0);
    return head.readUInt32LE(0);
  } finally {
    fs.closeSync(fd);
  }
}

test('nshelper pool: a response a helper posted and had not rung for when the pool stops counts as what it did, not as stopped', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  const emu = newEmulator(t, { busyPollUs: 1_000_000 });
  let a: Promise<ActionResult> | undefined;
  const run = await runTarget(
    t,
    dir,
    ['unshare', '-m', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', 'mkdir /a; echo a=$?'],
    async (n, fd) => {
      if (n.nr !== NR_MKDIR) return void support.answer(fd, n.id, CONTINUE);
      a = emu.mkdir({ notifyFd: fd, id: n.id, pid: n.pid, ...mkdirArgs(n), respond: true, replyMayWait: true });
    },
  );
  assert.match(run.output, /a=0/);
  const [helper] = helperChildren();
  await waitUntil(() => postedResponses(helper) === 1, 10_000, 'the helper to post its response');
  // Stopped in its poll, it never rings for it: the pool learns of it only from the ring.
  process.kill(helper, 'SIGSTOP');
  assert.equal(emu.stats().doorbells, 0, 'posted, not rung for');
  emu.close();
  const r = await a!;
  assert.deepEqual([r.outcome, r.errno, r.answered], ['done', 0, true], JSON.stringify(r, bigints));
  assert.ok(exists(path.join(root, 'a')));
});

test('nshelper pool: spawn-per-call mode gives the same results, one helper per request', async (t) => {
  const dir = scratchDir(t, 'emulation-');
  const root = makeRootfs(dir);
  const emu = newEmulator(t, { spawnPerCall: true });
  const results = new Map<string, ActionResult>();
  const run = await runTarget(
    t,
    dir,
    ['unshare', '-m', '--propagation', 'private', 'chroot', root, '/bin/sh', '-c', 'cd /tmp; mkdir ../../x; mkdir ../../x; echo done'],
    emulateMkdirs(emu, results),
  );
  assert.equal(run.exit, 0, run.output);
  assert.equal(results.get('../../x')?.errno, EEXIST);
  assert.ok(exists(path.join(root, 'x')));
  assert.equal(emu.stats().spawned, 2);
  await waitUntil(() => emu.stats().helpers === 0, 10_000, 'the one-shot helpers to be reaped');
  assert.deepEqual(zombieChildren(), []);
});

// ---- benchMkdir: the bench's loop, in both helper modes (bench/emulated-mkdir.ts judges their speed) ----

async function benchOnce(t: TestContext, spawnPerCall: boolean, seconds: number): Promise<{ bench: BenchResult; workload: Record<string, number> }> {
  const dir = scratchDir(t, 'emulation-bench-');
  const emu = newEmulator(t, { spawnPerCall });
  const socket = path.join(dir, 'agent.sock');
  const received = support.receiveNotifyFd(socket, 10_000);
  await waitUntil(() => fs.existsSync(socket), 10_000, 'the emulator to listen');
  const workload = start(t, SECCOMP_RUN, [
    '--socket',
    socket,
    '--syscalls',
    'mkdir',
    '--',
    BENCH_WORKLOAD,
    '--threads',
    '1',
    '--seconds',
    String(seconds),
    '--warmup-ms',
    '200',
    '--syscall',
    'mkdir',
    '--path-prefix',
    path.join(dir, 'm'),
  ]);
  const { fds } = await received;
  let bench: BenchResult;
  try {
    bench = await emu.benchMkdir({ notifyFd: fds[0], count: 1e9, timeoutMs: 1000 });
  } finally {
    support.closeFd(fds[0]);
  }
  assert.equal(await workload.exited, 0, workload.output());
  const line = workload.output().split('\n').find((l) => l.startsWith('{'));
  return { bench, workload: JSON.parse(line ?? '{}') as Record<string, number> };
}

test('emulator benchMkdir: with a kept helper and with one spawned per call, every mkdir of a workload is emulated and answered', async (t) => {
  for (const [name, spawnPerCall] of [['kept helper', false], ['spawn per call', true]] as const) {
    const r = await benchOnce(t, spawnPerCall, 1);
    assert.equal(r.bench.unanswered, 0, name);
    assert.ok(r.bench.n > 0, `${name}: no mkdir emulated`);
    assert.equal(r.workload.errors, 0, name);
    assert.ok(r.bench.n >= r.workload.calls, `${name}: ${r.bench.n} emulated for ${r.workload.calls} measured calls`);
  }
});
