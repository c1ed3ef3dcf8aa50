// The control plane's view of the data plane's containers (one entry per notify fd), each with
// its parsed policy and its pod identity. Fed from the data plane's snapshot and its
// container_added / container_removed events; read by handle, synchronously, on every notification.
//
// Identity, in order: the runtime's pod annotations; else the pod UID in /proc/<pid>/cgroup,
// looked up in the pod cache; else unresolved. A container is resolved once every identity field
// its policy reads is known (MKDIR_TMPL is the only key that reads any). Unresolved containers are
// resolved again when the pod cache syncs and when a pod with their UID arrives or changes, so
// their later syscalls get the right policy; each container is logged once when it is admitted
// unresolved and once when it becomes resolved.
import { handleFromProto, type ContainerHandle } from '../common/container-handle';
import { AgentError } from '../common/errors';
import type { Logger } from '../common/logger';
import { readCgroupPod, type CgroupPodRef } from './kube/cgroup-pod-uid';
import { identityFromAnnotations, identityFromLabels, type PodIdentity } from '../common/pod-identity';
import { parseListenerMetadata, type ListenerPolicy } from '../common/profile/listener-metadata';
import { renderMkdirTemplate } from '../common/profile/mkdir-template';
import type { CachedPod, PodCacheEvents, PodCacheState } from './kube/pod-cache';
import type { Container } from '../proto/gen/seccompagent/v1/dataplane';

/** What a mkdir of this container gets from its policy. */
export type MkdirPlan =
  /** No MKDIR_TMPL: mkdir follows DEFAULT_ACTION, else continues. */
  | { readonly kind: 'none' }
  /** Emulate the mkdir with this suffix appended to the last path component. */
  | { readonly kind: 'suffix'; readonly suffix: string }
  /** The identity the template needs is not known yet: --unresolved-action. */
  | { readonly kind: 'unresolved'; readonly reason: string }
  /** The template's output is not a plain name suffix: --unresolved-action, and logged. */
  | { readonly kind: 'refused'; readonly error: AgentError };

export type Resolution = 'annotations' | 'cgroup' | 'unresolved';

export interface ContainerEntry {
  readonly handle: ContainerHandle;
  readonly containerId: string;
  /**
   * The container's init: the pid the runtime sent, or, for an fd that came with pid 0 (crun
   * sends pid 0 and bundle "." for exec fds), the pid of the first fd of the same container id.
   */
  readonly pid: number;
  /** The container's init fd (OCI status "creating"), not an exec's. */
  readonly initFd: boolean;
  /** The process that attached the filter (for an exec, the exec'd process); 0 when unknown. */
  readonly filterPid: number;
  readonly annotations: Readonly<Record<string, string>>;
  readonly policy: ListenerPolicy;
  /** Pod UID and container id from /proc/<pid>/cgroup, read once at admission. */
  readonly cgroup: CgroupPodRef | null;
  /** Where the identity came from, or 'unresolved'. */
  readonly resolution: Resolution;
  readonly identity: PodIdentity | null;
  readonly mkdir: MkdirPlan;
  /** Why the container is unresolved (for logs and seccompctl); '' when resolved. */
  readonly unresolvedReason: string;
}

/** The part of the pod cache the registry uses. */
export interface PodSource {
  readonly state: PodCacheState;
  lookup(uid: string): CachedPod | undefined;
  on<E extends keyof PodCacheEvents>(event: E, listener: (...args: PodCacheEvents[E]) => void): unknown;
  off<E extends keyof PodCacheEvents>(event: E, listener: (...args: PodCacheEvents[E]) => void): unknown;
  setPendingCounter?(counter: () => number): void;
}

export interface ContainerRegistryOptions {
  logger: Logger;
  /** The pod cache; null with --no-kubernetes. */
  pods: PodSource | null;
  /** --unresolved-action as typed, for log lines. */
  unresolvedAction: string;
  /** Reads the pod of a pid from its cgroup (tests replace it). */
  readCgroup?: (pid: number) => CgroupPodRef | null;
  /** Called whenever an entry's identity or policy was (re)computed. */
  onChange?: (entry: ContainerEntry) => void;
}

