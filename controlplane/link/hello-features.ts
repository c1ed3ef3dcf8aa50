// The features this control plane names in its Hello, and what it loses on a data plane of another
// release (docs/upgrades.md, "Attach"): the Welcome lists the features the data plane speaks; a decision kind it does not list would be
// refused there (the default action answers instead), and without policy.v1 nothing answers from
// compiled policy while no control plane is attached. Said once per attach, as a warning.
import { EMULATION_FEATURES } from '../../common/emulations';
import { MKDIR_SUFFIX_FEATURE } from '../../common/mkdir-suffix-feature';
import { POLICY_FEATURE } from '../../common/policy-feature';
import type { DataplaneForms } from '../policy/rule-matcher';

/** Decisions this control plane may send, and compiled policy (Hello.features). */
export const CONTROLPLANE_FEATURES = ['decision.continue', 'decision.error', ...EMULATION_FEATURES, POLICY_FEATURE];

/** The line to log when `welcome` (Welcome.features) lacks some of `ours` (Hello.features); null when none is missing. */
export function skewWarning(ours: readonly string[], welcome: readonly string[], dataplaneVersion: string): string | null {
  const missing = ours.filter((f) => !welcome.includes(f));
  if (missing.length === 0) return null;
  const decisions = missing.filter((f) => f.startsWith('decision.'));
  const consequences: string[] = [];
  if (decisions.length > 0) consequences.push(`its ${decisions.map((f) => f.slice('decision.'.length)).join(', ')} decisions would be refused there, so those notifications get the data plane's default action`);
  if (missing.includes(POLICY_FEATURE)) consequences.push('no compiled policy is pushed: every notification is decided over Attach, and while no control plane is attached the default action answers');
  const other = missing.filter((f) => !f.startsWith('decision.') && f !== POLICY_FEATURE);
  if (other.length > 0) consequences.push(`${other.join(', ')} unused`);
  return `data plane ${dataplaneVersion || '(no version)'} does not speak ${missing.join(', ')}: ${consequences.join('; ')}. Run both planes within one minor release of each other (docs/upgrades.md)`;
}

/**
 * The decision forms a data plane takes, from its Welcome.features: one without
 * MKDIR_SUFFIX_FEATURE gets a mkdir under a suffix as the whole path (nothing is lost, no warning).
 */
export function dataplaneForms(welcome: readonly string[]): DataplaneForms {
  return { mkdirSuffix: welcome.includes(MKDIR_SUFFIX_FEATURE) };
}
