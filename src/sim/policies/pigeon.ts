/**
 * Pigeon (Wang et al. 2019, §2): workers (RUs) in groups of GROUP_SIZE, one master per group.
 * A job's scheduler spreads its tasks evenly over the masters (⌊F/N_g⌋ each, the remainder to
 * random masters). A master keeps two queues, short-job (high) and long-job (low), served by
 * weighted fair queuing — of every W tasks dispatched while both are non-empty at least one is
 * long — and reserves a share of its workers for short tasks. Short tasks take a low-priority
 * idle worker first, then a reserved one; long tasks only low-priority workers.
 */
import type { Rng } from '../../util/rng.ts';
import { NETWORK, PIGEON } from '../constants.ts';
import type { SimJob, SimTask, World } from '../world.ts';
import type { Policy } from './types.ts';

export interface PigeonOptions {
  groupSize?: number;
  weight?: number;
  reserved?: number;
  /** A job whose mean task time is under this is short, ms. */
  shortCutoffMs: number;
  oneWayMs?: number;
}

class Fifo<T> {
  private a: T[] = [];
  private h = 0;
  get size(): number {
    return this.a.length - this.h;
  }
  push(x: T): void {
    this.a.push(x);
  }
  shift(): T | undefined {
    if (this.h >= this.a.length) return undefined;
    const x = this.a[this.h++] as T;
    if (this.h > 1024 && this.h * 2 > this.a.length) {
      this.a = this.a.slice(this.h);
      this.h = 0;
    }
    return x;
  }
}

interface Master {
  high: Fifo<SimTask>;
  low: Fifo<SimTask>;
  idleHigh: number[];
  idleLow: number[];
  /** High tasks served since the last low one while low was waiting. */
  streak: number;
  served: ('h' | 'l')[];
}

export class PigeonPolicy implements Policy {
  readonly name = 'pigeon';
  readonly masters: Master[] = [];
  private readonly groupOf: Int32Array;
  private readonly reservedRu: Uint8Array;
  private readonly W: number;
  private readonly oneWay: number;
  private readonly cutoff: number;
  /** When set, the order of dispatch per master is recorded (tests of the weights). */
  record = false;
  readonly c = { short: 0, long: 0, dispatchedHigh: 0, dispatchedLow: 0, weightForced: 0 };

  constructor(
    private readonly world: World,
    private readonly rng: Rng,
    opts: PigeonOptions,
  ) {
    const size = opts.groupSize ?? PIGEON.GROUP_SIZE;
    this.W = opts.weight ?? PIGEON.WEIGHT;
    this.oneWay = opts.oneWayMs ?? NETWORK.ONE_WAY_MS;
    this.cutoff = opts.shortCutoffMs;
    const reserved = opts.reserved ?? PIGEON.RESERVED.yahoo;
    const groups = Math.max(1, Math.round(world.nRu / size));
    this.groupOf = new Int32Array(world.nRu);
    this.reservedRu = new Uint8Array(world.nRu);
    for (let g = 0; g < groups; g++) this.masters.push({ high: new Fifo(), low: new Fifo(), idleHigh: [], idleLow: [], streak: 0, served: [] });
    const per = world.nRu / groups;
    for (let ru = 0; ru < world.nRu; ru++) {
      const g = Math.min(groups - 1, Math.floor(ru / per));
      this.groupOf[ru] = g;
    }
    // The first ⌈reserved·size⌉ workers of each group are reserved for short tasks.
    const seen = new Int32Array(groups);
    for (let ru = 0; ru < world.nRu; ru++) {
      const g = this.groupOf[ru] as number;
      const m = this.masters[g] as Master;
      const k = seen[g] ?? 0;
      seen[g] = k + 1;
      const isReserved = k < Math.ceil(reserved * per);
      this.reservedRu[ru] = isReserved ? 1 : 0;
      if (world.occ[ru] === null) (isReserved ? m.idleHigh : m.idleLow).push(ru);
    }
    world.onFree = (ru) => {
      // The worker tells its master it is idle.
      world.engine.after(this.oneWay, () => this.onIdle(ru));
    };
  }

  counters(): Record<string, number> {
    return { ...this.c };
  }

  isShort(job: SimJob): boolean {
    let sum = 0;
    for (const t of job.tasks) sum += t.work;
    return sum / Math.max(1, job.tasks.length) < this.cutoff;
  }

  submit(job: SimJob): void {
    const short = this.isShort(job);

    if (short) this.c.short++;
    else this.c.long++;
    const n = this.masters.length;
    const F = job.tasks.length;
    const S = Math.floor(F / n);
    const r = F % n;
    // r distinct random masters take one more task each.
    const extra = new Set<number>();
    while (extra.size < r) extra.add(this.rng.int(n));
    let k = 0;
    for (let g = 0; g < n; g++) {
      const take = S + (extra.has(g) ? 1 : 0);
      for (let i = 0; i < take; i++) {
        const t = job.tasks[k++] as SimTask;
        this.world.engine.after(this.oneWay, () => this.onTask(g, t, short));
      }
    }
  }

  private onTask(g: number, t: SimTask, short: boolean): void {
    const m = this.masters[g] as Master;
    if (short) {
      const ru = m.idleLow.pop() ?? m.idleHigh.pop();
      if (ru === undefined) m.high.push(t);
      else this.send(m, ru, t, 'h');
    } else {
      const ru = m.idleLow.pop();
      if (ru === undefined) m.low.push(t);
      else this.send(m, ru, t, 'l');
    }
  }

  private send(m: Master, ru: number, t: SimTask, cls: 'h' | 'l'): void {
    if (cls === 'h') this.c.dispatchedHigh++;
    else this.c.dispatchedLow++;
    if (this.record) m.served.push(cls);
    this.world.engine.after(this.oneWay, () => this.world.startTask(t, ru));
  }

  private onIdle(ru: number): void {
    const g = this.groupOf[ru] as number;
    const m = this.masters[g] as Master;
    const reserved = this.reservedRu[ru] === 1;
    if (reserved) {
      const t = m.high.shift();
      if (t) this.send(m, ru, t, 'h');
      else m.idleHigh.push(ru);
      return;
    }
    const hasLow = m.low.size > 0;
    const hasHigh = m.high.size > 0;
    if (!hasLow) m.streak = 0;
    if (hasHigh && (!hasLow || m.streak < this.W - 1)) {
      if (hasLow) m.streak++;
      this.send(m, ru, m.high.shift() as SimTask, 'h');
    } else if (hasLow) {
      if (hasHigh) this.c.weightForced++;
      m.streak = 0;
      this.send(m, ru, m.low.shift() as SimTask, 'l');
    } else {
      m.idleLow.push(ru);
    }
  }
}
