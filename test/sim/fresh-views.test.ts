/**
 * The sample-size ablation (bench sample-size): ten agents that see each other's commits late pile
 * a larger sample onto the same emptiest-looking servers; with views that are never stale, a
 * larger sample places better, as Tarcil's analysis of R assumes.
 */
import { describe, expect, it } from 'vitest';
import { runSim, type RunResult } from '../../src/sim/run.ts';
import { w1 } from '../../src/sim/workloads.ts';

const interference = (r: RunResult): number => r.records.reduce((a, x) => a + x.loss.interference, 0) / r.records.length;
const run = (R: number, freshViews: boolean): RunResult =>
  runSim({ workload: w1({ load: 0.8, jobs: 4000 }), policy: { name: `fixed-R${R}`, runtime: {}, ...(freshViews ? { freshViews } : {}) }, seed: 1 });

describe('ten agents at 80% load', () => {
  it('with views as modelled, R = 16 loses more to interference than R = 2; with fresh views, less, and commits rarely conflict', () => {
    const stale2 = run(2, false);
    const stale16 = run(16, false);
    const fresh2 = run(2, true);
    const fresh16 = run(16, true);
    expect(interference(stale16)).toBeGreaterThan(interference(stale2));
    expect(interference(fresh16)).toBeLessThan(interference(fresh2));
    // Fresh: a conflict needs two agents deciding within one decision's time of each other.
    expect(fresh16.summary.conflictsPerCommit).toBeLessThan(stale16.summary.conflictsPerCommit / 4);
  });
});
