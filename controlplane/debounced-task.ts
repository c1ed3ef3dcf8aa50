// One background job run at most once at a time, a short while after it was asked for: asks that
// arrive while it waits or runs are folded into one more run. For writes off the notification
// path (the node checkpoint, the policies' status).
export class DebouncedTask {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  constructor(
    private readonly run: () => Promise<void>,
    private readonly delayMs: number,
  ) {}

  schedule(): void {
    if (this.stopped || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.running) {
        this.again = true;
        return;
      }
      this.running = this.run().finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.schedule();
        }
      });
    }, this.delayMs);
    this.timer.unref();
  }

  /** No more runs; resolves when the one running now has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  get isStopped(): boolean {
    return this.stopped;
  }
}
