/**
 * A simulated agent scores the neighbours of its own in-flight picks as occupied, as a live agent
 * does once it has claimed them in its view: a larger sample must then not pile its tasks onto
 * the same emptiest servers.
 */
import { describe, expect, it } from 'vitest';
import { runSim, type RunResult } from '../../src/sim/run.ts';
import { w1 } from '../../src/sim/workloads.ts';

const interference = (r: RunResult): number => r.records.reduce((a, x) => a + x.loss.interference, 0) / r.records.length;

describe("an agent's own in-flight picks", () => {
  it('count as neighbours in its next decisions: with one agent, R = 16 loses less to interference than R = 2', () => {
    // One agent at 50% load: no other agent's picks to miss, and the agent is not saturated.
    // With the profiles as declared (no learning, `runtime: {}`): what is tested is the decision's use of its own picks.
    const run = (R: number): RunResult => runSim({ workload: w1({ load: 0.5, jobs: 3000 }), policy: { name: `fixed-R${R}`, agents: 1, runtime: {} }, seed: 1 });
    const r2 = run(2);
    const r16 = run(16);
    expect(r16.counters.placedAcceptable).toBeGreaterThanOrEqual(r2.counters.placedAcceptable as number);
    expect(interference(r2)).toBeGreaterThan(0.01);
    expect(interference(r16)).toBeLessThan(interference(r2));
  });
});
