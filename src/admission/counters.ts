/**
 * Admission control (Tarcil §4): coarse, incrementally maintained counters that say in O(buckets)
 * whether a job is likely to find acceptable RUs now, and if not, how long it should wait.
 *
 * Everything here is fed by {@link AdmissionCounters.updateRu}, called off the scheduling path when an
 * RU's occupancy or its neighbourhood changes; the questions (verdict, estimateF) cost
 * O(buckets · N) and never look at individual RUs.
 */
import { mean as ssMean, sampleStandardDeviation } from 'simple-statistics';
import { erlangQuantile } from './erlang.ts';
import type { Clock } from '../util/clock.ts';
import { invalid } from '../util/errors.ts';
import { scoreRu, type JobTarget } from '../quality/index.ts';
import { ContentionLsh, DEFAULT_BUCKETS, type BucketInfo, type LshOptions } from './lsh.ts';
import { Bucket, mergeRuns, type MergedStats } from './buckets.ts';

export interface AdmissionOptions {
  /** Number of LSH buckets (default 20, paper §4). */
  buckets?: number;
  /** Seed of the LSH hyperplanes; agents that share a seed bucket alike. */
  seed?: number;
  clock: Clock;
  /** How far back free events count (default 2 h, paper §4). */
  historyWindowMs?: number;
  /** Most free events kept per bucket (default 4096); the oldest go first. */
  historyMax?: number;
  /** The wait estimate is the time by which the RUs are free with this probability (default 0.9). */
  waitQuantile?: number;
  /** Admit outright only with this much headroom: acceptable free ≥ needed × margin (default 1.25). */
  margin?: number;
  /** Finer LSH settings (direction bits, band edges, centre); `buckets` and `seed` above win. */
  lsh?: Omit<LshOptions, 'buckets' | 'seed'>;
}

export interface AdmissionVerdict {
  action: 'admit' | 'queue' | 'best-effort';
  /** One sentence for `tarcil explain`. */
  reason: string;
  /** Acceptable buckets that hold free RUs now. */
  buckets: number[];
  acceptableFree: number;
  totalFree: number;
  needed: number;
  estimateMs?: number;
  boundMs?: number;
  /** acceptableFree / totalFree: the acceptable fraction that sizes the sample. */
  f: number;
  /** Set when a sample of free RUs overruled the buckets' "queue" (see sampling/probe.ts). */
  sampled?: { drawn: number; acceptable: number; acceptableLow: number };
}

/** What verdict() needs besides the job's target and size. */
export interface VerdictOptions {
  priority: number;
  /** Priorities strictly above this bypass the queue. */
  bypassAbove: number;
  /**
   * RUs that could ever hold the job (its platform/attribute constraints applied, down servers
   * included), when the caller knows them. A margin above it can never be met, so a job whose
   * needed RUs are all free and acceptable is admitted instead of queued.
   */
  capacity?: number;
  /**
   * What is left of the job's own queue bound (maxQueueMs), when the caller holds one: a job whose
   * median wait is longer would more likely than not reach its bound and be placed at best effort
   * anyway, so it is placed now instead of being held for nothing.
   */
  leftMs?: number;
  /**
   * How long the job has already been held by admission, when the caller counts it: a job that has
   * waited out the bound of the current estimate has seen the prediction fail (the frees it foretold
   * did not make acceptable RUs free), so it is placed now at best effort rather than held on the
   * same prediction until its own bound runs out.
   */
  queuedMs?: number;
}

export interface FreeFraction {
  f: number;
  acceptableFree: number;
  totalFree: number;
  buckets: number[];
}

export interface WaitEstimate {
  /** Time by which k more acceptable RUs are free with probability waitQuantile (Infinity: no history). */
  estimateMs: number;
  /** k·μ + 2·√k·σ of the observed inter-free times (Infinity: no history). */
  boundMs: number;
  /** The median of the same wait (the 0.5 quantile), computed when first read. */
  medianMs: number;
  /** Inter-free intervals behind μ and σ. */
  samples: number;
}

export interface BucketSnapshot extends BucketInfo {
  free: number;
  total: number;
  /** Mean contention of the bucket's free RUs (null when none is free). */
  mean: number[] | null;
  /** Free events in the sliding window. */
  history: number;
}

