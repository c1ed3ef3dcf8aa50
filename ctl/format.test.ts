import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Event } from '../proto/gen/seccompagent/v1/dataplane';
import { formatEvent, quoteBytes } from './format';

const latin1 = (s: string) => Buffer.from(s, 'latin1');

test('seccompctl quoting: bytes that are not UTF-8 show as Go-style \\x escapes, one per byte', () => {
  assert.equal(quoteBytes(latin1('bad\xff\xfe')), '"bad\\xff\\xfe"');
  assert.notEqual(quoteBytes(latin1('bad\xff\xfe')), quoteBytes(latin1('bad\xff\xfd')));
  // A truncated sequence, an overlong one, a surrogate: each byte escaped.
  assert.equal(quoteBytes(Buffer.from([0xe2, 0x82])), '"\\xe2\\x82"');
  assert.equal(quoteBytes(Buffer.from([0xc0, 0xaf])), '"\\xc0\\xaf"');
  assert.equal(quoteBytes(Buffer.from([0xed, 0xa0, 0x80])), '"\\xed\\xa0\\x80"');
});

test('seccompctl quoting: printable UTF-8 as is, controls and quotes escaped as Go does', () => {
  assert.equal(quoteBytes(Buffer.from('/tmp/é 漢 🙂', 'utf8')), '"/tmp/é 漢 🙂"');
  assert.equal(quoteBytes(Buffer.from('a"b\\c\n\t\r\x07\x00\x1b\x7f', 'utf8')), '"a\\"b\\\\c\\n\\t\\r\\a\\x00\\x1b\\x7f"');
  assert.equal(quoteBytes(Buffer.from('\u2028\u00ad', 'utf8')), '"\\u2028\\u00ad"');
  assert.equal(quoteBytes(Buffer.alloc(0)), '""');
  // U+FFFD itself is a printable rune: it reads differently from the byte \xff.
  assert.equal(quoteBytes(Buffer.from('\ufffd', 'utf8')), '"\ufffd"');
});

test('seccompctl watch line: a notification shows its exact bytes; one from an older data plane its text', () => {
  const event = (stringArgs: Array<{ index: number; value: string; truncated: boolean; raw?: Buffer }>, syscallNr = 83, arch = 0): Event => ({
    seq: 1n, time: new Date('2025-01-01T00:00:00.000Z'),
    event: { $case: 'notification', notification: { handle: 1n, id: 3n, pid: 9, syscallNr, syscall: 'mkdir', arch, instructionPointer: 0n, args: [], stringArgs, containerId: 'c1', receivedAt: undefined } },
  });
  // Another ABI says so (issue 17): int $0x80's mkdir, x32's.
  assert.equal(formatEvent(event([], 39, 0x40000003)), '00:00:00.000 notify   c1 pid=9 mkdir(i386)  id=3');
  assert.equal(formatEvent(event([], 0x40000053, 0xc000003e)), '00:00:00.000 notify   c1 pid=9 mkdir(x32)  id=3');
  assert.equal(formatEvent(event([{ index: 0, value: 'bad\ufffd\ufffd', truncated: false, raw: latin1('bad\xff\xfe') }])), '00:00:00.000 notify   c1 pid=9 mkdir "bad\\xff\\xfe" id=3');
  assert.equal(formatEvent(event([{ index: 0, value: '/tmp/x', truncated: false }])), '00:00:00.000 notify   c1 pid=9 mkdir "/tmp/x" id=3');
});

test('seccompctl watch line: an answer with an Audit finding says what Enforce would have done', () => {
  const answer = (findings: Extract<Event['event'], { $case: 'answer' }>['answer']['findings']): Event => ({
    seq: 2n, time: new Date('2025-01-01T00:00:00.000Z'),
    event: { $case: 'answer', answer: { handle: 1n, id: 3n, containerId: 'c1', syscall: 'mkdir', answeredBy: 1, kind: 1, errno: 0, value: 0n, latency: { seconds: 0n, nanos: 40_000 }, ruleIndex: 0, policyVersion: '', findings } },
  });
  assert.match(formatEvent(answer([])), /mkdir id=3 continue by control-plane in 40 µs$/);
  assert.match(
    formatEvent(answer([{ policy: 'SeccompNotifyPolicy shop/deny-etc', rule: 'no-etc', mode: 'Audit', action: 'errno EPERM', kind: 2, errno: 1 }])),
    /continue by control-plane in 40 µs; audit: SeccompNotifyPolicy shop\/deny-etc rule no-etc would answer errno EPERM$/,
  );
});
