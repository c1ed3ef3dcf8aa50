import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentError } from '../common/errors';
import { parseRuntimeMessage } from './runtime-message';

const RUNC = JSON.stringify({
  ociVersion: '1.0.2-dev', fds: ['seccompFd'], pid: 4672, metadata: 'MKDIR_TMPL=-{{.Pod}}',
  state: { ociVersion: '1.0.2-dev', id: 'abc', status: 'creating', pid: 4672, bundle: '/b', annotations: { 'io.kubernetes.pod.name': 'p' } },
});
const SECCOMP = [{ seccomp: true }];

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof AgentError);
    return `${err.code}: ${err.message}`;
  }
  return 'no error';
}

test('parseRuntimeMessage: the runc 1.1 shape', () => {
  const state = parseRuntimeMessage(RUNC, SECCOMP);
  assert.deepEqual(state, {
    containerId: 'abc', status: 'creating', pid: 4672, processPid: 4672, bundle: '/b', annotations: { 'io.kubernetes.pod.name': 'p' },
    metadata: 'MKDIR_TMPL=-{{.Pod}}', ociVersion: '1.0.2-dev', seccompFdIndex: 0,
  });
});

test('parseRuntimeMessage: the crun shape (pretty-printed, exec status running, fd named second)', () => {
  const crun = JSON.stringify({ ociVersion: '1.0.0', fds: ['other', 'seccompFd'], pid: 9, state: { id: 'c', status: 'running', pid: 9 } }, null, 2);
  const state = parseRuntimeMessage(crun, [{ seccomp: false }, { seccomp: true }]);
  assert.equal(state.status, 'running');
  assert.equal(state.seccompFdIndex, 1);
  assert.deepEqual(state.annotations, {});
});

test('parseRuntimeMessage: an exec\'s message: pid is the container\'s init (state.pid), processPid the exec\'d process (top-level pid)', () => {
  const exec = parseRuntimeMessage(JSON.stringify({ fds: ['seccompFd'], pid: 5001, state: { id: 'x', status: 'running', pid: 4672 } }), SECCOMP);
  assert.deepEqual([exec.pid, exec.processPid], [4672, 5001]);
  assert.equal(parseRuntimeMessage(JSON.stringify({ fds: ['seccompFd'], state: { id: 'x', status: 'running', pid: 4672 } }), SECCOMP).processPid, 0, 'none sent (crun exec)');
});

test('parseRuntimeMessage: a missing state.pid falls back to the top-level pid', () => {
  const message = JSON.stringify({ fds: ['seccompFd'], pid: 77, state: { id: 'x', status: 'creating' } });
  assert.equal(parseRuntimeMessage(message, SECCOMP).pid, 77);
});

test('parseRuntimeMessage: each bad message is refused with EBAD_RUNTIME_MESSAGE and a reason', () => {
  const cases: Array<[string, string, Array<{ seccomp: boolean }>, RegExp]> = [
    ['not JSON', '{"fds":', SECCOMP, /not JSON/],
    ['array', '[]', SECCOMP, /not a JSON object/],
    ['no fds received', RUNC, [], /no fd came/],
    ['fd count mismatch', RUNC, [{ seccomp: true }, { seccomp: true }, { seccomp: true }], /names 1 fd\(s\) .* but 3 were received/],
    ['pipe', RUNC, [{ seccomp: false }], /not a seccomp notify fd/],
    ['no seccompFd name', JSON.stringify({ fds: ['x'], state: { id: 'a', status: 'creating' } }), SECCOMP, /no "seccompFd"/],
    ['no id', JSON.stringify({ fds: ['seccompFd'], state: { status: 'creating' } }), SECCOMP, /state.id" is missing/],
    ['bad status', JSON.stringify({ fds: ['seccompFd'], state: { id: 'a', status: 'stopped' } }), SECCOMP, /expected creating/],
    ['bad annotation', JSON.stringify({ fds: ['seccompFd'], state: { id: 'a', status: 'creating', annotations: { k: 1 } } }), SECCOMP, /annotation "k"/],
    ['bad pid', JSON.stringify({ fds: ['seccompFd'], state: { id: 'a', status: 'creating', pid: -1 } }), SECCOMP, /must be a pid/],
  ];
  for (const [name, text, fds, reason] of cases) {
    const result = code(() => parseRuntimeMessage(text, fds));
    assert.match(result, /^EBAD_RUNTIME_MESSAGE: /, name);
    assert.match(result, reason, name);
  }
});
