/**
 * The scheduling calls of one process that wait for a freed RU (held by admission control, or
 * with no eligible RU free), and which of them a freed RU wakes. Waiters are grouped into classes
 * that a freed RU serves alike (same constraints; for admission, same target and threshold), each
 * class a queue in priority then arrival order. A freed RU wakes one waiter: the first, across the
 * classes that can use that RU and are ready for it. With the `ratio` order (wait-order.ts), the
 * first after priority is the waiter with the highest response ratio now: each class queue then
 * holds waiters of one workload class, which share their class's expected run time as it is now,
 * so that among them arrival order is ratio order, and the heads of the queues are compared: the
 * same waiter that a scan of every waiter in the order would find. The work per freed RU follows the number of
 * classes, not the number of waiting jobs, and a job that cannot use the RU is not woken at all.
 *
 * With fair share (fair-share.ts), each class queue holds the waiters of one namespace, and the
 * first waiter across classes is the one of the namespace with the lowest usage (RUs held / weight)
 * now, then priority, then arrival: the order within a namespace is unchanged, and a cell with one
 * namespace is served exactly as without fair share.
 */
import type { ServerState } from '../sampling/ru-index.ts';
import { DEFAULT_CORE_CONFIG } from './defaults.ts';
import { priorityBefore, type FairShare } from './fair-share.ts';
import { waiterBefore, type Expected, type OrderedWaiter, type WaitOrder } from './wait-order.ts';

/** Waiters a freed RU serves alike: same key, same answers. */
export interface WaitClass {
  key: string;
  /** Can a waiter of this class use this (free) RU? Asked at most once per server while the class waits, unless `perRu`. */
  canUse(server: ServerState, index: number): boolean;
  /** canUse depends on more than the server (e.g. where the job's own tasks are): ask it every time. */
  perRu?: boolean;
  /**
   * Is the class ready to take what is free now, the freed RU included (an admission waiter:
   * could the verdict admit it now; a gang: are enough RUs free)? Asked at most once per freed
   * RU. Absent: always ready.
   */
  ready?(server: ServerState, index: number): boolean;
}

export interface Waiter extends OrderedWaiter {
  /** The job's namespace (fair share); absent: default. */
  namespace?: string;
  /** RUs the waiting call wants (fair share counts them per namespace); absent: 1. */
  need?: number;
  wake(): void;
}

interface ClassQueue {
  cls: WaitClass;
  /** The key of this queue: the class's, prefixed by the namespace with fair share. */
  key: string;
  namespace: string;
  /** Sorted: higher priority first, then lower seq. */
  queue: Waiter[];
  usable: Map<string, boolean>;
}

/** Does `a` come before `b` in one queue (higher priority, then earlier arrival; in a queue of one expected run time that is the ratio order too)? */
const before = priorityBefore;

export class FreedWaiters {
  private readonly classes = new Map<string, ClassQueue>();
  private seq = 0;
  private count = 0;
  /** With fair share: RUs wanted by the waiters of each namespace. */
  private readonly needs = new Map<string, number>();

  private readonly order: WaitOrder;
  private readonly now: () => number;
  private readonly expected: Expected | undefined;
  private readonly holds: ((w: OrderedWaiter) => boolean) | undefined;

  /**
   * `fair`: serve namespaces by fair share (undefined: priority, then the order, across all).
   * `order`: after priority, by arrival or by response ratio at `now()` (the default), with each
   * workload class's expected run time from `expected` (RunTimes.expected). `holds`: a waiter
   * that a freed RU must not wake now (the short-task reserve, short-reserve.ts): such a waiter
   * is passed over for the first one behind it in its queue that is not held.
   */
  constructor(
    readonly fair?: FairShare,
    opts: { order?: WaitOrder; now?: () => number; expected?: Expected; holds?: (w: OrderedWaiter) => boolean } = {},
  ) {
    this.order = opts.order ?? DEFAULT_CORE_CONFIG.waitOrder;
    this.now = opts.now ?? Date.now;
    this.expected = opts.expected;
    this.holds = opts.holds;
  }

  /** RUs wanted by the waiting calls, per namespace (kept with fair share only). */
  get waitingNeeds(): ReadonlyMap<string, number> {
    return this.needs;
  }
  /** Freed RUs seen, waiters woken, and class checks made (tests and benchmarks count these). */
  readonly stats = { freed: 0, woken: 0, classChecks: 0 };

  /** A new arrival number (taken once per scheduling call, at its first wait). */
  nextSeq(): number {
    return ++this.seq;
  }

  /** Waiters now. */
  get size(): number {
    return this.count;
  }

  /** Classes with waiters now. */
  get classCount(): number {
    return this.classes.size;
  }

