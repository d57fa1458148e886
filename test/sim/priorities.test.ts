/**
 * Priorities in a saturated cell with ten agents (Tarcil §5.3, Fig. 12): there tasks wait in
 * commit races for the RUs freed, not in an agent's queue, and a high-priority request must still
 * come first.
 */
import { describe, expect, it } from 'vitest';
import { runSim, type RunResult } from '../../src/sim/run.ts';
import { w1 } from '../../src/sim/workloads.ts';

const mean = (r: RunResult, cls: string, k: 'sched' | 'response'): number => {
  const xs = r.records.filter((x) => x.label === cls).map((x) => x[k]);
  return xs.reduce((a, b) => a + b, 0) / xs.length;
};

describe('priorities under commit races', () => {
  it('a high-priority task that loses a race waits for the next freed RU ahead of lower ones, so priorities make it faster', () => {
    // W1 at 90% with 10 agents: interference makes the offered work more than the cell, and
    // jobs lose several commit races each before one places them.
    const run = (priorities: boolean): RunResult =>
      runSim({ workload: w1({ load: 0.9, jobs: 2000, highShare: 0.2, priorities }), policy: { name: 'tarcil', core: { preemption: false } }, seed: 1 });
    const on = run(true);
    const off = run(false);
    expect(off.summary.conflictsPerCommit).toBeGreaterThan(0.3);
    expect(on.records.filter((x) => x.label === 'high').length).toBe(off.records.filter((x) => x.label === 'high').length);
    expect(mean(on, 'high', 'response')).toBeLessThanOrEqual(mean(off, 'high', 'response'));
    expect(mean(on, 'high', 'sched')).toBeLessThan(0.75 * mean(off, 'high', 'sched'));
    expect(mean(on, 'high', 'sched')).toBeLessThan(0.75 * mean(on, 'low', 'sched'));
  });
});
