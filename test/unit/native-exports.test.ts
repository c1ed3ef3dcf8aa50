// dataplane/native.ts declares exactly what the shipped addon exports, and
// test/support/emulator-addon.ts what the test-only one does: each table below must name every
// member of its interface (the compiler checks, through `satisfies`), and the loaded addon must
// export exactly those (this test checks). Loading an addon needs no root and no kernel feature.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadChannelIo, type ChannelIo } from '../../controlplane/link/channel-connection';
import { loadNative, type NativeAddon, type NativeEngine } from '../../dataplane/native';
import { loadEmulatorAddon, type EmulatorAddon, type EmulatorTestSupport, type NativeEmulator } from '../support/emulator-addon';

const ADDON = {
  Engine: true, syscallNames: true, syscallTables: true, openFdCount: true, AUDIT_ARCH_X86_64: true, AUDIT_ARCH_I386: true, sdNotify: true, fdStoreStore: true,
  fdStoreRemove: true, takeListenFds: true, handoffConnect: true, handoffReceive: true, handoffAck: true,
  handoffWaitClosed: true, closeFd: true, probeKernel: true, watchProcessExit: true, unwatchProcess: true,
  latencyBucketsNs: true, eventLayout: true, emulations: true, suffixedPath: true,
} satisfies Record<keyof NativeAddon, true>;

const CHANNEL_IO = {
  recv: true, send: true, recvWithFd: true, ringOpen: true, ringTake: true, ringPut: true, ringMaySleep: true, ringAwake: true, ringClose: true, yieldCpu: true,
} satisfies Record<keyof ChannelIo, true>;

const TEST_ADDON = { Emulator: true, emulatorTestSupport: true } satisfies Record<keyof EmulatorAddon, true>;

const ENGINE = {
  start: true, listen: true, listenFd: true, listenerPaths: true, adopt: true, restore: true, takeRestoredContainers: true, listenHandoff: true, setAccepting: true,
  setDetailedEvents: true, holdForControlPlane: true, handOff: true, reject: true, listenChannel: true,
  openSession: true, setActiveSession: true, closeSession: true, sessionPending: true, setDefaultAction: true,
  setDecisionTimeout: true, respond: true, extendDeadline: true, stats: true, targetWaits: true, stop: true, applyPolicy: true, nameContainer: true, policyOf: true, explainRule: true,
} satisfies Record<keyof NativeEngine, true>;

const EMULATOR = {
  mkdir: true, mount: true, kill: true, freeze: true, thaw: true, forget: true, stats: true, benchMkdir: true, close: true,
} satisfies Record<keyof NativeEmulator, true>;

const TEST_SUPPORT = {
  receiveNotifyFd: true, recvNotification: true, answer: true, closeFd: true,
} satisfies Record<keyof EmulatorTestSupport, true>;

const sorted = (o: object) => Object.keys(o).sort();
const methods = (cls: { prototype: object }) => Object.getOwnPropertyNames(cls.prototype).filter((n) => n !== 'constructor').sort();

test('native.ts: the shipped addon exports exactly what NativeAddon declares, and no test or bench code', () => {
  const addon = loadNative();
  assert.deepEqual(sorted(addon), sorted(ADDON));
  assert.deepEqual(methods(addon.Engine), sorted(ENGINE), 'Engine methods');
});

test('channel-connection.ts: the control plane\'s channel addon exports exactly what ChannelIo declares, and refuses bad arguments', () => {
  const io = loadChannelIo();
  assert.ok(io, 'built by npm ci');
  assert.deepEqual(sorted(io), sorted(CHANNEL_IO));
  assert.throws(() => io.recv('3' as unknown as number, Buffer.alloc(1)), TypeError);
  assert.throws(() => io.send(3, 'bytes' as unknown as Uint8Array), TypeError);
  assert.equal(io.recv(-1, Buffer.alloc(1)), -9, 'a bad fd is -EBADF, not an exception');
  assert.throws(() => io.ringTake({} as never, Buffer.alloc(1)), TypeError, 'only a ring from ringOpen');
});

test('emulator-addon.ts: the test-only addon exports exactly what EmulatorAddon declares', () => {
  const addon = loadEmulatorAddon();
  assert.deepEqual(sorted(addon), sorted(TEST_ADDON));
  assert.deepEqual(methods(addon.Emulator), sorted(EMULATOR), 'Emulator methods');
  assert.deepEqual(sorted(addon.emulatorTestSupport), sorted(TEST_SUPPORT), 'emulatorTestSupport');
});
