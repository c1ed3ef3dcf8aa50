import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { AgentError } from '../../common/errors';
import { podFromCgroupFile, podFromCgroupPath, readCgroupPod } from './cgroup-pod-uid';

const UID = '1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d';
const UID_ = UID.replace(/-/g, '_');
const CID = '9f2d0c5b8a7e6d4c3b2a19f8e7d6c5b4a39281f0e9d8c7b6a5f4e3d2c1b0a998';

test('cgroup pod UID: cgroupfs driver, cgroup v1 (burstable, besteffort, guaranteed)', () => {
  const v1 = [
    '12:pids:/kubepods/burstable/pod' + UID + '/' + CID,
    '11:memory:/kubepods/burstable/pod' + UID + '/' + CID,
    '10:cpu,cpuacct:/kubepods/burstable/pod' + UID + '/' + CID,
    '1:name=systemd:/kubepods/burstable/pod' + UID + '/' + CID,
    '0::/',
    '',
  ].join('\n');
  assert.deepEqual(podFromCgroupFile(v1), { podUid: UID, containerId: CID, path: `/kubepods/burstable/pod${UID}/${CID}` });
  assert.equal(podFromCgroupFile(`4:memory:/kubepods/besteffort/pod${UID}/${CID}\n`)?.podUid, UID);
  assert.deepEqual(podFromCgroupFile(`4:memory:/kubepods/pod${UID}/${CID}\n`), { podUid: UID, containerId: CID, path: `/kubepods/pod${UID}/${CID}` });
});

test('cgroup pod UID: systemd driver, cgroup v2, underscores become dashes', () => {
  const burstable = `0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${UID_}.slice/cri-containerd-${CID}.scope\n`;
  assert.deepEqual(podFromCgroupFile(burstable), {
    podUid: UID,
    containerId: CID,
    path: `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${UID_}.slice/cri-containerd-${CID}.scope`,
  });
  const besteffort = `0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${UID_}.slice/crio-${CID}.scope\n`;
  assert.deepEqual(podFromCgroupFile(besteffort), { podUid: UID, containerId: CID, path: besteffort.slice(3, -1) });
  const guaranteed = `0::/kubepods.slice/kubepods-pod${UID_}.slice/cri-containerd-${CID}.scope`;
  assert.equal(podFromCgroupFile(guaranteed)?.podUid, UID);
  assert.equal(podFromCgroupFile(guaranteed)?.containerId, CID);
});

test('cgroup pod UID: systemd driver, cgroup v1 hybrid, and kubelet in a nested slice (kind)', () => {
  const hybrid = [
    `9:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${UID_}.slice/docker-${CID}.scope`,
    `1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${UID_}.slice/docker-${CID}.scope`,
    `0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${UID_}.slice/docker-${CID}.scope`,
  ].join('\n');
  assert.equal(podFromCgroupFile(hybrid)?.podUid, UID);
  const kind = `0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod${UID_}.slice/cri-containerd-${CID}.scope`;
  assert.equal(podFromCgroupFile(kind)?.podUid, UID);
});

test('cgroup pod UID: a static pod\'s 32-hex config hash, and an unknown container component', () => {
  const hash = '6c3c1c2e2f0c4b7a9d8e7f6a5b4c3d2e';
  assert.deepEqual(podFromCgroupPath(`/kubepods/burstable/pod${hash}/${CID}`), { podUid: hash, containerId: CID, path: `/kubepods/burstable/pod${hash}/${CID}` });
  assert.equal(podFromCgroupPath(`/kubepods.slice/kubepods-pod${UID_}.slice/crio-conmon-${CID}.scope`)?.containerId, null);
  assert.equal(podFromCgroupPath(`/kubepods/pod${UID}`)?.containerId, null);
});

test('cgroup pod UID: paths that are not a pod\'s give null', () => {
  assert.equal(podFromCgroupFile('0::/user.slice/user-0.slice/session-3.scope\n'), null);
  assert.equal(podFromCgroupFile('0::/system.slice/containerd.service\n'), null);
  assert.equal(podFromCgroupFile('0::/\n'), null);
  assert.equal(podFromCgroupFile(''), null);
  assert.equal(podFromCgroupFile('garbage without colons'), null);
  // "pod<uid>" outside a kubepods hierarchy is someone else's naming.
  assert.equal(podFromCgroupPath(`/machine.slice/pod${UID}/${CID}`), null);
  // Not a UID: wrong length.
  assert.equal(podFromCgroupPath('/kubepods/burstable/pod1234/abc'), null);
});

test('cgroup pod UID: readCgroupPod reads /proc/<pid>/cgroup; a process that is gone gives null', (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cgroup-pod-'));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  fs.mkdirSync(path.join(root, '42'));
  fs.writeFileSync(path.join(root, '42', 'cgroup'), `0::/kubepods/besteffort/pod${UID}/${CID}\n`);
  assert.equal(readCgroupPod(42, root)?.podUid, UID);
  assert.equal(readCgroupPod(43, root), null);
  assert.equal(readCgroupPod(0, root), null);
  assert.equal(readCgroupPod(-1, root), null);
  // Beyond pid_max: the real /proc has no such entry.
  assert.equal(readCgroupPod(2 ** 22 + 7), null);
});

test('cgroup pod UID: an unreadable cgroup file is an AgentError ECGROUP_READ', (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cgroup-pod-'));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  fs.mkdirSync(path.join(root, '42', 'cgroup'), { recursive: true }); // a directory: EISDIR
  assert.throws(() => readCgroupPod(42, root), (err) => err instanceof AgentError && err.code === 'ECGROUP_READ');
});