type MutableEntry = { -readonly [K in keyof ContainerEntry]: ContainerEntry[K] } & {
  /** Identity from the annotations, computed once. */
  fromAnnotations: PodIdentity | null;
  /** Identity a previous control plane resolved from the cgroup and kept in the data plane's labels. */
  fromLabels: PodIdentity | null;
  /** Why /proc/<pid>/cgroup could not be read, '' when it could. */
  cgroupError: string;
};

interface Logged {
  warnings: boolean;
  unresolved: boolean;
  refused: boolean;
}

export class ContainerRegistry {
  private readonly entries = new Map<ContainerHandle, MutableEntry>();
  /** Unresolved handles; by pod UID too, so a pod event re-resolves only its own containers. */
  private readonly unresolved = new Set<ContainerHandle>();
  private readonly unresolvedByUid = new Map<string, Set<ContainerHandle>>();
  /** Live handles per container id: logs say things once per container, not per exec. */
  private readonly handlesByContainer = new Map<string, number>();
  /** The init pid per container id, from its first fd that named one (see ContainerEntry.pid). */
  private readonly initPids = new Map<string, number>();
  private readonly logged = new Map<string, Logged>();
  private readonly log: Logger;
  private readonly pods: PodSource | null;
  private readonly unresolvedAction: string;
  private readonly readCgroup: (pid: number) => CgroupPodRef | null;
  private readonly onChange: ((entry: ContainerEntry) => void) | undefined;
  private readonly onReachable = () => this.resolveAll();
  private readonly onPod = (pod: CachedPod) => this.resolvePod(pod);

  constructor(options: ContainerRegistryOptions) {
    this.log = options.logger;
    this.pods = options.pods;
    this.unresolvedAction = options.unresolvedAction;
    this.readCgroup = options.readCgroup ?? ((pid) => readCgroupPod(pid));
    this.onChange = options.onChange;
    if (this.pods) {
      this.pods.on('reachable', this.onReachable);
      this.pods.on('pod', this.onPod);
      this.pods.setPendingCounter?.(() => this.unresolved.size);
    }
  }

  /** Stops following the pod cache. */
  close(): void {
    this.pods?.off('reachable', this.onReachable);
    this.pods?.off('pod', this.onPod);
  }

  /** The entry of a notify fd: a Map read, for the notification path. */
  get(handle: ContainerHandle): ContainerEntry | undefined {
    return this.entries.get(handle);
  }

  get size(): number {
    return this.entries.size;
  }

  /** Entries whose policy still waits for an identity. */
  get unresolvedCount(): number {
    return this.unresolved.size;
  }

  values(): IterableIterator<ContainerEntry> {
    return this.entries.values();
  }

  /**
   * A container the data plane announced (snapshot, container_added), as the API's Container;
   * replaces an entry with the same handle. Its labels are those of the policy the data plane
   * holds for it (a previous control plane's word).
   */
  add(info: Container): ContainerEntry {
    const handle = handleFromProto(info.handle);
    if (this.entries.has(handle)) this.remove(handle);
    const { policy, warnings } = parseListenerMetadata(info.metadata ?? '');
    const annotations = Object.freeze({ ...(info.annotations ?? {}) });
    const pid = info.pid > 0 ? info.pid : this.initPids.get(info.containerId) ?? 0;
    if (pid > 0 && !this.initPids.has(info.containerId)) this.initPids.set(info.containerId, pid);
    let cgroup: CgroupPodRef | null = null;
    let cgroupError = '';
    const fromAnnotations = identityFromAnnotations(annotations);
    if (!fromAnnotations) {
      try {
        cgroup = this.readCgroup(pid);
      } catch (err) {
        cgroupError = (err as Error).message;
      }
    }
    const entry: MutableEntry = {
      handle,
      containerId: info.containerId,
      pid,
      initFd: info.status === 'creating',
      filterPid: info.processPid ?? 0,
      annotations,
      policy,
      cgroup,
      resolution: 'unresolved',
      identity: null,
      mkdir: { kind: 'none' },
      unresolvedReason: '',
      fromAnnotations,
      fromLabels: fromAnnotations ? null : identityFromLabels(info.labels),
      cgroupError,
    };
    this.entries.set(handle, entry);
    this.handlesByContainer.set(info.containerId, (this.handlesByContainer.get(info.containerId) ?? 0) + 1);
    const logged = this.loggedFor(info.containerId);
    if (!logged.warnings) {
      logged.warnings = true;
      for (const warning of warnings) {
        this.log.warn({ container: info.containerId, handle: String(handle), code: warning.code, key: warning.key }, warning.message);
      }
    }
    this.resolve(entry, true);
    return entry;
  }

