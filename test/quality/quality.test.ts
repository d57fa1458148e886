import { expectInvalid } from '../support/expect.ts';
import { describe, expect, it } from 'vitest';
import {
  ENCODING_MAX,
  compareEncoding,
  compareScores,
  contention,
  encode,
  encodeBigInt,
  encodingMax,
  encodingToBigInt,
  encodingToUnit,
  jobTarget,
  rankD,
  resourceOrder,
  scoreRu,
  type RuScore,
} from '../../src/quality/index.ts';
import { SeededRng, type Rng } from '../../src/util/rng.ts';

const N = 10;
const IDENTITY = Array.from({ length: N }, (_, i) => i);
const MAX_BIG = 10n ** 20n - 1n;

function randVec(rng: Rng, max = 100): number[] {
  return Array.from({ length: N }, () => rng.int(max));
}

/** C is within the job's tolerance t = 99 − c lexicographically, in the job's resource order. */
function lexAcceptable(C: readonly number[], caused: readonly number[], order: readonly number[]): boolean {
  for (const i of order) {
    const s = Math.round(C[i] as number) + Math.round(caused[i] as number);
    if (s !== 99) return s < 99;
  }
  return true;
}

describe('encoding (eq. 1–2)', () => {
  it('reproduces the paper example [84, 31] → 8431 / 9999 with N = 2', () => {
    const e = encode([84, 31], [0, 1]);
    expect(e).toEqual({ hi: 0, lo: 8431 });
    expect(encodingMax(2)).toEqual({ hi: 0, lo: 9999 });
    expect(encodingToUnit(e, 2)).toBe(8431 / 9999);
    const job = jobTarget([31, 84]);
    expect(job.order).toEqual([1, 0]);
    expect(job.T).toBe(8431 / 9999);
  });

  it('with N = 10 the same job is the 20-digit number 8431·10^16', () => {
    const caused = [84, 31, 0, 0, 0, 0, 0, 0, 0, 0];
    const job = jobTarget(caused);
    expect(encodingToBigInt(job.enc)).toBe(8431n * 10n ** 16n);
    expect(encodeBigInt(caused, job.order)).toBe(8431n * 10n ** 16n);
    expect(job.T).toBeCloseTo(0.8431, 12);
  });

  it('ENCODING_MAX is 10^20 − 1 and normalises to exactly 1', () => {
    expect(ENCODING_MAX).toEqual({ hi: 99_999_999_999_999, lo: 999_999 });
    expect(encodingToBigInt(ENCODING_MAX)).toBe(MAX_BIG);
    expect(encodingToUnit(ENCODING_MAX)).toBe(1);
    expect(encodingToUnit({ hi: 0, lo: 0 })).toBe(0);
    expect(encodeBigInt(new Array<number>(N).fill(99), IDENTITY)).toBe(MAX_BIG);
  });

  it('rounds to the nearest integer and clamps to [0, 99]', () => {
    expect(encode([-5, 120, 49.5, 49.49, Number.NaN, 7], [0, 1, 2, 3, 4, 5])).toEqual({ hi: 9950, lo: 490007 });
    expect(encodeBigInt([-5, 120, 49.5, 49.49, Number.NaN, 7], [0, 1, 2, 3, 4, 5])).toBe(9950490007n);
  });

  it('orders resources by decreasing c_i, ties by lower index', () => {
    expect(resourceOrder([10, 50, 50, 90, 0, 10])).toEqual([3, 1, 2, 0, 5, 4]);
    // 30.2 and 29.8 both encode as 30, so they tie and keep index order.
    expect(resourceOrder([29.8, 30.2])).toEqual([0, 1]);
    expect(resourceOrder(new Array<number>(N).fill(7))).toEqual(IDENTITY);
  });

  it('matches the BigInt reference and compares exactly on random vectors', () => {
    const rng = new SeededRng(1);
    for (let t = 0; t < 2000; t++) {
      const a = randVec(rng);
      const b = t % 3 === 0 ? a.map((v, i) => (i >= 7 ? rng.int(100) : v)) : randVec(rng);
      const order = resourceOrder(randVec(rng));
      const ea = encode(a, order);
      const eb = encode(b, order);
      const ba = encodeBigInt(a, order);
      const bb = encodeBigInt(b, order);
      expect(encodingToBigInt(ea)).toBe(ba);
      expect(Math.sign(compareEncoding(ea, eb))).toBe(ba < bb ? -1 : ba > bb ? 1 : 0);
      // The double is an approximation but never inverts the order.
      if (ba < bb) expect(encodingToUnit(ea)).toBeLessThanOrEqual(encodingToUnit(eb));
    }
  });

  it('is exact beyond 2^53 where the doubles tie', () => {
    const a = [50, 40, 30, 20, 10, 5, 4, 3, 2, 1];
    const b = [50, 40, 30, 20, 10, 5, 4, 3, 2, 2];
    const ea = encode(a, IDENTITY);
    const eb = encode(b, IDENTITY);
    expect(encodingToUnit(ea)).toBe(encodingToUnit(eb));
    expect(compareEncoding(ea, eb)).toBeLessThan(0);
    expect(compareEncoding(eb, ea)).toBeGreaterThan(0);
    expect(compareEncoding(ea, ea)).toBe(0);
    expect(encodeBigInt(b, IDENTITY) - encodeBigInt(a, IDENTITY)).toBe(1n);
  });

  it('the double conversion stays monotone across the hi/lo boundary', () => {
    for (const hi of [1, 12_345_678, 99_999_999_999_998, 31_415_926_535_897]) {
      const below = { hi, lo: 999_999 };
      const above = { hi: hi + 1, lo: 0 };
      expect(encodingToUnit(below)).toBeLessThanOrEqual(encodingToUnit(above));
    }
  });

  it('rejects bad vectors and orders', () => {
    expectInvalid(() => jobTarget([]), 'caused');
    expectInvalid(() => jobTarget(new Array<number>(11).fill(1)), 'caused');
    expectInvalid(() => jobTarget([10, 100]), 'caused[1]');
    expectInvalid(() => jobTarget([Number.NaN]), 'caused[0]');
    expectInvalid(() => encode([1, 2], [0, 0]), 'order');
    expectInvalid(() => encode([1, 2], [0, 2]), 'order');
    expectInvalid(() => encodingToUnit(ENCODING_MAX, 11), 'resources');
  });
});