/**
 * Contention is stored in fixed point (2^-20 steps) so the per-bucket sums are exact integers:
 * thousands of add/subtract cycles on means like 33.333… would otherwise drift, and the sums would
 * stop matching a recount. The quantisation (1e-6) is far below the integer rounding of eq. 1.
 */
const FIXED = 1 << 20;

/** A contention vector prepared for the state (see AdmissionCounters.prepare). */
export interface PreparedContention {
  q: Int32Array;
  bucket: number;
}

/** RU states in {@link AdmissionCounters}'s per-RU array. */
const UNKNOWN = 0;
const BUSY = 1;
const FREE = 2;

function checkRu(ru: number): void {
  if (!Number.isInteger(ru) || ru < 0) throw invalid('ru', 'must be an RU id (an integer ≥ 0)', { value: ru });
}

function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return '∞';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}

export class AdmissionCounters {
  readonly lsh: ContentionLsh;
  readonly historyWindowMs: number;
  readonly historyMax: number;
  readonly waitQuantile: number;
  readonly margin: number;
  private readonly clock: Clock;
  private readonly n: number;
  /**
   * Per RU, indexed by its dense id (RuIndex's: RU i of a server is base + i): its state
   * (UNKNOWN, BUSY, FREE), its bucket and its fixed-point contention (n entries from id · n). Flat
   * typed arrays, not an object per RU: a 160,000-RU cell costs about 7 MB here, not 40.
   */
  private ruState = new Uint8Array(0);
  private ruBucket = new Int32Array(0);
  private ruQ = new Int32Array(0);
  private known = 0;
  private readonly bucketList: Bucket[];
  private freeTotal = 0;
  /** Reused by the per-bucket acceptability checks. */
  private readonly scratch: number[];
  private readonly preparedScratch: PreparedContention;
  /** mergedStats: the last result per set of buckets, and its buffers. */
  private readonly merged = new Map<string, MergedStats>();
  private times = new Float64Array(1024);
  private intervals = new Float64Array(1024);

  constructor(opts: AdmissionOptions) {
    const buckets = opts.buckets ?? DEFAULT_BUCKETS;
    this.lsh = new ContentionLsh({ ...opts.lsh, buckets, ...(opts.seed === undefined ? {} : { seed: opts.seed }) });
    this.clock = opts.clock;
    this.historyWindowMs = opts.historyWindowMs ?? 2 * 60 * 60 * 1000;
    this.historyMax = opts.historyMax ?? 4096;
    this.waitQuantile = opts.waitQuantile ?? 0.9;
    this.margin = opts.margin ?? 1.25;
    if (!(this.historyWindowMs > 0)) throw invalid('historyWindowMs', 'must be > 0', { value: this.historyWindowMs });
    if (!Number.isInteger(this.historyMax) || this.historyMax < 2) {
      throw invalid('historyMax', 'must be an integer ≥ 2', { value: this.historyMax });
    }
    if (!(this.waitQuantile > 0 && this.waitQuantile < 1 - 1e-12)) {
      throw invalid('waitQuantile', 'must be in (0, 1)', { value: this.waitQuantile });
    }
    if (!(this.margin >= 1) || !Number.isFinite(this.margin)) throw invalid('margin', 'must be ≥ 1', { value: this.margin });
    this.n = this.lsh.dims;
    this.bucketList = Array.from({ length: this.lsh.buckets }, () => new Bucket(this.n, this.historyMax));
    this.scratch = new Array<number>(this.n).fill(0);
    this.preparedScratch = { q: new Int32Array(this.n), bucket: 0 };
  }

  /**
   * Records the current contention and state of RU `ru` (its dense id; null C: removed or down).
   * O(N). A busy → free transition is a free event for the bucket the RU now falls in — that is
   * where it can be found.
   */
  updateRu(ru: number, C: readonly number[] | null, free: boolean): void {
    if (C === null) {
      checkRu(ru);
      if (ru < this.ruState.length && this.ruState[ru] !== UNKNOWN) {
        this.detach(ru);
        this.ruState[ru] = UNKNOWN;
        this.known--;
      }
      return;
    }
    this.updateRuPrepared(ru, this.prepare(C, this.preparedScratch), free);
  }

