/**
 * The simulated agents' waiters for a freed RU keep each job's place (its first wait), as the live
 * agent's do (freed-waiters.ts): a job placed in part that waits again is not sent behind every
 * job that arrived after it.
 */
import { describe, expect, it } from 'vitest';
import type { ServerSpec } from '../../src/model/types.ts';
import { runSim } from '../../src/sim/run.ts';
import { SYNTHETIC, type Workload } from '../../src/sim/workloads.ts';
import { makeJob, type SimJob, type World } from '../../src/sim/world.ts';

/**
 * 25 servers of 4 RUs; a big job at 0 asks for more RUs than the cell has, small ones follow. Task
 * lengths differ, so RUs free one at a time and each wakes one waiter.
 */
function cell(): Workload {
  const servers: ServerSpec[] = Array.from({ length: 25 }, (_, i) => ({ id: `s${i}`, platform: 'r3-2xlarge', rack: 'r0', rus: 4, speed: 1, attributes: {} }));
  return {
    name: 'waiters cell',
    servers,
    interference: false,
    env: {},
    warmupMs: 0,
    offered: 0,
    *jobs() {
      yield makeJob({ id: 1, profile: SYNTHETIC, arrival: 0, work: Array.from({ length: 160 }, (_, i) => 1000 + 20 * i), maxPerf: 1, label: 'big' });
      for (let i = 0; i < 40; i++)
        yield makeJob({ id: 2 + i, profile: SYNTHETIC, arrival: 100 + i, work: [3000 + 10 * i, 3000 + 10 * i], maxPerf: 1, label: 'small' });
    },
  };
}

describe('tarcil in the simulator: waiters for a freed RU', () => {
  it('serve a job placed in part before the jobs that arrived after it', () => {
    const r = runSim({ workload: cell(), policy: { name: 'tarcil', runtime: {} }, seed: 1, keepWorld: true });
    const w = r.world as World;
    const big = w.completed.find((j) => j.id === 1) as SimJob;
    expect(big).toBeDefined();
    expect(w.completed.length).toBe(41);
    // The first 100 tasks start at once; the other 60 wait, and as the first ones end (from 1 s on,
    // one every 20 ms) the big job, first among the waiters, takes most freed RUs. Sent behind the
    // small jobs each time it waited again, its last tasks started only after all of theirs (5 s).
    const starts = big.tasks.map((t) => t.start).sort((a, b) => a - b);
    expect(starts[99]).toBeLessThan(100);
    expect(starts[159]).toBeLessThan(2500);
    const smallStarts = w.completed.filter((j) => j.id > 1).flatMap((j) => j.tasks.map((t) => t.start));
    expect(smallStarts.filter((t) => t > (starts[159] as number)).length).toBeGreaterThan(20);
  });
});
