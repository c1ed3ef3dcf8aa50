// seccompctl against a real data plane: tables for people, --json for scripts, live watch, health.
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import { startControlPlane } from '../support/controlplane';
import { startDataPlane } from '../support/dataplane';
import { ROOT } from '../support/paths';
import { run, start } from '../support/processes';
import { startUnderFilter, runUnderFilter } from '../support/workload';
import { waitUntil } from '../support/wait';

const CTL = path.join(ROOT, 'bin', 'seccompctl');

test('seccompctl status and containers: readable tables, and --json for scripts', async (t) => {
  const dp = await startDataPlane(t);
  startUnderFilter(t, {
    socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'c-ctl',
    annotations: { 'io.kubernetes.cri.sandbox-namespace': 'ns1', 'io.kubernetes.cri.sandbox-name': 'pod1' },
  }, ['/bin/sleep', '30']);
  await waitUntil(async () => (await dp.status()).containers === 1, 5000, 'the container');
  const status = await run(CTL, ['status', '--grpc-socket', dp.grpcSocket]);
  assert.equal(status.code, 0, status.stderr);
  assert.match(status.stdout, /^control plane\s+none: the default action answers$/m);
  assert.match(status.stdout, /^containers\s+1$/m);
  assert.match(status.stdout, new RegExp(`^pid\\s+${dp.proc.child.pid} \\(started fresh\\)$`, 'm'));
  assert.match(status.stdout, /^fd store\s+no: a crash gives ENOSYS/m);
  const json = await run(CTL, ['status', '--json', '--grpc-socket', dp.grpcSocket]);
  assert.equal(JSON.parse(json.stdout).containers, 1);
  const containers = await run(CTL, ['containers', '--grpc-socket', dp.grpcSocket]);
  assert.match(containers.stdout, /^HANDLE\s+CONTAINER\s+STATUS\s+PID\s+POD\s+POLICY\s+FAST PATH\s+DEFAULT\s+WAIT\s+SINCE\s+LABELS$/m);
  assert.match(containers.stdout, /c-ctl\s+init\s+\d+\s+ns1\/pod1\s+none\s+0\s+0\s+-\s+\S+\s+-$/m);
  const list = JSON.parse((await run(CTL, ['containers', '--json', '--grpc-socket', dp.grpcSocket])).stdout);
  assert.equal(list.containers[0].containerId, 'c-ctl');
});

test('seccompctl status: every listener socket the data plane serves (--listener-socket twice)', async (t) => {
  const dp = await startDataPlane(t);
  assert.match((await run(CTL, ['status', '--grpc-socket', dp.grpcSocket])).stdout, new RegExp(`^listener socket\\s+${dp.listenerSocket}$`, 'm'));
  const spo = path.join(dp.dir, 'spo', 'seccomp-agent.sock');
  const two = await startDataPlane(t, ['--listener-socket', spo], path.join(dp.dir, 'two'));
  const status = await run(CTL, ['status', '--grpc-socket', two.grpcSocket]);
  assert.equal(status.code, 0, status.stderr);
  assert.match(status.stdout, new RegExp(`^listener sockets\\s+${two.listenerSocket}, ${spo}$`, 'm'));
  const json = JSON.parse((await run(CTL, ['status', '--json', '--grpc-socket', two.grpcSocket])).stdout);
  assert.deepEqual(json.listenerSockets, [two.listenerSocket, spo]);
  assert.equal(json.listenerSocket, two.listenerSocket, 'the single-socket field names the first');
});

test('seccompctl watch --container: a live line per event of that container only', async (t) => {
  const dp = await startDataPlane(t);
  const watch = start(t, CTL, ['watch', '--container', 'c-watched', '--grpc-socket', dp.grpcSocket]);
  await waitUntil(async () => (await dp.status()).watchers === 1, 5000, 'the watcher');
  await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'c-other' }, ['/bin/mkdir', path.join(dp.dir, 'other')]);
  await runUnderFilter({ socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'c-watched' }, ['/bin/mkdir', path.join(dp.dir, 'watched')]);
  await watch.waitFor(/notify\s+c-watched pid=\d+ mkdir "[^"]*watched"/);
  await watch.waitFor(/answer\s+c-watched mkdir id=\d+ continue by default\(no control plane\)/);
  assert.doesNotMatch(watch.output(), /c-other/);
});

