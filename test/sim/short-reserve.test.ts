/**
 * The simulated tarcil's short-task reserve (agent/short-reserve.ts), the live agents' rule on the
 * agents' view: on a nearly full cell a job of a long-running class waits while a job of a short
 * class that arrives after it starts at once; without the reserve the long job takes the free RUs.
 * And the oracle keeps the same reserve with what it knows.
 */
import { describe, expect, it } from 'vitest';
import { runSim } from '../../src/sim/run.ts';
import { SYNTHETIC, type Workload } from '../../src/sim/workloads.ts';
import type { SimJob, World } from '../../src/sim/world.ts';
import { simCell } from '../support/sim-cell.ts';

const SHORT = { ...SYNTHETIC, name: 'short-class' };
const LONG = { ...SYNTHETIC, name: 'long-class' };

/**
 * One server of ten RUs, a reserve of two. A short task (500 ms) and a long one (4 s) run first, so
 * that both classes' run times are known (mean 2.25 s: the long class is long). At 5 s a long job of
 * eight 10-s tasks leaves two RUs free; a long job of two 20-s tasks arrives at 5.1 s (long for the
 * oracle too: above the mean ideal of the tasks that arrived, 10.4 s), a short job of two tasks at
 * 5.2 s.
 */
function cell(): Workload {
  return simCell('short reserve cell', 1, 10, [
    { id: 1, profile: SHORT, arrival: 0, work: [500] },
    { id: 2, profile: LONG, arrival: 0, work: [4000] },
    { id: 3, profile: LONG, arrival: 5000, work: new Array<number>(8).fill(10_000) },
    { id: 4, profile: LONG, arrival: 5100, work: [20_000, 20_000] },
    { id: 5, profile: SHORT, arrival: 5200, work: [500, 500] },
  ]);
}

function starts(shortReserve: number): { start: Map<number, number>; holds: number } {
  const r = runSim({ workload: cell(), policy: { name: 'tarcil', runtime: {}, core: { shortReserve } }, seed: 1, keepWorld: true });
  const w = r.world as World;
  expect(w.completed.length).toBe(5);
  const start = new Map(w.completed.map((j: SimJob) => [j.id, Math.min(...j.tasks.map((t) => t.start))]));
  return { start, holds: r.counters.reserveHolds ?? 0 };
}

describe('tarcil in the simulator: the short-task reserve', () => {
  it('without it, the long job takes the last two free RUs and the short job waits for the cell to free', () => {
    const { start, holds } = starts(0);
    expect(holds).toBe(0);
    expect(start.get(4)).toBeLessThan(5600);
    expect(start.get(5)).toBeGreaterThanOrEqual(9100);
  });

  it('with a reserve of two RUs, the long job waits and the short one that arrived after it starts at once', () => {
    const { start, holds } = starts(0.2);
    expect(holds).toBeGreaterThan(0);
    expect(start.get(5)).toBeLessThan(5700);
    // Two RUs free again once the short tasks end: still the reserve; the long job waits for more.
    expect(start.get(4)).toBeGreaterThanOrEqual(6000);
  });

  it('the oracle keeps its own reserve: with it the short job starts first, without it the long one', () => {
    const run = (reserve: number) => {
      const w = runSim({ workload: cell(), policy: { name: 'oracle', oracle: { reserve } }, seed: 1, keepWorld: true }).world as World;
      return new Map(w.completed.map((j: SimJob) => [j.id, Math.min(...j.tasks.map((t) => t.start))]));
    };
    const none = run(0);
    expect(none.get(4)).toBe(5100);
    expect(none.get(5)).toBeGreaterThanOrEqual(9100);
    const kept = run(0.2);
    expect(kept.get(5)).toBe(5200);
    expect(kept.get(4)).toBeGreaterThan(5200);
  });
});
