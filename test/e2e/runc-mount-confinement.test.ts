// Emulated mounts on real runc containers (runc's default capabilities: no CAP_SYS_ADMIN), tried
// as an attacker in the container would: a mount the agent makes must give the container nothing
// its own mounts do not already give it.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { test, type TestContext } from 'node:test';
import { startControlPlane } from '../support/controlplane';
import { startDataPlane } from '../support/dataplane';
import { runcExec, sleepingContainer, type Bundle } from '../support/runc';
import { scratchDir } from '../support/scratch';

async function container(t: TestContext, metadata: string) {
  const dir = scratchDir(t);
  const dp = await startDataPlane(t, [], dir);
  await startControlPlane(t, dp);
  return sleepingContainer(t, dir, dp.listenerSocket, metadata, ['mount']);
}

async function sh(c: { bundle: Bundle; id: string }, script: string) {
  return runcExec(c.bundle, c.id, ['/bin/sh', '-c', script]);
}

/**
 * What a path gives the container: how many bytes it reads, how many entries it lists, and
 * whether it opens for writing (`: >>` opens O_WRONLY|O_APPEND and writes nothing; busybox's
 * `[ -w ]` is always true for root, whatever the mount says).
 */
const PROBE = (p: string) =>
  `if [ -e ${p} ]; then echo "${p}" bytes=$(/bin/busybox cat ${p} 2>/dev/null | /bin/busybox wc -c) entries=$(/bin/busybox ls ${p} 2>/dev/null | /bin/busybox wc -l) writable=$( (: >> ${p}) 2>/dev/null && echo yes || echo no); else echo "${p}" absent; fi`;

/** The per-mount options of each mount below `under` in the container's mountinfo, by relative path. */
function submountOptions(mountinfo: string, under: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of mountinfo.split('\n')) {
    const f = line.split(' ');
    if (f.length > 6 && f[4].startsWith(`${under}/`)) {
      out.set(f[4].slice(under.length), f[5].split(',').filter((o) => o === 'ro' || o === 'rw').join(','));
    }
  }
  return out;
}

function probeLines(output: string, prefix: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of output.split('\n')) {
    const m = /^(\S+) (.*)$/.exec(line);
    if (m && m[1].startsWith(prefix)) out.set(m[1].slice(prefix.length), m[2]);
  }
  return out;
}

test('seccomp-controlplane MOUNT_PROC on runc: a new proc is nosuid,nodev,noexec and has every masked and read-only path of the container\'s own /proc', async (t) => {
  const c = await container(t, 'MOUNT_PROC=true');
  const config = JSON.parse(fs.readFileSync(c.bundle.configPath, 'utf8'));
  const paths: string[] = [...config.linux.maskedPaths, ...config.linux.readonlyPaths].filter((p: string) => p.startsWith('/proc/'));
  assert.ok(paths.includes('/proc/sys') && paths.includes('/proc/keys'), 'runc spec masks /proc/keys and makes /proc/sys read-only');
  const probes = paths.flatMap((p) => [PROBE(p), PROBE(`/tmp/q${p.slice('/proc'.length)}`)]);
  const script = [
    'mkdir -p /tmp/q && mount -t proc proc /tmp/q && echo mounted',
    '(: >> /tmp/q/sys/kernel/core_pattern) 2>/dev/null && echo CORE_PATTERN_WRITABLE || echo core_pattern read-only',
    '/bin/busybox cat /proc/self/mountinfo',
    // Writes back the value it read: if the hole were open, nothing on the host changes.
    'v=$(/bin/busybox cat /tmp/q/sys/kernel/printk_ratelimit); (echo $v > /tmp/q/sys/kernel/printk_ratelimit) 2>/dev/null && echo SYSCTL_WRITTEN || echo sysctl refused',
    ...probes,
  ].join('\n');
  const r = await sh(c, script);
  assert.match(r.stdout, /^mounted$/m, r.stderr);
  const info = /^.* \/tmp\/q (\S+) .*$/m.exec(r.stdout);
  assert.ok(info, r.stdout);
  for (const flag of ['nosuid', 'nodev', 'noexec']) assert.ok(info[1].split(',').includes(flag), `${flag} in ${info[0]}`);
  assert.match(r.stdout, /core_pattern read-only/);
  assert.match(r.stdout, /sysctl refused/);
  const own = probeLines(r.stdout, '/proc');
  const emulated = probeLines(r.stdout, '/tmp/q');
  for (const p of paths) {
    const rel = p.slice('/proc'.length);
    assert.equal(emulated.get(rel), own.get(rel), `${p}: the new instance gives what the container's own /proc gives\n${r.stdout}`);
  }
  assert.match(own.get('/keys') ?? '', /bytes=0 /, 'the container\'s own /proc/keys is masked');
  assert.match(own.get('/sys') ?? '', /writable=no/);
  const ownMounts = submountOptions(r.stdout, '/proc');
  assert.ok(ownMounts.size >= 4, `runc stacked masks on /proc: ${[...ownMounts.keys()]}`);
  assert.deepEqual(submountOptions(r.stdout, '/tmp/q'), ownMounts, 'the same mounts, read-only where the container\'s are');
});

