/**
 * A sweep on worker threads gives the same results as the same sweep run one by one: every cell
 * is a seeded run of its own. Only wall-clock figures may differ.
 */
import { describe, expect, it } from 'vitest';
import { EXPERIMENTS } from '../../src/sim/experiments/index.ts';
import { longestFirst } from '../../src/sim/experiments/common.ts';
import { runCells } from '../../src/sim/parallel/pool.ts';
import type { RunResult } from '../../src/sim/run.ts';

/** The rows without their wall-clock columns. */
function figures(rows: Record<string, string | number>[]): Record<string, string | number>[] {
  return rows.map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !/wall|persec/i.test(k))));
}

describe('sweeps on worker threads', () => {
  it('the duration experiment gives the same rows on 2 worker threads as one by one', () => {
    const run = (workers: number): { rows: Record<string, string | number>[]; labels: string[] } => {
      const labels: string[] = [];
      const duration = EXPERIMENTS.duration;
      if (!duration) throw new Error('no duration experiment');
      const res = duration({ quick: true, seed: 11, experiment: 'duration', workers, progress: (_d, _t, label) => void labels.push(label) });
      return { rows: figures(res.rows), labels };
    };
    const one = run(1);
    const two = run(2);
    expect(one.rows.length).toBeGreaterThan(3);
    expect(two.rows).toEqual(one.rows);
    // The parallel run did go through the workers (its progress says so).
    expect(two.labels.some((l) => /worker threads/.test(l))).toBe(true);
    expect(one.labels.some((l) => /worker threads/.test(l))).toBe(false);
  }, 120_000);

  it('cells handed out in another order come back by cell index, with the same results', () => {
    // The duration experiment's quick sweep has 6 cells (task durations from 10 ms to 600 s).
    const go = (order?: number[]): unknown[] =>
      runCells<RunResult>({ experiment: 'duration', quick: true, seed: 5, cells: 6, workers: 2, ...(order ? { order } : {}), onResult: () => undefined }).map(
        (r) => ({ s: r.summary, c: r.counters, e: r.stats.events }),
      );
    const plain = go();
    expect(go([5, 3, 1, 0, 2, 4])).toEqual(plain);
    expect(() => go([0, 1, 2, 3, 4, 4])).toThrow(/each of the 6 cells once/);
  }, 120_000);

  it('longestFirst orders cells by decreasing cost, ties in their order', () => {
    expect(longestFirst(['a', 'bb', 'c', 'ddd', 'ee'], (x) => x.length)).toEqual([3, 1, 4, 0, 2]);
  });

  it('a worker that cannot run its cells answers with the error instead of leaving the caller waiting', () => {
    expect(() => runCells({ experiment: 'no-such-experiment', quick: true, seed: 1, cells: 3, workers: 2, onResult: () => undefined })).toThrow(
      /unknown experiment no-such-experiment/,
    );
  }, 60_000);
});