  /**
   * C in the form the state keeps (fixed point, clamped to [0, 99]) and its LSH bucket: the RUs of
   * one server that share a contention vector (its free ones) are prepared once and recorded with
   * {@link updateRuPrepared}, the same as {@link updateRu} with that C for each.
   */
  prepare(C: readonly number[], out?: PreparedContention): PreparedContention {
    const n = this.n;
    if (C.length !== n) throw invalid('C', `must have ${n} entries`, { length: C.length });
    const p = out ?? { q: new Int32Array(n), bucket: 0 };
    for (let i = 0; i < n; i++) {
      const v = C[i] as number;
      p.q[i] = v > 0 ? Math.round((v < 99 ? v : 99) * FIXED) : 0;
    }
    p.bucket = this.lsh.bucketOf(C);
    return p;
  }

  /** {@link updateRu} with a prepared contention vector (not kept: copied into the RU's slot). */
  updateRuPrepared(ru: number, p: PreparedContention, free: boolean): void {
    checkRu(ru);
    if (ru >= this.ruState.length) this.grow(ru + 1);
    const prev = this.ruState[ru] as number;
    if (prev !== UNKNOWN) this.detach(ru);
    else this.known++;
    this.ruQ.set(p.q, ru * this.n);
    this.ruBucket[ru] = p.bucket;
    this.ruState[ru] = free ? FREE : BUSY;
    this.attach(ru);
    if (prev === BUSY && free) {
      const b = this.bucketList[p.bucket] as Bucket;
      const now = this.clock.now();
      b.history.prune(now - this.historyWindowMs);
      b.history.push(now);
    }
  }

  /** Room for RU ids below `min`, by half as much again (ids are dense: they grow with the cell). */
  private grow(min: number): void {
    const cap = Math.max(min, Math.ceil(this.ruState.length * 1.5), 1024);
    const state = new Uint8Array(cap);
    state.set(this.ruState);
    const bucket = new Int32Array(cap);
    bucket.set(this.ruBucket);
    const q = new Int32Array(cap * this.n);
    q.set(this.ruQ);
    this.ruState = state;
    this.ruBucket = bucket;
    this.ruQ = q;
  }

  private detach(ru: number): void {
    const b = this.bucketList[this.ruBucket[ru] as number] as Bucket;
    const q = this.ruQ;
    const o = ru * this.n;
    if (b.total === 1) this.remember(b);
    b.total--;
    for (let i = 0; i < this.n; i++) b.sumAll[i] = (b.sumAll[i] as number) - (q[o + i] as number);
    if (this.ruState[ru] === FREE) {
      b.free--;
      this.freeTotal--;
      for (let i = 0; i < this.n; i++) b.sumFree[i] = (b.sumFree[i] as number) - (q[o + i] as number);
    }
  }

  private attach(ru: number): void {
    const b = this.bucketList[this.ruBucket[ru] as number] as Bucket;
    const q = this.ruQ;
    const o = ru * this.n;
    b.total++;
    for (let i = 0; i < this.n; i++) b.sumAll[i] = (b.sumAll[i] as number) + (q[o + i] as number);
    if (this.ruState[ru] === FREE) {
      b.free++;
      this.freeTotal++;
      for (let i = 0; i < this.n; i++) b.sumFree[i] = (b.sumFree[i] as number) + (q[o + i] as number);
    }
    b.seen = true;
  }

  /** Keeps a representative vector for a bucket about to empty, so its history still counts. */
  private remember(b: Bucket): void {
    this.meanInto(b, b.lastMean);
  }

  /** The bucket's mean contention: of its free RUs if any is free, else of all its RUs. */
  private meanInto(b: Bucket, out: Float64Array | number[]): void {
    const free = b.free > 0;
    const sum = free ? b.sumFree : b.sumAll;
    const count = (free ? b.free : b.total) * FIXED;
    for (let i = 0; i < this.n; i++) out[i] = (sum[i] as number) / count;
  }

  totalFree(): number {
    return this.freeTotal;
  }

  freeIn(bucket: number): number {
    return this.bucketList[bucket]?.free ?? 0;
  }

  bucketOfRu(ru: number): number | undefined {
    return ru >= 0 && ru < this.ruState.length && this.ruState[ru] !== UNKNOWN ? this.ruBucket[ru] : undefined;
  }

