// The linter in the control plane's log: when a container arrives, its profile is checked once
// per distinct profile (not per container, not per exec) and each finding logged as one line.
// The profile is the container's bundle config.json (linux.seccomp) when this process can read
// it (as root on the host); otherwise only its listenerMetadata, which the data plane passes on.
// Off the answer path: runs after the container is registered, reads at most MAX_CONFIG_BYTES.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { Logger } from '../common/logger';
import { lintProfile, type LintFinding, type SeccompSection } from '../common/profile/lint';

const MAX_CONFIG_BYTES = 4 * 1024 * 1024;
/** Distinct profiles remembered; past it the oldest are forgotten (and would be logged again). */
const MAX_PROFILES = 4096;

export interface ArrivingContainer {
  containerId: string;
  /** state.bundle: its config.json holds the profile ("" or "." when unknown, as crun's exec fds). */
  bundle: string;
  metadata: string;
}

/** The container's seccomp section from its bundle, or why it could not be read. */
export async function readBundleProfile(bundle: string): Promise<SeccompSection | string> {
  if (!path.isAbsolute(bundle)) return `no bundle path ("${bundle}")`;
  const file = path.join(bundle, 'config.json');
  let handle: fs.FileHandle | null = null;
  try {
    handle = await fs.open(file, 'r');
    const { size } = await handle.stat();
    if (size > MAX_CONFIG_BYTES) return `${file} is larger than ${MAX_CONFIG_BYTES} bytes`;
    const buffer = Buffer.alloc(size);
    const { bytesRead } = await handle.read(buffer, 0, size, 0);
    const config = JSON.parse(buffer.subarray(0, bytesRead).toString('utf8')) as { linux?: { seccomp?: SeccompSection } };
    return config.linux?.seccomp ?? `${file} has no linux.seccomp`;
  } catch (err) {
    return `cannot read ${file}: ${(err as Error).message}`;
  } finally {
    await handle?.close();
  }
}

export class ProfileLintLog {
  private readonly seen = new Set<string>();
  /** One check at a time: a snapshot of a thousand containers reads one config.json after another. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly log: Logger,
    /** The listener paths the data plane serves (GetStatus); the shipped ones when it cannot say. */
    private readonly servedPaths: () => Promise<readonly string[]>,
    private readonly readProfile: (bundle: string) => Promise<SeccompSection | string> = readBundleProfile,
  ) {}

  /** Checks the container's profile unless an identical one was checked; resolves with what it logged. */
  check(container: ArrivingContainer): Promise<LintFinding[]> {
    const next = this.queue.then(() => this.checkNow(container));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async checkNow(container: ArrivingContainer): Promise<LintFinding[]> {
    const profile = await this.readProfile(container.bundle);
    const full = typeof profile !== 'string';
    const section: SeccompSection = full ? profile : { listenerMetadata: container.metadata };
    // The metadata the data plane got is what the agent uses, whatever the file says now.
    const key = createHash('sha256').update(JSON.stringify([full, { ...section, listenerMetadata: container.metadata }])).digest('hex').slice(0, 16);
    if (this.seen.has(key)) return [];
    if (this.seen.size >= MAX_PROFILES) this.seen.delete(this.seen.values().next().value!);
    this.seen.add(key);
    // Unknown when the data plane cannot say (it is restarting): then whether the profile's
    // listenerPath is served is not judged, rather than judged against paths it may not serve.
    let served: readonly string[] | null = null;
    try {
      const paths = await this.servedPaths();
      if (paths.length > 0) served = paths;
    } catch {
      served = null;
    }
    const findings = lintProfile(section, { metadata: container.metadata, servedPaths: served, metadataOnly: !full });
    const scope = full ? 'profile' : `listenerMetadata only (${profile})`;
    for (const f of findings) {
      const fields = { container: container.containerId, profile: key, checked: full ? 'profile' : 'listenerMetadata', severity: f.severity, rule: f.rule, why: f.why, fix: f.fix };
      const line = `profile lint, ${f.severity} ${f.rule}: ${f.message}; fix: ${f.fix} (first container with this profile: ${container.containerId}; logged once per profile; seccompctl lint checks a profile file)`;
      if (f.severity === 'info') this.log.info(fields, line);
      else this.log.warn(fields, line);
    }
    if (findings.length === 0) this.log.debug({ container: container.containerId, profile: key }, `profile lint: no findings (${scope})`);
    return findings;
  }
}
