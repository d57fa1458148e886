/**
 * The discrete-event engine of the simulator: a virtual clock and its event queue.
 */
import type { Clock, Timer } from '../util/clock.ts';

/**
 * One scheduled event, and its own timer handle (no second object or closure per event). `pos`
 * is its place in the heap (−1 once fired or removed), so that it can be moved in place.
 */
class Ev implements Timer {
  dead = false;
  pos = -1;
  constructor(
    public t: number,
    public seq: number,
    readonly fn: () => void,
    private readonly engine: Engine,
  ) {}
  cancel(): void {
    this.dead = true;
  }
  /** Moves the event to time t (see Engine.reschedule). */
  moveTo(t: number): boolean {
    return this.engine.reschedule(this, t);
  }
}

/** A timer the engine can move to another time without scheduling a second event. */
export interface MovableTimer extends Timer {
  /** Moves the event to time t as if it had been scheduled now for t; false if it already fired or was cancelled. */
  moveTo(t: number): boolean;
}

/**
 * The discrete-event core: a binary heap of (time, sequence) ordered events. Ties fire in the
 * order they were scheduled, which together with seeded Rngs makes a run a pure function of its
 * seed. Cancelling marks an event dead rather than removing it (O(1)); an event that must fire at
 * another time is moved in place (reschedule), which keeps the heap to the live events: a task
 * re-rated each time a neighbour comes or goes has one finish event, not one per re-rating.
 */
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
  at(t: number, fn: () => void): MovableTimer {
    const ev = new Ev(t < this.t ? this.t : t, this.seq++, fn, this);
    this.push(ev);
    return ev;
  }
  setTimer(ms: number, fn: () => void): MovableTimer {
    return this.at(this.t + Math.max(0, ms), fn);
  }
  /**
   * Moves a pending event to time t (clamped to now), ordered among events of the same time as if
   * it had been scheduled now: exactly what cancelling it and scheduling the same function anew
   * would do, without the dead event left in the heap. False if it already fired or was cancelled.
   */
  reschedule(timer: Timer, t: number): boolean {
    const ev = timer as Ev;
    if (!(ev instanceof Ev) || ev.dead || ev.pos < 0) return false;
    const old = ev.t;
    const oldSeq = ev.seq;
    ev.t = t < this.t ? this.t : t;
    ev.seq = this.seq++;
    if (ev.t < old || (ev.t === old && ev.seq < oldSeq)) this.up(ev.pos);
    else this.down(ev.pos);
    return true;
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

  private static less(a: Ev, b: Ev): boolean {
    return a.t < b.t || (a.t === b.t && a.seq < b.seq);
  }
  private push(ev: Ev): void {
    this.heap.push(ev);
    ev.pos = this.heap.length - 1;
    this.up(ev.pos);
  }
  /** Removes the top event. */
  private pop(): void {
    const h = this.heap;
    const top = h[0] as Ev;
    top.pos = -1;
    const last = h.pop() as Ev;
    if (h.length === 0) return;
    h[0] = last;
    last.pos = 0;
    this.down(0);
  }
  private up(i: number): void {
    const h = this.heap;
    const ev = h[i] as Ev;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const pe = h[p] as Ev;
      if (!Engine.less(ev, pe)) break;
      h[i] = pe;
      pe.pos = i;
      i = p;
    }
    h[i] = ev;
    ev.pos = i;
  }
  private down(i: number): void {
    const h = this.heap;
    const n = h.length;
    const ev = h[i] as Ev;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && Engine.less(h[r] as Ev, h[l] as Ev) ? r : l;
      const ce = h[c] as Ev;
      if (!Engine.less(ce, ev)) break;
      h[i] = ce;
      ce.pos = i;
      i = c;
    }
    h[i] = ev;
    ev.pos = i;
  }
}
