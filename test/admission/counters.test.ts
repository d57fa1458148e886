import { describe, expect, it } from 'vitest';
import { mean, sampleStandardDeviation } from 'simple-statistics';
import { AdmissionCounters, EXACT_ERLANG_MAX_K, erlangQuantile, type VerdictOptions } from '../../src/admission/index.ts';
import { jobTarget, scoreRu, type JobTarget } from '../../src/quality/index.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { SeededRng, type Rng } from '../../src/util/rng.ts';
import { isTarcilError } from '../../src/util/errors.ts';

const N = 10;
const zeros = (): number[] => new Array<number>(N).fill(0);
const full = (v: number): number[] => new Array<number>(N).fill(v);
/** Sensitive on every resource: tolerates at most 9 on the first, 19 on the second, ... */
const DEMANDING = jobTarget([90, 80, 70, 60, 50, 40, 30, 20, 10, 0]);
const TOLERANT = jobTarget(full(50));

function randomContention(rng: Rng, integer: boolean): number[] {
  const scale = rng.next() * 99;
  return Array.from({ length: N }, () => {
    const v = rng.next() < 0.3 ? 0 : rng.next() * scale;
    return integer ? Math.round(v) : v;
  });
}

/** Frees RU `key` (busy → free) after `dt`, then takes it again, so the free count is unchanged. */
function freeEvent(st: AdmissionCounters, clock: ManualClock, key: number, C: number[], dt: number): void {
  clock.advance(dt);
  st.updateRu(key, C, true);
  st.updateRu(key, C, false);
}

function newState(clock: ManualClock, extra: Partial<ConstructorParameters<typeof AdmissionCounters>[0]> = {}): AdmissionCounters {
  return new AdmissionCounters({ clock, seed: 5, ...extra });
}

