// dataplane/native.ts declares exactly what the addon exports: each table below must name every
// member of its interface (the compiler checks, through `satisfies`), and the loaded addon must
// export exactly those (this test checks). Loading the addon needs no root and no kernel feature.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadNative, type NativeAddon, type NativeEmulator, type NativeEngine, type EmulatorTestSupport } from '../../dataplane/native';

const ADDON = {
  Engine: true, syscallNames: true, openFdCount: true, AUDIT_ARCH_X86_64: true, sdNotify: true, fdStoreStore: true,
  fdStoreRemove: true, takeListenFds: true, handoffConnect: true, handoffReceive: true, handoffAck: true,
  handoffWaitClosed: true, closeFd: true, probeKernel: true, Emulator: true, emulatorTestSupport: true,
} satisfies Record<keyof NativeAddon, true>;

const ENGINE = {
  start: true, listen: true, listenFd: true, adopt: true, restore: true, listenHandoff: true, setAccepting: true,
  setDetailedEvents: true, holdForControlPlane: true, handOff: true, reject: true, listenChannel: true,
  openSession: true, setActiveSession: true, closeSession: true, sessionPending: true, setDefaultAction: true,
  setDecisionTimeout: true, respond: true, stats: true, stop: true,
} satisfies Record<keyof NativeEngine, true>;

const EMULATOR = {
  mkdir: true, mount: true, kill: true, freeze: true, thaw: true, forget: true, stats: true, benchMkdir: true, close: true,
} satisfies Record<keyof NativeEmulator, true>;

const TEST_SUPPORT = {
  receiveNotifyFd: true, recvNotification: true, answer: true, closeFd: true,
} satisfies Record<keyof EmulatorTestSupport, true>;

const sorted = (o: object) => Object.keys(o).sort();
const methods = (cls: { prototype: object }) => Object.getOwnPropertyNames(cls.prototype).filter((n) => n !== 'constructor').sort();

test('native.ts: the addon exports exactly what NativeAddon declares', () => {
  const addon = loadNative();
  assert.deepEqual(sorted(addon), sorted(ADDON));
  assert.deepEqual(methods(addon.Engine), sorted(ENGINE), 'Engine methods');
  assert.deepEqual(methods(addon.Emulator), sorted(EMULATOR), 'Emulator methods');
  assert.deepEqual(sorted(addon.emulatorTestSupport), sorted(TEST_SUPPORT), 'emulatorTestSupport');
});
