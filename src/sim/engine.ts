/**
 * The discrete-event engine of the simulator: a virtual clock and its event queue.
 */
import type { Clock, Timer } from '../util/clock.ts';

/** A timer the engine can move to another time without scheduling a second event. */
export interface MovableTimer extends Timer {
  /** Moves the event to time t as if it had been scheduled now for t; false if it already fired or was cancelled. */
  moveTo(t: number): boolean;
}

/** The handle of one scheduled event: its slot and the slot's generation when it was scheduled. */
class Handle implements MovableTimer {
  constructor(
    private readonly engine: Engine,
    readonly slot: number,
    readonly gen: number,
  ) {}
  cancel(): void {
    this.engine.cancelSlot(this.slot, this.gen);
  }
  moveTo(t: number): boolean {
    return this.engine.moveSlot(this.slot, this.gen, t);
  }
}

const INITIAL = 1024;

/**
 * Events all scheduled the same fixed delay after the moment they are scheduled (a network hop)
 * come out in the order they went in: the clock never goes back, so their times never decrease,
 * and their sequence numbers grow. Such a lane is a FIFO (a ring buffer) that the engine merges
 * with its heap by (time, sequence), the same order as if every event went through the heap.
 */
class Lane {
  t = new Float64Array(INITIAL);
  s = new Float64Array(INITIAL);
  fns: (((arg: never) => void) | undefined)[] = new Array<undefined>(INITIAL).fill(undefined);
  args: unknown[] = new Array<undefined>(INITIAL).fill(undefined);
  head = 0;
  size = 0;
  constructor(readonly delay: number) {}
  push(t: number, s: number, fn: (arg: never) => void, arg: unknown): void {
    if (this.size === this.t.length) this.grow();
    const cap = this.t.length;
    let i = this.head + this.size;
    if (i >= cap) i -= cap;
    this.t[i] = t;
    this.s[i] = s;
    this.fns[i] = fn;
    this.args[i] = arg;
    this.size++;
  }
  private grow(): void {
    const cap = this.t.length;
    const t = new Float64Array(cap * 2);
    const s = new Float64Array(cap * 2);
    const fns = new Array<((arg: never) => void) | undefined>(cap * 2).fill(undefined);
    const args = new Array<unknown>(cap * 2).fill(undefined);
    for (let k = 0; k < this.size; k++) {
      let i = this.head + k;
      if (i >= cap) i -= cap;
      t[k] = this.t[i] as number;
      s[k] = this.s[i] as number;
      fns[k] = this.fns[i];
      args[k] = this.args[i];
    }
    this.t = t;
    this.s = s;
    this.fns = fns;
    this.args = args;
    this.head = 0;
  }
}

/**
 * The discrete-event core: events ordered by (time, sequence). Ties fire in the order they were
 * scheduled, which together with seeded Rngs makes a run a pure function of its seed.
 *
 * Built to cost little per event, since a run fires millions of them:
 * - the queue is a 4-ary heap kept in typed arrays (time, sequence, slot), so comparing and moving
 *   entries touches contiguous memory and no event object;
 * - an event's function lives in a slot that is reused once the event fired; `after`/`post`
 *   schedule without a handle (no allocation beyond the caller's closure), and `at`/`setTimer`
 *   return a handle only for the callers that cancel or move their event;
 * - cancelling marks the slot dead (O(1)); the dead entry is dropped when it reaches the top;
 * - an event that must fire at another time is moved in place (`moveTo`): a task re-rated each
 *   time a neighbour comes or goes keeps one finish event.
 */
