import { expectInvalid } from '../support/expect.ts';
import { describe, expect, it } from 'vitest';
import { guarantee, sampleSize, samplesForFraction, samplesForGoodOfPopulation, samplesForQuantile } from '../../src/sampling/size.ts';
import { SeededRng } from '../../src/util/rng.ts';

describe('the paper checks (§3.3)', () => {
  it('x = 0.8, p = 1e-3 needs 31 samples (the paper rounds up to 32)', () => {
    expect(samplesForQuantile(0.8, 1e-3)).toBe(31);
    expect(guarantee(31, 0.8)).toBeLessThanOrEqual(1e-3);
    expect(guarantee(30, 0.8)).toBeGreaterThan(1e-3);
    expect(guarantee(32, 0.8)).toBeLessThan(1e-3);
  });

  it('8 good of 100 at p = 1e-3 needs 83 (the paper truncates 82.85 to 82)', () => {
    expect(samplesForGoodOfPopulation(8, 100, 1e-3)).toBe(83);
    expect(Math.log(1e-3) / Math.log(0.92)).toBeCloseTo(82.85, 2);
    expect(guarantee(82, 0.92)).toBeGreaterThan(1e-3);
    expect(guarantee(83, 0.92)).toBeLessThanOrEqual(1e-3);
  });

  it('R = 64, x = 0.8 fails with probability 6.3e-7 (the paper says 1e-6)', () => {
    expect(guarantee(64, 0.8)).toBeCloseTo(6.277e-7, 9);
    expect(guarantee(64, 0.8)).toBeLessThan(1e-6);
  });
});

describe('sample-size formulas', () => {
  it('gives the smallest R with x^R ≤ p on random inputs', () => {
    const rng = new SeededRng(11);
    for (let t = 0; t < 2000; t++) {
      const x = rng.next() * 0.999;
      const p = 10 ** -(1 + rng.next() * 8);
      const R = samplesForQuantile(x, p);
      expect(Number.isInteger(R)).toBe(true);
      expect(R).toBeGreaterThanOrEqual(1);
      expect(guarantee(R, x)).toBeLessThanOrEqual(p * (1 + 1e-12));
      if (R > 1) expect(guarantee(R - 1, x)).toBeGreaterThan(p);
    }
  });

  it('is not thrown off by an exact power (0.5^3 = 0.125)', () => {
    expect(samplesForQuantile(0.5, 0.125)).toBe(3);
    expect(samplesForQuantile(0.1, 1e-3)).toBe(3);
  });

  it('treats a fraction f like the quantile 1 − f, with the edge cases', () => {
    expect(samplesForFraction(0.2, 1e-3)).toBe(31);
    expect(samplesForFraction(0.08, 1e-3)).toBe(83);
    expect(samplesForFraction(0, 1e-3)).toBe(Infinity);
    expect(samplesForFraction(-0.1, 1e-3)).toBe(Infinity);
    expect(samplesForFraction(1, 1e-3)).toBe(1);
    expect(samplesForFraction(1.0000001, 1e-3)).toBe(1);
    expect(samplesForQuantile(0, 1e-3)).toBe(1);
    expect(samplesForQuantile(1, 1e-3)).toBe(Infinity);
    expect(samplesForGoodOfPopulation(0, 100, 1e-3)).toBe(Infinity);
    expect(samplesForGoodOfPopulation(100, 100, 1e-3)).toBe(1);
    expect(guarantee(0, 0.5)).toBe(1);
  });

  it('validates its arguments', () => {
    expectInvalid(() => samplesForQuantile(1.5, 1e-3), 'x');
    expectInvalid(() => samplesForQuantile(-0.1, 1e-3), 'x');
    expectInvalid(() => samplesForQuantile(Number.NaN, 1e-3), 'x');
    expectInvalid(() => samplesForQuantile(0.8, 0), 'failProb');
    expectInvalid(() => samplesForQuantile(0.8, 1), 'failProb');
    expectInvalid(() => samplesForQuantile(0.8, Number.NaN), 'failProb');
    expectInvalid(() => samplesForFraction(Number.NaN, 1e-3), 'f');
    expectInvalid(() => samplesForGoodOfPopulation(8.5, 100, 1e-3), 'good');
    expectInvalid(() => samplesForGoodOfPopulation(101, 100, 1e-3), 'good');
    expectInvalid(() => samplesForGoodOfPopulation(8, 0, 1e-3), 'population');
    expectInvalid(() => samplesForGoodOfPopulation(8, 10.5, 1e-3), 'population');
    expectInvalid(() => guarantee(2.5, 0.8), 'R');
    expectInvalid(() => guarantee(-1, 0.8), 'R');
    expectInvalid(() => guarantee(8, 2), 'x');
    expectInvalid(() => sampleSize(0.5, { failProb: 1e-3, min: 0 }), 'min');
    expectInvalid(() => sampleSize(0.5, { failProb: 1e-3, min: 16, cap: 8 }), 'cap');
    expectInvalid(() => sampleSize(0.5, { failProb: 2 }), 'failProb');
  });
});

describe('sampleSize', () => {
  it('floors at min (8) when almost everything is acceptable', () => {
    expect(sampleSize(1, { failProb: 1e-3 })).toEqual({ R: 8, uncapped: 1, capped: false, failProbAchieved: 0 });
    const s = sampleSize(0.9, { failProb: 1e-3 });
    expect(s.uncapped).toBe(3);
    expect(s.R).toBe(8);
    expect(s.failProbAchieved).toBeCloseTo(0.1 ** 8, 20);
  });

  it('uses the guarantee between min and cap', () => {
    const s = sampleSize(0.2, { failProb: 1e-3 });
    expect(s).toMatchObject({ R: 31, uncapped: 31, capped: false });
    expect(s.failProbAchieved).toBeLessThanOrEqual(1e-3);
  });

  it('caps at 32 and reports the probability actually achieved', () => {
    const s = sampleSize(0.05, { failProb: 1e-3 });
    expect(s.uncapped).toBe(135);
    expect(s).toMatchObject({ R: 32, capped: true });
    expect(s.failProbAchieved).toBeCloseTo(0.95 ** 32, 12);
    expect(s.failProbAchieved).toBeGreaterThan(1e-3);
    expect(sampleSize(0, { failProb: 1e-3 })).toEqual({ R: 32, uncapped: Infinity, capped: true, failProbAchieved: 1 });
  });

  it('honours custom min and cap', () => {
    expect(sampleSize(0.08, { failProb: 1e-3, min: 4, cap: 128 })).toMatchObject({ R: 83, capped: false });
    expect(sampleSize(0.99, { failProb: 1e-3, min: 2, cap: 2 })).toMatchObject({ R: 2, uncapped: 2, capped: false });
  });
});
