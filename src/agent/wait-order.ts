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
  /** The expected run time of one of its tasks (ms; RunTimes.expected); ratio order only. */
  expectedMs?: number;
  /** Its workload class, whose run times `expectedMs` was read from; ratio order only. */
  runClass?: string;
}

/** (waited + expected) / expected at `now`; 1 when nothing is expected yet (arrival order then decides). */
export function responseRatio(w: Pick<OrderedWaiter, 'since' | 'expectedMs'>, now: number): number {
  const e = w.expectedMs;
  if (e === undefined || !(e > 0) || w.since === undefined) return 1;
  return (Math.max(0, now - w.since) + e) / e;
}

/** Does `a` come before `b`: higher priority, then (ratio order) the higher response ratio at `now`, then earlier arrival. */
export function waiterBefore(a: OrderedWaiter, b: OrderedWaiter, order: WaitOrder, now: number): boolean {
  if (a.priority !== b.priority) return a.priority > b.priority;
  if (order === 'ratio') {
    const ra = responseRatio(a, now);
    const rb = responseRatio(b, now);
    if (ra !== rb) return ra > rb;
  }
  return a.seq < b.seq;
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

  /** The expected run time of a task of class `cls` (ms); undefined when no task has ended yet. */
  expected(cls: string): number | undefined {
    const c = this.byClass.get(cls);
    if (c) return c.mean;
    return this.n > 0 ? this.sum / this.n : undefined;
  }
}
