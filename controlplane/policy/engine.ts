// Decides each notification from the container's listenerMetadata policy and its pod identity:
// mkdir with MKDIR_TMPL is emulated with the suffix, allowed mounts are emulated, DEFAULT_ACTION
// kills or freezes, everything else continues. Synchronous: a Map lookup and byte work only.
// Paths are bytes: decisions carry the exact bytes the container gave (`*_bytes` fields), and the
// string fields beside them only their lossy UTF-8 reading, for data planes older than those.
import { handleFromProto } from '../../common/container-handle';
import type { FallbackAction } from '../../common/default-action';
import type { Logger } from '../../common/logger';
import type { Decision, Notification, PolicyFinding } from '../../proto/gen/seccompagent/v1/dataplane';
import type { ContainerEntry, ContainerRegistry } from '../container-registry';
import type { ExecHolds } from './listener-metadata/exec-hold';
import { suffixedMkdir } from './listener-metadata/mkdir-path';

/** Decision counts by action, for metrics. */
export type DecisionKind = 'continue' | 'error' | 'mkdir' | 'mount' | 'kill' | 'freeze' | 'unresolved';

const MKDIR_ARGS: Record<string, { path: number; mode: number }> = {
  mkdir: { path: 0, mode: 1 },
  mkdirat: { path: 1, mode: 2 },
};
const EINVAL = 22;
const NO_BYTES = Buffer.alloc(0);

type StringArg = Notification['stringArgs'][number];

function stringArg(n: Notification, index: number): StringArg | null {
  return n.stringArgs.find((s) => s.index === index) ?? null;
}

/** The argument's exact bytes; from a data plane older than `raw`, its text as UTF-8. */
function bytesOf(arg: StringArg | null): Buffer {
  if (!arg) return NO_BYTES;
  return arg.raw ?? Buffer.from(arg.value, 'utf8');
}

export class PolicyEngine {
  readonly counts = new Map<DecisionKind, number>();

  constructor(
    private readonly registry: Pick<ContainerRegistry, 'get'>,
    private readonly unresolvedAction: FallbackAction,
    private readonly log: Logger,
    /** The policy resources (resource-policy.ts) answer first; null falls through to listenerMetadata. */
    private readonly resources?: { decide(entry: ContainerEntry, n: Notification, findings?: PolicyFinding[], deadline?: number): Decision['action'] | null },
    /** EXEC_PATTERN and SIDECARS (exec-hold.ts): an execve that waits is answered later. */
    private readonly holds?: Pick<ExecHolds, 'decide'>,
  ) {}

  private count(kind: DecisionKind): void {
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
  }

  /** The decision now (an execve that EXEC_PATTERN or SIDECARS would hold continues at once). */
  decide(n: Notification): Decision {
    return this.decideWith(n, false) as Decision;
  }

  /** For the data plane link: the decision, or a Promise of it for an execve that EXEC_PATTERN or SIDECARS holds. */
  answer(n: Notification, deadline?: number): Decision | Promise<Decision> {
    return this.decideWith(n, true, deadline);
  }

  private decideWith(n: Notification, holding: boolean, deadline?: number): Decision | Promise<Decision> {
    const entry = this.registry.get(handleFromProto(n.handle));
    const findings: PolicyFinding[] = [];
    if (!entry) return { handle: n.handle, id: n.id, action: this.continueUnknown(n), findings };
    const answered = this.resources?.decide(entry, n, findings, deadline);
    if (answered) return { handle: n.handle, id: n.id, action: answered, findings };
    if (!holding && n.syscall === 'execve' && (entry.policy.exec || entry.policy.sidecars)) {
      this.count('continue');
      return { handle: n.handle, id: n.id, action: { $case: 'continue', continue: {} }, findings };
    }
    const held = holding ? this.holds?.decide(entry, n) : null;
    if (held) {
      this.count('continue');
      return held instanceof Promise ? held.then((action) => ({ handle: n.handle, id: n.id, action, findings })) : { handle: n.handle, id: n.id, action: held, findings };
    }
    return { handle: n.handle, id: n.id, action: this.actionFor(entry, n), findings };
  }

  private continueUnknown(n: Notification): Decision['action'] {
    this.log.debug({ handle: Number(n.handle), id: String(n.id), syscall: n.syscall }, 'notification for a container the control plane does not know yet: continue');
    this.count('continue');
    return { $case: 'continue', continue: {} };
  }

  private actionFor(entry: ContainerEntry, n: Notification): Decision['action'] {
    const mkdirArgs = MKDIR_ARGS[n.syscall];
    if (mkdirArgs) {
      const action = this.mkdirAction(entry, n);
      if (action) return action;
    }
    if (n.syscall === 'mount' && entry.policy.mount) {
      const fstype = bytesOf(stringArg(n, 2));
      if (entry.policy.mount.filesystems.some((name) => fstype.equals(Buffer.from(name, 'utf8')))) {
        // Mount data (argument 4): empty when absent; a truncated one is not what the caller meant.
        const dataArg = stringArg(n, 4);
        if (dataArg?.truncated) {
          this.count('error');
          return { $case: 'error', error: { errno: EINVAL } };
        }
        const source = bytesOf(stringArg(n, 0));
        const target = bytesOf(stringArg(n, 1));
        const data = bytesOf(dataArg);
        this.count('mount');
        return {
          $case: 'mount',
          mount: {
            source: source.toString('utf8'),
            target: target.toString('utf8'),
            fstype: fstype.toString('utf8'),
            flags: n.args[3] ?? 0n,
            data: data.toString('utf8'),
            requireCapSysAdmin: entry.policy.mount.needCapAdmin,
            sourceBytes: source,
            targetBytes: target,
            fstypeBytes: fstype,
            dataBytes: data,
          },
        };
      }
    }
    return this.fallback(entry);
  }

  /** null when the policy has no mkdir rule for this container. */
  private mkdirAction(entry: ContainerEntry, n: Notification): Decision['action'] | null {
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
        const action = suffixedMkdir(n, plan.suffix)!;
        this.count(action.$case === 'mkdir' ? 'mkdir' : 'error');
        return action;
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
