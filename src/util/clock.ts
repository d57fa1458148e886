/**
 * Time is injected everywhere so that the simulator, the live agents and the tests run the same
 * code: live components use {@link SystemClock}; the simulator and deterministic tests use
 * {@link ManualClock}, whose time only moves when told to.
 */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds. Wall-clock epoch for SystemClock, virtual for ManualClock. */
  now(): number;
  /** High-resolution monotonic milliseconds, for measuring short stages. */
  monotonic(): number;
  /** Runs fn after ms. Live timers are unref()'d: they never keep a process alive. */
  setTimer(ms: number, fn: () => void): Timer;
  sleep(ms: number): Promise<void>;
}

export class SystemClock implements Clock {
  now(): number {
    return Date.now();
  }
  monotonic(): number {
    return performance.now();
  }
  setTimer(ms: number, fn: () => void): Timer {
    // Node fires a longer setTimeout after 1 ms (with a warning): a simulated task of days on a
    // slow platform, or any far deadline, would end at once.
    if (ms > MAX_TIMEOUT_MS) return new LongTimer(Date.now() + ms, fn);
    const t = setTimeout(fn, Math.max(0, ms));
    t.unref();
    return new NodeTimer(t);
  }
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.setTimer(ms, resolve);
    });
  }
}

/** The longest delay setTimeout takes (2^31 − 1 ms, about 24.8 days). */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** A setTimeout as a Timer (a class: processes keep one per running simulated task). */
class NodeTimer implements Timer {
  constructor(private readonly t: NodeJS.Timeout) {}
  cancel(): void {
    clearTimeout(this.t);
  }
}

/** A timer longer than setTimeout takes: armed again in steps of at most its limit until `at`. */
class LongTimer implements Timer {
  private t: NodeJS.Timeout | undefined;
  private cancelled = false;

  constructor(
    private readonly at: number,
    private readonly fn: () => void,
  ) {
    this.arm();
  }

  private arm(): void {
    if (this.cancelled) return;
    const left = this.at - Date.now();
    this.t = left > MAX_TIMEOUT_MS ? setTimeout(() => this.arm(), MAX_TIMEOUT_MS) : setTimeout(this.fn, Math.max(0, left));
    this.t.unref();
  }

  cancel(): void {
    this.cancelled = true;
    clearTimeout(this.t);
  }
}

interface PendingTimer {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/** A virtual clock. `advance(ms)` fires due timers in time order (ties in creation order). */
export class ManualClock implements Clock {
  private t: number;
  private seq = 0;
  private timers: PendingTimer[] = [];

  constructor(start = 0) {
    this.t = start;
  }
  now(): number {
    return this.t;
  }
  monotonic(): number {
    return this.t;
  }
  setTimer(ms: number, fn: () => void): Timer {
    const timer: PendingTimer = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, cancelled: false };
    this.timers.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
      },
    };
  }
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.setTimer(ms, resolve);
    });
  }
  /** Moves time forward by ms, firing every timer that falls due on the way. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      this.timers = this.timers.filter((x) => !x.cancelled);
      let next: PendingTimer | undefined;
      for (const x of this.timers) {
        if (x.at <= end && (!next || x.at < next.at || (x.at === next.at && x.seq < next.seq))) next = x;
      }
      if (!next) break;
      this.t = Math.max(this.t, next.at);
      next.cancelled = true;
      next.fn();
    }
    this.t = end;
  }
  pendingTimers(): number {
    return this.timers.filter((x) => !x.cancelled).length;
  }
}
