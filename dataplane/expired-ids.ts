// A bounded memory of notification ids the deadline answered, so a decision that arrives for one
// of them is reported as late rather than as bogus.
const LIMIT = 8192;

export class ExpiredIds {
  private readonly ids = new Set<string>();

  add(handle: number, id: bigint): void {
    this.ids.add(`${handle}:${id}`);
    if (this.ids.size > LIMIT) this.ids.delete(this.ids.values().next().value as string);
  }

  has(handle: number, id: bigint): boolean {
    return this.ids.has(`${handle}:${id}`);
  }
}
