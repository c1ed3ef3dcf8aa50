// Decides each notification from the container's listenerMetadata policy and its pod identity:
// mkdir with MKDIR_TMPL is emulated with the suffix, allowed mounts are emulated, DEFAULT_ACTION
// kills or freezes, everything else continues. Synchronous: a Map lookup and string work only.
import type { Logger } from '../common/logger';
import type { NativeDefaultAction } from '../dataplane/native';
import type { Decision, Notification } from '../proto/gen/seccompagent/v1/dataplane';
import type { ContainerEntry, ContainerRegistry } from './container-registry';

/** Decision counts by action, for metrics. */
export type DecisionKind = 'continue' | 'error' | 'mkdir' | 'mount' | 'kill' | 'freeze' | 'unresolved';

const MKDIR_ARGS: Record<string, { path: number; mode: number }> = {
  mkdir: { path: 0, mode: 1 },
  mkdirat: { path: 1, mode: 2 },
};
const ENAMETOOLONG = 36;
const EFAULT = 14;
const EINVAL = 22;
/** mount(source, target, fstype, flags, data): the options text is argument 4. */
const MOUNT_DATA_ARG = 4;

function stringArg(n: Notification, index: number): { value: string; truncated: boolean } | null {
  return n.stringArgs.find((s) => s.index === index) ?? null;
}

/** `/tmp/a/` + `-ns-pod` -> `/tmp/a-ns-pod`: the suffix goes on the last path component. */
export function withSuffix(path: string, suffix: string): string {
  const trimmed = path.replace(/\/+$/, '');
  return trimmed === '' ? path : `${trimmed}${suffix}`;
}

export class PolicyEngine {
  readonly counts = new Map<DecisionKind, number>();

  constructor(
    private readonly registry: Pick<ContainerRegistry, 'get'>,
    private readonly unresolvedAction: NativeDefaultAction,
    private readonly log: Logger,
    /** The policy resources (resource-policy.ts) answer first; null falls through to listenerMetadata. */
    private readonly resources?: { decide(entry: ContainerEntry, n: Notification): Decision['action'] | null },
  ) {}

  private count(kind: DecisionKind): void {
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
  }

  decide(n: Notification): Decision {
    const entry = this.registry.get(n.handle);
    const action = entry ? (this.resources?.decide(entry, n) ?? this.actionFor(entry, n)) : this.continueUnknown(n);
    return { handle: n.handle, id: n.id, action };
  }

  private continueUnknown(n: Notification): Decision['action'] {
    this.log.debug({ handle: Number(n.handle), id: String(n.id), syscall: n.syscall }, 'notification for a container the control plane does not know yet: continue');
    this.count('continue');
    return { $case: 'continue', continue: {} };
  }

  private actionFor(entry: ContainerEntry, n: Notification): Decision['action'] {
    const mkdirArgs = MKDIR_ARGS[n.syscall];
    if (mkdirArgs) {
      const action = this.mkdirAction(entry, n, mkdirArgs);
      if (action) return action;
    }
    if (n.syscall === 'mount' && entry.policy.mount) {
      const fstype = stringArg(n, 2)?.value ?? '';
      if (entry.policy.mount.filesystems.includes(fstype)) {
        // The options text (tmpfs size=1m,mode=0700) is passed on as read; one longer than the
        // data plane reads is refused rather than cut (a cut option could widen the mount).
        const data = stringArg(n, MOUNT_DATA_ARG);
        if (data?.truncated) {
          this.count('error');
          return { $case: 'error', error: { errno: EINVAL } };
        }
        this.count('mount');
        return {
          $case: 'mount',
          mount: {
            source: stringArg(n, 0)?.value ?? '',
            target: stringArg(n, 1)?.value ?? '',
            fstype,
            flags: n.args[3] ?? 0n,
            data: data?.value ?? '',
            requireCapSysAdmin: entry.policy.mount.needCapAdmin,
          },
        };
      }
    }
    return this.fallback(entry);
  }

  /** null when the policy has no mkdir rule for this container. */
  private mkdirAction(entry: ContainerEntry, n: Notification, args: { path: number; mode: number }): Decision['action'] | null {
    const plan = entry.mkdir;
    switch (plan.kind) {
      case 'none':
        return null;
      case 'unresolved':
      case 'refused':
        this.count('unresolved');
        return this.unresolvedAction.kind === 'continue'
          ? { $case: 'continue', continue: {} }
          : { $case: 'error', error: { errno: this.unresolvedAction.errno } };
      case 'suffix': {
        const path = stringArg(n, args.path);
        if (!path || path.truncated) {
          this.count('error');
          return { $case: 'error', error: { errno: path ? ENAMETOOLONG : EFAULT } };
        }
        this.count('mkdir');
        return { $case: 'mkdir', mkdir: { path: withSuffix(path.value, plan.suffix), mode: Number((n.args[args.mode] ?? 0o777n) & 0o7777n) } };
      }
    }
  }

  /** What a syscall without a rule of its own gets: DEFAULT_ACTION, else continue. */
  private fallback(entry: ContainerEntry): Decision['action'] {
    switch (entry.policy.defaultAction) {
      case 'kill-container':
        this.count('kill');
        return { $case: 'kill', kill: { signal: 0 } };
      case 'freeze-container':
        this.count('freeze');
        return { $case: 'freeze', freeze: { errno: 0 } };
      default:
        this.count('continue');
        return { $case: 'continue', continue: {} };
    }
  }
}
