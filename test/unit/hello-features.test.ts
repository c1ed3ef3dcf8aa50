// The two planes' feature lists side by side (the control plane never imports the data plane; a test may).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CONTROLPLANE_FEATURES, skewWarning } from '../../controlplane/link/hello-features';
import { DATAPLANE_FEATURES } from '../../dataplane/decisions';

test('control plane skew warning: none against a data plane of this release (it offers every feature this control plane uses)', () => {
  assert.equal(skewWarning(CONTROLPLANE_FEATURES, DATAPLANE_FEATURES, '0.2.0'), null);
});

test('control plane skew warning: a data plane without policy.v1 or a decision kind is named, with what answers instead', () => {
  const line = skewWarning(CONTROLPLANE_FEATURES, ['decision.continue', 'decision.error', 'decision.mkdir', 'decision.mount'], '0.0.9');
  assert.ok(line);
  assert.match(line, /^data plane 0\.0\.9 does not speak decision\.kill, decision\.freeze, policy\.v1: /);
  assert.match(line, /its kill, freeze decisions would be refused there/);
  assert.match(line, /no compiled policy is pushed/);
});
