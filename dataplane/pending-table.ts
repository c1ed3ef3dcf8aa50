// Notifications forwarded to a control plane and not yet answered, by native handle and id,
// plus a short memory of those the deadline answered, to tell a late decision from a bogus one.

export interface PendingEntry<S> {
  session: S;
  syscall: string;
  containerId: string;
}

const RECENTLY_EXPIRED_LIMIT = 8192;

export class PendingTable<S> {
  private readonly byHandle = new Map<number, Map<bigint, PendingEntry<S>>>();
  private readonly expired = new Set<string>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(handle: number, id: bigint, entry: PendingEntry<S>): void {
    let ids = this.byHandle.get(handle);
    if (!ids) this.byHandle.set(handle, (ids = new Map()));
    if (!ids.has(id)) this.count++;
    ids.set(id, entry);
  }

  get(handle: number, id: bigint): PendingEntry<S> | undefined {
    return this.byHandle.get(handle)?.get(id);
  }

  /** Removes and returns the entry. */
  take(handle: number, id: bigint): PendingEntry<S> | undefined {
    const ids = this.byHandle.get(handle);
    const entry = ids?.get(id);
    if (ids && entry) {
      ids.delete(id);
      this.count--;
      if (ids.size === 0) this.byHandle.delete(handle);
    }
    return entry;
  }

  /** Removes an entry the deadline answered and remembers it for a while. */
  expire(handle: number, id: bigint): PendingEntry<S> | undefined {
    const entry = this.take(handle, id);
    const key = `${handle}:${id}`;
    this.expired.add(key);
    if (this.expired.size > RECENTLY_EXPIRED_LIMIT) {
      const oldest = this.expired.values().next().value as string;
      this.expired.delete(oldest);
    }
    return entry;
  }

  wasExpired(handle: number, id: bigint): boolean {
    return this.expired.has(`${handle}:${id}`);
  }

  /** Drops every entry of a handle whose fd is gone. */
  dropHandle(handle: number): void {
    const ids = this.byHandle.get(handle);
    if (!ids) return;
    this.count -= ids.size;
    this.byHandle.delete(handle);
  }

  /** Removes and returns every entry held by `session`. */
  takeSession(session: S): Array<{ handle: number; id: bigint; entry: PendingEntry<S> }> {
    const taken: Array<{ handle: number; id: bigint; entry: PendingEntry<S> }> = [];
    for (const [handle, ids] of this.byHandle) {
      for (const [id, entry] of ids) if (entry.session === session) taken.push({ handle, id, entry });
    }
    for (const { handle, id } of taken) this.take(handle, id);
    return taken;
  }

  countSession(session: S): number {
    let n = 0;
    for (const ids of this.byHandle.values()) for (const entry of ids.values()) if (entry.session === session) n++;
    return n;
  }
}
