/**
 * Fair share among namespaces, for the live agents and the simulator alike. A namespace's usage is
 * the RUs its jobs hold or are being placed on, over its weight (`namespaces/<ns>`, default 1),
 * counted in the cluster view of the process that asks (RuIndex.namespaceRus): live, each
 * front-end counts from its own cache, so the order is approximate across front-ends.
 *
 * The rule: when jobs of several namespaces wait for capacity, the waiting job served first (a
 * freed RU, the next decision) is one of the namespace with the lowest usage among those with
 * waiting jobs; within a namespace, higher priority, then earlier arrival. A request of a namespace
 * that would take RUs while another namespace further below its usage waits for more than the
 * free RUs holds back and waits in that order (mustYield). Preemption across namespaces only
 * goes from a namespace below its guaranteed share (weight / sum of the weights of namespaces
 * holding or waiting for RUs, times the cell's RUs) to one above its own (mayDisplace).
 */
import { namespaceOfJob } from '../tenancy/namespace.ts';

/** What fair share reads from a cluster view: RUs held (or being placed) per namespace. */
export interface NamespaceUsage {
  /** RUs the namespace's jobs hold or are being placed on. */
  held(ns: string): number;
  /** The namespaces that hold at least one RU. */
  holding(): Iterable<string>;
  /** RUs of the cell. */
  totalRus(): number;
}

/** A waiting request as fair share orders it. */
export interface FairWaiter {
  namespace: string;
  priority: number;
  /** Arrival order (lower first). */
  seq: number;
}

/** Priority, then arrival: the order within a namespace (and the whole order with fair share off). */
export function priorityBefore(a: { priority: number; seq: number }, b: { priority: number; seq: number }): boolean {
  return a.priority !== b.priority ? a.priority > b.priority : a.seq < b.seq;
}

export class FairShare {
  private readonly weights = new Map<string, number>();

  constructor(private readonly usageOf: NamespaceUsage) {}

  /** Sets the weights (namespace records); a namespace not named keeps weight 1. */
  setWeights(records: Iterable<{ name: string; weight: number }>): void {
    this.weights.clear();
    for (const r of records) if (Number.isFinite(r.weight) && r.weight > 0) this.weights.set(r.name, r.weight);
  }

  weight(ns: string): number {
    return this.weights.get(ns) ?? 1;
  }

  /** RUs held or being placed, over the weight: lower is served first. */
  usage(ns: string): number {
    return this.usageOf.held(ns) / this.weight(ns);
  }

  /** Does waiter `a` come before `b`: lower usage first (across namespaces), then priority, then arrival. */
  before(a: FairWaiter, b: FairWaiter): boolean {
    if (a.namespace !== b.namespace) {
      const ua = this.usage(a.namespace);
      const ub = this.usage(b.namespace);
      if (ua !== ub) return ua < ub;
    }
    return priorityBefore(a, b);
  }

  /**
   * Should a request of `ns` for `m` RUs hold back and wait in fair order? Yes when namespaces
   * with lower usage wait for more RUs than are free beyond the `m` this request would take.
   * `waiting`: RUs wanted by the waiting requests, per namespace.
   */
  mustYield(ns: string, m: number, free: number, waiting: ReadonlyMap<string, number>): boolean {
    let lower = 0;
    let u: number | undefined;
    for (const [other, need] of waiting) {
      if (other === ns || need <= 0) continue;
      u ??= this.usage(ns);
      if (this.usage(other) < u) lower += need;
    }
    return lower > 0 && free < lower + m;
  }

  /**
   * Guaranteed shares in RUs: weight / (sum of the weights of the namespaces that hold RUs, wait
   * for them, or are named in `also`) × the cell's RUs.
   */
  shares(waiting: Iterable<string>, also: Iterable<string> = []): Map<string, number> {
    const names = new Set<string>([...this.usageOf.holding(), ...waiting, ...also]);
    let sum = 0;
    for (const n of names) sum += this.weight(n);
    const total = this.usageOf.totalRus();
    const out = new Map<string, number>();
    for (const n of names) out.set(n, sum > 0 ? (total * this.weight(n)) / sum : 0);
    return out;
  }

  /**
   * What a job of `ns` may preempt (the priority rule applies besides): a task of its own
   * namespace; a task of another only when `ns` is below its guaranteed share and the victim's
   * namespace above its own. Never the reverse.
   */
  mayDisplace(ns: string, waiting: Iterable<string>): (victimJob: string) => boolean {
    const shares = this.shares(waiting, [ns]);
    const below = this.usageOf.held(ns) < (shares.get(ns) ?? 0);
    return (victimJob) => {
      const vn = namespaceOfJob(victimJob);
      if (vn === ns) return true;
      return below && this.usageOf.held(vn) > (shares.get(vn) ?? 0);
    };
  }
}