  /** RUs known (free or busy). */
  size(): number {
    return this.known;
  }

  private freeMeanInto(b: Bucket, out: number[]): number[] {
    for (let i = 0; i < this.n; i++) out[i] = (b.sumFree[i] as number) / (b.free * FIXED);
    return out;
  }

  /** Buckets with free RUs whose mean free-RU contention is acceptable for the job. */
  acceptableBuckets(job: JobTarget): number[] {
    const res: number[] = [];
    this.bucketList.forEach((b, i) => {
      if (b.free > 0 && scoreRu(this.freeMeanInto(b, this.scratch), job).acceptable) res.push(i);
    });
    return res;
  }

  /**
   * Buckets whose RUs would be acceptable, free or not: the free mean where there is one, else the
   * mean of the bucket's busy RUs, else the last mean seen. Their free events predict the wait.
   */
  private waitBuckets(job: JobTarget): number[] {
    const res: number[] = [];
    this.bucketList.forEach((b, i) => {
      if (!b.seen) return;
      const v = this.scratch;
      if (b.free > 0) this.freeMeanInto(b, v);
      else if (b.total > 0) this.meanInto(b, v);
      else for (let j = 0; j < this.n; j++) v[j] = b.lastMean[j] as number;
      if (scoreRu(v, job).acceptable) res.push(i);
    });
    return res;
  }

  /** The fraction of free RUs that sit in acceptable buckets: the f of the sample-size formula. */
  estimateF(job: JobTarget): FreeFraction {
    const buckets = this.acceptableBuckets(job);
    let acceptableFree = 0;
    for (const b of buckets) acceptableFree += (this.bucketList[b] as Bucket).free;
    const totalFree = this.freeTotal;
    return { f: totalFree > 0 ? acceptableFree / totalFree : 0, acceptableFree, totalFree, buckets };
  }

  /**
   * How long until `needed` acceptable RUs are free. The free events of every bucket acceptable for
   * the job are merged into one stream; its inter-free intervals give μ and σ. With k = needed −
   * acceptableFree RUs still to come and frees modelled as a Poisson process of rate λ = 1/μ, the
   * k-th free arrives by time t with probability P[Poisson(λt) ≥ k]; the estimate is the smallest t
   * where that reaches waitQuantile (for k = 1: μ·ln(1/(1 − q)), 2.3 μ at q = 0.9) — the paper's
   * "when the probability that an appropriate RU exists approaches 1".
   *
   * The bound generalises the paper's μ + 2σ, stated for one RU: the wait for k frees is a sum of k
   * inter-free intervals, with mean kμ and, for independent intervals, standard deviation √k·σ, so
   * bound = kμ + 2√k·σ. A job waits only if the estimate is below it (see verdict).
   */
  waitEstimate(job: JobTarget, needed: number): WaitEstimate {
    if (!Number.isInteger(needed) || needed < 1) throw invalid('needed', 'must be a positive integer', { value: needed });
    return this.waitFrom(this.waitBuckets(job), this.estimateF(job).acceptableFree, needed);
  }

  /**
   * The same estimate for one bucket alone, as if it were the only bucket acceptable for a job
   * (the dashboard's admission page): `needed` RUs of it, its free RUs counted, its free events
   * behind μ and σ.
   */
  bucketWait(bucket: number, needed = 1): WaitEstimate {
    if (!Number.isInteger(needed) || needed < 1) throw invalid('needed', 'must be a positive integer', { value: needed });
    const b = this.bucketList[bucket];
    if (!b) throw invalid('bucket', `must be a bucket index below ${this.bucketList.length}`, { value: bucket });
    return this.waitFrom([bucket], b.free, needed);
  }