export class Engine implements Clock {
  // Per slot: the function (undefined once fired or cancelled), its argument, its generation, its heap index.
  private fns: (((arg: never) => void) | undefined)[] = [];
  private args: unknown[] = [];
  private gens = new Uint32Array(INITIAL);
  private posOf = new Int32Array(INITIAL).fill(-1);
  private freeSlots: number[] = [];
  private slots = 0;
  // The heap: entry i is (hT[i], hS[i]) → slot hSlot[i].
  private hT = new Float64Array(INITIAL);
  private hS = new Float64Array(INITIAL);
  private hSlot = new Int32Array(INITIAL);
  private n = 0;
  private lanes: Lane[] = [];
  private queuedInLanes = 0;
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
  /** Schedules fn at time t (clamped to now), with a handle to cancel or move it. */
  at(t: number, fn: () => void): MovableTimer {
    const slot = this.post(t, fn);
    return new Handle(this, slot, this.gens[slot] as number);
  }
  setTimer(ms: number, fn: () => void): MovableTimer {
    return this.at(this.t + Math.max(0, ms), fn);
  }
  /** Schedules fn at time t (clamped to now) without a handle; returns its slot. */
  post(t: number, fn: () => void): number {
    const slot = this.takeSlot();
    this.fns[slot] = fn;
    this.insert(t < this.t ? this.t : t, this.seq++, slot);
    return slot;
  }
  /** Schedules fn `ms` from now without a handle. */
  after(ms: number, fn: () => void): void {
    this.post(this.t + (ms > 0 ? ms : 0), fn);
  }
  /**
   * Schedules fn(arg) at time t (clamped to now) without a handle; returns its slot. With fn made
   * once (a bound method), an event costs no allocation at all: no closure, no handle.
   */
  postArg<A>(t: number, fn: (arg: A) => void, arg: A): number {
    const slot = this.takeSlot();
    this.fns[slot] = fn;
    this.args[slot] = arg;
    this.insert(t < this.t ? this.t : t, this.seq++, slot);
    return slot;
  }
  /** Schedules fn(arg) `ms` from now without a handle. */
  afterArg<A>(ms: number, fn: (arg: A) => void, arg: A): void {
    this.postArg(this.t + (ms > 0 ? ms : 0), fn, arg);
  }
  /**
   * A lane for events scheduled `delay` ms (> 0) after the moment they are scheduled; returns its
   * number for afterLane. Cheaper than the heap, and the same order of events.
   */
  lane(delay: number): number {
    if (!(delay > 0) || !Number.isFinite(delay)) throw new Error(`a lane needs a positive finite delay, got ${delay}`);
    const k = this.lanes.findIndex((l) => l.delay === delay);
    if (k >= 0) return k;
    this.lanes.push(new Lane(delay));
    return this.lanes.length - 1;
  }
  /** Schedules fn(arg) the lane's delay from now (no handle: it cannot be cancelled or moved). */
  afterLane<A>(lane: number, fn: (arg: A) => void, arg: A): void {
    const l = this.lanes[lane] as Lane;
    l.push(this.t + l.delay, this.seq++, fn, arg);
    this.queuedInLanes++;
  }
  /** The generation of a slot: with the slot, what identifies its pending event (cancelSlot, moveSlot). */
  genOf(slot: number): number {
    return this.gens[slot] as number;
  }
  /**
   * Moves a pending event to time t (clamped to now), ordered among events of the same time as if
   * it had been scheduled now: exactly what cancelling it and scheduling the same function anew
   * would do, without the dead event left in the queue. False if it already fired or was cancelled.
   */
  reschedule(timer: Timer, t: number): boolean {
    return timer instanceof Handle ? this.moveSlot(timer.slot, timer.gen, t) : false;
  }
  /** @internal (Handle) */
  cancelSlot(slot: number, gen: number): void {
    if (this.gens[slot] !== gen || this.fns[slot] === undefined) return;
    this.fns[slot] = undefined;
    this.args[slot] = undefined;
    this.gens[slot] = (gen + 1) >>> 0;
  }
  /** @internal (Handle) */
  moveSlot(slot: number, gen: number, t: number): boolean {
    if (this.gens[slot] !== gen || this.fns[slot] === undefined) return false;
    const i = this.posOf[slot] as number;
    if (i < 0) return false;
    const oldT = this.hT[i] as number;
    const oldS = this.hS[i] as number;
    const nt = t < this.t ? this.t : t;
    const ns = this.seq++;
    this.hT[i] = nt;
    this.hS[i] = ns;
    if (nt < oldT || (nt === oldT && ns < oldS)) this.up(i);
    else this.down(i);
    return true;
  }
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.after(ms, resolve);
    });
  }
  stop(): void {
    this.stopped = true;
  }
  /** Entries in the queue (events cancelled but not yet dropped included). */
  get pending(): number {
    return this.n + this.queuedInLanes;
  }

  /** Runs events until the queue is empty, `until` is passed, or stop() is called. */
  run(until = Infinity, onProgress?: (t: number) => void, progressEvery = 50_000): void {
    this.stopped = false;
    const fns = this.fns as (((arg: unknown) => void) | undefined)[];
    const args = this.args;
    const lanes = this.lanes;
    while (!this.stopped) {
      // The earliest of the heap's top and the lanes' heads, by (time, sequence).
      let from: Lane | undefined;
      let t = Infinity;
      let s = Infinity;
      if (this.n > 0) {
        t = this.hT[0] as number;
        s = this.hS[0] as number;
      }
      if (this.queuedInLanes > 0) {
        for (let k = 0; k < lanes.length; k++) {
          const l = lanes[k] as Lane;
          if (l.size === 0) continue;
          const lt = l.t[l.head] as number;
          if (lt < t || (lt === t && (l.s[l.head] as number) < s)) {
            from = l;
            t = lt;
            s = l.s[l.head] as number;
          }
        }
      } else if (this.n === 0) break;
      if (t > until) break;
      let fn: ((arg: unknown) => void) | undefined;
      let arg: unknown;
      if (from) {
        const h = from.head;
        fn = from.fns[h] as (arg: unknown) => void;
        arg = from.args[h];
        from.fns[h] = undefined;
        from.args[h] = undefined;
        from.head = h + 1 === from.t.length ? 0 : h + 1;
        from.size--;
        this.queuedInLanes--;
      } else {
        const slot = this.hSlot[0] as number;
        this.removeTop();
        fn = fns[slot];
        arg = args[slot];
        fns[slot] = undefined;
        args[slot] = undefined;
        this.gens[slot] = ((this.gens[slot] as number) + 1) >>> 0;
        this.posOf[slot] = -1;
        this.freeSlots.push(slot);
        if (fn === undefined) continue;
      }
      this.t = t;
      this.fired++;
      fn(arg);
      if (onProgress && this.fired % progressEvery === 0) onProgress(this.t);
    }
    if (until !== Infinity && !this.stopped && this.t < until && this.n === 0 && this.queuedInLanes === 0) this.t = until;
  }

  private takeSlot(): number {
    const s = this.freeSlots.pop();
    if (s !== undefined) return s;
    const slot = this.slots++;
    if (slot >= this.gens.length) {
      const gens = new Uint32Array(this.gens.length * 2);
      gens.set(this.gens);
      this.gens = gens;
      const pos = new Int32Array(this.posOf.length * 2).fill(-1);
      pos.set(this.posOf);
      this.posOf = pos;
    }
    this.fns.push(undefined);
    this.args.push(undefined);
    return slot;
  }

  private insert(t: number, s: number, slot: number): void {
    if (this.n === this.hT.length) {
      const size = this.hT.length * 2;
      const hT = new Float64Array(size);
      hT.set(this.hT);
      this.hT = hT;
      const hS = new Float64Array(size);
      hS.set(this.hS);
      this.hS = hS;
      const hSlot = new Int32Array(size);
      hSlot.set(this.hSlot);
      this.hSlot = hSlot;
    }
    const i = this.n++;
    this.hT[i] = t;
    this.hS[i] = s;
    this.hSlot[i] = slot;
    this.posOf[slot] = i;
    this.up(i);
  }

  private removeTop(): void {
    const last = --this.n;
    if (last === 0) return;
    this.hT[0] = this.hT[last] as number;
    this.hS[0] = this.hS[last] as number;
    const slot = this.hSlot[last] as number;
    this.hSlot[0] = slot;
    this.posOf[slot] = 0;
    this.down(0);
  }

  private up(i: number): void {
    const hT = this.hT;
    const hS = this.hS;
    const hSlot = this.hSlot;
    const posOf = this.posOf;
    const t = hT[i] as number;
    const s = hS[i] as number;
    const slot = hSlot[i] as number;
    while (i > 0) {
      const p = (i - 1) >> 2;
      const pt = hT[p] as number;
      if (t > pt || (t === pt && s > (hS[p] as number))) break;
      hT[i] = pt;
      hS[i] = hS[p] as number;
      const ps = hSlot[p] as number;
      hSlot[i] = ps;
      posOf[ps] = i;
      i = p;
    }
    hT[i] = t;
    hS[i] = s;
    hSlot[i] = slot;
    posOf[slot] = i;
  }

  private down(i: number): void {
    const hT = this.hT;
    const hS = this.hS;
    const hSlot = this.hSlot;
    const posOf = this.posOf;
    const n = this.n;
    const t = hT[i] as number;
    const s = hS[i] as number;
    const slot = hSlot[i] as number;
    for (;;) {
      const first = 4 * i + 1;
      if (first >= n) break;
      let c = first;
      let ct = hT[first] as number;
      let cs = hS[first] as number;
      const end = first + 4 < n ? first + 4 : n;
      for (let k = first + 1; k < end; k++) {
        const kt = hT[k] as number;
        if (kt < ct || (kt === ct && (hS[k] as number) < cs)) {
          c = k;
          ct = kt;
          cs = hS[k] as number;
        }
      }
      if (ct > t || (ct === t && cs > s)) break;
      hT[i] = ct;
      hS[i] = cs;
      const cslot = hSlot[c] as number;
      hSlot[i] = cslot;
      posOf[cslot] = i;
      i = c;
    }
    hT[i] = t;
    hS[i] = s;
    hSlot[i] = slot;
    posOf[slot] = i;
  }
}