describe('AdmissionCounters counters', () => {
  for (const integer of [true, false]) {
    it(`match a brute-force recount after thousands of random updates (${integer ? 'integer' : 'fractional'} C)`, () => {
      const clock = new ManualClock(1_000_000);
      const st = newState(clock);
      const rng = new SeededRng(integer ? 21 : 22);
      const ref = new Map<number, { C: number[]; free: boolean }>();
      const events = new Array<number>(st.lsh.buckets).fill(0);
      for (let op = 0; op < 6000; op++) {
        const key = rng.int(300);
        const prev = ref.get(key);
        if (rng.next() < 0.08) {
          st.updateRu(key, null, false);
          ref.delete(key);
        } else {
          const C = randomContention(rng, integer);
          const free = rng.next() < 0.5;
          st.updateRu(key, C, free);
          ref.set(key, { C, free });
          if (prev && !prev.free && free) events[st.lsh.bucketOf(C)]!++;
        }
        clock.advance(rng.int(100));
      }

      const B = st.lsh.buckets;
      const free = new Array<number>(B).fill(0);
      const total = new Array<number>(B).fill(0);
      const sums = Array.from({ length: B }, () => zeros());
      for (const [key, { C, free: isFree }] of ref) {
        const b = st.lsh.bucketOf(C);
        expect(st.bucketOfRu(key)).toBe(b);
        total[b]!++;
        if (isFree) {
          free[b]!++;
          C.forEach((v, i) => (sums[b]![i]! += v));
        }
      }
      expect(st.size()).toBe(ref.size);
      expect(st.totalFree()).toBe(free.reduce((a, b) => a + b, 0));
      const snap = st.snapshot();
      expect(snap).toHaveLength(B);
      for (let b = 0; b < B; b++) {
        expect(st.freeIn(b)).toBe(free[b]);
        expect(snap[b]!.free).toBe(free[b]);
        expect(snap[b]!.total).toBe(total[b]);
        expect(snap[b]!.history).toBe(events[b]);
        if (free[b] === 0) expect(snap[b]!.mean).toBeNull();
        else snap[b]!.mean!.forEach((v, i) => expect(v).toBeCloseTo(sums[b]![i]! / free[b]!, 5));
      }
      expect(st.bucketOfRu(12345)).toBeUndefined();

      // Acceptable buckets and f agree with the recount (exactly, for integer vectors).
      for (const job of [DEMANDING, TOLERANT, jobTarget(full(20)), jobTarget([99, 0, 0, 0, 0, 0, 0, 0, 0, 0])]) {
        const expected: number[] = [];
        for (let b = 0; b < B; b++) {
          if (
            free[b]! > 0 &&
            scoreRu(
              sums[b]!.map((s) => s / free[b]!),
              job,
            ).acceptable
          )
            expected.push(b);
        }
        if (integer) expect(st.acceptableBuckets(job)).toEqual(expected);
        const F = st.estimateF(job);
        expect(F.buckets).toEqual(st.acceptableBuckets(job));
        expect(F.acceptableFree).toBe(F.buckets.reduce((a, b) => a + free[b]!, 0));
        expect(F.f).toBeCloseTo(F.acceptableFree / F.totalFree, 12);
      }
    });
  }

  it('drops an RU that goes away (null C) and ignores unknown removals', () => {
    const st = newState(new ManualClock());
    st.updateRu(0, zeros(), true);
    st.updateRu(1, zeros(), false);
    expect(st.totalFree()).toBe(1);
    st.updateRu(0, null, false);
    st.updateRu(999, null, false);
    expect(st.totalFree()).toBe(0);
    expect(st.size()).toBe(1);
    expect(st.bucketOfRu(0)).toBeUndefined();
    try {
      st.updateRu(1, [1, 2, 3], true);
      throw new Error('expected a throw');
    } catch (e) {
      expect(isTarcilError(e, 'INVALID_ARGUMENT')).toBe(true);
    }
    expect(st.size()).toBe(1); // the bad update left the RU as it was
    expect(st.snapshot().reduce((a, s) => a + s.total, 0)).toBe(1);
  });

  it('a contention vector prepared once and shared by several RUs records what updateRu records for each', () => {
    const rng = new SeededRng(17);
    const clockA = new ManualClock();
    const clockB = new ManualClock();
    const a = newState(clockA);
    const b = newState(clockB);
    const shared = b.prepare(zeros());
    for (let step = 0; step < 300; step++) {
      const C = randomContention(rng, false);
      const keys = Array.from({ length: 1 + rng.int(8) }, () => rng.int(40));
      const free = keys.map(() => rng.next() < 0.5);
      const dt = rng.int(50);
      clockA.advance(dt);
      clockB.advance(dt);
      keys.forEach((k, i) => a.updateRu(k, C, free[i] as boolean));
      // The prepared vector is reused (overwritten) between steps, as the cluster wiring does.
      const p = b.prepare(C, shared);
      keys.forEach((k, i) => b.updateRuPrepared(k, p, free[i] as boolean));
      C.fill(0); // the state keeps no reference to the caller's vector
    }
    expect(b.snapshot()).toEqual(a.snapshot());
    expect(b.totalFree()).toBe(a.totalFree());
    for (const target of [DEMANDING, TOLERANT]) expect(b.waitEstimate(target, 3)).toEqual(a.waitEstimate(target, 3));
  });
});

describe('acceptable buckets and f', () => {
  it('idle cluster: everything acceptable, f = 1', () => {
    const st = newState(new ManualClock());
    for (let i = 0; i < 100; i++) st.updateRu(i, zeros(), true);
    const F = st.estimateF(DEMANDING);
    expect(F).toMatchObject({ f: 1, acceptableFree: 100, totalFree: 100 });
    expect(F.buckets).toHaveLength(1);
  });

  it('saturated cluster: nothing acceptable, f = 0', () => {
    const st = newState(new ManualClock());
    for (let i = 0; i < 100; i++) st.updateRu(i, full(99), true);
    expect(st.estimateF(DEMANDING)).toEqual({ f: 0, acceptableFree: 0, totalFree: 100, buckets: [] });
    expect(st.estimateF(TOLERANT).f).toBe(0);
    expect(st.estimateF(jobTarget(zeros())).f).toBe(1); // a job that causes nothing tolerates everything
  });

  it('all busy: f = 0 with nothing free', () => {
    const st = newState(new ManualClock());
    for (let i = 0; i < 10; i++) st.updateRu(i, zeros(), false);
    expect(st.estimateF(TOLERANT)).toEqual({ f: 0, acceptableFree: 0, totalFree: 0, buckets: [] });
  });

  it('half idle, half saturated: f = 1/2; moderate contention splits jobs by sensitivity', () => {
    const st = newState(new ManualClock());
    for (let i = 0; i < 50; i++) st.updateRu(i, zeros(), true);
    for (let i = 0; i < 50; i++) st.updateRu(100 + i, full(95), true);
    for (let i = 0; i < 100; i++) st.updateRu(200 + i, full(30), true);
    expect(st.estimateF(DEMANDING).f).toBeCloseTo(50 / 200, 12);
    expect(st.estimateF(TOLERANT).f).toBeCloseTo(150 / 200, 12);
  });
});