  /** The wait for `needed` RUs of `buckets`, `acceptableFree` of them free now (see waitEstimate). */
  private waitFrom(buckets: number[], acceptableFree: number, needed: number): WaitEstimate {
    const k = needed - acceptableFree;
    const { samples, mu, sigma } = this.mergedStats(buckets);
    if (samples === 0) return { estimateMs: k <= 0 ? 0 : Infinity, boundMs: Infinity, medianMs: k <= 0 ? 0 : Infinity, samples };
    if (k <= 0) return { estimateMs: 0, boundMs: mu + 2 * sigma, medianMs: 0, samples };
    const estimateMs = mu * erlangQuantile(k, this.waitQuantile);
    const boundMs = k * mu + 2 * Math.sqrt(k) * sigma;
    // The median costs a second Erlang quantile (O(k) per bisection step): computed on first
    // read, which only a verdict with a queue bound to compare it with does.
    let median: number | undefined;
    return {
      estimateMs,
      boundMs,
      samples,
      get medianMs(): number {
        return (median ??= mu * erlangQuantile(k, 0.5));
      },
    };
  }

  /**
   * μ and σ of the inter-free intervals of the buckets' free events merged into one stream. Many
   * waiting jobs ask about the same buckets between two free events, so the result is kept per
   * set of buckets until one of their histories changes; a recount merges the (sorted) histories
   * in typed arrays, with no per-call allocation once the buffers have grown.
   */
  private mergedStats(buckets: number[]): MergedStats {
    const now = this.clock.now();
    let version = 0;
    let n = 0;
    for (const i of buckets) {
      const h = (this.bucketList[i] as Bucket).history;
      h.prune(now - this.historyWindowMs);
      version += h.version;
      n += h.length;
    }
    const key = buckets.join(',');
    const hit = this.merged.get(key);
    if (hit && hit.version === version) return hit;
    if (this.times.length < n) {
      this.times = new Float64Array(Math.max(n, 2 * this.times.length));
      this.intervals = new Float64Array(this.times.length);
    }
    // Each history is sorted (oldest first): merging them, runs two by two, gives the same
    // sorted times as sorting the lot, in O(n log k) for k buckets instead of O(n log n).
    let at = 0;
    const bounds = [0];
    for (const i of buckets) {
      at = (this.bucketList[i] as Bucket).history.copyTo(this.times, at);
      if (at > (bounds[bounds.length - 1] as number)) bounds.push(at);
    }
    const [sorted, spare] = mergeRuns(this.times, this.intervals, bounds);
    const times = sorted.subarray(0, n);
    const samples = Math.max(0, n - 1);
    const intervals = spare.subarray(0, samples);
    for (let i = 1; i < n; i++) intervals[i - 1] = (times[i] as number) - (times[i - 1] as number);
    const stats: MergedStats = {
      version,
      samples,
      mu: samples > 0 ? ssMean(intervals as unknown as number[]) : Number.NaN,
      sigma: samples >= 2 ? sampleStandardDeviation(intervals as unknown as number[]) : 0,
    };
    // Sets of buckets seen are few (one per distinct job target in practice); bound them anyway.
    if (this.merged.size >= 256) this.merged.clear();
    this.merged.set(key, stats);
    return stats;
  }

