import { describe, expect, it } from 'vitest';
import { runSim } from '../../src/sim/run.ts';
import { w3 } from '../../src/sim/workloads.ts';
import type { World } from '../../src/sim/world.ts';

const RT = { slowBelow: 0.8, recoverAbove: 0.9 };
/**
 * The paper's one-sided Q: with the default two-sided Q, W3's first 300 jobs leave no task slow
 * enough to block or move, and these tests are about what the loop does with slow tasks.
 */
const ONE_SIDED = { twoSided: false };

describe('the run-time loop in the simulator', () => {
  it('moves slow tasks to acceptable RUs, each at most once, one copy at a time, and every task finishes once', () => {
    const res = runSim({
      workload: w3({ jobs: 300 }),
      policy: { name: 'tarcil', core: ONE_SIDED, runtime: { move: true, config: RT } },
      seed: 2,
      keepWorld: true,
    });
    const c = res.counters;
    const w = res.world as World;
    expect(c.moves).toBeGreaterThan(0);
    expect(c.moveLostWorkMs).toBeGreaterThan(0);
    // Every ask ends one way or the other.
    expect(c.moveAsks).toBe(c.moves! + c.moveNoBetterRu! + c.moveConflicts! + c.moveObsolete!);
    let moved = 0;
    for (const j of w.completed) {
      expect(j.done).toBe(j.tasks.length);
      for (const t of j.tasks) {
        expect(t.state).toBe('done');
        expect(t.moves ?? 0).toBeLessThanOrEqual(1);
        if (t.moves) {
          moved++;
          // A moved task ran its whole work again after the move, on an RU acceptable to it.
          expect(t.acceptable).toBe(true);
          expect(t.end - t.start).toBeGreaterThanOrEqual((t.work / t.speed) * 0.999);
        }
      }
    }
    expect(moved).toBe(c.moves);
    // A restart does not count as another task start.
    expect(w.tasksStarted).toBe(w.completed.reduce((n, j) => n + j.tasks.length, 0));
    expect(w.busy).toBe(0);
  });

  it('blocks servers with a slow task and unblocks each of them once it recovers', () => {
    const res = runSim({ workload: w3({ jobs: 300 }), policy: { name: 'tarcil', core: ONE_SIDED, runtime: { block: true, config: RT } }, seed: 2 });
    expect(res.counters.blocks).toBeGreaterThan(0);
    // The run ends with an empty cell: every block was lifted.
    expect(res.counters.unblocks).toBe(res.counters.blocks);
  });

  it('changes nothing when off', () => {
    // Every part named and off, against no run-time loop at all (`runtime: {}`; absent, the spec runs the default parts).
    const a = runSim({
      workload: w3({ jobs: 200 }),
      policy: { name: 'tarcil', runtime: { block: false, move: false, learn: false, autoscale: false } },
      seed: 4,
    });
    const b = runSim({ workload: w3({ jobs: 200 }), policy: { name: 'tarcil', runtime: {} }, seed: 4 });
    expect(b.summary).toEqual(a.summary);
    expect(a.counters.moves).toBeUndefined();
  });
});
