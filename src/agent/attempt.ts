/**
 * The attempt loop of one scheduling request, once, for the live agents and the simulator: what to
 * do after an admission verdict, after a selection and after a commit — go on, wait for admission,
 * wait for a freed RU, back off, or go back to admission. It decides nothing about RUs (that is
 * `decide()` in core.ts) and performs nothing: a driver asks it what comes next and does it, the
 * live agent with awaits on the store and the clock, the simulator with engine timers and its
 * modelled commits. Every number here (retries, backoff, recheck, queue bound) comes from
 * AttemptPolicy, so the two drivers cannot drift apart.
 */
import type { AdmissionVerdict } from '../admission/index.ts';
import type { Rng } from '../util/rng.ts';

export interface AttemptPolicy {
  /** Conflicting commits of one chunk retried with a fresh draw before going back to admission. */
  maxRetries: number;
  /** Backoff before retry k: uniform in [c/2, c], c = min(backoffMaxMs, backoffBaseMs · 2^k). */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** Longest wait for admission or for a freed RU before deciding again. */
  recheckMs: number;
  /**
   * A wait for capacity (nothing it may use free) that its timer ended, no freed RU having woken
   * it, doubles the next one, up to this; a freed RU that wakes it, or a placement, starts again
   * from recheckMs. Freed RUs wake the waiters that can use them, so the timer only catches what
   * no freed RU announced; at or below recheckMs (or absent), the waits do not grow.
   */
  recheckMaxMs?: number;
}

/**
 * Placements per commit transaction, from the store's operation limit (etcd's --max-txn-ops,
 * 128 by default): RU + task per pick, an epoch per server (at most one per pick), plus the job
 * and decision records on the last chunk. 42 for etcd's default.
 */
export function picksPerTxn(maxTxnOps: number): number {
  return Math.max(1, Math.floor((maxTxnOps - 2) / 3));
}

/** What the driver does next. */
export type Next =
  /** Decide (and commit) now. */
  | { kind: 'go' }
  /** Admission queued the request: wait this long, or until an RU frees, then ask again. */
  | { kind: 'admission-wait'; ms: number }
  /**
   * Nothing eligible was free (or, `why` set, the job's namespace is at its quota): wait this
   * long, or until an RU frees, then decide again.
   */
  | { kind: 'capacity-wait'; ms: number; why?: string }
  /**
   * The commit lost a race: wait this long, then decide again with a fresh draw. `untilFreed`: a
   * request whose priority bypasses others waits instead for a freed RU (woken first among the
   * waiters, in priority order), at most this long: backing off, it would leave every RU freed
   * meanwhile to whichever lower-priority request happens to retry first.
   */
  | { kind: 'backoff'; ms: number; untilFreed?: boolean };

/** What happened to one commit of a chunk. */
export interface CommitOutcome {
  /** Picks the store accepted. */
  placed: number;
  /** Picks that conflicted (to resample). */
  conflicts: number;
  /** Tasks the chunk asked for. */
  asked: number;
}

/**
 * The state of one request's attempts. `queuedSince` is when admission first held it: the job's
 * `maxQueueMs` bounds its admission waits in total, over every return to admission.
 */
export class Attempt {
  admitted = false;
  queuedSince = Number.NaN;
  /** Estimated wait of the first admission verdict that queued it (for the realised-wait figure). */
  firstEstimateMs = Number.NaN;
  /** Held by admission since it was last admitted; whether the realised wait was reported. */
  private waiting = false;
  private reported = false;
  /** Retries of the current chunk. */
  retries = 0;
  /** Waits for capacity in a row that their timer ended, nothing placed since (see recheckMaxMs). */
  private quiet = 0;
  /** Counters for explain and for the simulator's figures. */
  readonly totals = { retries: 0, readmissions: 0, admissionWaits: 0, capacityWaits: 0, conflicts: 0 };

  constructor(
    readonly policy: AttemptPolicy,
    private readonly rng: Rng,
    private readonly maxQueueMs: number,
    /** The request's priority bypasses others' (above the policy's bypassAbove): see `untilFreed`. */
    private readonly bypasses = false,
  ) {}

  /** Admission is skipped once admitted, and once the job has waited its whole bound. */
  skipAdmission(now: number): boolean {
    return this.admitted || this.overdue(now);
  }

  /** What is left of the job's queue bound: all of it until admission first holds it. */
  leftMs(now: number): number {
    return Number.isNaN(this.queuedSince) ? this.maxQueueMs : Math.max(0, this.maxQueueMs - (now - this.queuedSince));
  }

  /** How long admission has held the request: 0 until it first does (over every return to admission, as maxQueueMs counts). */
  queuedMs(now: number): number {
    return Number.isNaN(this.queuedSince) ? 0 : Math.max(0, now - this.queuedSince);
  }