describe('T_W, U_H and Q (eq. 2–5)', () => {
  it('keeps T_W, U_H and Q in [0, 1] with the documented ends', () => {
    const rng = new SeededRng(2);
    for (let t = 0; t < 1000; t++) {
      const job = jobTarget(randVec(rng));
      expect(job.T).toBeGreaterThanOrEqual(0);
      expect(job.T).toBeLessThanOrEqual(1);
      for (const form of ['monotone', 'paper'] as const) {
        const s = scoreRu(randVec(rng), job, form);
        for (const v of [s.U, s.Q]) {
          expect(v).toBeGreaterThanOrEqual(0);
          expect(v).toBeLessThanOrEqual(1);
        }
      }
    }
    expect(jobTarget(new Array<number>(N).fill(0)).T).toBe(0);
    expect(jobTarget(new Array<number>(N).fill(99)).T).toBe(1);
    const job = jobTarget([80, 20, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(scoreRu(new Array<number>(N).fill(0), job).U).toBe(1);
    expect(scoreRu(new Array<number>(N).fill(99), job).U).toBe(0);
  });

  it('acceptable ⇔ U_H ≥ T_W exactly ⇔ C within 99 − c lexicographically (BigInt reference)', () => {
    const rng = new SeededRng(3);
    let acc = 0;
    let ties = 0;
    for (let t = 0; t < 5000; t++) {
      const caused = randVec(rng);
      const job = jobTarget(caused);
      // Bias towards sums of exactly 99 on the leading resources, where the decision is subtle.
      const C = randVec(rng).map((v, i) => {
        const depth = job.order.indexOf(i);
        return depth < t % 11 ? 99 - (caused[i] as number) : v;
      });
      const s = scoreRu(C, job);
      const ref = encodeBigInt(C, job.order) + encodeBigInt(caused, job.order) <= MAX_BIG;
      expect(s.acceptable).toBe(ref);
      expect(s.acceptable).toBe(lexAcceptable(C, caused, job.order));
      const lead = job.order[0] as number;
      const slack = 99 - (caused[lead] as number) - (C[lead] as number);
      if (slack > 0) expect(s.acceptable).toBe(true);
      if (slack < 0) expect(s.acceptable).toBe(false);
      if (slack === 0) ties++;
      if (s.acceptable) acc++;
    }
    expect(acc).toBeGreaterThan(500);
    expect(ties).toBeGreaterThan(500);
  });

  it('decides acceptability exactly where U_H and T_W are equal doubles', () => {
    const caused = [84, 31, 20, 10, 9, 8, 7, 6, 5, 4];
    const job = jobTarget(caused);
    const tight = caused.map((c) => 99 - c); // enc_H + enc_W = 10^20 − 1 exactly: U_H = T_W
    const over = [...tight];
    over[9] = (over[9] as number) + 1; // one more on the least important resource
    const a = scoreRu(tight, job);
    const b = scoreRu(over, job);
    expect(a.acceptable).toBe(true);
    expect(a.Q).toBeCloseTo(1, 12);
    expect(b.acceptable).toBe(false);
    expect(a.U).toBe(b.U); // the doubles cannot tell them apart...
    expect(compareScores(a, b)).toBeGreaterThan(0); // ...the encodings can
    expect(compareScores(b, a)).toBeLessThan(0);
  });

  it("monotone form: Q rises with U_H below T_W; 'paper' form falls; both agree above", () => {
    const caused = [70, 40, 10, 0, 0, 0, 0, 0, 0, 0];
    const job = jobTarget(caused);
    const below: RuScore[][] = [];
    const above: RuScore[][] = [];
    // Contention on the leading resource from 99 (worst) down to 0 (idle).
    for (let x = 99; x >= 0; x--) {
      const C = [x, 30, 30, 30, 30, 30, 30, 30, 30, 30];
      const pair = [scoreRu(C, job, 'monotone'), scoreRu(C, job, 'paper')];
      ((pair[0] as RuScore).acceptable ? above : below).push(pair);
    }
    expect(below.length).toBeGreaterThan(10);
    expect(above.length).toBeGreaterThan(10);
    for (let i = 1; i < below.length; i++) {
      const [m0, p0] = below[i - 1] as RuScore[];
      const [m1, p1] = below[i] as RuScore[];
      expect(m1!.U).toBeGreaterThan(m0!.U);
      expect(m1!.Q).toBeGreaterThan(m0!.Q); // better RU, higher Q
      expect(p1!.Q).toBeLessThan(p0!.Q); // the literal formula inverts it
      expect(m1!.Q).toBeLessThan(job.T);
      expect(m1!.Q).toBeCloseTo(m1!.U, 12);
      expect(p1!.Q).toBeCloseTo(job.T - p1!.U, 12);
    }
    for (const [m, p] of above) {
      expect(m!.Q).toBe(p!.Q);
      expect(m!.Q).toBeGreaterThanOrEqual(job.T);
      expect(m!.Q).toBeCloseTo(1 - (m!.U - job.T), 12);
    }
    // Above the target the tighter fit (less spare tolerance) scores higher.
    for (let i = 1; i < above.length; i++) expect(above[i]![0]!.Q).toBeLessThanOrEqual(above[i - 1]![0]!.Q);
  });

  it('compareScores: acceptable first, tightest acceptable fit, least contended unacceptable', () => {
    const job = jobTarget([60, 50, 40, 0, 0, 0, 0, 0, 0, 0]);
    const idle = scoreRu(new Array<number>(N).fill(0), job);
    const snug = scoreRu([39, 49, 59, 0, 0, 0, 0, 0, 0, 0], job); // C + c = 99 on the three loaded resources: the tightest fit
    const slightlyOver = scoreRu([40, 0, 0, 0, 0, 0, 0, 0, 0, 0], job);
    const saturated = scoreRu(new Array<number>(N).fill(99), job);
    expect(idle.acceptable && snug.acceptable).toBe(true);
    expect(slightlyOver.acceptable || saturated.acceptable).toBe(false);
    const sorted = [saturated, idle, slightlyOver, snug].sort(compareScores);
    expect(sorted).toEqual([saturated, slightlyOver, idle, snug]);
    expect(compareScores(idle, scoreRu(new Array<number>(N).fill(0), job))).toBe(0);
    // Antisymmetry on random pairs.
    const rng = new SeededRng(4);
    for (let t = 0; t < 500; t++) {
      const a = scoreRu(randVec(rng), job);
      const b = scoreRu(randVec(rng), job);
      expect(Math.sign(compareScores(a, b))).toBe(-Math.sign(compareScores(b, a)));
    }
  });
});

describe('contention (eq. 3)', () => {
  it('is the mean over the other M − 1 RUs, free ones counting 0', () => {
    // A 4-RU server: RU 0 runs a, RU 1 runs b, RUs 2 and 3 are free.
    const a = [90, 10, 0, 0, 0, 0, 0, 0, 0, 60];
    const b = [30, 20, 0, 0, 0, 0, 0, 0, 0, 0];
    const sum = a.map((v, i) => v + (b[i] as number));
    expect(contention(sum, 4, a)).toEqual(b.map((v) => v / 3));
    expect(contention(sum, 4, null)).toEqual(sum.map((v) => v / 3));
    expect(contention(sum, 4)).toEqual(sum.map((v) => v / 3));
  });

  it('is zero on a one-RU server and never negative', () => {
    const sum = [10, 20, 30, 0, 0, 0, 0, 0, 0, 0];
    expect(contention(sum, 1, sum)).toEqual(new Array<number>(N).fill(0));
    expect(contention([1e-16, 0, 0, 0, 0, 0, 0, 0, 0, 0], 2, [2e-16, 0, 0, 0, 0, 0, 0, 0, 0, 0])[0]).toBe(0);
  });

  it('writes into `out` when given', () => {
    const out = new Array<number>(N).fill(-1);
    const res = contention(new Array<number>(N).fill(9), 4, null, out);
    expect(res).toBe(out);
    expect(out).toEqual(new Array<number>(N).fill(3));
  });
});

describe('rank D (§3.3)', () => {
  it('assigns i / (n − 1) in compareScores order', () => {
    const rng = new SeededRng(5);
    const job = jobTarget(randVec(rng));
    const scores = Array.from({ length: 101 }, () => scoreRu(randVec(rng), job));
    const D = rankD(scores, new SeededRng(6));
    expect([...D].sort((x, y) => x - y)).toEqual(Array.from({ length: 101 }, (_, i) => i / 100));
    for (let i = 0; i < scores.length; i++) {
      for (let j = 0; j < scores.length; j++) {
        const c = compareScores(scores[i]!, scores[j]!);
        if (c > 0) expect(D[i]).toBeGreaterThan(D[j]!);
      }
    }
    expect(rankD(scores, new SeededRng(6))).toEqual(D);
  });

  it('breaks ties with a fair coin', () => {
    const job = jobTarget([50, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    const same = Array.from({ length: 4 }, () => scoreRu(new Array<number>(N).fill(10), job));
    const top = [0, 0, 0, 0];
    const rng = new SeededRng(8);
    for (let t = 0; t < 4000; t++) {
      const D = rankD(same, rng);
      top[D.indexOf(1)]!++;
    }
    for (const c of top) expect(c).toBeGreaterThan(850); // 1000 expected, σ ≈ 27
  });

  it('handles 0 and 1 entries', () => {
    const job = jobTarget([1]);
    expect(rankD([], new SeededRng(1))).toEqual([]);
    expect(rankD([scoreRu([5], job)], new SeededRng(1))).toEqual([1]);
  });
});
