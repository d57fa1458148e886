/**
 * How many requests one process keeps in flight to etcd, adapted to how etcd answers (additive
 * increase, multiplicative decrease, as TCP's congestion window). While etcd answers within
 * `slowMs` the limit grows by about one request per limit's worth of answers; a request that
 * takes longer or times out (DEADLINE_EXCEEDED, or etcd's own "request timed out") cuts the limit
 * by `decrease`, at most once per `slowMs`, so one burst of slow answers counts once. Requests
 * over the limit wait in this process, in order.
 *
 * Why: a loaded etcd that falls behind applying its log also falls behind renewing leases, and
 * every lease that expires then (a node's, an owner's) turns into far more work: nodes register
 * again, jobs are adopted, tasks are placed again. Requests that wait here instead of in etcd
 * leave it room to keep up, and each process's share of the waiting is its own.
 *
 * An urgent request (a placement commit, whose compares go stale while it waits: the longer it
 * waits, the likelier another front-end took its picks meanwhile) waits in a lane of its own,
 * served first: while both lanes wait, at most URGENT_STREAK urgent requests are let through in a
 * row before one of the others, so neither lane is starved.
 *
 * A request that waited longer than `maxWaitMs` for its slot is not sent: it fails at once with
 * UNAVAILABLE, and its caller retries (or not) as after any transient failure. Under a long
 * overload the queue would otherwise keep growing with work that is stale by the time it runs
 * (progress records, evaluations of jobs that changed meanwhile), each waiting request holding
 * memory; dropping at the head bounds both by what arrives in `maxWaitMs`.
 */
import { isTransient, TarcilError } from '../util/errors.ts';

export interface AdaptiveLimitOptions {
  /** Requests in flight at the start (default 32). */
  initial?: number;
  min?: number;
  max?: number;
  /** An answer slower than this counts as a sign of overload (default 1000 ms). */
  slowMs?: number;
  /** Factor applied to the limit on overload (default 0.7). */
  decrease?: number;
  /** A request that waited longer than this for a slot fails with UNAVAILABLE, unsent (default 10,000 ms). */
  maxWaitMs?: number;
  /** Whether a failure says the store is overloaded (default: {@link isOverload}). */
  overloaded?: (err: unknown) => boolean;
  now?: () => number;
}

export interface AdaptiveLimitStats {
  limit: number;
  inFlight: number;
  queued: number;
  /** Times the limit was cut. */
  decreases: number;
  /** Requests failed unsent after waiting longer than maxWaitMs. */
  shed: number;
}

/** Urgent requests let through in a row while others wait, before one of those. */
export const URGENT_STREAK = 4;

export class AdaptiveLimit {
  private lim: number;
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly urgent: (() => void)[] = [];
  /** Urgent requests let through in a row while others waited. */
  private streak = 0;
  private lastCut = -Infinity;
  private decreases = 0;
  private shed = 0;
  private readonly maxWaitMs: number;
  private readonly min: number;
  private readonly max: number;
  private readonly slowMs: number;
  private readonly factor: number;
  private readonly now: () => number;
  private readonly overloaded: (err: unknown) => boolean;

  constructor(o: AdaptiveLimitOptions = {}) {
    this.min = o.min ?? 4;
    this.max = o.max ?? 512;
    this.lim = Math.min(this.max, Math.max(this.min, o.initial ?? 32));
    this.slowMs = o.slowMs ?? 1000;
    this.factor = o.decrease ?? 0.7;
    this.maxWaitMs = o.maxWaitMs ?? 10_000;
    this.now = o.now ?? Date.now;
    this.overloaded = o.overloaded ?? isOverload;
  }

  get limit(): number {
    return Math.floor(this.lim);
  }

  stats(): AdaptiveLimitStats {
    return { limit: this.limit, inFlight: this.inFlight, queued: this.waiting.length + this.urgent.length, decreases: this.decreases, shed: this.shed };
  }

  /**
   * Runs fn once a slot is free (after the requests already waiting in its lane: `urgent`, or the
   * others); its answer adjusts the limit.
   */
  async run<T>(fn: () => Promise<T>, urgent = false): Promise<T> {
    // A woken request is handed its slot by wake(): inFlight already counts it.
    const lane = urgent ? this.urgent : this.waiting;
    if (this.inFlight >= this.limit || lane.length > 0 || this.urgent.length > 0) {
      const queuedAt = this.now();
      await new Promise<void>((resolve) => lane.push(resolve));
      const waited = this.now() - queuedAt;
      if (waited > this.maxWaitMs) {
        // Stale: give the slot to the next request without sending this one.
        this.shed++;
        this.inFlight--;
        this.wake();
        throw new TarcilError(
          'UNAVAILABLE',
          `the store is overloaded: the request waited ${Math.round(waited)} ms for a slot (limit ${this.limit}) and was not sent; retry later`,
        );
      }
    } else this.inFlight++;
    const t0 = this.now();
    let overloaded = false;
    try {
      return await fn();
    } catch (err) {
      overloaded = this.overloaded(err);
      throw err;
    } finally {
      this.inFlight--;
      this.answered(overloaded || this.now() - t0 > this.slowMs);
      this.wake();
    }
  }

  private answered(overloaded: boolean): void {
    if (overloaded) {
      const t = this.now();
      if (t - this.lastCut < this.slowMs) return;
      this.lastCut = t;
      this.decreases++;
      this.lim = Math.max(this.min, this.lim * this.factor);
    } else {
      this.lim = Math.min(this.max, this.lim + 1 / this.lim);
    }
  }

  private wake(): void {
    while (this.inFlight < this.limit && (this.urgent.length > 0 || this.waiting.length > 0)) {
      this.inFlight++;
      const other = this.waiting.length > 0 && (this.urgent.length === 0 || this.streak >= URGENT_STREAK);
      if (other) this.streak = 0;
      else if (this.waiting.length > 0) this.streak++;
      ((other ? this.waiting : this.urgent).shift() as () => void)();
    }
  }
}

/** A failure that says etcd is overloaded rather than unreachable or refusing. */
export function isOverload(err: unknown): boolean {
  if (!isTransient(err)) return false;
  return err.code === 'DEADLINE_EXCEEDED' || /request timed out|too many requests/i.test(err.message);
}
