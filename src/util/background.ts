/**
 * What a long-lived component runs besides its calls: timers (one-shot and periodic) on its
 * injected clock, and promises it does not await but must see settled before it is closed.
 * `close()` cancels the timers, lets no new one fire, and waits for the promises.
 */
import type { Clock, Timer } from './clock.ts';

export class Background {
  private readonly timers = new Set<Timer>();
  private readonly running = new Set<Promise<unknown>>();
  private closed = false;

  constructor(private readonly clock: Clock) {}

  /** Runs `fn` in `ms`, unless closed by then. */
  later(ms: number, fn: () => void): void {
    if (this.closed) return;
    const t = this.clock.setTimer(ms, () => {
      this.timers.delete(t);
      if (!this.closed) fn();
    });
    this.timers.add(t);
  }

  /** Runs `fn` every `ms` (the first time in `ms`) until closed. */
  every(ms: number, fn: () => void): void {
    const tick = (): void => {
      fn();
      this.later(ms, tick);
    };
    this.later(ms, tick);
  }

  /**
   * A promise `settled()` waits for. It must not reject (catch what it may throw first): a
   * rejection is left unhandled, for the process's fault handler to report.
   */
  track(p: Promise<unknown>): void {
    this.running.add(p);
    void p.finally(() => this.running.delete(p));
  }

  /** Stops the timers now. */
  stopTimers(): void {
    this.closed = true;
    for (const t of this.timers) t.cancel();
    this.timers.clear();
  }

  /** Waits for the promises tracked so far to settle. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.running]);
  }
}
