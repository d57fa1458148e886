/**
 * The simulated tarcil agents' turns (tarcil.ts extends it): the step sequence of the live agent's
 * attempt loop (agent/attempt-steps.ts) performed with engine timers and modelled commits. An
 * agent's turn takes steps until one waits or a commit is sent; the store applies a commit half a
 * round trip later (each pick lands if its RU's revision is the one read; a gang's or a one-server
 * job's all or none; a gang's reservation held in the world until confirmed or given back; a
 * commit over its namespace's quota refused in advance, as the live commit refuses it), and its
 * answer reaches the agent half a round trip after that.
 */
import type { AttemptPolicy } from '../../agent/attempt.ts';
import { Attempt, picksPerTxn } from '../../agent/attempt.ts';
import { AttemptSteps, type Outcome, type Step } from '../../agent/attempt-steps.ts';
import { admissionVerdict, decide, type CoreConfig } from '../../agent/core.ts';
import type { FairShare } from '../../agent/fair-share.ts';
import type { Pick } from '../../sampling/batch.ts';
import { hardPack } from '../../sampling/feasibility.ts';
import { DEFAULT_MAX_TXN_OPS } from '../../store/common.ts';
import { TARCIL } from '../constants.ts';
import type { SimTask, View, World } from '../world.ts';
import { selectOneServer } from './one-server.ts';
import type { SimLoadMonitor } from './runtime.ts';
import { confirmHeld, releaseHeld, reserveAtStore, unchanged, type QuotaBook } from './tarcil-gang.ts';
import type { Agent, Request, TarcilOptions } from './tarcil-types.ts';

/** As large a chunk as one transaction of etcd's default limits holds, as in the live agent. */
export const PICKS_PER_TXN = picksPerTxn(DEFAULT_MAX_TXN_OPS);

/** The simulated tarcil's counters (TarcilPolicy.counters). */
export interface TarcilCounters {
  decisions: number;
  commits: number;
  conflicts: number;
  picks: number;
  readmissions: number;
  queued: number;
  bestEffort: number;
  Rsum: number;
  capacityWaits: number;
  fairYields: number;
  reserveHolds: number;
  acceptablePicks: number;
  Qsum: number;
}

export abstract class TarcilTurns {
  protected abstract readonly world: World;
  protected abstract readonly view: View;
  protected abstract readonly cfg: CoreConfig;
  protected abstract readonly policy: AttemptPolicy;
  protected abstract readonly opts: TarcilOptions;
  protected abstract readonly fair: FairShare | undefined;
  protected abstract readonly needs: Map<string, number>;
  protected abstract readonly c: TarcilCounters;
  protected abstract readonly monitor: SimLoadMonitor | undefined;
  protected abstract readonly quotas: QuotaBook | undefined;
  protected abstract readonly wall: { verdicts: number; verdictMs: number; decisions: number; decideMs: number; candidates: number };
  protected abstract readonly lag: { watch: number; rtt: number };
  protected abstract requeue(a: Agent, r: Request): void;
  protected abstract pump(a: Agent): void;
  protected abstract excludeFor(a: Agent, ru: number, until: number, own?: SimTask): void;
  protected abstract fairDisplace(r: Request): { mayDisplace?: (victimJob: string) => boolean };
  protected abstract countPlacing(ns: string, n: number, until: number): void;
  protected abstract need(ns: string, n: number): void;
  protected abstract waitForRu(a: Agent, r: Request, ms: number): void;
  protected abstract wakeFor(ru: number): void;
  /** The short-task reserve (agent/short-reserve.ts): is this request held back now? */
  protected abstract reserveHolds(r: Request): boolean;

  protected stepsOf(a: Agent, r: Request): AttemptSteps {
    const gang = r.spec.mode === 'gang';
    const reserving = gang && r.pending.length > PICKS_PER_TXN;
    const bypasses = this.opts.priorityWaits !== false && !reserving && r.job.priority > this.cfg.bypassAbove;
    const onStep = this.opts.onStep;
    return new AttemptSteps(new Attempt(this.policy, a.ctx.rng, r.spec.maxQueueMs, bypasses), {
      tasks: r.pending.length,
      perTxn: PICKS_PER_TXN,
      gang,
      pack: hardPack(r.spec.locality),
      onStep: onStep && ((st, after) => onStep(r.spec.id, st, after)),
    });
  }