  overdue(now: number): boolean {
    return !Number.isNaN(this.queuedSince) && now - this.queuedSince >= this.maxQueueMs;
  }

  /**
   * After an admission verdict (undefined: admission off or skipped). Queue → wait the estimate,
   * at most recheckMs and what is left of the bound; admit/bypass/best-effort → go. Returns the
   * realised wait when this verdict ends one (the caller may record it).
   */
  afterVerdict(verdict: AdmissionVerdict | undefined, now: number): Next & { realisedWaitMs?: number } {
    if (verdict?.action === 'queue' && !this.overdue(now)) {
      if (Number.isNaN(this.queuedSince)) {
        this.queuedSince = now;
        this.firstEstimateMs = verdict.estimateMs ?? Number.NaN;
      }
      this.waiting = true;
      this.totals.admissionWaits++;
      const left = this.maxQueueMs - (now - this.queuedSince);
      const ms = Math.max(1, Math.min(verdict.estimateMs ?? this.policy.recheckMs, this.policy.recheckMs, left));
      return { kind: 'admission-wait', ms };
    }
    // The realised wait is reported once, when the first admission wait ends (a request that
    // returns to admission later and is admitted at once reports nothing more).
    const ended = this.waiting && !this.reported;
    this.waiting = false;
    this.admitted = true;
    if (!ended) return { kind: 'go' };
    this.reported = true;
    return { kind: 'go', realisedWaitMs: now - this.queuedSince };
  }

  /**
   * After a selection found `picks` RUs for a chunk of `asked` tasks. None (or, all-or-nothing,
   * too few) → back to admission and wait for a freed RU; otherwise commit what was found.
   */
  afterSelection(picks: number, asked: number, allOrNothing: boolean): Next {
    if (picks === 0 || (allOrNothing && picks < asked)) {
      this.readmit();
      this.totals.capacityWaits++;
      return { kind: 'capacity-wait', ms: this.capacityRecheckMs() };
    }
    return { kind: 'go' };
  }

  /**
   * After a commit. No conflict → the next chunk (fewer placed than asked: the view had too few
   * free RUs, so the rest waits for a freed one); conflicts → back off and resample, and once the
   * chunk has used its retries, back to admission with one more backoff (RUs exist but rivals
   * keep taking them: waiting for a freed RU would stall a job that can run now).
   */
  afterCommit(o: CommitOutcome): Next {
    this.totals.conflicts += o.conflicts;
    if (o.placed > 0) this.quiet = 0;
    if (o.conflicts === 0) {
      this.retries = 0;
      if (o.placed < o.asked) {
        this.readmit();
        this.totals.capacityWaits++;
        return { kind: 'capacity-wait', ms: this.capacityRecheckMs() };
      }
      return { kind: 'go' };
    }
    const untilFreed = this.bypasses ? { untilFreed: true } : {};
    if (this.retries >= this.policy.maxRetries) {
      this.readmit();
      return { kind: 'backoff', ms: this.backoffMs(this.policy.maxRetries + 1), ...untilFreed };
    }
    this.retries++;
    this.totals.retries++;
    return { kind: 'backoff', ms: this.backoffMs(this.retries), ...untilFreed };
  }

  /**
   * A commit refused in advance because the job's namespace is at its RU quota (the live agent's
   * commit, tenancy/quota.ts): back to admission, wait for an RU to be freed, decide again.
   */
  afterQuota(why: string): Next {
    this.readmit();
    this.totals.capacityWaits++;
    return { kind: 'capacity-wait', ms: this.policy.recheckMs, why };
  }

  /** The longest the next wait for capacity may last: recheckMs, doubled for each quiet wait before it, up to recheckMaxMs. */
  capacityRecheckMs(): number {
    const base = this.policy.recheckMs;
    const max = Math.max(base, this.policy.recheckMaxMs ?? base);
    return Math.min(max, base * 2 ** Math.min(this.quiet, 30));
  }

  /** A wait for capacity ended: woken by a freed RU (the next starts from recheckMs again), or by its timer. */
  capacityWaitEnded(woken: boolean): void {
    this.quiet = woken ? 0 : this.quiet + 1;
  }

  /** Back to admission: asked again before the next decision, within what is left of the bound. */
  readmit(): void {
    if (this.admitted) this.totals.readmissions++;
    this.admitted = false;
    this.retries = 0;
  }

  backoffMs(attempt: number): number {
    return backoffMs(this.policy, attempt, this.rng);
  }
}

/** Jittered exponential backoff before retry `attempt`: uniform in [c/2, c], c = min(max, base · 2^attempt). */
export function backoffMs(policy: Pick<AttemptPolicy, 'backoffBaseMs' | 'backoffMaxMs'>, attempt: number, rng: Rng): number {
  const cap = Math.min(policy.backoffMaxMs, policy.backoffBaseMs * 2 ** attempt);
  return cap / 2 + rng.next() * (cap / 2);
}