test('seccomp-controlplane MOUNT_SYSFS on runc: a new sysfs is read-only, nosuid,nodev,noexec, with /sys/firmware masked as in the container', async (t) => {
  const c = await container(t, 'MOUNT_SYSFS=true');
  const r = await sh(c, [
    'mkdir -p /tmp/s && mount -t sysfs sysfs /tmp/s && echo mounted',
    '/bin/busybox grep " /tmp/s " /proc/self/mountinfo',
    '(: >> /tmp/s/kernel/uevent_helper) 2>/dev/null && echo UEVENT_WRITABLE || echo uevent read-only',
    PROBE('/sys/firmware'),
    PROBE('/tmp/s/firmware'),
  ].join('\n'));
  assert.match(r.stdout, /^mounted$/m, r.stderr);
  const info = /^.* \/tmp\/s (\S+) .*$/m.exec(r.stdout);
  assert.ok(info, r.stdout);
  for (const flag of ['ro', 'nosuid', 'nodev', 'noexec']) assert.ok(info[1].split(',').includes(flag), `${flag} in ${info[0]}`);
  assert.match(r.stdout, /uevent read-only/);
  assert.equal(probeLines(r.stdout, '/tmp/s').get('/firmware'), probeLines(r.stdout, '/sys').get('/firmware'));
});

test('seccomp-controlplane MOUNT_OTHER_FS_LIST on runc: tmpfs gets its size and mode, nosuid,nodev; debugfs and devtmpfs are refused; cgroup2 is read-only', async (t) => {
  const c = await container(t, 'MOUNT_OTHER_FS_LIST=tmpfs,debugfs,devtmpfs,cgroup2');
  const r = await sh(c, [
    'mkdir -p /tmp/t /tmp/d /tmp/v /tmp/g',
    'mount -t tmpfs -o size=1m,mode=0700 tmpfs /tmp/t && echo tmpfs mounted',
    '/bin/busybox grep " /tmp/t " /proc/self/mountinfo',
    'mount -t debugfs debugfs /tmp/d; echo debugfs rc=$?',
    'mount -t devtmpfs devtmpfs /tmp/v; echo devtmpfs rc=$?',
    'mount -t cgroup2 cgroup2 /tmp/g && echo cgroup2 mounted',
    '/bin/busybox grep " /tmp/g " /proc/self/mountinfo',
  ].join('\n'));
  assert.match(r.stdout, /^tmpfs mounted$/m, r.stderr);
  const tmpfs = / \/tmp\/t (\S+) .*?- tmpfs \S+ (\S+)$/m.exec(r.stdout);
  assert.ok(tmpfs, r.stdout);
  for (const flag of ['nosuid', 'nodev']) assert.ok(tmpfs[1].split(',').includes(flag), `${flag} in ${tmpfs[0]}`);
  assert.ok(tmpfs[2].split(',').includes('size=1024k'), `the size option reached the kernel: ${tmpfs[0]}`);
  assert.ok(tmpfs[2].split(',').includes('mode=700'), `the mode option reached the kernel: ${tmpfs[0]}`);
  assert.match(r.stdout, /^debugfs rc=[1-9]/m);
  assert.match(r.stdout, /^devtmpfs rc=[1-9]/m);
  assert.match(r.stderr, /Operation not permitted|permission denied/i);
  assert.match(r.stdout, /^cgroup2 mounted$/m);
  const cgroup = /^.* \/tmp\/g (\S+) /m.exec(r.stdout);
  assert.ok(cgroup && cgroup[1].split(',').includes('ro'), `cgroup2 is read-only: ${r.stdout}`);
});

test('seccomp-controlplane MOUNT_OTHER_FS_LIST on runc: a target that resolves to the container root is refused, and later execs still work', async (t) => {
  const c = await container(t, 'MOUNT_OTHER_FS_LIST=tmpfs');
  const r = await sh(c, 'ln -s /../../.. /tmp/l 2>/dev/null || /bin/busybox ln -s /../../.. /tmp/l; mount -t tmpfs tmpfs /tmp/l; echo rc=$?; mount -t tmpfs tmpfs /; echo root rc=$?');
  assert.match(r.stdout, /^rc=[1-9]/m, r.stderr);
  assert.match(r.stdout, /^root rc=[1-9]/m, r.stderr);
  assert.match(r.stderr, /Operation not permitted|permission denied/i);
  const after = await runcExec(c.bundle, c.id, ['/bin/busybox', 'true']);
  assert.equal(after.code, 0, `exec still works: ${after.stderr}`);
});