  /** The agent is free again `after` ms from now (the CPU its turn cost). */
  protected free(a: Agent, after: number): void {
    this.world.engine.after(after, () => {
      a.busy = false;
      this.pump(a);
    });
  }

  /** One turn of an agent: steps taken until one waits or a commit is sent. */
  protected turn(a: Agent, r: Request, steps: AttemptSteps, s: Step): void {
    let cpu = 0;
    for (;;) {
      switch (s.kind) {
        case 'fair': {
          const y = this.fair !== undefined && this.needs.size > 0 && this.fair.mustYield(r.ns, s.need, this.view.state.available.size, this.needs);
          if (y) this.c.fairYields++;
          if (!y && this.reserveHolds(r)) {
            this.c.reserveHolds++;
            s = steps.next({ kind: 'fair', yield: true, reserve: true });
            continue;
          }
          s = steps.next({ kind: 'fair', yield: y });
          continue;
        }
        case 'admit':
          s = this.admit(a, r, steps, s.need);
          continue;
        case 'decide':
          cpu += this.decideChunk(a, r, s);
          s = steps.next({ kind: 'decided', picks: (r.picks as Pick[]).length, kept: r.keep?.length ?? 0 });
          // Nothing free and eligible in the (stale) view: wait for a free RU.
          if (s.kind !== 'commit') this.c.capacityWaits++;
          continue;
        case 'release':
          for (const ru of releaseHeld(this.world, r)) this.wakeFor(ru);
          s = steps.next({ kind: 'released' });
          continue;
        case 'commit':
          this.send(a, r, s.reserve, cpu);
          return;
        case 'wait':
          this.waitInTurn(a, r, s, cpu);
          return;
        default:
          this.free(a, cpu);
          return;
      }
    }
  }

  /** One admission verdict; the step after it. */
  protected admit(a: Agent, r: Request, steps: AttemptSteps, need: number): Step {
    const now = this.world.engine.now();
    const at = steps.at;
    const skip = !this.cfg.admission || at.skipAdmission(now);
    const want = r.spec.mode === 'gang' ? need : Math.max(1, Math.min(need, r.capacity));
    // Wall time of the core's calls (the virtual clock models their cost): what a decision
    // really costs the simulator, which must not grow with the cell (bench sim-speed).
    const w0 = performance.now();
    const verdict = skip
      ? undefined
      : a.ov.during(() =>
          admissionVerdict(a.ctx, {
            job: r.spec,
            target: r.target,
            needed: want,
            cfg: this.cfg,
            capacity: r.capacity,
            leftMs: at.leftMs(now),
            queuedMs: at.queuedMs(now),
          }),
        );
    if (!skip) {
      this.wall.verdicts++;
      this.wall.verdictMs += performance.now() - w0;
    }
    const s = steps.next({ kind: 'verdict', verdict, now });
    if (s.kind === 'wait') return s;
    if (verdict?.action === 'best-effort') this.c.bestEffort++;
    if (steps.realisedWaitMs !== undefined) r.job.head.waits.push({ estimate: at.firstEstimateMs, realised: steps.realisedWaitMs });
    return s;
  }

