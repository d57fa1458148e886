/**
 * The step sequence of one scheduling request, written once for both drivers: given what the last
 * step came to, which step comes next — ask fair share, ask admission, decide a chunk, commit its
 * picks (a chunk, a commit-ahead run, or a gang's reservation), confirm or give back a gang's
 * reservations, wait (admission, capacity, quota, fair share, backoff, a freed RU), or done. It is
 * pure and synchronous: it performs nothing, and its numbers (retries, backoff, recheck) are the
 * request's Attempt's (attempt.ts). The live agent performs each step with awaits on the store and
 * the clock (attempt-driver.ts); the simulator with engine timers and its modelled commits
 * (sim/policies/tarcil.ts).
 *
 * Two paths: chunks (incremental jobs, and gangs that fit one transaction: all of the chunk or
 * none), and reservations (gangs larger than one transaction: reserve chunk by chunk, then confirm
 * them all; a chunk that cannot be reserved gives every reservation back and the job returns to
 * admission). A partial conflict resamples only the picks that conflicted: the others either
 * landed (`placed`) or are kept for the next commit (`kept`).
 */
import type { AdmissionVerdict } from '../admission/index.ts';
import type { Attempt, Next } from './attempt.ts';
import { RESERVE_WHY } from './short-reserve.ts';

/** What a driver waits for. */
export type WaitFor = 'admission' | 'capacity' | 'quota' | 'fair' | 'backoff' | 'freed';

export type Step =
  /**
   * Whether this request must yield to namespaces further below their fair share, or wait while
   * the short-task reserve holds it (short-reserve.ts).
   */
  | { kind: 'fair'; need: number }
  /** One admission verdict for `need` tasks. */
  | { kind: 'admit'; need: number }
  /** A commit-ahead run over what is left (the live agent's AgentConfig.commitAhead). */
  | { kind: 'ahead'; left: number }
  /**
   * One decision for a chunk of `chunk` tasks (`fresh`: a new chunk, else the same chunk again
   * after a conflict or a quota's cut). `reserve`: a gang's reservation, whose selection must find
   * `room` RUs (a required pack's rest) and takes the chunk's share of them.
   */
  | { kind: 'decide'; chunk: number; fresh: boolean; reserve: boolean; room: number }
  /** Commit the picks found (reserve: as a gang's reservation). */
  | { kind: 'commit'; picks: number; chunk: number; reserve: boolean }
  /** Turn every reservation of the gang into a placement. */
  | { kind: 'confirm'; tasks: number }
  /** Give every reservation of the gang back. */
  | { kind: 'release'; tasks: number }
  /**
   * Wait at most `ms` (for a freed RU, or admission's recheck, or a backoff). `retry`: a conflict
   * retry within the chunk (its kept picks stay chosen); else the chunk, if any, has ended.
   * `counted`: a retry of the decision record. `readmitted`: the request went back to admission.
   */
  | { kind: 'wait'; for: WaitFor; ms: number; need: number; why?: string; retry: boolean; counted: boolean; readmitted: boolean }
  | { kind: 'done' };

export type Outcome =
  /** `reserve`: the request yields to the short-task reserve (short-reserve.ts), not to fair share. */
  | { kind: 'fair'; yield: boolean; reserve?: boolean }
  | { kind: 'verdict'; verdict: AdmissionVerdict | undefined; now: number }
  /**
   * What a commit-ahead run sent (0: nothing, the chunk path takes over), placed and lost, and how
   * many free RUs its last chunk lacked (`short`: the request then waits for freed ones).
   */
  | { kind: 'ahead'; asked: number; placed: number; conflicts: number; short?: number }
  /** RUs chosen for the chunk (kept ones included; a reservation: all the chunk's or 0). */
  | { kind: 'decided'; picks: number; kept: number }
  /**
   * A commit's answer: picks placed, picks that conflicted, picks kept for the next commit (the
   * live agent keeps those the store confirmed unchanged), or refused in advance by the quota.
   */
  | { kind: 'committed'; placed: number; conflicts: number; kept?: number; quota?: { room: number; message: string } }
  | { kind: 'confirmed' }
  | { kind: 'released' }
  | { kind: 'waited'; woken: boolean };

export interface StepsOptions {
  /** Tasks the request places. */
  tasks: number;
  /** Tasks per commit (picks per transaction). */
  perTxn: number;
  /** A gang: all of it or none (reserved chunk by chunk when larger than one transaction). */
  gang: boolean;
  /** Chunks of a large incremental job may be sent before the earlier ones are answered. */
  ahead?: boolean;
  /** A required pack: a reservation finds room for every task left, and a gang waits for all. */
  pack?: boolean;
  /** Hears every step taken, with the outcome that led to it (explain, tests). */
  onStep?: ((s: Step, after: Outcome | undefined) => void) | undefined;
}

/** Why a request waits behind other namespaces (fair share). */
export const FAIR_WHY = 'waiting behind jobs of namespaces further below their fair share (fairShare)';

