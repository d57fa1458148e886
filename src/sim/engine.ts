/**
 * The discrete-event engine of the simulator: a virtual clock and its event queue.
 */
import type { Clock, Timer } from '../util/clock.ts';

/**
 * The discrete-event core: a binary heap of (time, sequence) ordered events. Ties fire in the
 * order they were scheduled, which together with seeded Rngs makes a run a pure function of its
 * seed. Events are plain closures; cancelling marks them dead rather than removing them from the
 * heap (O(1), and stale events are rare next to live ones).
 */
interface Ev {
  t: number;
  seq: number;
  fn: () => void;
  dead: boolean;
}

export class Engine implements Clock {
  private heap: Ev[] = [];
  private seq = 0;
  private t = 0;
  /** Events executed, for the speed figures. */
  fired = 0;
  private stopped = false;

  now(): number {
    return this.t;
  }
  /** Virtual too: the scheduling core's stage timers read 0 and decision cost is modelled instead. */
  monotonic(): number {
    return this.t;
  }
  at(t: number, fn: () => void): Timer {
    const ev: Ev = { t: t < this.t ? this.t : t, seq: this.seq++, fn, dead: false };
    this.push(ev);
    return {
      cancel: () => {
        ev.dead = true;
      },
    };
  }
  setTimer(ms: number, fn: () => void): Timer {
    return this.at(this.t + Math.max(0, ms), fn);
  }
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.setTimer(ms, resolve);
    });
  }
  stop(): void {
    this.stopped = true;
  }
  get pending(): number {
    return this.heap.length;
  }

  /** Runs events until the queue is empty, `until` is passed, or stop() is called. */
  run(until = Infinity, onProgress?: (t: number) => void, progressEvery = 50_000): void {
    this.stopped = false;
    while (this.heap.length > 0 && !this.stopped) {
      const top = this.heap[0] as Ev;
      if (top.t > until) break;
      this.pop();
      if (top.dead) continue;
      this.t = top.t;
      this.fired++;
      top.fn();
      if (onProgress && this.fired % progressEvery === 0) onProgress(this.t);
    }
    if (until !== Infinity && !this.stopped && this.t < until && this.heap.length === 0) this.t = until;
  }

  private less(a: Ev, b: Ev): boolean {
    return a.t < b.t || (a.t === b.t && a.seq < b.seq);
  }
  private push(ev: Ev): void {
    const h = this.heap;
    h.push(ev);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const pe = h[p] as Ev;
      if (!this.less(ev, pe)) break;
      h[i] = pe;
      i = p;
    }
    h[i] = ev;
  }
  private pop(): void {
    const h = this.heap;
    const last = h.pop() as Ev;
    if (h.length === 0) return;
    let i = 0;
    const n = h.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && this.less(h[r] as Ev, h[l] as Ev) ? r : l;
      if (!this.less(h[c] as Ev, last)) break;
      h[i] = h[c] as Ev;
      i = c;
    }
    h[i] = last;
  }
}