  /** One decision for the step's chunk (picks in r.picks, kept ones first); returns its modelled CPU. */
  protected decideChunk(a: Agent, r: Request, s: Extract<Step, { kind: 'decide' }>): number {
    if (s.fresh) r.keep = undefined;
    const chunk = (r.chunk = r.job.oneServer ? r.pending : r.pending.slice(0, s.chunk));
    const keep = r.keep ?? [];
    const w1 = performance.now();
    const exclude = keep.length > 0 ? new Set([...a.ov.exclude, ...keep.map((p) => p.id)]) : a.ov.exclude;
    const ask = { job: r.spec, target: r.target, skipAdmission: true, exclude };
    const one = r.job.oneServer ? a.ov.during(() => selectOneServer(a.ctx, r.spec, r.target, chunk.length, this.cfg, a.ov.exclude)) : undefined;
    const d = one
      ? { R: one.R, selection: { ...one, preemptionCandidates: 0 } }
      : s.reserve
        ? a.ov.during(() => decide(a.ctx, { ...ask, m: s.room, cfg: { ...this.cfg, preemption: false } }))
        : a.ov.during(() => decide(a.ctx, { ...ask, m: chunk.length - keep.length, cfg: this.cfg, ...this.fairDisplace(r) }));
    this.wall.decisions++;
    this.wall.decideMs += performance.now() - w1;
    this.wall.candidates += d.selection.candidatesSeen;
    const cost = TARCIL.DECISION_BASE_MS + TARCIL.DECISION_PER_CANDIDATE_MS * d.selection.candidatesSeen;
    const head = r.job.head;
    head.decisionMs += cost;
    head.Rsum += d.R;
    head.Rn++;
    this.c.decisions++;
    this.c.Rsum += d.R;
    const picks = d.selection.picks;
    r.picks = s.reserve ? (picks.length >= s.room ? picks.slice(0, chunk.length) : []) : keep.concat(picks);
    return cost;
  }

  /** A wait taken within the agent's turn (the agent is free after the turn's CPU). */
  protected waitInTurn(a: Agent, r: Request, s: Extract<Step, { kind: 'wait' }>, cpu: number): void {
    if (s.for === 'admission') {
      // Admission control: wait for the estimated time (bounded), then ask again.
      this.c.queued++;
      this.free(a, TARCIL.DECISION_BASE_MS);
      r.job.head.decisionMs += TARCIL.DECISION_BASE_MS;
      // Held by admission, the request waits for RUs as a live one does in the waiters (fair share counts it).
      this.need(r.ns, r.pending.length);
      this.world.engine.after(TARCIL.DECISION_BASE_MS + s.ms, () => {
        this.need(r.ns, -r.pending.length);
        this.requeue(a, r);
      });
      return;
    }
    this.free(a, cpu);
    this.waitForRu(a, r, s.ms);
  }

  /** Sends the chunk's commit (a reservation: `reserve`); the store applies it half a round trip later. */
  protected send(a: Agent, r: Request, reserve: boolean, cpu: number): void {
    const eng = this.world.engine;
    const picks = r.picks as Pick[];
    const chunk = r.chunk as SimTask[];
    const sendAt = cpu + TARCIL.COMMIT_ISSUE_MS;
    const storeAt = eng.now() + sendAt + this.lag.rtt / 2;
    picks.forEach((p, k) => this.excludeFor(a, p.id, storeAt + this.lag.watch + this.lag.rtt, chunk[k]));
    if (this.fair) this.countPlacing(r.ns, picks.length, storeAt + this.lag.watch);
    this.free(a, sendAt);
    // Remove the chunk's tasks from pending while the commit is in flight.
    const inFlight = chunk.slice(0, picks.length);
    r.pending = r.pending.slice(picks.length);
    const Qs = picks.map((p) => p.quality.Q);
    eng.at(storeAt, () => {
      const refused = this.quotas?.refusal(r.ns, picks.length);
      if (refused) {
        // Refused in advance: nothing is kept, the chunk is decided again within what the quota leaves.
        r.pending = inFlight.concat(r.pending);
        r.keep = undefined;
      }
      const out: Outcome = refused
        ? { kind: 'committed', placed: 0, conflicts: 0, quota: refused }
        : reserve
          ? this.reserveAnswer(a, r, picks, inFlight)
          : this.commitAnswer(a, r, picks, inFlight, Qs);
      const steps = r.steps as AttemptSteps;
      const wasAdmitted = steps.at.admitted;
      const next = steps.next(out);
      if (out.kind === 'committed' && out.conflicts > 0 && wasAdmitted && !steps.at.admitted) this.c.readmissions++;
      this.answered(a, r, next);
    });
  }