test('seccompctl health: exit 0 while the data plane serves, 1 when it is gone', async (t) => {
  const dp = await startDataPlane(t);
  const ok = await run(CTL, ['health', '--grpc-socket', dp.grpcSocket]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /SERVING/);
  const gone = await run(CTL, ['health', '--grpc-socket', path.join(dp.dir, 'nothing.sock'), '--timeout', '1']);
  assert.equal(gone.code, 1);
  assert.match(gone.stderr, /seccompctl health:/);
});

test('seccompctl: an unknown command or flag is a clear usage error', async () => {
  const bad = await run(CTL, ['stauts']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /unknown command "stauts"|cannot reach the data plane/);
  const flag = await run(CTL, ['status', '--gprc-socket', '/x']);
  assert.equal(flag.code, 2);
  assert.match(flag.stderr, /did you mean --grpc-socket/);
});

test('seccompctl containers and explain with a control plane: labels and rule version per container; explain names the native rule that answers and why, also with the control plane gone', async (t) => {
  const dp = await startDataPlane(t);
  const cp = await startControlPlane(t, dp);
  const ctl = (args: string[]) => run(CTL, [...args, '--grpc-socket', dp.grpcSocket]);
  startUnderFilter(t, {
    socket: dp.listenerSocket, syscalls: ['mkdir', 'getppid'], id: 'c-explain', metadata: 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}',
    annotations: { 'io.kubernetes.cri.sandbox-namespace': 'shop', 'io.kubernetes.cri.sandbox-name': 'web-1', 'io.kubernetes.cri.container-name': 'app' },
  }, ['/bin/sleep', '30']);
  let version = '';
  await waitUntil(async () => {
    version = /c-explain\s+init\s+\d+\s+shop\/web-1\s+([0-9a-f]{16}) \(2 rules\)/.exec((await ctl(['containers'])).stdout)?.[1] ?? '';
    return version !== '';
  }, 15_000, 'the container\'s policy to be listed');
  const listed = (await ctl(['containers'])).stdout;
  assert.match(listed, /c-explain\s.*\scontainer=app,namespace=shop,pod=web-1,resolution=annotations$/m, listed);

  const mkdir = await ctl(['explain', 'c-explain', 'mkdir', '/tmp/x']);
  assert.equal(mkdir.code, 0, mkdir.stderr);
  assert.match(mkdir.stdout, /^container c-explain \(shop\/web-1\/app\): mkdir \(x86_64\) \/tmp\/x$/m);
  assert.match(mkdir.stdout, new RegExp(`^data plane: policy ${version} \\(2 rules, labels [^)]*pod=web-1[^)]*\\): rule 0 \\(listenerMetadata MKDIR_TMPL\\) answers: mkdir with the suffix "-shop-web-1" \\(emulated\\), natively`, 'm'));
  assert.match(mkdir.stdout, /^ {2}why: mkdir is one of its syscalls \(mkdir, mkdirat\); no argument or path condition$/m);
  assert.doesNotMatch(mkdir.stdout, /^control plane:/m, 'a native rule needs no control plane');
  // Another ABI's call of the same name: the same rule (issue 17); the arch is on the first line.
  const i386 = await ctl(['explain', 'c-explain', 'mkdir', '/tmp/x', '--arch', 'i386']);
  assert.equal(i386.code, 0, i386.stderr);
  assert.match(i386.stdout, /^container c-explain \(shop\/web-1\/app\): mkdir \(i386\) \/tmp\/x$/m);
  assert.match(i386.stdout, /: rule 0 \(listenerMetadata MKDIR_TMPL\) answers: mkdir with the suffix "-shop-web-1" \(emulated\), natively/);
  const stat64 = JSON.parse((await ctl(['explain', 'c-explain', 'stat64', '--arch', 'x86', '--json'])).stdout);
  assert.equal(stat64.arch, 'i386');
  assert.equal(stat64.dataPlane.ruleIndex, 1, 'an i386-only name: only the catch-all');
  assert.equal((await ctl(['explain', 'c-explain', 'stat64'])).code, 2, 'x86_64 has no stat64');
  const badArch = await ctl(['explain', 'c-explain', 'mkdir', '--arch', 'arm64']);
  assert.equal(badArch.code, 2);
  assert.match(badArch.stderr, /--arch: "arm64" is not x86_64, i386 \(x86\) or x32/);
  const json = JSON.parse((await ctl(['explain', 'shop/web-1', 'getppid', '--json'])).stdout);
  assert.equal(json.container, 'c-explain');
  assert.equal(json.dataPlane.ruleIndex, 1);
  assert.equal(json.dataPlane.rules[1].origin, 'no rule of its own: continue');

  cp.child.kill('SIGKILL');
  await cp.exited;
  await waitUntil(async () => (await dp.status()).controlPlane === undefined, 10_000, 'the control plane to be gone');
  const getppid = await ctl(['explain', 'c-explain', 'getppid']);
  assert.equal(getppid.code, 0, getppid.stderr);
  assert.match(getppid.stdout, /rule 1 \(no rule of its own: continue\) answers: continue, natively, whether a control plane is attached or not$/m);
  assert.match(getppid.stdout, /^ {2}why: it names no syscall \(every syscall\); no argument or path condition; rules 0 to 0 do not match$/m);
  const bad = await ctl(['explain', 'c-explain', 'nosuchcall']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /"nosuchcall" is not an x86_64 syscall name/);
  const missing = await ctl(['explain', 'nope', 'mkdir']);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /no container nope on this node/);
});