  /** A notify fd the data plane closed. */
  remove(handle: ContainerHandle): boolean {
    const entry = this.entries.get(handle);
    if (!entry) return false;
    this.entries.delete(handle);
    this.forgetUnresolved(entry);
    const left = (this.handlesByContainer.get(entry.containerId) ?? 1) - 1;
    if (left > 0) this.handlesByContainer.set(entry.containerId, left);
    else {
      this.handlesByContainer.delete(entry.containerId);
      this.initPids.delete(entry.containerId);
      this.logged.delete(entry.containerId);
    }
    return true;
  }

  /** A snapshot after (re)attaching: the data plane's list is the truth. */
  replaceAll(infos: readonly Container[]): void {
    const keep = new Set(infos.map((info) => handleFromProto(info.handle)));
    for (const handle of [...this.entries.keys()]) if (!keep.has(handle)) this.remove(handle);
    // Fds that name a pid first: an exec fd with pid 0 then finds its container's init.
    infos = [...infos].sort((a, b) => Number(b.pid > 0) - Number(a.pid > 0));
    for (const info of infos) {
      const existing = this.entries.get(handleFromProto(info.handle));
      if (existing && existing.containerId === info.containerId) continue;
      this.add(info);
    }
  }

  /** Tries every unresolved container again (the pod cache synced). */
  resolveAll(): void {
    for (const handle of [...this.unresolved]) {
      const entry = this.entries.get(handle);
      if (entry) this.resolve(entry, false);
    }
  }

  private resolvePod(pod: CachedPod): void {
    const handles = new Set([...(this.unresolvedByUid.get(pod.uid) ?? []), ...(pod.mirrorHash ? this.unresolvedByUid.get(pod.mirrorHash) ?? [] : [])]);
    for (const handle of handles) {
      const entry = this.entries.get(handle);
      if (entry) this.resolve(entry, false);
    }
  }

  private loggedFor(containerId: string): Logged {
    let logged = this.logged.get(containerId);
    if (!logged) {
      logged = { warnings: false, unresolved: false, refused: false };
      this.logged.set(containerId, logged);
    }
    return logged;
  }

  /** The identity from the cgroup's pod UID and the cache, or the reason there is none. */
  private identityFromCache(entry: MutableEntry): PodIdentity | string {
    if (entry.cgroupError) return `no pod annotations, and ${entry.cgroupError}`;
    if (!entry.cgroup) {
      return `no pod annotations, and no pod UID in /proc/${entry.pid}/cgroup (not a Kubernetes pod, or the process is gone)`;
    }
    const uid = entry.cgroup.podUid;
    if (!this.pods) return `no pod annotations, and --no-kubernetes: pod UID ${uid} from its cgroup cannot be looked up`;
    const pod = this.pods.lookup(uid);
    if (!pod) {
      const why =
        this.pods.state === 'synced'
          ? 'no pod with that UID on this node'
          : this.pods.state === 'connecting'
            ? 'the pod cache is still syncing'
            : 'the Kubernetes API server is unreachable';
      return `no pod annotations, and pod UID ${uid} from its cgroup is not in the pod cache (${why})`;
    }
    return Object.freeze({
      namespace: pod.namespace,
      pod: pod.pod,
      container: pod.containers.get(entry.containerId) ?? (entry.cgroup.containerId ? pod.containers.get(entry.cgroup.containerId) : undefined) ?? null,
      podUid: pod.uid,
      source: 'cgroup',
    });
  }

