// What the control plane remembers across its own restarts: the node checkpoint (checkpoint.ts)
// read once at start into the caches, and written again (debounced, asynchronously) once every
// informer has synced and whenever their content changes. A checkpoint is used only for the same
// node and the same API server URL (one from another cluster or test never answers here).
import { AgentError } from '../../common/errors';
import type { Logger } from '../../common/logger';
import { readCheckpoint, writeCheckpoint, type CheckpointContent } from './checkpoint';
import { DebouncedTask } from '../debounced-task';
import type { PodCache } from './pod-cache';
import type { PolicySet } from '../policy/resources/set';
import type { PolicySources } from '../policy/resources/sources';

const WRITE_DELAY_MS = 500;

export class NodeState {
  private loaded: CheckpointContent | null = null;
  private readonly writer = new DebouncedTask(() => this.write(), WRITE_DELAY_MS);
  private announced = false;

  constructor(
    private readonly dir: string,
    private readonly node: string,
    private readonly pods: PodCache,
    private readonly sources: PolicySources,
    private readonly set: PolicySet,
    private readonly log: Logger,
  ) {}

  /** Reads the checkpoint and seeds the caches with it; a corrupt one is refused with one error line. */
  load(serverUrl: string): void {
    let content: CheckpointContent | null;
    try {
      content = readCheckpoint(this.dir);
    } catch (err) {
      const e = err as AgentError;
      this.log.error({ code: e.code, dir: this.dir }, e.message);
      return;
    }
    if (!content) return;
    const server = content.server;
    if (content.node !== this.node || server !== serverUrl) {
      this.log.warn({ dir: this.dir, node: content.node, server }, `checkpoint in ${this.dir} is for node ${content.node} at ${server}, not ${this.node} at ${serverUrl}: not used`);
      return;
    }
    this.loaded = content;
    this.pods.seed(content.pods);
    this.sources.seed(content.inForce, content.policies, content.namespaces);
  }

  /** Wires the line of a start from the checkpoint and the writes; call after load(). */
  start(): void {
    const onUnreachable = ({ reason }: { reason: string }) => {
      if (!this.loaded || this.announced || this.pods.informer.state === 'synced') return;
      this.announced = true;
      const c = this.loaded;
      this.log.warn(
        { reason, checkpoint: c.writtenAt, pods: c.pods.length, policies: c.policies.length },
        `API server unreachable; using the checkpoint from ${c.writtenAt}: ${c.pods.length} pods, ${c.policies.length} policies`,
      );
    };
    this.pods.on('unreachable', onUnreachable);
    const changed = () => this.schedule();
    this.pods.informer.on('upsert', changed);
    this.pods.informer.on('delete', changed);
    this.pods.informer.on('synced', changed);
    for (const informer of [this.sources.policies.namespaced, this.sources.policies.cluster, this.sources.namespaces]) {
      informer.on('upsert', changed);
      informer.on('delete', changed);
      informer.on('synced', changed);
    }
    // Namespaces that cannot be listed do not hold the checkpoint back (write() says which are used).
    this.sources.namespaces.on('unreachable', changed);
  }

  async stop(): Promise<void> {
    await this.writer.stop();
  }

  private schedule(): void {
    this.writer.schedule();
  }

  /**
   * Only content every informer has synced is written: a checkpoint never holds half a list. The
   * namespaces are the exception: a control plane that may not list them (an RBAC without list
   * namespaces) still writes its pods and policies, with the namespaces' labels it has cached.
   */
  private async write(): Promise<void> {
    if (this.pods.informer.state !== 'synced' || !this.sources.policiesSynced || this.sources.namespaces.state === 'connecting') return;
    const entries = [...this.set.values()];
    const content = {
      writtenAt: new Date().toISOString(),
      node: this.node,
      server: this.pods.serverUrl,
      pods: [...this.pods.pods()],
      namespaces: [...this.sources.namespaces.values()],
      policies: [...this.sources.policies.namespaced.values(), ...this.sources.policies.cluster.values()],
      inForce: entries.filter((e) => e.inForce && e.inForce.generation !== e.object.generation).map((e) => e.inForce!.object),
    };
    try {
      await writeCheckpoint(this.dir, content);
      if (this.loaded) {
        this.log.info({ dir: this.dir, pods: content.pods.length, policies: content.policies.length }, `checkpoint replaced with the API server's state: ${content.pods.length} pods, ${content.policies.length} policies`);
        this.loaded = null;
      }
    } catch (err) {
      this.log.warn({ dir: this.dir, err }, `checkpoint not written to ${this.dir} (${(err as Error).message}); the previous one stays`);
    }
  }
}
