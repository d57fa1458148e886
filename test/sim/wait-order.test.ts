/**
 * The simulated agents' `ratio` wait order (agent/wait-order.ts): on a full cell, a job whose
 * class's tasks run short is served before a job of a long-running class that waited about as
 * long, by the run times the policy saw its tasks take (the default); the other order is arrival.
 */
import { describe, expect, it } from 'vitest';
import { runSim } from '../../src/sim/run.ts';
import { SYNTHETIC, type Workload } from '../../src/sim/workloads.ts';
import type { SimJob, World } from '../../src/sim/world.ts';
import { simCell } from '../support/sim-cell.ts';

const SHORT = { ...SYNTHETIC, name: 'short-class' };
const LONG = { ...SYNTHETIC, name: 'long-class' };

/**
 * One server of one RU. A short task (500 ms) and a long one (4 s) run first, one after the other,
 * so the run times of both classes are known; a long task then holds the RU until 7.7 s, while a
 * long job (arrives 4.8 s) and then a short one (5.8 s) wait for it.
 */
function cell(): Workload {
  return simCell('wait order cell', 1, 1, [
    { id: 1, profile: SHORT, arrival: 0, work: [500] },
    { id: 2, profile: LONG, arrival: 600, work: [4000] },
    { id: 3, profile: LONG, arrival: 4700, work: [3000] },
    { id: 4, profile: LONG, arrival: 4800, work: [4000] },
    { id: 5, profile: SHORT, arrival: 5800, work: [500] },
  ]);
}

function starts(waitOrder?: 'arrival' | 'ratio'): Map<number, number> {
  const r = runSim({ workload: cell(), policy: { name: 'tarcil', runtime: {}, ...(waitOrder ? { core: { waitOrder } } : {}) }, seed: 1, keepWorld: true });
  const w = r.world as World;
  expect(w.completed.length).toBe(5);
  return new Map(w.completed.map((j: SimJob) => [j.id, j.tasks[0]?.start as number]));
}

describe('tarcil in the simulator: the order of jobs waiting for a freed RU', () => {
  it('by arrival: the long job that waited first takes the RU freed at 7.7 s', () => {
    const s = starts('arrival');
    expect(s.get(3)).toBeLessThan(4800);
    expect(s.get(4)).toBeGreaterThanOrEqual(7700);
    expect(s.get(4)).toBeLessThan(8200);
    // The short job waits behind the long one's 4 s.
    expect(s.get(5)).toBeGreaterThanOrEqual(11_700);
  });

  it('by response ratio, the default: the short job (4.8 at 7.7 s) goes before the long one (1.7)', () => {
    const s = starts();
    expect(s.get(5)).toBeGreaterThanOrEqual(7700);
    expect(s.get(5)).toBeLessThan(8200);
    expect(s.get(4)).toBeGreaterThanOrEqual(8200);
    expect(s.get(4)).toBeLessThan(9000);
  });
});
