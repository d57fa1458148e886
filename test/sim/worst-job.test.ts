import { describe, expect, it } from 'vitest';
import type { JobRecord } from '../../src/sim/metrics.ts';
import { EXPERIMENTS } from '../../src/sim/experiments/index.ts';
import { pairWithOracle, quantileOf } from '../../src/sim/experiments/worst-job.ts';

const rec = (arrival: number, ideal: number, response: number): JobRecord => ({ arrival, ideal, response, label: 'x', tasks: 1 }) as unknown as JobRecord;

describe('worst-job', () => {
  it('pairs each job with the oracle on the same job, worst first, performance capped at 1, unmatched jobs left out', () => {
    const mine = [rec(1, 100, 200), rec(2, 100, 100), rec(3, 100, 400), rec(9, 100, 100)];
    const oracle = [rec(1, 100, 100), rec(2, 100, 50), rec(3, 100, 200)];
    const p = pairWithOracle(mine, oracle);
    expect(p.map((x) => x.rec.arrival)).toEqual([1, 3, 2]);
    expect(p.map((x) => x.ratio)).toEqual([0.5, 0.5, 1]);
    expect(p[0]?.ref.arrival).toBe(1);
  });

  it('quantileOf takes the nearest rank', () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(quantileOf(xs, 0.01)).toBe(1);
    expect(quantileOf(xs, 0.05)).toBe(5);
    expect(quantileOf(xs, 0.5)).toBe(50);
    expect(quantileOf([], 0.5)).toBeNaN();
  });

  it('the quick run reports ordered percentiles and the worst 5% of the jobs it paired', () => {
    const r = EXPERIMENTS['worst-job']?.({ quick: true, seed: 1, progress: () => undefined });
    const row = r?.rows[0] as Record<string, number>;
    expect(row.jobs).toBe(1000);
    expect(row.p1PctOracle).toBeLessThanOrEqual(row.p5PctOracle as number);
    expect(row.p5PctOracle).toBeLessThanOrEqual(row.p50PctOracle as number);
    expect(row.below50PctOracle).toBeLessThanOrEqual(row.below60PctOracle as number);
    expect(r?.tables[1]?.rows[0]?.[1]).toBe(50);
  });
});