  /** Adds a waiter; the returned function removes it (it was woken, timed out or aborted). */
  add(cls: WaitClass, w: Waiter): () => void {
    const ns = w.namespace ?? 'default';
    // One queue per workload class: its waiters share the class's expected run time.
    const base = this.order === 'ratio' ? `${cls.key}|${w.runClass ?? '-'}` : cls.key;
    const key = this.fair ? `${ns}|${base}` : base;
    let c = this.classes.get(key);
    if (!c) this.classes.set(key, (c = { cls, key, namespace: ns, queue: [], usable: new Map() }));
    if (this.fair) this.needs.set(ns, (this.needs.get(ns) ?? 0) + (w.need ?? 1));
    const q = c.queue;
    // Binary search for the first waiter that w comes before.
    let lo = 0;
    let hi = q.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (before(w, q[mid] as Waiter)) hi = mid;
      else lo = mid + 1;
    }
    q.splice(lo, 0, w);
    this.count++;
    const entry = c;
    return () => this.remove(entry, w);
  }

  private remove(c: ClassQueue, w: Waiter): void {
    const k = c.queue.indexOf(w);
    if (k < 0) return;
    c.queue.splice(k, 1);
    this.count--;
    this.unneed(c.namespace, w);
    if (c.queue.length === 0 && this.classes.get(c.key) === c) this.classes.delete(c.key);
  }

  private unneed(ns: string, w: Waiter): void {
    if (!this.fair) return;
    const n = (this.needs.get(ns) ?? 0) - (w.need ?? 1);
    if (n > 0) this.needs.set(ns, n);
    else this.needs.delete(ns);
  }

  /** RU `index` of `server` became available: wake the first waiter that can use it, if any. */
  freed(server: ServerState, index: number): void {
    this.stats.freed++;
    if (this.count === 0) return;
    let best: ClassQueue | undefined;
    const fair = this.fair;
    // Usage is read once per namespace per freed RU (it does not change during the choice), and
    // only when heads of two namespaces are compared: a cell with one namespace never reads it.
    let usage: Map<string, number> | undefined;
    const usageOf = (ns: string): number => {
      usage ??= new Map();
      let u = usage.get(ns);
      if (u === undefined) {
        u = fair?.usage(ns) ?? 0;
        usage.set(ns, u);
      }
      return u;
    };
    const order = this.order;
    const now = order === 'ratio' ? this.now() : 0;
    const expected = this.expected;
    const first = (a: ClassQueue, wa: Waiter, b: ClassQueue, wb: Waiter): boolean => {
      if (fair && a.namespace !== b.namespace) {
        const ua = usageOf(a.namespace);
        const ub = usageOf(b.namespace);
        if (ua !== ub) return ua < ub;
      }
      return waiterBefore(wa, wb, order, now, expected);
    };
    let bw: Waiter | undefined;
    for (const c of this.classes.values()) {
      const head = this.candidate(c);
      if (!head) continue;
      // A class whose first waiter comes after the best so far cannot win: not even asked.
      if (best && bw && !first(c, head, best, bw)) continue;
      this.stats.classChecks++;
      if (!this.usable(c, server, index)) continue;
      if (c.cls.ready && !c.cls.ready(server, index)) continue;
      best = c;
      bw = head;
    }
    const w = bw;
    if (!best || !w) return;
    this.remove(best, w);
    this.stats.woken++;
    w.wake();
  }

  /**
   * The first waiter of a queue that the reserve does not hold: its head, or (the head held, the
   * queue mixing workload classes under the `arrival` order) the first behind it that is not held.
   */
  private candidate(c: ClassQueue): Waiter | undefined {
    const head = c.queue[0];
    if (!head || !this.holds?.(head)) return head;
    // Under the ratio order a queue is one workload class in priority order, and what the
    // reserve holds depends on the class and holds a lower priority whenever a higher one: the
    // waiters behind a held head are held too, and the queue is not scanned on every freed RU.
    if (this.order === 'ratio') return undefined;
    return c.queue.find((w) => !this.holds?.(w));
  }

  /** Every waiter, at once (a server came back, the process closes). */
  wakeAll(): void {
    const all = [...this.classes.values()].flatMap((c) => c.queue);
    for (const c of this.classes.values()) c.queue.length = 0;
    this.classes.clear();
    this.needs.clear();
    this.count = 0;
    for (const w of all) w.wake();
  }

  private usable(c: ClassQueue, server: ServerState, index: number): boolean {
    if (c.cls.perRu) return c.cls.canUse(server, index);
    let u = c.usable.get(server.id);
    if (u === undefined) c.usable.set(server.id, (u = c.cls.canUse(server, index)));
    return u;
  }
}
