import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { EMULATIONS } from '../common/emulations';
import { AnsweredBy } from '../proto/gen/seccompagent/v1/dataplane';
import { EVENT_LAYOUT_NAMES, makeEventDecoder, type EventLayout } from './event-decoder';
import { loadNative, type NativeEvent } from './native';

const ROOT = path.resolve(__dirname, '..', '..');
const NATIVE_TESTS = path.join(ROOT, 'build', 'Release', 'seccomp-native-tests');
const addon = loadNative();

/** The batch `seccomp-native-tests --encode-events` encodes (its SampleBatch), as the engine hands one to JS. */
function nativeSampleBatch(): [ArrayBuffer, ArrayBuffer, string[], number, ArrayBuffer] {
  assert.ok(fs.existsSync(NATIVE_TESTS), `${NATIVE_TESTS} is missing: run npx node-gyp rebuild`);
  const run = spawnSync(NATIVE_TESTS, ['--encode-events'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(run.status, 0, run.stdout + run.stderr);
  const bytes = (hex: string) => Buffer.from(hex, 'hex');
  const buffer = (hex: string) => Uint8Array.from(bytes(hex)).buffer;
  const lines = run.stdout.trimEnd().split('\n').map((line) => line.split(' ') as [string, string?]);
  const part = (name: string) => lines.find(([key]) => key === name)?.[1] ?? '';
  const texts = lines.filter(([key]) => key === 'text').map(([, hex]) => bytes(hex ?? '').toString());
  return [buffer(part('w64')), buffer(part('w32')), texts, Number(part('count')), buffer(part('raw'))];
}

function decode(batch: Parameters<ReturnType<typeof makeEventDecoder>>): NativeEvent[] {
  let events: NativeEvent[] = [];
  makeEventDecoder(addon.eventLayout, (decoded) => (events = decoded))(...batch);
  return events;
}

const I386 = addon.AUDIT_ARCH_I386;
const X86_64 = addon.AUDIT_ARCH_X86_64;

test('event-decoder: the addon exports every constant of event_layout.hpp the decoder names, and no other', () => {
  assert.deepEqual(Object.keys(addon.eventLayout).sort(), [...EVENT_LAYOUT_NAMES].sort());
  for (const name of EVENT_LAYOUT_NAMES) assert.equal(typeof addon.eventLayout[name], 'number', name);
  assert.ok(Object.isFrozen(addon.eventLayout));
});

test('event-decoder: a layout that lacks a constant is refused when the decoder is made', () => {
  const partial = Object.fromEntries(Object.entries(addon.eventLayout).filter(([name]) => name !== 'W32_TEXT'));
  assert.throws(() => makeEventDecoder(partial as EventLayout, () => {}), /lacks W32_TEXT/);
});

test('event-decoder: a batch the native encoder wrote decodes to every event type with every field (seccomp-native-tests --encode-events)', () => {
  const events = decode(nativeSampleBatch());
  const truncated = Buffer.from([0xff, 0xfe, 0x2f, 0x78]);
  const expected: NativeEvent[] = [
    {
      type: 'notification', handle: 7, id: 0x8877665544332211n, pid: 4242, nr: 83, arch: X86_64, ip: 0x401000n,
      args: [1n, 2n, 0xffffffffffffffffn, 4n, 5n, 6n],
      strings: [
        { index: 0, value: '/tmp/a', truncated: false, raw: Buffer.from('/tmp/a') },
        { index: 5, value: truncated.toString(), truncated: true, raw: truncated },
      ],
      forwarded: true, session: 3, viaChannel: true, receivedNs: 1000n,
    },
    {
      type: 'notification', handle: 8, id: 1n, pid: 0, nr: 39, arch: I386, ip: 0n, args: [0n, 0n, 0n, 0n, 0n, 0n],
      strings: [], forwarded: false, session: 0, viaChannel: false, receivedNs: 2000n,
    },
    {
      type: 'answered', handle: 7, id: 0x8877665544332211n, by: AnsweredBy.ANSWERED_BY_FAST_PATH, action: { kind: 'error', errno: 13 },
      gone: false, latencyNs: 500n, notified: { nr: 2, arch: I386 }, rule: 2,
    },
    {
      type: 'answered', handle: 8, id: 1n, by: AnsweredBy.ANSWERED_BY_CONTROL_PLANE, action: { kind: 'value', value: -5n } as never,
      gone: true, latencyNs: 600n, notified: null, rule: -1,
    },
    {
      type: 'answered', handle: 8, id: 1n, by: AnsweredBy.ANSWERED_BY_DEFAULT_RECOVERED, action: { kind: 'continue' },
      gone: false, latencyNs: 600n, notified: null, rule: -1,
    },
    ...EMULATIONS.map((e, i): NativeEvent => ({
      type: 'answered', handle: 9, id: 100n + BigInt(i), by: AnsweredBy.ANSWERED_BY_CONTROL_PLANE,
      action: { kind: e.name, errno: i, value: BigInt.asUintN(64, BigInt(i - 1)) },
      gone: false, latencyNs: 700n + BigInt(i), notified: null, rule: -1,
    })),
    {
      type: 'connection', conn: 5, json: '{"id":"café"}', fds: [{ seccomp: true }, { seccomp: false }, { seccomp: true }],
      peer: { pid: -1, uid: 1000, gid: 1001 },
    },
    { type: 'ingest-error', code: 'too-large', message: 'message too large', peer: { pid: 77, uid: 0, gid: 0 } },
    { type: 'ingest-error', code: 'read-error', message: 'read failed', peer: { pid: 77, uid: 0, gid: 0 } },
    { type: 'removed', handle: 9 },
    { type: 'error', message: 'boom' },
    ...(['unknown', 'late', 'wrong-session', 'invalid'] as const).map((reason): NativeEvent => ({
      type: 'decision-dropped', session: 4, handle: 7, id: 99n, reason,
    })),
    { type: 'session-drained', session: 5 },
    { type: 'channel', session: 6, state: 'connected', reason: '' },
    { type: 'channel', session: 6, state: 'closed', reason: 'peer hung up' },
    { type: 'handoff', conn: 11, peer: { pid: 12, uid: 13, gid: 14 } },
    {
      type: 'tally', handle: 7, nr: 2, arch: X86_64, by: AnsweredBy.ANSWERED_BY_DEFAULT_NO_CONTROL_PLANE, gone: true, count: 17,
      latencySumNs: 123456n, latencyBuckets: [1, 0, 16],
    },
    { type: 'read-stall', handle: 12, pid: 4343, lane: 1, stalledNs: 51_000_000n, returned: false, nr: 0, arch: 0 },
    { type: 'read-stall', handle: 12, pid: 4343, lane: 1, stalledNs: 2_500_000_000n, returned: true, nr: 39, arch: I386 },
  ];
  assert.equal(events.length, expected.length);
  for (let i = 0; i < expected.length; i++) assert.deepEqual(events[i], expected[i], `event ${i} (${expected[i].type})`);
});
