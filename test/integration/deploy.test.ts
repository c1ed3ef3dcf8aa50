// deploy/'s files run for real: the DaemonSet's init script and probes, its data plane container
// as the old and the new pod of a rolling update, the systemd units under socket activation and
// systemd-analyze verify, and kubectl kustomize. The static checks are in test/unit/deploy.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { createDataPlaneClient, getStatus } from '../../common/dataplane-client';
import { DEFAULT_GRPC_SOCKET } from '../../common/shared-options';
import type { GetStatusResponse } from '../../proto/gen/seccompagent/v1/dataplane';
import { keeperChild } from '../support/dataplane';
import { container, imageBinDir, kube, NODE_BY_NODE, onThisHost, parseUnit, read, single, type Json } from '../support/deploy-files';
import { ROOT } from '../support/paths';
import { run, start, stop, type Started } from '../support/processes';
import { waitUntil } from '../support/wait';
import { runUnderFilter } from '../support/workload';

test('DaemonSet: the listener-link script creates, corrects and keeps the symlink, atomically', (t) => {
  const init = container('listener-link');
  const script = init.command!;
  assert.deepEqual(script.slice(0, 2), ['/bin/sh', '-ec']);
  const env = Object.fromEntries((init.env ?? []).map((e) => [e.name, e.value ?? '']));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-link-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const link = path.join(dir, 'seccomp-agent.socket');
  const run = () => {
    const r = spawnSync(script[0], script.slice(1), { env: { PATH: process.env.PATH, LINK: link, TARGET: env.TARGET }, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
  };
  run();
  assert.equal(fs.readlinkSync(link), env.TARGET);
  const inode = fs.lstatSync(link).ino;
  run();
  assert.equal(fs.lstatSync(link).ino, inode, 'a correct link is left alone');
  fs.unlinkSync(link);
  fs.symlinkSync('elsewhere.socket', link);
  run();
  assert.equal(fs.readlinkSync(link), env.TARGET);
  assert.deepEqual(fs.readdirSync(dir), ['seccomp-agent.socket'], 'no temporary file left behind');
  assert.match(script[2], /mv -Tf /, 'the link is replaced by rename(2), never missing');
});

test('DaemonSet: both probe commands exit 1 within the probe timeout when no data plane serves', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-probe-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const env = { PATH: process.env.PATH, SECCOMP_AGENT_GRPC_SOCKET: path.join(dir, path.posix.basename(DEFAULT_GRPC_SOCKET)) };
  for (const [name, probe] of [['dataplane', container('dataplane').readinessProbe!], ['controlplane', container('controlplane').readinessProbe!]] as const) {
    const [program, ...args] = onThisHost(probe.exec!.command!, dir);
    const started = Date.now();
    const r = await run(program, args, { env });
    assert.equal(r.code, 1, `${name} probe: stdout: ${r.stdout} stderr: ${r.stderr}`);
    assert.ok(Date.now() - started < probe.timeoutSeconds! * 1000, `${name} probe took ${Date.now() - started} ms`);
  }
  // With a socket file left behind by a data plane that is gone, too.
  fs.writeFileSync(env.SECCOMP_AGENT_GRPC_SOCKET, '');
  const [program, ...args] = onThisHost(container('dataplane').readinessProbe!.exec!.command!, dir);
  assert.equal((await run(program, args, { env })).code, 1);
});

test('DaemonSet: the data plane container, run as the old and the new pod of a rolling update, hands over; only the serving pod is ready', async (t) => {
  // Each "pod" gets its own network namespace (unshare) and both share one socket directory,
  // as the two pods on a node share the hostPath; everything else is the manifest's.
  const shared = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-rollout-'));
  const pods: Started[] = [];
  // The pods first: a data plane still running would create sockets in a folder being removed.
  t.after(async () => {
    await Promise.all(pods.map((pod) => stop(pod.child)));
    fs.rmSync(shared, { recursive: true, force: true });
  });
  const dp = container('dataplane');
  const line = onThisHost([...dp.command!, ...(dp.args ?? [])], shared);
  const grpcSocket = path.join(shared, path.posix.basename(DEFAULT_GRPC_SOCKET));
  const env = { ...process.env, SECCOMP_AGENT_GRPC_SOCKET: grpcSocket };
  const [probeProgram, ...probeArgs] = onThisHost(dp.readinessProbe!.exec!.command!, shared);
  const ready = async (pod: Started) => (await run('nsenter', [`--net=/proc/${pod.child.pid}/ns/net`, '--', probeProgram, ...probeArgs], { env })).code === 0;
  const client = createDataPlaneClient(grpcSocket);
  t.after(() => client.close());

  const oldPod = start(null, 'unshare', ['--net', '--', ...line], { env });
  pods.push(oldPod);
  await waitUntil(() => ready(oldPod), 20_000, () => `the old pod to be ready; output:\n${oldPod.output()}`);
  const oldDataPlane = keeperChild(oldPod.child.pid!);
  assert.equal((await getStatus(client)).pid, oldDataPlane);

  const newPod = start(null, 'unshare', ['--net', '--', ...line], { env });
  pods.push(newPod);
  await waitUntil(() => ready(newPod), 20_000, () => `the new pod to be ready; output:\n${newPod.output()}`);
  // The old data plane may still answer for a moment on a connection made before the handoff.
  const newDataPlane = keeperChild(newPod.child.pid!);
  let status: GetStatusResponse | undefined;
  await waitUntil(async () => (status = await getStatus(client).catch(() => undefined))?.pid === newDataPlane, 10_000, 'status from the new pod');
  assert.equal(status!.origin, 'handoff');
  await oldPod.waitFor(/handed every container over to data plane/, 10_000);
  // The old data plane exited 0 after handing over; its keeper stays, holding nothing, and its
  // pod is no longer ready although seccompctl health, through the shared socket, still passes.
  await waitUntil(() => keeperChild(oldPod.child.pid!) === 0, 10_000, 'the old data plane to exit');
  assert.equal(oldPod.child.exitCode, null, 'the old keeper idles instead of ending its container');
  assert.equal(await ready(oldPod), false, 'the old pod is not ready any more');
  const health = await run('nsenter', [`--net=/proc/${oldPod.child.pid}/ns/net`, '--', path.join(ROOT, 'bin', 'seccompctl'), 'health'], { env });
  assert.equal(health.code, 0, 'seccompctl health alone would have passed in the old pod');
  // Deleting the old pod: its keeper exits at once, and the new pod goes on serving.
  oldPod.child.kill('SIGTERM');
  assert.equal(await oldPod.exited, 0);
  assert.equal(await ready(newPod), true);
});

test('kubectl kustomize builds the install and the node-by-node overlay; they differ only in the update strategy', () => {
  const build = (dir: string): Json[] => {
    const r = spawnSync('kubectl', ['kustomize', path.join(ROOT, dir)], { encoding: 'utf8' });
    assert.equal(r.error, undefined, 'kubectl is installed');
    assert.equal(r.status, 0, `kubectl kustomize ${dir}: ${r.stderr}`);
    return parseAllDocuments(r.stdout).map((d) => d.toJS() as Json);
  };
  const base = build('deploy/kubernetes');
  const overlay = build(path.dirname(NODE_BY_NODE));
  // deploy/kubernetes takes ../crds: the two policy resource definitions come with the install.
  assert.deepEqual(base.map((o) => o.kind).sort(), [...kube().map((m) => m.obj.kind), 'CustomResourceDefinition', 'CustomResourceDefinition'].sort());
  const ds = (objs: Json[]) => objs.find((o) => o.kind === 'DaemonSet')!;
  assert.deepEqual(ds(base).spec.updateStrategy.type, 'RollingUpdate');
  assert.deepEqual(ds(overlay).spec.updateStrategy, { type: 'OnDelete' });
  ds(overlay).spec.updateStrategy = ds(base).spec.updateStrategy;
  assert.deepEqual(overlay, base);
});

test('systemd: the data plane, started as ExecStart says, takes both listeners seccomp-agent.socket passes by its FileDescriptorName and answers a workload through each', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-activation-'));
  let activator: Started | undefined;
  t.after(async () => {
    if (activator) await stop(activator.child);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const socketUnit = parseUnit('deploy/systemd/seccomp-agent.socket');
  const service = parseUnit('deploy/systemd/seccomp-dataplane.service');
  // Each ListenStream= (the default path, the Security Profiles Operator's) moved into the scratch folder.
  const streams = socketUnit.get('Socket', 'ListenStream');
  assert.equal(streams.length, 2);
  const listeners = streams.map((s, i) => path.join(dir, `l${i}`, path.basename(s)));
  for (const l of listeners) fs.mkdirSync(path.dirname(l));
  const listener = listeners[0];
  const grpcSocket = path.join(dir, 'seccomp-agent', 'dataplane.sock');
  const line = single(service, 'Service', 'ExecStart', 'data plane unit')
    .split(/\s+/)
    .map((w) => streams.reduce((text, s, i) => (text === s ? listeners[i] : text), w.replace(`${imageBinDir()}/`, `${path.join(ROOT, 'bin')}/`).replace(DEFAULT_GRPC_SOCKET, grpcSocket)));
  for (const l of listeners) assert.ok(line.includes(l), `ExecStart names ${l}'s unit path with --listener-socket`);
  // systemd-socket-activate stands in for the .socket unit: it binds the paths, and on the first
  // connection runs the service with the sockets as LISTEN_FDS, named as FileDescriptorName says.
  const name = single(socketUnit, 'Socket', 'FileDescriptorName', 'socket unit');
  activator = start(null, 'systemd-socket-activate', [...listeners.flatMap((l) => ['--listen', l]), `--fdname=${listeners.map(() => name).join(':')}`, ...line]);
  await activator.waitFor(/Listening on/, 10_000);
  const inodes = listeners.map((l) => fs.statSync(l).ino);
  const inode = inodes[0];
  await new Promise<void>((resolve, reject) => {
    const conn = net.connect(listener, () => {
      conn.end();
      resolve();
    });
    conn.on('error', reject);
  });
  const client = createDataPlaneClient(grpcSocket);
  t.after(() => client.close());
  await waitUntil(() => getStatus(client).then(() => true, () => false), 15_000, () => `the data plane to serve; output:\n${activator.output()}`);
  const status = await getStatus(client);
  assert.equal(status.pid, activator.child.pid, 'the activated process is the data plane itself');
  assert.equal(status.origin, 'fd-store', 'its listener came from LISTEN_FDS');
  assert.equal(fs.statSync(listener).ino, inode, 'the data plane serves the socket it was given, not a new one');
  assert.deepEqual(listeners.map((l) => fs.statSync(l).ino), inodes, 'both sockets are the ones it was given');
  assert.deepEqual(status.listenerSockets, listeners, 'status shows every listener path');
  assert.doesNotMatch(activator.output(), /a name this data plane does not use/);
  // The connection made before it started waited in the backlog and reached it.
  await waitUntil(() => getStatus(client).then((s) => (s.counters?.ingestRejected ?? 0n) >= 1n), 10_000, 'the queued connection to be read');
  // A workload through each path: its notified mkdir is answered (continue) and the directory made.
  for (const [i, l] of listeners.entries()) {
    const target = path.join(dir, `made-through-${i}`);
    const r = await runUnderFilter({ socket: l, syscalls: ['mkdir'], id: `systemd-${i}` }, ['/bin/mkdir', target]);
    assert.equal(r.code, 0, `through ${l}: ${r.stderr}`);
    assert.ok(fs.existsSync(target));
  }
  // Counted as the engine's answered events reach JS, which may be just after the workloads end.
  await waitUntil(async () => (await getStatus(client)).counters!.notifications >= 2n, 10_000, 'both mkdirs to be counted as notified');
});

test('systemd: systemd-analyze verify accepts the three units', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-units-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const units = ['seccomp-agent.socket', 'seccomp-dataplane.service', 'seccomp-controlplane.service'];
  for (const u of units) {
    // The programs are not installed here; verify checks that ExecStart names an executable.
    const text = read(`deploy/systemd/${u}`).replace(new RegExp(`${imageBinDir()}/[a-z-]+`, 'g'), '/bin/true');
    fs.writeFileSync(path.join(dir, u), text);
  }
  const version = Number(/systemd (\d+)/.exec(spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' }).stdout ?? '')?.[1]);
  assert.ok(version > 0, 'systemd-analyze is installed');
  const r = spawnSync('systemd-analyze', ['verify', '--man=no', ...units.map((u) => `./${u}`)], { cwd: dir, encoding: 'utf8' });
  // FileDescriptorStorePreserve= exists from systemd 254 on; older ones ignore it with a warning.
  const tolerated = version < 254 ? /Unknown key '?FileDescriptorStorePreserve'?/ : /^$/;
  const complaints = `${r.stdout}\n${r.stderr}`.split('\n').filter((l) => l.trim() !== '' && !tolerated.test(l));
  assert.deepEqual(complaints, []);
  assert.equal(r.status, 0);
});