describe('wait estimate', () => {
  /** A cluster whose acceptable RUs are all busy, with free events after the given intervals. */
  function withHistory(intervals: number[], extra = {}): { st: AdmissionCounters; clock: ManualClock } {
    const clock = new ManualClock(0);
    const st = newState(clock, extra);
    for (let i = 0; i < 20; i++) st.updateRu(i, zeros(), false);
    for (let i = 0; i < 20; i++) st.updateRu(100 + i, full(99), true); // free but useless
    freeEvent(st, clock, 0, zeros(), 50);
    intervals.forEach((dt, i) => freeEvent(st, clock, (i + 1) % 20, zeros(), dt));
    return { st, clock };
  }

  it('uses μ and σ of the inter-free intervals: k = 1', () => {
    const { st } = withHistory([100, 100, 100, 1700]);
    expect(st.estimateF(DEMANDING).acceptableFree).toBe(0);
    const w = st.waitEstimate(DEMANDING, 1);
    expect(w.samples).toBe(4);
    // μ = 500, σ = 800 (sample): P[a free within t] = 1 − e^{−t/μ} reaches 0.9 at μ·ln 10.
    expect(w.estimateMs).toBeCloseTo(500 * Math.LN10, 6);
    expect(w.boundMs).toBeCloseTo(500 + 2 * 800, 9);
  });

  it('generalises to k frees: Erlang quantile and kμ + 2√k·σ', () => {
    const intervals = [300, 80, 1200, 40, 650, 220, 900];
    const { st } = withHistory(intervals);
    const mu = mean(intervals);
    const sigma = sampleStandardDeviation(intervals);
    for (const k of [1, 2, 3, 7]) {
      const w = st.waitEstimate(DEMANDING, k);
      expect(w.samples).toBe(intervals.length);
      expect(w.estimateMs).toBeCloseTo(mu * erlangQuantile(k, 0.9), 6);
      expect(w.boundMs).toBeCloseTo(k * mu + 2 * Math.sqrt(k) * sigma, 9);
    }
    // Free acceptable RUs reduce k (a new RU: joining free is not a free event).
    st.updateRu(77, zeros(), true);
    expect(st.waitEstimate(DEMANDING, 3).estimateMs).toBeCloseTo(mu * erlangQuantile(2, 0.9), 6);
    expect(st.waitEstimate(DEMANDING, 1).estimateMs).toBe(0);
  });

  it('only counts the buckets acceptable for the job, merged into one stream', () => {
    const clock = new ManualClock(0);
    const st = newState(clock);
    // Two low-contention vectors in different buckets, both fine for a tolerant job.
    const a = zeros();
    const b = [...Array(N).keys()].map((i) => zeros().map((_, j) => (j === i ? 8 : 0))).find((v) => st.lsh.bucketOf(v) !== st.lsh.bucketOf(a));
    expect(b).toBeDefined();
    st.updateRu(0, a, false);
    st.updateRu(1, b!, false);
    st.updateRu(2, full(99), false);
    for (let i = 0; i < 6; i++) {
      freeEvent(st, clock, i % 2 === 0 ? 0 : 1, i % 2 === 0 ? a : b!, 100);
      freeEvent(st, clock, 2, full(99), 7); // a saturated RU freed often: not acceptable, not counted
    }
    const w = st.waitEstimate(TOLERANT, 1);
    expect(w.samples).toBe(5);
    expect(w.boundMs).toBe(107); // merged a/b stream: every 107 ms, σ = 0
  });

  it('no history: Infinity', () => {
    const clock = new ManualClock(0);
    const st = newState(clock);
    st.updateRu(0, zeros(), false);
    expect(st.waitEstimate(DEMANDING, 1)).toEqual({ estimateMs: Infinity, boundMs: Infinity, medianMs: Infinity, samples: 0 });
    freeEvent(st, clock, 0, zeros(), 10); // one event is no interval yet
    expect(st.waitEstimate(DEMANDING, 1).estimateMs).toBe(Infinity);
  });

  it('records free events only on busy → free', () => {
    const clock = new ManualClock(0);
    const st = newState(clock);
    const b = st.lsh.bucketOf(zeros());
    st.updateRu(0, zeros(), true); // new and free: not a free event
    st.updateRu(0, zeros(), true); // free → free
    expect(st.snapshot()[b]!.history).toBe(0);
    st.updateRu(0, zeros(), false);
    st.updateRu(0, zeros(), true);
    expect(st.snapshot()[b]!.history).toBe(1);
    st.updateRu(0, null, false);
    st.updateRu(0, zeros(), true); // back from down: not a free event
    expect(st.snapshot()[b]!.history).toBe(1);
  });

  it('answers a recheck with the same figures as a fresh count, whatever changed in between', () => {
    // A waiting job asks again and again; the answer is remembered per set of buckets until a
    // free event, a pruned or a capped history changes it. A state asked after every change must
    // agree exactly with one fed the same events and asked once.
    const rng = new SeededRng(31);
    const clockA = new ManualClock(0);
    const opts = { historyWindowMs: 5000, historyMax: 16 };
    const asked = newState(clockA, opts);
    const targets = [DEMANDING, TOLERANT, jobTarget(full(20))];
    const ops: { key: number; C: number[]; free: boolean; dt: number }[] = [];
    for (let i = 0; i < 1500; i++) {
      ops.push({ key: rng.int(40), C: randomContention(rng, true), free: rng.next() < 0.5, dt: rng.int(60) });
    }
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i]!;
      clockA.advance(op.dt);
      asked.updateRu(op.key, op.C, op.free);
      for (const t of targets) asked.waitEstimate(t, 1 + (i % 4));
      if (i % 100 !== 99) continue;
      const clockB = new ManualClock(0);
      const fresh = newState(clockB, opts);
      for (const o of ops.slice(0, i + 1)) {
        clockB.advance(o.dt);
        fresh.updateRu(o.key, o.C, o.free);
      }
      for (const t of targets) {
        for (const k of [1, 3, 8]) {
          const a = asked.waitEstimate(t, k);
          const b = fresh.waitEstimate(t, k);
          expect({ e: a.estimateMs, b: a.boundMs, n: a.samples, m: a.medianMs }).toEqual({ e: b.estimateMs, b: b.boundMs, n: b.samples, m: b.medianMs });
        }
      }
    }
  });

  it('slides the window and caps the history', () => {
    const { st, clock } = withHistory([1000, 1000, 1000, 1000], { historyWindowMs: 10_000 });
    // Events at 50, 1050, 2050, 3050, 4050.
    expect(st.waitEstimate(DEMANDING, 1).samples).toBe(4);
    clock.advance(10_050 - 4050 + 500); // now 10 550: the event at 50 is older than the window
    expect(st.waitEstimate(DEMANDING, 1).samples).toBe(3);
    clock.advance(6000); // now 16 550: the newest event (4050) is older than the window too
    expect(st.waitEstimate(DEMANDING, 1)).toMatchObject({ samples: 0, estimateMs: Infinity });
    expect(st.snapshot().reduce((a, s) => a + s.history, 0)).toBe(0);

    const capped = withHistory(new Array<number>(40).fill(10), { historyMax: 8 });
    expect(capped.st.waitEstimate(DEMANDING, 1).samples).toBe(7);
    expect(Math.max(...capped.st.snapshot().map((s) => s.history))).toBe(8);
  });

  it('erlangQuantile is the Poisson waiting-time quantile', () => {
    expect(erlangQuantile(0, 0.9)).toBe(0);
    expect(erlangQuantile(1, 0.9)).toBeCloseTo(Math.LN10, 12);
    expect(erlangQuantile(2, 0.9)).toBeCloseTo(3.88972, 4);
    expect(erlangQuantile(5, 0.9)).toBeCloseTo(7.99359, 4);
    // Large k: close to the normal approximation k + z_0.9·√k.
    expect(erlangQuantile(400, 0.9) / (400 + 1.2816 * 20)).toBeCloseTo(1, 2);
    for (let k = 1; k < 30; k++) expect(erlangQuantile(k + 1, 0.9)).toBeGreaterThan(erlangQuantile(k, 0.9));
  });

  it('erlangQuantile switches to the Wilson–Hilferty approximation for large k without a jump', () => {
    const k = EXACT_ERLANG_MAX_K;
    for (const q of [0.5, 0.9, 0.99]) {
      const exact = erlangQuantile(k, q);
      const approx = erlangQuantile(k + 1, q);
      // One more event adds about one unit of time; the approximation continues the exact curve.
      expect(approx - exact).toBeGreaterThan(0.9);
      expect(approx - exact).toBeLessThan(1.1);
    }
    // k = 100,000 at q = 0.9: close to k + z·√k (z_0.9 = 1.28155), and monotone.
    expect(erlangQuantile(100_000, 0.9)).toBeCloseTo(100_000 + 1.28155 * Math.sqrt(100_000) + (1.28155 ** 2 - 1) / 3, 0);
    expect(erlangQuantile(100_001, 0.9)).toBeGreaterThan(erlangQuantile(100_000, 0.9));
  });
});