export class AttemptSteps {
  /** Tasks neither placed nor reserved. */
  left: number;
  /** The realised admission wait the last verdict ended (the caller may record it), else undefined. */
  realisedWaitMs: number | undefined;
  private chunk = 0;
  private kept = 0;
  private reserved = 0;
  private woken = false;
  /** What the last step was (the outcome answers it). */
  private last: Step = { kind: 'done' };
  /** After a gang's reservations are given back: the wait the attempt loop asked for. */
  private afterRelease: Next | undefined;
  readonly reserving: boolean;

  constructor(
    readonly at: Attempt,
    private readonly o: StepsOptions,
  ) {
    this.left = o.tasks;
    this.reserving = o.gang && o.tasks > o.perTxn;
  }

  start(): Step {
    return this.emit(this.round(), undefined);
  }

  next(out: Outcome): Step {
    return this.emit(this.after(this.last, out), out);
  }

  private emit(s: Step, after: Outcome | undefined): Step {
    this.last = s;
    this.o.onStep?.(s, after);
    return s;
  }

  private after(s: Step, out: Outcome): Step {
    switch (out.kind) {
      case 'fair':
        return out.yield
          ? this.wait({ kind: 'capacity-wait', ms: this.at.policy.recheckMs, why: out.reserve ? RESERVE_WHY : FAIR_WHY }, 'fair')
          : this.admitted();
      case 'verdict':
        return this.verdict(out.verdict, out.now);
      case 'ahead':
        return this.aheadDone(out);
      case 'decided':
        return this.decided(out.picks, out.kept);
      case 'committed':
        return s.kind === 'commit' && s.reserve ? this.reservedChunk(out) : this.committed(out);
      case 'confirmed':
        this.left = 0;
        return { kind: 'done' };
      case 'released':
        return this.released();
      case 'waited':
        return this.waited(s, out.woken);
    }
  }

  /** A new round: fair share (unless a freed RU just woke the request), admission, then a chunk. */
  private round(): Step {
    if (this.left === 0) return { kind: 'done' };
    if (this.reserving) return this.at.admitted ? this.reserveNext(true) : { kind: 'admit', need: this.o.tasks };
    if (!this.woken) return { kind: 'fair', need: Math.min(this.left, this.o.perTxn) };
    return this.admitted();
  }

  /** Past fair share: admission if the request is not admitted, else a chunk. */
  private admitted(): Step {
    this.woken = false;
    if (!this.at.admitted) return { kind: 'admit', need: this.left };
    return this.chunkStart();
  }

  private verdict(v: AdmissionVerdict | undefined, now: number): Step {
    const then = this.at.afterVerdict(v, now);
    this.realisedWaitMs = then.realisedWaitMs;
    if (then.kind !== 'go') return this.wait(then);
    return this.reserving ? this.reserveNext(true) : this.chunkStart();
  }

  private chunkStart(): Step {
    if (this.o.ahead && this.left > this.o.perTxn) return { kind: 'ahead', left: this.left };
    return this.freshChunk();
  }

  private freshChunk(): Step {
    this.chunk = Math.min(this.o.perTxn, this.left);
    this.kept = 0;
    return { kind: 'decide', chunk: this.chunk, fresh: true, reserve: false, room: this.chunk };
  }

  private aheadDone(o: { asked: number; placed: number; conflicts: number; short?: number }): Step {
    if (o.asked === 0) return this.freshChunk();
    this.left -= o.placed;
    // A short last chunk counts as asked in full: fewer placed than asked, the request waits for freed RUs.
    const then =
      o.conflicts === 0
        ? this.at.afterCommit({ placed: o.placed, conflicts: 0, asked: o.asked + (o.short ?? 0) })
        : this.at.afterCommit({ placed: 0, conflicts: o.conflicts, asked: o.asked });
    if (then.kind === 'go' || this.left === 0) return this.round();
    return this.wait(then, undefined, o.conflicts > 0 && this.at.admitted);
  }

  private decided(picks: number, kept: number): Step {
    const s = this.last;
    const reserve = s.kind === 'decide' && s.reserve;
    const sel = this.at.afterSelection(picks, this.chunk, this.o.gang);
    if (sel.kind !== 'go') return reserve ? this.giveBack(sel) : this.wait(sel);
    this.kept = kept;
    return { kind: 'commit', picks, chunk: this.chunk, reserve };
  }

  private committed(o: Extract<Outcome, { kind: 'committed' }>): Step {
    if (o.quota) {
      // An incremental job takes what its namespace's quota leaves: fewer tasks now, the rest
      // once RUs are given back. A gang waits until all of its chunk fits.
      this.kept = 0;
      if (o.quota.room > 0 && !this.o.gang) {
        this.chunk = Math.min(this.chunk, o.quota.room);
        return { kind: 'decide', chunk: this.chunk, fresh: false, reserve: false, room: this.chunk };
      }
      return this.wait(this.at.afterQuota(o.quota.message));
    }
    this.left -= o.placed;
    if (o.conflicts === 0) {
      const then = this.at.afterCommit({ placed: o.placed, conflicts: 0, asked: this.chunk });
      this.kept = 0;
      if (then.kind === 'go' || this.left === 0) return this.round();
      return this.wait(then);
    }
    // Picks that landed are done; those kept stay chosen; only the conflicting ones are resampled.
    const then = this.at.afterCommit({ placed: o.placed, conflicts: o.conflicts, asked: this.chunk });
    this.kept = o.kept ?? 0;
    if (this.left === 0) return { kind: 'done' };
    if (!this.at.admitted) return this.wait(then);
    // Picks landed: the chunk is taken again from what is left; none did: the same chunk.
    if (o.placed > 0) this.chunk = Math.min(this.o.perTxn, this.left);
    return this.retryWait(then, this.chunk - this.kept);
  }

