// Decisions of one source (a namespace) never wait behind another's: one queue per source, served
// round robin, one item per source per turn, in slices of the event loop (after `sliceMs` of work
// the rest waits for the next turn, so what arrived meanwhile, other sources' notifications
// included, joins the rotation). While the loop keeps up nothing queues: an item pushed while no
// slice runs is served at once, on the caller's stack.
import { performance } from 'node:perf_hooks';

export class FairQueue<T> {
  /** Insertion order is the rotation: a source served moves to the end. */
  private readonly queues = new Map<string, T[]>();
  private draining = false;
  private scheduled = false;
  /** performance.now() when this turn's slice began; -1: none began in this turn. */
  private sliceStart = -1;
  /** Items dropped because their source's queue was full (the oldest goes). */
  dropped = 0;

  constructor(
    private readonly serve: (item: T) => void,
    private readonly sliceMs = 5,
    /** At most this many waiting items per source; the oldest is dropped (onDrop) beyond it. */
    private readonly perSource = 4096,
    private readonly onDrop: (item: T, source: string) => void = () => undefined,
  ) {}

  get waiting(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.length;
    return n;
  }

  push(source: string, item: T): void {
    let queue = this.queues.get(source);
    if (!queue) {
      queue = [];
      this.queues.set(source, queue);
    }
    if (queue.length >= this.perSource) {
      this.dropped++;
      this.onDrop(queue.shift()!, source);
    }
    queue.push(item);
    if (this.draining || this.scheduled) return;
    // Items pushed one by one on one stack (a batch) share one slice: past it, they wait their turn.
    if (this.sliceStart >= 0 && performance.now() - this.sliceStart >= this.sliceMs) this.schedule();
    else this.drain();
  }

  private schedule(): void {
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.sliceStart = -1;
      this.drain();
    });
  }

  private drain(): void {
    this.draining = true;
    if (this.sliceStart < 0) {
      this.sliceStart = performance.now();
      setImmediate(() => {
        this.sliceStart = -1;
      });
    }
    const start = this.sliceStart;
    try {
      for (;;) {
        const first = this.queues.entries().next();
        if (first.done) return;
        const [source, queue] = first.value;
        const item = queue.shift()!;
        this.queues.delete(source);
        if (queue.length > 0) this.queues.set(source, queue);
        this.serve(item);
        if (this.queues.size > 0 && performance.now() - start >= this.sliceMs) {
          this.schedule();
          return;
        }
      }
    } finally {
      this.draining = false;
    }
  }
}
