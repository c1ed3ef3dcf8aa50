import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ContainerTable } from './container-table';
import type { RuntimeContainerState } from './runtime-message';

function state(containerId: string, status: string, pid: number): RuntimeContainerState {
  return { containerId, status, pid, processPid: pid, bundle: pid === 0 ? '.' : '/b', annotations: {}, metadata: '', ociVersion: '0.2.0', seccompFdIndex: 0 };
}

const PEER = { pid: 1, uid: 0, gid: 0 };

test('container table: a kill of an exec fd that came with pid 0 (crun) targets the init of the same container id', () => {
  const table = new ContainerTable();
  table.add(1, state('c1', 'creating', 4242), PEER);
  table.add(2, state('c1', 'running', 0), PEER);
  table.add(3, state('c2', 'running', 0), PEER);
  assert.equal(table.initPidOf(1), 4242);
  assert.equal(table.initPidOf(2), 4242);
  assert.equal(table.get(2)?.pid, 0, 'the record keeps what the runtime sent');
  assert.equal(table.initPidOf(3), 0, 'another container\'s init is never borrowed');
  assert.equal(table.initPidOf(9), 0);
  table.remove(1);
  assert.equal(table.initPidOf(2), 0, 'the init fd gone: nothing to kill by');
});

test('container table: answers are counted per container (default, fast path) and listed as the API\'s figures', () => {
  const table = new ContainerTable();
  table.add(1, state('c1', 'creating', 10), PEER);
  table.add(2, state('c2', 'creating', 11), PEER);
  table.countAnswer(1, 'default');
  table.countAnswer(1, 'default');
  table.countAnswer(2, 'fast-path');
  table.countAnswer(9, 'default'); // unknown handle: ignored
  const byId = new Map(table.list().map((c) => [c.containerId, c]));
  assert.equal(byId.get('c1')?.answeredDefault, 2n);
  assert.equal(byId.get('c1')?.answeredFastPath, 0n);
  assert.equal(byId.get('c2')?.answeredFastPath, 1n);
  table.remove(1);
  table.countAnswer(1, 'default');
  assert.deepEqual(table.list().map((c) => c.containerId), ['c2']);
});