  /** The store applies a chunk's commit: all its picks land if every RU is unchanged, else none. */
  protected commitAnswer(a: Agent, r: Request, picks: Pick[], inFlight: SimTask[], Qs: number[]): Outcome {
    const head = r.job.head;
    this.c.commits++;
    head.commits++;
    head.commitMs += this.lag.rtt;
    let conflicts = 0;
    const failed: SimTask[] = [];
    const kept: Pick[] = [];
    // One transaction's compares: all picks land or none. Those the store found unchanged are
    // kept for the next commit (a one-server job's chunk is chosen again whole).
    const together = picks.every((p) => unchanged(this.world, p));
    const keeps = !r.job.oneServer;
    picks.forEach((p, k) => {
      const task = inFlight[k] as SimTask;
      if (together && unchanged(this.world, p)) {
        if (r.scaleOut && !this.world.canJoin(r.job)) {
          (this.monitor as SimLoadMonitor).notScaledOut(r.job);
          return;
        }
        task.Q = Qs[k];
        task.acceptable = p.quality.acceptable;
        this.world.startTask(task, p.id);
        this.quotas?.add(r.ns, 1);
        this.c.picks++;
        this.c.Qsum += task.Q ?? 0;
        if (task.acceptable) this.c.acceptablePicks++;
        if (r.scaleOut) (this.monitor as SimLoadMonitor).scaledOut(r.job);
        return;
      }
      failed.push(task);
      if (keeps && unchanged(this.world, p)) {
        kept.push({ ...p, quality: { ...p.quality } });
        return;
      }
      conflicts++;
      // The else branch of the txn returns the RU's current value: the agent knows it now.
      this.excludeFor(a, p.id, this.world.engine.now() + this.lag.rtt / 2 + this.lag.watch);
    });
    this.c.conflicts += conflicts;
    head.conflicts += conflicts;
    r.pending = failed.concat(r.pending);
    r.keep = kept;
    return { kind: 'committed', placed: picks.length - conflicts - kept.length, conflicts, kept: kept.length };
  }

  /** The store applies a gang's reservation of a chunk: all its picks held, or none. */
  protected reserveAnswer(a: Agent, r: Request, picks: Pick[], inFlight: SimTask[]): Outcome {
    this.c.commits++;
    r.job.head.commits++;
    const bad = reserveAtStore(this.world, r, picks, inFlight);
    if (bad === 0) {
      this.quotas?.add(r.ns, picks.length);
      return { kind: 'committed', placed: picks.length, conflicts: 0 };
    }
    for (const p of picks) if (!unchanged(this.world, p)) this.excludeFor(a, p.id, this.world.engine.now() + this.lag.rtt / 2 + this.lag.watch);
    this.c.conflicts += bad;
    r.job.head.conflicts += bad;
    r.pending = inFlight.concat(r.pending);
    return { kind: 'committed', placed: 0, conflicts: bad };
  }

  /** What follows a commit's answer, which reaches the agent half a round trip after the store applied it. */
  protected answered(a: Agent, r: Request, s: Step): void {
    const eng = this.world.engine;
    const steps = r.steps as AttemptSteps;
    const back = this.lag.rtt / 2;
    if (s.kind === 'release') {
      for (const ru of releaseHeld(this.world, r)) this.wakeFor(ru);
      s = steps.next({ kind: 'released' });
    }
    if (s.kind === 'done') return;
    if (s.kind === 'confirm') {
      // The confirm is one more transaction on RUs only this job may change: it succeeds.
      eng.after(this.lag.rtt, () => {
        for (const t of confirmHeld(this.world, r)) {
          this.c.picks++;
          this.c.Qsum += t.Q;
          if (t.acceptable) this.c.acceptablePicks++;
        }
        steps.next({ kind: 'confirmed' });
      });
      return;
    }
    if (s.kind !== 'wait') {
      r.next = s;
      eng.after(back, () => this.requeue(a, r));
    } else if (s.for === 'capacity' || s.for === 'quota') this.waitForRu(a, r, s.ms);
    else if (s.for === 'freed') eng.after(back, () => this.waitForRu(a, r, s.ms));
    else eng.after(back + s.ms, () => this.requeue(a, r));
  }
}