  private retryWait(then: Next, need: number): Step {
    const untilFreed = then.kind === 'backoff' && then.untilFreed === true;
    const ms = then.kind === 'go' ? 0 : then.ms;
    return { kind: 'wait', for: untilFreed ? 'freed' : 'backoff', ms, need, retry: true, counted: true, readmitted: false };
  }

  /** The next chunk of a gang's reservation (`fresh`), or the same one again. */
  private reserveNext(fresh: boolean): Step {
    if (fresh) this.chunk = Math.min(this.o.perTxn, this.o.tasks - this.reserved);
    const room = this.o.pack ? this.o.tasks - this.reserved : this.chunk;
    return { kind: 'decide', chunk: this.chunk, fresh, reserve: true, room };
  }

  private reservedChunk(o: Extract<Outcome, { kind: 'committed' }>): Step {
    if (o.quota) return this.giveBack(this.at.afterQuota(o.quota.message));
    if (o.conflicts === 0) {
      const then = this.at.afterCommit({ placed: this.chunk, conflicts: 0, asked: this.chunk });
      this.reserved += this.chunk;
      this.left -= this.chunk;
      if (then.kind !== 'go') return this.giveBack(then);
      return this.reserved === this.o.tasks ? { kind: 'confirm', tasks: this.reserved } : this.reserveNext(true);
    }
    const then = this.at.afterCommit({ placed: 0, conflicts: o.conflicts, asked: this.chunk });
    if (!this.at.admitted) return this.giveBack(then);
    return this.retryWait(then, this.chunk);
  }

  /** All or nothing: every reservation goes back, then the request waits as the loop said. */
  private giveBack(then: Next): Step {
    this.afterRelease = then;
    return { kind: 'release', tasks: this.reserved };
  }

  private released(): Step {
    this.left += this.reserved;
    this.reserved = 0;
    this.at.readmit();
    const then = this.afterRelease ?? { kind: 'capacity-wait', ms: this.at.policy.recheckMs };
    this.afterRelease = undefined;
    return this.wait(then, undefined, false, true);
  }

  private waited(s: Step, woken: boolean): Step {
    if (s.kind !== 'wait') return this.round();
    if (s.for === 'capacity' && !s.retry) this.at.capacityWaitEnded(woken);
    if (s.retry) return this.reserving ? this.reserveNext(false) : { kind: 'decide', chunk: this.chunk, fresh: false, reserve: false, room: this.chunk };
    if (s.for === 'admission') return { kind: 'admit', need: this.reserving ? this.o.tasks : this.left };
    this.woken = woken;
    return this.round();
  }

  /** A wait that ends the chunk (if any): as the attempt loop said. */
  private wait(then: Next, as?: WaitFor, counted = false, gang = false): Step {
    const need = this.reserving ? (this.o.pack ? this.o.tasks : 1) : this.left;
    const readmitted = gang || (as !== 'fair' && then.kind !== 'admission-wait' && !this.at.admitted);
    const base = { need, retry: false, counted, readmitted };
    switch (then.kind) {
      case 'go':
        return this.round();
      case 'admission-wait':
        return { kind: 'wait', for: 'admission', ms: then.ms, ...base, need: this.reserving ? this.o.tasks : this.left };
      case 'capacity-wait':
        return then.why === undefined
          ? { kind: 'wait', for: 'capacity', ms: then.ms, ...base }
          : { kind: 'wait', for: as ?? 'quota', ms: then.ms, why: then.why, ...base };
      case 'backoff':
        return { kind: 'wait', for: then.untilFreed ? 'freed' : 'backoff', ms: then.ms, ...base };
    }
  }
}

/** A step as one line of a trace: its kind and what it is asked for. */
export function stepLine(s: Step): string {
  switch (s.kind) {
    case 'fair':
    case 'admit':
      return `${s.kind} ${s.need}`;
    case 'ahead':
      return `ahead ${s.left}`;
    case 'decide':
      return `${s.reserve ? 'decide-reserve' : 'decide'} ${s.chunk}${s.fresh ? '' : ' again'}`;
    case 'commit':
      return `${s.reserve ? 'reserve' : 'commit'} ${s.picks}/${s.chunk}`;
    case 'confirm':
    case 'release':
      return `${s.kind} ${s.tasks}`;
    case 'wait':
      return `wait ${s.for}${s.retry ? ' retry' : ''}${s.readmitted ? ' readmitted' : ''}`;
    case 'done':
      return 'done';
  }
}