describe('verdict', () => {
  const opts = { priority: 0, bypassAbove: 10 };

  function cluster(freeIdle: number, intervals: number[] | null): AdmissionCounters {
    const clock = new ManualClock(0);
    const st = newState(clock);
    for (let i = 0; i < 40; i++) st.updateRu(i, zeros(), i < freeIdle);
    for (let i = 0; i < 40; i++) st.updateRu(100 + i, full(99), true);
    if (intervals) {
      freeEvent(st, clock, 39, zeros(), 50);
      for (const dt of intervals) freeEvent(st, clock, 39, zeros(), dt);
    }
    return st;
  }

  function check(st: AdmissionCounters, job: JobTarget, needed: number, o: VerdictOptions = opts): ReturnType<AdmissionCounters['verdict']> {
    const v = st.verdict(job, needed, o);
    expect(v.needed).toBe(needed);
    expect(v.totalFree).toBe(st.totalFree());
    expect(v.reason.length).toBeGreaterThan(20);
    return v;
  }

  it('admits with enough acceptable RUs and the margin', () => {
    const st = cluster(10, null);
    const v = check(st, DEMANDING, 8); // 8 × 1.25 = 10 ≤ 10
    expect(v).toMatchObject({ action: 'admit', acceptableFree: 10, totalFree: 50, f: 0.2 });
    expect(v.buckets).toEqual([st.lsh.bucketOf(zeros())]);
    expect(v.reason).toContain('10 acceptable free RUs');
    expect(v.estimateMs).toBeUndefined();
  });

  it('queues when the margin is missing and a wait is predictable', () => {
    const st = cluster(10, [100, 100, 100, 1700, 300, 20, 900]);
    const v = check(st, DEMANDING, 9); // 10 ≥ 9 needed, but 12 wanted with the margin: k = 2
    expect(v.action).toBe('queue');
    expect(v.estimateMs!).toBeLessThan(v.boundMs!);
    expect(v.reason).toMatch(/2 more expected free within/);
    expect(v.reason).toContain('wait');
  });

  it("places at best effort when the median wait is longer than what is left of the job's queue bound", () => {
    const st = cluster(10, [100, 100, 100, 1700, 300, 20, 900]);
    const held = check(st, DEMANDING, 9);
    expect(held.action).toBe('queue');
    const w = st.waitEstimate(DEMANDING, 12);
    expect(w.medianMs).toBeGreaterThan(0);
    expect(w.medianMs).toBeLessThan(w.estimateMs);
    // Enough left for the median wait: still queued.
    expect(check(st, DEMANDING, 9, { ...opts, leftMs: w.medianMs + 1 }).action).toBe('queue');
    // Less left than the median wait: waiting would more likely than not end at the bound.
    const now = check(st, DEMANDING, 9, { ...opts, leftMs: w.medianMs - 1 });
    expect(now.action).toBe('best-effort');
    expect(now.reason).toContain('but the job may wait only');
    expect(now.estimateMs).toBe(held.estimateMs);
  });

  it('places at best effort once the job has waited out the bound of the current estimate', () => {
    const st = cluster(10, [100, 100, 100, 1700, 300, 20, 900]);
    const held = check(st, DEMANDING, 9);
    expect(held.action).toBe('queue');
    const bound = held.boundMs!;
    // Held for less than the bound: the prediction may still come true.
    expect(check(st, DEMANDING, 9, { ...opts, queuedMs: bound - 1 }).action).toBe('queue');
    // Held for the whole bound and the acceptable RUs are still not free: the prediction failed.
    const now = check(st, DEMANDING, 9, { ...opts, queuedMs: bound });
    expect(now.action).toBe('best-effort');
    expect(now.reason).toContain('the prediction failed');
    expect(now.estimateMs).toBe(held.estimateMs);
  });

  it('a burst of simultaneous frees predicts a wait of about nothing, and a job held on it goes at best effort within a few ms', () => {
    // Tasks of one job ending together (or claims let go together) free many RUs at one instant:
    // intervals of 0 make μ and σ about 0, so the estimate and its bound are about 0 ms.
    const clock = new ManualClock(0);
    const st = newState(clock);
    for (let i = 0; i < 40; i++) st.updateRu(100 + i, full(99), true);
    for (let i = 0; i < 30; i++) st.updateRu(i, zeros(), false);
    // Three bursts of ten, 1 ms apart (freed and taken again at once: none stays free).
    for (let burst = 0; burst < 3; burst++) {
      clock.advance(1);
      for (let i = burst * 10; i < burst * 10 + 10; i++) {
        st.updateRu(i, zeros(), true);
        st.updateRu(i, zeros(), false);
      }
    }
    const held = check(st, DEMANDING, 4);
    expect(held.action).toBe('queue');
    expect(held.boundMs!).toBeLessThan(3);
    // The paper's rule alone (no queuedMs) holds it on the same prediction again and again.
    expect(check(st, DEMANDING, 4).action).toBe('queue');
    expect(check(st, DEMANDING, 4, { ...opts, queuedMs: held.boundMs! / 2 }).action).toBe('queue');
    expect(check(st, DEMANDING, 4, { ...opts, queuedMs: 3 }).action).toBe('best-effort');
  });

  it('places at best effort without history or when the wait is not under the bound', () => {
    const none = check(cluster(0, null), DEMANDING, 1);
    expect(none.action).toBe('best-effort');
    expect(none.reason).toContain('no recent free events');
    expect(none.estimateMs).toBe(Infinity);

    // Clockwork frees (σ = 0): bound kμ is below the Poisson 90% quantile.
    const regular = check(cluster(0, [1000, 1000, 1000, 1000]), DEMANDING, 1);
    expect(regular.action).toBe('best-effort');
    expect(regular.estimateMs!).toBeGreaterThanOrEqual(regular.boundMs!);
    expect(regular.reason).toContain('not under the bound');
  });

  it('lets priority bypass the queue, strictly above the threshold', () => {
    const st = cluster(0, [100, 100, 100, 1700]);
    expect(check(st, DEMANDING, 1).action).toBe('queue');
    const hi = check(st, DEMANDING, 1, { priority: 11, bypassAbove: 10 });
    expect(hi.action).toBe('admit');
    expect(hi.reason).toContain('bypasses the queue');
    expect(check(st, DEMANDING, 1, { priority: 10, bypassAbove: 10 }).action).toBe('queue');
  });

  it('a job that tolerates the saturated RUs is admitted on them', () => {
    const st = cluster(0, null);
    expect(check(st, jobTarget(zeros()), 32)).toMatchObject({ action: 'admit', acceptableFree: 40, f: 1 });
  });

  describe('a margin that can never be met does not hold a job', () => {
    /** `size` RUs with nothing running near them; the first `busy` of them are busy. */
    function small(size: number, busy: number, intervals: number[] | null = null): AdmissionCounters {
      const clock = new ManualClock(0);
      const st = newState(clock);
      for (let i = 0; i < size; i++) st.updateRu(i, zeros(), i >= busy);
      if (intervals) {
        const key = size - 1;
        st.updateRu(key, zeros(), false);
        freeEvent(st, clock, key, zeros(), 50);
        for (const dt of intervals) freeEvent(st, clock, key, zeros(), dt);
        st.updateRu(key, zeros(), true);
      }
      return st;
    }

    it('idle 24-RU cluster, 24-task job: admitted at once', () => {
      const v = check(small(24, 0, [100, 100, 100, 1700]), DEMANDING, 24);
      expect(v).toMatchObject({ action: 'admit', acceptableFree: 24, totalFree: 24 });
      expect(v.reason).toContain('the margin ×1.25 wants 30');
      expect(v.reason).toContain('at most 24 could ever be free (24 acceptable free + 0 busy)');
      expect(v.estimateMs).toBeUndefined();
    });

    it('20 free of 24 (4 busy), 20-task job: 25 wanted, 24 ever possible: admitted', () => {
      const v = check(small(24, 4, [100, 100, 100, 1700]), DEMANDING, 20);
      expect(v).toMatchObject({ action: 'admit', acceptableFree: 20, totalFree: 20 });
      expect(v.reason).toContain('20 acceptable free + 4 busy');
      // 19 needed: 24 wanted, 24 possible: the margin can be met, so the paper's rule stands.
      expect(check(small(24, 4, [100, 100, 100, 1700]), DEMANDING, 19).action).toBe('queue');
    });

    it('not when the needed RUs are not all free and acceptable', () => {
      // 10 free of 24, 20 needed: admission cannot admit what is not there.
      const v = check(small(24, 14, [100, 100, 100, 1700]), DEMANDING, 20);
      expect(v.action).toBe('queue');
      expect(check(small(24, 14), DEMANDING, 20).action).toBe('best-effort');
    });

    it('a big cluster with exactly the needed RUs free and plenty busy still queues', () => {
      const st = cluster(10, [100, 100, 100, 1700, 300, 20, 900]); // 10 acceptable free, 30 busy
      const v = check(st, DEMANDING, 10); // 13 wanted, 40 could be free
      expect(v.action).toBe('queue');
      expect(v.reason).toMatch(/3 more expected free within/);
      expect(check(st, DEMANDING, 10, { ...opts, capacity: 40 }).action).toBe('queue');
      expect(check(st, DEMANDING, 10, { ...opts, capacity: 13 }).action).toBe('queue');
    });

    it('the caller’s capacity (eligible RUs) caps what could ever be free', () => {
      const st = cluster(10, [100, 100, 100, 1700, 300, 20, 900]);
      const v = check(st, DEMANDING, 10, { ...opts, capacity: 12 });
      expect(v.action).toBe('admit');
      expect(v.reason).toContain('the job may use only 12 RUs in all');
      // Capacity does not admit a job whose RUs are not free yet.
      expect(check(st, DEMANDING, 11, { ...opts, capacity: 12 }).action).toBe('queue');
      expect(() => st.verdict(DEMANDING, 1, { ...opts, capacity: -1 })).toThrow(/capacity/);
    });
  });

  it('validates needed and options', () => {
    const st = cluster(1, null);
    expect(() => st.verdict(DEMANDING, 0, opts)).toThrow(/needed/);
    expect(() => st.waitEstimate(DEMANDING, 1.5)).toThrow(/needed/);
    expect(() => new AdmissionCounters({ clock: new ManualClock(), margin: 0.5 })).toThrow(/margin/);
    expect(() => new AdmissionCounters({ clock: new ManualClock(), waitQuantile: 1 })).toThrow(/waitQuantile/);
    expect(() => new AdmissionCounters({ clock: new ManualClock(), historyMax: 1 })).toThrow(/historyMax/);
  });
});
