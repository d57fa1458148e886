/**
 * A centralized greedy scheduler (Quasar-like, Tarcil §6.2): one scheduler with a complete and
 * fresh view, scoring every free RU with the same interference-aware quality as Tarcil, so its
 * decisions are the best available; what it pays is time.
 *
 * It works in rounds. A round reads the whole cluster state once — BASE + SCAN_PER_RU × RUs, cut
 * at the 2 s timeout, after which it decides on the share scanned — and then places the requests
 * (a job, or a query stage) that were queued when the round began, FIFO. Requests arriving during
 * a round wait for the next one. A request that cannot be placed in full keeps its place in the
 * queue and is retried by the next round, which starts when a request arrives or an RU frees;
 * it does not block the requests behind it (a greedy scheduler places what fits).
 *
 * Why rounds rather than one scan per request: the paper's two observations of the same scheduler
 * only agree this way. Fig. 15d puts a decision at ≈ 1 s on 4,178 RUs (≈ 0.2 ms per RU, the cost
 * here); TPC-H on the 100-server cluster submits ≈ 100 stages a second, which one-scan-per-stage
 * at 0.2 ms/RU × 800 RUs (161 ms) could not keep up with, yet Fig. 13 shows the centralized
 * overhead bounded by the 2 s timeout. A scan is the cost of reading the cluster state; scoring
 * the RUs it read for each queued request is cheap next to it.
 */
import { DEFAULT_CORE_CONFIG } from '../../agent/core.ts';
import { jobTarget, type JobTarget } from '../../quality/index.ts';
import { selectPlacements, type PlacementRequest, type SelectionResult } from '../../sampling/batch.ts';
import type { Rng } from '../../util/rng.ts';
import { CENTRAL } from '../constants.ts';
import { replicaAttributes } from '../replicas.ts';
import type { SimJob, SimTask, View, World } from '../world.ts';
import { bestServerFor, startAllOn } from './one-server.ts';
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
  /** A request arrived while a round was scanning. */
  private arrived = false;
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
        this.round();
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
    if (this.busy) this.arrived = true;
    else this.round();
  }

  private target(c: readonly number[]): JobTarget {
    let t = this.targets.get(c);
    if (!t) {
      t = jobTarget(c);
      this.targets.set(c, t);
    }
    return t;
  }

  /** One round: scan, then place what was queued when the scan began. */
  private round(): void {
    if (this.busy || this.queue.length === 0) return;
    this.busy = true;
    this.waiting = false;
    this.arrived = false;
    this.c.decisions++;
    if (this.scanShare < 1) this.c.timeouts++;
    const batch = this.queue.slice();
    this.world.engine.after(this.decisionMs, () => {
      this.busy = false;
      for (const r of batch) {
        r.job.head.decisionMs += this.decisionMs;
        this.place(r);
      }
      const placed = new Set(batch.filter((r) => r.tasks.every((t) => t.state !== 'pending')));
      for (let i = this.queue.length - 1; i >= 0; i--) if (placed.has(this.queue[i] as Req)) this.queue.splice(i, 1);
      // New requests start the next round at once; requests that found too few free RUs (or
      // none on their replicas) wait for a free RU.
      if (this.arrived) this.round();
      else if (this.queue.length > 0) this.waiting = true;
    });
  }

  /** The core's batch selection over the scanned state, with this request's job and profile. */
  private select(r: Req, how: Pick<PlacementRequest, 'locality' | 'constraints' | 'm' | 'R'>): SelectionResult {
    return selectPlacements(this.view.state, this.request(r, how), this.rng);
  }

  private request(r: Req, how: Pick<PlacementRequest, 'locality' | 'constraints' | 'm' | 'R'>): PlacementRequest {
    const job = r.job;
    const constraints = job.platforms ? { ...how.constraints, platforms: [...job.platforms] } : how.constraints;
    return {
      jobId: String(job.id),
      target: this.target(job.declared),
      caused: job.declared,
      priority: job.priority,
      platformPerf: job.profile.platformPerf,
      form: DEFAULT_CORE_CONFIG.qualityForm,
      platformWeight: DEFAULT_CORE_CONFIG.platformWeight,
      ...how,
      constraints,
    };
  }

  /** A one-server job (one-server.ts): the best scanned server with room for all its pending tasks, or none this round. */
  private placeOneServer(r: Req): void {
    const pending = r.tasks.filter((t) => t.state === 'pending');
    const req = this.request(r, { locality: { mode: 'pack', scope: 'server' }, constraints: {}, m: pending.length, R: 1 });
    const best = bestServerFor(this.world, this.view.state, req, r.job, pending.length, this.scanShare, this.rng);
    if (best) startAllOn(this.world, pending, best.server, best.quality);
  }

  /** The attributes holding a data-constrained task to its replicas (W2's blocks or copysets). */
  private heldTo(t: SimTask): Record<string, string> | undefined {
    return t.data ? replicaAttributes(t.data.map((s) => (this.world.servers[s] as { spec: { attributes: Record<string, string> } }).spec)) : undefined;
  }

  private place(r: Req): void {
    if (r.job.oneServer) {
      this.placeOneServer(r);
      return;
    }
    // Tasks whose replicas are named (a block or copyset) are hard-constrained to it (Tarcil §6.2.1), one at a
    // time over the scanned state; the rest of the stage is decided jointly.
    for (const t of r.tasks) {
      if (t.state !== 'pending' || !t.data) continue;
      const held = this.heldTo(t);
      if (!held) continue;
      const avail = this.view.state.available.size;
      if (avail === 0) return;
      const sel = this.select(r, {
        locality: { mode: 'any', scope: 'server' },
        constraints: { attributes: held },
        m: 1,
        R: Math.max(1, Math.ceil(avail * this.scanShare)),
      });
      const p = sel.picks[0];
      if (!p) continue;
      t.Q = p.quality.Q;
      t.acceptable = p.quality.acceptable;
      this.world.startTask(t, p.id);
    }
    const pending = r.tasks.filter((t) => t.state === 'pending' && !this.heldTo(t));
    const avail = this.view.state.available.size;
    if (avail === 0 || pending.length === 0) return;
    const m = Math.min(pending.length, avail);
    // R·m candidates cover the scanned share of the free RUs: the whole cluster without a timeout.
    const R = Math.max(1, Math.ceil((avail * this.scanShare) / m));
    const sel = this.select(r, {
      locality: r.data ? { mode: 'pack', scope: 'server' } : { mode: 'any', scope: 'server' },
      constraints: r.data ? { dataServers: r.data } : {},
      m,
      R,
    });
    // The scheduler knows where each task's input is: a pick on a server holding some pending
    // task's data goes to that task; the rest take the remaining tasks in order.
    const left = new Set(pending);
    const assign = (pick: (typeof sel.picks)[number], t: SimTask): void => {
      left.delete(t);
      t.Q = pick.quality.Q;
      t.acceptable = pick.quality.acceptable;
      this.world.startTask(t, pick.id);
    };
    const rest: typeof sel.picks = [];
    for (const p of sel.picks) {
      const server = this.world.ruServer[p.id] as number;
      let local: SimTask | undefined;
      for (const t of left) {
        if (t.data?.includes(server)) {
          local = t;
          break;
        }
      }
      if (local) assign(p, local);
      else rest.push(p);
    }
    for (const p of rest) {
      const t = left.values().next().value;
      if (!t) break;
      assign(p, t);
    }
  }
}
