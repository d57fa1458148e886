import { describe, expect, it } from 'vitest';
import { runFairshare, type FairshareScenario } from '../../src/sim/experiments/fairshare.ts';
import { dist } from '../../src/sim/metrics.ts';

// Two namespaces of equal weight on 80 RUs: A offers 120% of the cell from t = 0, B 12% from 5 s;
// both stop at 30 s (virtual time). Waits are submission → last task started, in virtual ms.
const SC: FairshareScenario = { servers: 20, aLoad: 1.2, bLoad: 0.12, bStartMs: 5000, endMs: 30_000, tasksPerJob: 4, taskMs: 1000, sampleMs: 250 };

const bWaits = (r: ReturnType<typeof runFairshare>) => dist(r.r.records.filter((x) => x.label === 'b').map((x) => x.sched));
const heldB = (r: ReturnType<typeof runFairshare>) => {
  const s = r.samples.filter((x) => x.t >= SC.bStartMs + 5000 && x.t <= SC.endMs);
  return s.reduce((n, x) => n + x.B, 0) / s.length;
};

describe('fair share in the simulator: two namespaces, A offering 10x B’s load, overloaded', () => {
  it('without admission control (the default): with fair share B waits about as long as alone; without, far longer', () => {
    const alone = runFairshare(SC, 'b-alone', 7, false);
    const fair = runFairshare(SC, 'fair', 7, false);
    const off = runFairshare(SC, 'no-fair', 7, false);
    const a = bWaits(alone);
    const f = bWaits(fair);
    const o = bWaits(off);
    expect(f.n).toBe(o.n);
    expect(f.n).toBeGreaterThan(20);
    // Alone, B never waits for RUs; with fair share it waits only for RUs to free (tasks of ~1 s):
    // within 500 ms of alone on average. Without, it queues behind A's backlog for seconds.
    expect(a.mean).toBeLessThan(50);
    expect(f.mean).toBeLessThan(a.mean + 500);
    expect(o.mean).toBeGreaterThan(10 * f.mean);
    expect(o.mean).toBeGreaterThan(2000);
    // And with fair share B holds about what it holds alone once contention is under way.
    expect(heldB(fair)).toBeGreaterThan(0.8 * heldB(alone));
    expect(fair.r.counters.fairYields).toBeGreaterThan(0);
    expect(off.r.counters.fairYields).toBe(0);
  });

  it('with admission control on, fair share still cuts B’s wait', () => {
    const fair = runFairshare(SC, 'fair', 7, true);
    const off = runFairshare(SC, 'no-fair', 7, true);
    expect(bWaits(fair).mean).toBeLessThan(bWaits(off).mean / 2);
  });
});