  /**
   * Admit, queue, or place at best effort (paper §4 and §5.3):
   * 1. enough acceptable RUs free, with headroom for concurrent agents (≥ needed × margin): admit;
   * 2. priority above `bypassAbove`: admit anyway, high priority bypasses the queue;
   * 3. the wait until the headroom is back is predictable and short (estimate < bound): queue;
   * 4. otherwise place now on what there is, rather than queue without a useful end in sight;
   *    also when the median wait is longer than what is left of the job's own queue bound
   *    (`leftMs`): it would more likely than not end at the bound and place at best effort then;
   *    and when the job has already waited the estimate's bound (`queuedMs`): the frees the history
   *    foretold came and went without making acceptable RUs free, and waiting on the same
   *    prediction would hold the job, re-asked every few ms, until its own bound.
   * The wait is estimated for the frees that restore the admit condition (⌈needed × margin⌉ −
   * acceptableFree of them), so a queued job is one that would be admitted when the wait is over.
   *
   * The margin applies only where it can be met. When every RU the job needs is free and
   * acceptable now, but fewer RUs could ever be free than the margin wants — the acceptable free
   * ones plus all busy ones fall short, or the caller's `capacity` does — waiting would never
   * reach it (a job of ≥ 1/margin of an idle cluster would sit out its whole queue bound): admit.
   */
  verdict(job: JobTarget, needed: number, opts: VerdictOptions): AdmissionVerdict {
    if (!Number.isInteger(needed) || needed < 1) throw invalid('needed', 'must be a positive integer', { value: needed });
    if (opts.capacity !== undefined && !(opts.capacity >= 0)) throw invalid('capacity', 'must be ≥ 0', { value: opts.capacity });
    const F = this.estimateF(job);
    const base = { buckets: F.buckets, acceptableFree: F.acceptableFree, totalFree: F.totalFree, needed, f: F.f };
    const want = Math.ceil(needed * this.margin - 1e-9);
    const where = F.buckets.length > 0 ? `bucket${F.buckets.length > 1 ? 's' : ''} ${F.buckets.join(', ')}` : 'no bucket';
    if (F.acceptableFree >= want) {
      return {
        action: 'admit',
        reason: `${F.acceptableFree} acceptable free RUs (${where}) cover the ${needed} needed with margin ×${this.margin}`,
        ...base,
      };
    }
    if (F.acceptableFree >= needed) {
      // Busy RUs are the most that frees could add; unacceptable free ones are not counted.
      const busy = this.known - this.freeTotal;
      const ever = F.acceptableFree + busy;
      const cap = opts.capacity;
      const capped = cap !== undefined && cap < ever;
      if ((capped ? cap : ever) < want) {
        const limit = capped
          ? `the job may use only ${cap} RUs in all`
          : `at most ${ever} could ever be free (${F.acceptableFree} acceptable free + ${busy} busy)`;
        return {
          action: 'admit',
          reason: `${F.acceptableFree} acceptable free RUs (${where}) cover the ${needed} needed; the margin ×${this.margin} wants ${want} but ${limit}, so waiting cannot reach it`,
          ...base,
        };
      }
    }
    const short = `only ${F.acceptableFree} of ${F.totalFree} free RUs are acceptable (${where}); ${want} wanted for ${needed} needed with margin ×${this.margin}`;
    if (opts.priority > opts.bypassAbove) {
      return { action: 'admit', reason: `${short}, but priority ${opts.priority} > ${opts.bypassAbove} bypasses the queue`, ...base };
    }
    const w = this.waitEstimate(job, want);
    const timing = { estimateMs: w.estimateMs, boundMs: w.boundMs };
    const k = want - F.acceptableFree;
    if (opts.leftMs !== undefined && w.estimateMs < w.boundMs && w.medianMs > opts.leftMs) {
      return {
        action: 'best-effort',
        reason: `${short}; ${k} more expected free within ${fmtMs(w.estimateMs)} (median ${fmtMs(w.medianMs)}), but the job may wait only ${fmtMs(opts.leftMs)} more: placing now at best effort rather than at its bound`,
        ...base,
        ...timing,
      };
    }
    if (opts.queuedMs !== undefined && w.estimateMs < w.boundMs && opts.queuedMs >= w.boundMs) {
      return {
        action: 'best-effort',
        reason: `${short}; ${k} more expected free within ${fmtMs(w.estimateMs)}, but the job has already waited ${fmtMs(opts.queuedMs)}, past the bound ${fmtMs(w.boundMs)}: the prediction failed, placing now at best effort`,
        ...base,
        ...timing,
      };
    }
    if (w.estimateMs < w.boundMs) {
      return {
        action: 'queue',
        reason: `${short}; ${k} more expected free within ${fmtMs(w.estimateMs)} (p=${this.waitQuantile}), under the bound ${fmtMs(w.boundMs)}: wait`,
        ...base,
        ...timing,
      };
    }
    const why =
      w.samples === 0
        ? 'no recent free events in acceptable buckets to predict a wait'
        : `expected wait ${fmtMs(w.estimateMs)} for ${k} more is not under the bound ${fmtMs(w.boundMs)}`;
    return { action: 'best-effort', reason: `${short}; ${why}: placing now at best effort`, ...base, ...timing };
  }

  /** Per-bucket counters for `tarcil cluster` and `tarcil explain`. */
  snapshot(): BucketSnapshot[] {
    const now = this.clock.now();
    return this.bucketList.map((b, i) => {
      b.history.prune(now - this.historyWindowMs);
      return {
        ...this.lsh.describe(i),
        free: b.free,
        total: b.total,
        mean: b.free > 0 ? this.freeMeanInto(b, new Array<number>(this.n)) : null,
        history: b.history.length,
      };
    });
  }
}
