/**
 * A centralized greedy scheduler (Quasar-like, Tarcil §6.2): one scheduler with a complete and
 * fresh view, requests served FIFO (a job, or a stage, at a time). Each decision scans the whole
 * cluster, scoring every free RU with the same interference-aware quality as Tarcil, so its
 * decisions are the best available; what it pays is time: BASE + SCAN_PER_RU × RUs, cut at the
 * 2 s timeout, after which it decides on the share of the cluster it has scanned.
 *
 * A request that cannot be placed in full waits at the head of the queue (head-of-line blocking)
 * until an RU frees, then is decided again, paying the scan again.
 */
import { DEFAULT_CORE_CONFIG } from '../../agent/core.ts';
import { jobTarget, type JobTarget } from '../../quality/index.ts';
import { selectPlacements } from '../../sampling/batch.ts';
import type { Rng } from '../../util/rng.ts';
import { CENTRAL } from '../constants.ts';
import type { SimJob, SimTask, View, World } from '../world.ts';
import type { Policy } from './types.ts';

interface Req {
  job: SimJob;
  tasks: SimTask[];
  data?: string[];
}

export interface CentralizedOptions {
  scanPerRuMs?: number;
  baseMs?: number;
  timeoutMs?: number;
  /** Score by interference and platform (true) or take any free RU (false). */
  aware?: boolean;
}

export class CentralizedPolicy implements Policy {
  readonly name = 'centralized';
  private readonly view: View;
  private readonly queue: Req[] = [];
  private busy = false;
  private waiting = false;
  private readonly targets = new Map<readonly number[], JobTarget>();
  private readonly decisionMs: number;
  private readonly scanShare: number;
  readonly c = { decisions: 0, timeouts: 0, rescans: 0 };

  constructor(
    private readonly world: World,
    private readonly rng: Rng,
    opts: CentralizedOptions = {},
  ) {
    this.view = world.addView(0, false);
    const full = (opts.baseMs ?? CENTRAL.BASE_MS) + (opts.scanPerRuMs ?? CENTRAL.SCAN_PER_RU_MS) * world.nRu;
    const timeout = opts.timeoutMs ?? CENTRAL.TIMEOUT_MS;
    this.decisionMs = Math.min(full, timeout);
    this.scanShare = full > timeout ? Math.max(0.01, (timeout - (opts.baseMs ?? CENTRAL.BASE_MS)) / (full - (opts.baseMs ?? CENTRAL.BASE_MS))) : 1;
    world.onFree = () => {
      if (this.waiting) {
        this.waiting = false;
        this.c.rescans++;
        this.next();
      }
    };
  }

  counters(): Record<string, number> {
    return { ...this.c, decisionMs: this.decisionMs, scanShare: this.scanShare };
  }

  submit(job: SimJob): void {
    // Quasar decides a whole stage at once (Tarcil §6.2.1); data-constrained tasks make the union
    // of their replicas the preferred servers.
    const data = new Set<string>();
    for (const t of job.tasks) for (const s of t.data ?? []) data.add((this.world.servers[s] as { spec: { id: string } }).spec.id);
    this.queue.push(data.size > 0 ? { job, tasks: [...job.tasks], data: [...data] } : { job, tasks: [...job.tasks] });
    if (!this.busy && !this.waiting) this.next();
  }

  private target(c: readonly number[]): JobTarget {
    let t = this.targets.get(c);
    if (!t) {
      t = jobTarget(c);
      this.targets.set(c, t);
    }
    return t;
  }

  private next(): void {
    const r = this.queue[0];
    if (!r || this.busy) return;
    this.busy = true;
    const eng = this.world.engine;
    this.c.decisions++;
    if (this.scanShare < 1) this.c.timeouts++;
    r.job.head.decisionMs += this.decisionMs;
    eng.setTimer(this.decisionMs, () => {
      this.busy = false;
      const pending = r.tasks.filter((t) => t.state === 'pending');
      const avail = this.view.state.available.size;
      if (avail > 0 && pending.length > 0) {
        const m = Math.min(pending.length, avail);
        // R·m candidates cover the scanned share of the free RUs: the whole cluster without a timeout.
        const R = Math.max(1, Math.ceil((avail * this.scanShare) / m));
        const job = r.job;
        const sel = selectPlacements(
          this.view.state,
          {
            jobId: String(job.id),
            target: this.target(job.declared),
            caused: job.declared,
            priority: job.priority,
            platformPerf: job.profile.platformPerf,
            locality: r.data ? { mode: 'pack', scope: 'server' } : { mode: 'any', scope: 'server' },
            constraints: r.data ? { dataServers: r.data } : {},
            m,
            R,
            form: DEFAULT_CORE_CONFIG.qualityForm,
            platformWeight: DEFAULT_CORE_CONFIG.platformWeight,
          },
          this.rng,
        );
        sel.picks.forEach((p, k) => {
          const t = pending[k] as SimTask;
          t.Q = p.quality.Q;
          this.world.startTask(t, p.id);
        });
      }
      if (r.tasks.every((t) => t.state !== 'pending')) {
        this.queue.shift();
        this.next();
      } else {
        this.waiting = true;
      }
    });
  }
}
