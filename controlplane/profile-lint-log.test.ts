import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SeccompSection } from '../common/profile/lint';
import { captureLogger } from '../test/support/log-capture';
import { CLEAN_LINT_SOCKET as SOCKET, cleanLintProfile as profile, lintRules as rules } from '../test/support/seccomp-profile';
import { ProfileLintLog } from './profile-lint-log';

test('control plane lint log: once per distinct profile, not per container; metadata only when the profile cannot be read', async () => {
  const { logger, lines } = captureLogger();
  const profiles: Record<string, SeccompSection | string> = {
    '/b/1': profile({ listenerMetadata: 'MKDIR_TMLP=-x' }),
    '/b/2': profile({ listenerMetadata: 'MKDIR_TMLP=-x' }),
    '/b/3': profile({ listenerMetadata: 'MKDIR_TMLP=-x', architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86'] }),
  };
  let asked = 0;
  const lintLog = new ProfileLintLog(logger, async () => {
    asked++;
    return [SOCKET];
  }, async (bundle) => profiles[bundle] ?? `cannot read ${bundle}/config.json`);
  const first = await lintLog.check({ containerId: 'c1', bundle: '/b/1', metadata: 'MKDIR_TMLP=-x' });
  assert.deepEqual(rules(first), ['warning metadata-key']);
  // Same profile, another container (and an exec of it): nothing logged again.
  assert.deepEqual(await lintLog.check({ containerId: 'c2', bundle: '/b/2', metadata: 'MKDIR_TMLP=-x' }), []);
  assert.deepEqual(await lintLog.check({ containerId: 'c1', bundle: '/b/1', metadata: 'MKDIR_TMLP=-x' }), []);
  // Another profile: logged.
  assert.deepEqual(rules(await lintLog.check({ containerId: 'c3', bundle: '/b/3', metadata: 'MKDIR_TMLP=-x' })).sort(), ['info compat-arch', 'warning metadata-key']);
  // Unreadable profile: the metadata's own rules only (no listenerPath or syscall rule can be judged).
  assert.deepEqual(rules(await lintLog.check({ containerId: 'c4', bundle: '.', metadata: 'MOUNT_PORC=true' })), ['warning metadata-key']);
  const logged = lines.filter((l) => /^profile lint, /.test(l.msg));
  assert.equal(logged.length, 4);
  assert.deepEqual(logged.map((l) => l.container), ['c1', 'c3', 'c3', 'c4']);
  assert.match(logged[0].msg, /did you mean MKDIR_TMPL\?.*logged once per profile/);
  assert.equal(logged[3].checked, 'listenerMetadata');
  assert.equal(asked, 3, 'the served paths are asked once per new profile');
  // A data plane that cannot be asked: the listener path is not judged (the fallback is not the shipped paths).
  const quiet = new ProfileLintLog(logger, async () => {
    throw new Error('unavailable');
  }, async () => profile({ listenerPath: '/tmp/elsewhere.sock' }));
  assert.deepEqual(await quiet.check({ containerId: 'c5', bundle: '/b/5', metadata: '' }), []);
});
