/**
 * The order in which jobs waiting for a freed RU are served, after priority: by arrival (the job's
 * first wait), or by response ratio (highest response ratio next: (time waited + expected run
 * time) / expected run time). The ratio serves a job whose tasks are short before one whose tasks
 * are long that waited about as long, since the same wait costs the short job a larger share of
 * its response time; a long job's ratio grows as it waits, so it is not passed over for ever.
 *
 * The expected run time is not declared by a job: it is learned per workload class from the
 * tasks seen to end (RunTimes), the same way in the live agents (from the outcomes their job
 * owners record) and in the simulator's tarcil (from its tasks' ends). Until a class has a task
 * that ended, the mean over every class is taken; with none at all, the order is by arrival.
 */

export type WaitOrder = 'arrival' | 'ratio';

export const WAIT_ORDERS = ['arrival', 'ratio'] as const satisfies readonly WaitOrder[];

/** What the order reads of a waiting job. */
export interface OrderedWaiter {
  priority: number;
  /** Arrival order: the job's first wait; a job that waits again keeps it. */
  seq: number;
  /** When the job first waited (ms, the process's clock); ratio order only. */
  since?: number;
  /** Its workload class, whose expected run time (RunTimes.expected) is read when waiters are compared; ratio order only. */
  runClass?: string;
}

/** The expected run time of a workload class now (RunTimes.expected); undefined when none is known. */
export type Expected = (runClass: string) => number | undefined;

/**
 * (waited + expected) / expected at `now`; 1 when nothing is expected yet (arrival order then
 * decides). The expected run time is the class's now, not the one known when the job began to
 * wait: waiters of one class always share it, so among them arrival order is ratio order, and the
 * live agents' queues per class (freed-waiters.ts) serve exactly the order of a scan of every
 * waiter (the simulator's).
 */
export function responseRatio(since: number | undefined, expectedMs: number | undefined, now: number): number {
  if (expectedMs === undefined || !(expectedMs > 0) || since === undefined) return 1;
  return (Math.max(0, now - since) + expectedMs) / expectedMs;
}

/** The order on its three keys, the one comparison both drivers make: higher priority, then higher ratio, then earlier arrival. */
export function keysBefore(pa: number, ra: number, sa: number, pb: number, rb: number, sb: number): boolean {
  return pa !== pb ? pa > pb : ra !== rb ? ra > rb : sa < sb;
}

/** The ratio `w` is ordered by at `now` (1 for every waiter under arrival order). */
export function ratioOf(w: OrderedWaiter, order: WaitOrder, expected: Expected | undefined, now: number): number {
  if (order !== 'ratio' || !expected || w.runClass === undefined) return 1;
  return responseRatio(w.since, expected(w.runClass), now);
}

/** Does `a` come before `b`: higher priority, then (ratio order) the higher response ratio at `now`, then earlier arrival. */
export function waiterBefore(a: OrderedWaiter, b: OrderedWaiter, order: WaitOrder, now: number, expected?: Expected): boolean {
  return keysBefore(a.priority, ratioOf(a, order, expected, now), a.seq, b.priority, ratioOf(b, order, expected, now), b.seq);
}

/**
 * The first in the order that `fits`, across lists each kept in priority then arrival order and
 * holding waiters of one workload class (the simulator's waiters; the live agents' FreedWaiters
 * keeps queues the same way): the first that fits of each list, compared by `usage` of the list
 * first when given (fair share: lower first), then the order's keys. A list whose first waiter
 * comes after the best so far is not searched. The same result as a scan of every waiter in the order
 * (test/agent/wait-order.test.ts checks it).
 */
export function firstAcross<L extends { readonly list: readonly T[] }, T>(
  lists: Iterable<L>,
  waiter: (t: T) => OrderedWaiter,
  fits: (t: T) => boolean,
  order: WaitOrder,
  now: number,
  expected?: Expected,
  usage?: (l: L) => number,
): { of: L; k: number } | undefined {
  let found: { of: L; k: number } | undefined;
  let bu = Infinity;
  let bp = 0;
  let br = 0;
  let bs = 0;
  for (const l of lists) {
    const q = l.list;
    if (q.length === 0) continue;
    const u = usage ? usage(l) : 0;
    if (found && u > bu) continue;
    if (found && u === bu) {
      const h = waiter(q[0] as T);
      if (!keysBefore(h.priority, ratioOf(h, order, expected, now), h.seq, bp, br, bs)) continue;
    }
    const k = q.findIndex(fits);
    if (k < 0) continue;
    const w = waiter(q[k] as T);
    const r = ratioOf(w, order, expected, now);
    if (found && u === bu && !keysBefore(w.priority, r, w.seq, bp, br, bs)) continue;
    found = { of: l, k };
    bu = u;
    bp = w.priority;
    br = r;
    bs = w.seq;
  }
  return found;
}

/**
 * The mean run time of the tasks seen to end, per workload class: a moving mean over the last
 * `window` ends of each class (the first ends averaged alike), so that it follows a class whose
 * tasks change. The mean over all classes stands in for a class with no end seen yet.
 */
export class RunTimes {
  private readonly byClass = new Map<string, { mean: number; n: number }>();
  private sum = 0;
  private n = 0;

  constructor(private readonly window = 100) {}

  /** A task of class `cls` ran `ms` (from its start, or its placement, to its end). */
  observe(cls: string, ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) return;
    const c = this.byClass.get(cls);
    if (!c) this.byClass.set(cls, { mean: ms, n: 1 });
    else {
      c.n = Math.min(this.window, c.n + 1);
      c.mean += (ms - c.mean) / c.n;
    }
    this.sum += ms;
    this.n++;
  }

  /** The mean run time over every task seen to end (ms); undefined when none has. */
  overall(): number | undefined {
    return this.n > 0 ? this.sum / this.n : undefined;
  }

  /** Workload classes with a task seen to end. */
  get classes(): number {
    return this.byClass.size;
  }

  /** The expected run time of a task of class `cls` (ms); undefined when no task has ended yet. */
  expected(cls: string): number | undefined {
    const c = this.byClass.get(cls);
    if (c) return c.mean;
    return this.n > 0 ? this.sum / this.n : undefined;
  }
}
