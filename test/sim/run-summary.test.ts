/**
 * What a run measures. The streaming summary (records not kept) against the summary of kept
 * records, on the same run: counts and means equal, each percentile within the sketch's 1% of the
 * order statistics around its rank. A fixed warm-up leaves out exactly the jobs before it.
 */
import { describe, expect, it } from 'vitest';
import type { Dist } from '../../src/sim/metrics.ts';
import { runSim } from '../../src/sim/run.ts';
import { SKETCH_RELATIVE_ACCURACY } from '../../src/sim/streaming.ts';
import { w1, w4 } from '../../src/sim/workloads.ts';

const QS = [
  ['p5', 0.05],
  ['p25', 0.25],
  ['p50', 0.5],
  ['p75', 0.75],
  ['p90', 0.9],
  ['p95', 0.95],
  ['p99', 0.99],
] as const;

function expectWithin(streamed: Dist, values: number[]): void {
  const sorted = [...values].sort((a, b) => a - b);
  expect(streamed.n).toBe(sorted.length);
  expect(streamed.max).toBe(sorted[sorted.length - 1]);
  expect(streamed.mean).toBeCloseTo(sorted.reduce((a, x) => a + x, 0) / sorted.length, 6);
  const e = SKETCH_RELATIVE_ACCURACY;
  for (const [name, p] of QS) {
    const rank = p * (sorted.length - 1);
    const lo = sorted[Math.floor(rank)] as number;
    const hi = sorted[Math.ceil(rank)] as number;
    const v = streamed[name];
    expect(v, `${name}`).toBeGreaterThanOrEqual(lo * (1 - e) - 1e-9);
    expect(v, `${name}`).toBeLessThanOrEqual(hi * (1 + e) + 1e-9);
  }
}

describe('streaming summary', () => {
  for (const [label, cfg] of [
    ['sparrow, W4', { workload: w4({ load: 0.8, jobs: 1500, workers: 200 }), policy: { name: 'sparrow' } }],
    ['tarcil, W1', { workload: w1({ load: 0.8, jobs: 1500 }), policy: { name: 'tarcil', agents: 2 } }],
  ] as const) {
    it(`keeps no record and agrees with the kept records' summary (${label})`, () => {
      const kept = runSim({ ...cfg, seed: 3 });
      const streamed = runSim({ ...cfg, seed: 3, keepRecords: false });
      expect(streamed.records).toHaveLength(0);
      expect(kept.records.length).toBeGreaterThan(1000);
      const a = kept.summary;
      const b = streamed.summary;
      expect(b.jobs).toBe(a.jobs);
      for (const k of ['perfMean', 'perfWorst', 'within10', 'degraded', 'decisionMean', 'commitMean', 'queueMean', 'conflictsPerCommit', 'meanR'] as const)
        expect(b[k], k).toBeCloseTo(a[k], 9);
      expect(b.waits.n).toBe(a.waits.n);
      expectWithin(
        b.response,
        kept.records.map((r) => r.response),
      );
      expectWithin(
        b.ratio,
        kept.records.map((r) => r.response / r.ideal),
      );
      expectWithin(
        b.sched,
        kept.records.map((r) => r.sched),
      );
    });
  }
});

describe('warm-up', () => {
  it('a fixed warm-up leaves out exactly the jobs that arrived before it, whether set per run or for the thread', async () => {
    const { setWarmup } = await import('../../src/sim/run.ts');
    const cfg = { workload: w4({ load: 0.7, jobs: 400, workers: 100 }), policy: { name: 'sparrow' }, seed: 5 } as const;
    const none = runSim({ ...cfg, warmupMs: 0 });
    const cut = 100;
    const fixed = runSim({ ...cfg, warmupMs: cut });
    expect(none.records).toHaveLength(400);
    expect(fixed.stats.warmupMs).toBe(cut);
    expect(fixed.records).toEqual(none.records.filter((r) => r.arrival >= cut));
    expect(fixed.records.length).toBeLessThan(400);
    setWarmup(cut);
    try {
      expect(runSim(cfg).records).toEqual(fixed.records);
    } finally {
      setWarmup(undefined);
    }
    // The workload's default: the first 10% of W4's arrival window.
    const dflt = runSim(cfg);
    expect(dflt.stats.warmupMs).toBe(cfg.workload.warmupMs);
  });
});