test('seccompctl explain without a policy in force: says the control plane or the default decides, and that the control plane cannot be asked', async (t) => {
  const dp = await startDataPlane(t);
  startUnderFilter(t, { socket: dp.listenerSocket, syscalls: ['mkdir'], id: 'c-bare' }, ['/bin/sleep', '30']);
  await waitUntil(async () => (await dp.status()).containers === 1, 5000, 'the container');
  const r = await run(CTL, ['explain', 'c-bare', 'mkdir', '/tmp/y', '--grpc-socket', dp.grpcSocket, '--timeout', '1']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^data plane: no policy in force for this container: the control plane decides each call while one is attached, else the default action answers$/m);
  assert.match(r.stdout, /^control plane: not available \(cannot reach the control plane at /m);

  // ExplainRule itself, as a hostile client may call it: refused with a reason, the data plane serves on.
  const { status } = await import('@grpc/grpc-js');
  const explain = (request: Parameters<typeof dp.client.explainRule>[0]) =>
    new Promise<number>((resolve) => dp.client.explainRule(request, (err) => resolve(err ? err.code : 0)));
  const handle = (await new Promise<bigint>((resolve, reject) => dp.client.listContainers({}, (err, l) => (err ? reject(err) : resolve(l!.containers[0].handle)))));
  assert.equal(await explain({ handle: 999_999n, syscall: 'mkdir', args: [], stringArgs: [], arch: '' }), status.INVALID_ARGUMENT);
  assert.equal(await explain({ handle, syscall: '', args: [], stringArgs: [], arch: '' }), status.INVALID_ARGUMENT);
  assert.equal(await explain({ handle, syscall: 'mkdir', args: [1n, 2n, 3n, 4n, 5n, 6n, 7n], stringArgs: [], arch: '' }), status.INVALID_ARGUMENT);
  assert.equal(await explain({ handle, syscall: 'mkdir', args: [], stringArgs: [{ index: 9, value: 'x', truncated: false, raw: Buffer.alloc(70_000, 0x41) }], arch: '' }), 0, 'a path out of range is ignored');
  assert.equal((await dp.status()).containers, 1, 'the data plane serves on');
});