  private resolve(entry: MutableEntry, admitting: boolean): void {
    let found = entry.fromAnnotations ?? this.identityFromCache(entry);
    if (typeof found === 'string' && entry.fromLabels) {
      // An earlier control plane resolved it and the data plane kept the answer: the pod has not
      // changed while its container runs, so an API outage now loses nothing.
      this.log.info(
        { container: entry.containerId, handle: String(entry.handle), namespace: entry.fromLabels.namespace, pod: entry.fromLabels.pod },
        `container ${entry.containerId} keeps the pod identity the data plane holds for it (${entry.fromLabels.namespace}/${entry.fromLabels.pod}, resolved earlier from its cgroup): ${found}`,
      );
      found = entry.fromLabels;
    }
    const identity = typeof found === 'string' ? null : found;
    let reason = typeof found === 'string' ? found : '';
    let mkdir: MkdirPlan = { kind: 'none' };
    const template = entry.policy.mkdirTemplate;
    if (template) {
      if (!identity) {
        mkdir = { kind: 'unresolved', reason };
      } else {
        try {
          mkdir = { kind: 'suffix', suffix: renderMkdirTemplate(template, identity) };
        } catch (err) {
          const error = err as AgentError;
          if (error.code === 'EMKDIR_VALUE_UNKNOWN') {
            reason =
              identity.source === 'annotations'
                ? 'its pod annotations name no container, and MKDIR_TMPL reads {{.Container}}'
                : `pod ${identity.namespace}/${identity.pod} does not list container ${entry.containerId} in its status yet, and MKDIR_TMPL reads {{.Container}}`;
            mkdir = { kind: 'unresolved', reason };
          } else {
            mkdir = { kind: 'refused', error };
          }
        }
      }
    }
    const wasUnresolved = entry.resolution === 'unresolved';
    entry.identity = identity;
    entry.mkdir = Object.freeze(mkdir);
    entry.unresolvedReason = mkdir.kind === 'unresolved' || !identity ? reason : '';
    const pending = mkdir.kind === 'unresolved' || !identity;
    entry.resolution = pending ? 'unresolved' : identity.source;
    const logged = this.loggedFor(entry.containerId);
    const fields = {
      container: entry.containerId,
      handle: String(entry.handle),
      ...(identity ? { namespace: identity.namespace, pod: identity.pod } : {}),
    };

    if (pending) {
      this.trackUnresolved(entry);
      if (!logged.unresolved) {
        logged.unresolved = true;
        if (template) {
          this.log.warn(
            fields,
            `container ${entry.containerId} is unresolved (${reason}): MKDIR_TMPL is not applied and its mkdir gets --unresolved-action (${this.unresolvedAction}) until it is resolved; other policy keys apply`,
          );
        } else {
          this.log.info(fields, `container ${entry.containerId} has no pod identity (${reason}); its policy does not need one`);
        }
      }
    } else {
      this.forgetUnresolved(entry);
      if (wasUnresolved && !admitting && logged.unresolved) {
        logged.unresolved = false;
        this.log.info(
          fields,
          `container ${entry.containerId} resolved to pod ${identity.namespace}/${identity.pod}` +
            `${identity.container ? ` container ${identity.container}` : ''} (from ${identity.source === 'cgroup' ? 'its cgroup and the pod cache' : 'annotations'})` +
            `${mkdir.kind === 'suffix' ? `: its mkdir now gets the suffix "${mkdir.suffix}"` : ''}`,
        );
      }
    }
    if (mkdir.kind === 'refused' && !logged.refused) {
      logged.refused = true;
      this.log.warn({ ...fields, code: mkdir.error.code }, `container ${entry.containerId}: ${mkdir.error.message}; its mkdir gets --unresolved-action (${this.unresolvedAction})`);
    }
    this.onChange?.(entry);
  }

  private trackUnresolved(entry: MutableEntry): void {
    this.unresolved.add(entry.handle);
    const uid = entry.cgroup?.podUid;
    if (!uid) return;
    let handles = this.unresolvedByUid.get(uid);
    if (!handles) {
      handles = new Set();
      this.unresolvedByUid.set(uid, handles);
    }
    handles.add(entry.handle);
  }

  private forgetUnresolved(entry: MutableEntry): void {
    this.unresolved.delete(entry.handle);
    const uid = entry.cgroup?.podUid;
    const handles = uid ? this.unresolvedByUid.get(uid) : undefined;
    if (!handles) return;
    handles.delete(entry.handle);
    if (handles.size === 0) this.unresolvedByUid.delete(uid!);
  }
}
