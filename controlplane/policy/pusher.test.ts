import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { PolicyPusher } from './pusher';

function capture() {
  const lines: Array<{ level: number; msg: string }> = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { lines, log };
}

const ack = (reason: string) => ({ handle: 5n, version: '', accepted: false, refusedVersion: 'abc', ruleIndex: -1, reason, detail: 'no container with handle 5 is served here' });

test('policy pusher: a container that exited before its policy was pushed is an info line, not a level-50 error (issue 17)', () => {
  const { lines, log } = capture();
  const pusher = new PolicyPusher({ registry: { get: () => undefined, values: () => [][Symbol.iterator]() }, unresolvedAction: { kind: 'continue' }, send: () => true, log });
  pusher.onAcks([ack('unknown-handle')]);
  assert.deepEqual(lines.map((l) => l.level), [30]);
  assert.equal(lines[0].msg, 'container 5 exited before its policy abc reached the data plane; nothing to apply');
  assert.equal(pusher.refused, 0);
  assert.equal(pusher.gone, 1);
  // A real refusal still is an error.
  pusher.onAcks([ack('unknown-syscall')]);
  assert.equal(lines[1].level, 50);
  assert.equal(pusher.refused, 1);
});
