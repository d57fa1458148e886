/**
 * Delay scheduling for data-local tasks (Zaharia et al.; Schatzlein et al., DCC'16, Alg. 1): a
 * centralized fair scheduler offers each free slot to jobs in increasing order of running tasks.
 * A job takes the slot for a task whose data is on that server; a job with no local task there is
 * skipped until it has waited longer than the delay interval since it last launched, then it
 * launches remotely. Unconstrained tasks take any slot. Interference-blind.
 *
 * - fixed: a constant 3 s interval;
 * - dynamic: Alg. 1 line 5, delay ← (delay + t_netOH) / 2 on every completion of a task that
 *   reads input (the paper's HDFS read wrapper; unconstrained tasks read none and do not report).
 *   t_netOH is "zero if the task is scheduled locally" (§4.1), the remote-read overhead otherwise.
 *   So mostly-local stages drive the interval towards zero, the remote launches that follow push
 *   it back up to the overhead they paid: the interval settles near what missing locality costs.
 */
import type { Timer } from '../../util/clock.ts';
import type { Rng } from '../../util/rng.ts';
import { DELAY, PERF } from '../constants.ts';
import type { SimJob, SimTask, World } from '../world.ts';
import type { Policy } from './types.ts';

interface Active {
  job: SimJob;
  pending: SimTask[];
  running: number;
  waitBegin: number;
  timer?: Timer;
}

export class DelayPolicy implements Policy {
  readonly name: string;
  private readonly active: Active[] = [];
  private delay: number;
  private readonly dynamic: boolean;
  readonly c = { local: 0, remote: 0, skips: 0, reports: 0, finalDelayMs: 0 };

  constructor(
    private readonly world: World,
    private readonly rng: Rng,
    opts: { dynamic: boolean },
  ) {
    this.dynamic = opts.dynamic;
    this.name = opts.dynamic ? 'delay-dynamic' : 'delay-fixed';
    this.delay = opts.dynamic ? DELAY.DYNAMIC_INITIAL_MS : DELAY.FIXED_MS;
    world.onFree = (ru, t) => {
      const a = t.job.policyData as Active | undefined;
      if (a) a.running--;
      if (this.dynamic && t.data) {
        // The remote read is the inflated share f/(1+f) of the task's work, at the task's rate.
        const f = PERF.REMOTE_READ_FRACTION;
        const netOH = t.remote ? (t.work * f) / (1 + f) / Math.max(1e-9, t.rate) : 0;
        this.delay = (this.delay + netOH) / 2;
        this.c.reports++;
      }
      this.offer(ru);
    };
  }

  counters(): Record<string, number> {
    return { ...this.c, finalDelayMs: this.delay };
  }

  submit(job: SimJob): void {
    const a: Active = { job, pending: [...job.tasks], running: 0, waitBegin: this.world.engine.now() };
    job.policyData = a;
    this.active.push(a);
    // Offer as many free slots as the job has tasks (random ones: no slot is special).
    const free = this.world.free;
    const offers = Math.min(free.size, job.tasks.length);
    const picked = new Set<number>();
    while (picked.size < offers) picked.add(free.at(this.rng.int(free.size)));
    for (const ru of picked) if (this.world.occ[ru] === null) this.offer(ru);
    this.armTimer(a);
  }

  /**
   * When a skipping job's delay expires, the free slots it skipped are offered again. One timer per
   * job; it is re-armed when the job launches (its wait restarts), never for a time already past,
   * so a job starved of slots waits for the next free rather than spinning.
   */
  private armTimer(a: Active): void {
    if (a.timer || !a.pending.some((t) => t.data)) return;
    const eng = this.world.engine;
    a.timer = eng.at(Math.max(a.waitBegin + this.delay, eng.now()) + 1e-6, () => {
      a.timer = undefined;
      if (a.pending.length === 0) return;
      // The interval may have grown, or the job launched, since the timer was set.
      if (eng.now() - a.waitBegin <= this.delay) {
        this.armTimer(a);
        return;
      }
      const free = this.world.free;
      const n = Math.min(free.size, a.pending.length);
      for (let i = 0; i < n && free.size > 0; i++) this.offer(free.at(this.rng.int(free.size)));
    });
  }

  private offer(ru: number): void {
    if (this.world.occ[ru] !== null) return;
    const now = this.world.engine.now();
    const s = this.world.ruServer[ru] as number;
    for (let i = this.active.length - 1; i >= 0; i--) if ((this.active[i] as Active).pending.length === 0) this.active.splice(i, 1);
    const order = [...this.active].sort((x, y) => x.running - y.running || x.job.arrival - y.job.arrival);
    for (const a of order) {
      let k = a.pending.findIndex((t) => !t.data || t.data.includes(s));
      if (k < 0) {
        if (now - a.waitBegin <= this.delay) {
          this.c.skips++;
          continue;
        }
        k = 0;
      }
      const t = a.pending[k] as SimTask;
      a.pending.splice(k, 1);
      a.running++;
      a.waitBegin = now;
      if (t.data && !t.data.includes(s)) this.c.remote++;
      else if (t.data) this.c.local++;
      this.world.startTask(t, ru);
      this.armTimer(a);
      return;
    }
  }
}
