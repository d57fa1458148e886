/**
 * The soak's per-row counter increases (bench/lib/metrics.ts counterIncreases) across a front-end
 * that stops answering and one that restarts: no row goes negative, and a restarted process's
 * counts are taken from 0 under its new start.
 */
import { describe, expect, it } from 'vitest';
import { counterIncreases } from '../../bench/lib/metrics.ts';

describe('counterIncreases', () => {
  it('sums the increases of two front-ends through a stop and a restart', () => {
    const increase = counterIncreases();
    // Each row: [start, reading] of two front-ends, summed as the soak sums them.
    const row = (a: [number, number], b: [number, number]): number => increase(`fe0@${a[0]} conflicts`, a[1]) + increase(`fe1@${b[0]} conflicts`, b[1]);
    expect(row([100, 10], [100, 4])).toBe(14);
    expect(row([100, 25], [100, 9])).toBe(20);
    // fe1 does not answer (a stopped or dead process scrapes as NaN): it adds nothing.
    expect(row([100, 30], [NaN, NaN])).toBe(5);
    // fe1 answers again, same start: everything since its last reading counts once.
    expect(row([100, 31], [100, 15])).toBe(7);
    // fe1 restarted (a new start time) and has counted 3 since: 3, not 3 - 15.
    expect(row([100, 31], [200, 3])).toBe(3);
    expect(row([100, 40], [200, 8])).toBe(14);
  });

  it('takes a counter that went down under the same key as no increase', () => {
    const increase = counterIncreases();
    expect(increase('etcd@1 slow', 50)).toBe(50);
    expect(increase('etcd@1 slow', 20)).toBe(0);
    expect(increase('etcd@1 slow', 26)).toBe(6);
  });
});
