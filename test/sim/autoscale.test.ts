import { describe, expect, it } from 'vitest';
import { N_RESOURCES, type ServerSpec } from '../../src/model/types.ts';
import { runSim } from '../../src/sim/run.ts';
import { SYNTHETIC, w3, W3_SCALE_OUT, type Workload } from '../../src/sim/workloads.ts';
import { makeJob, type SimJob, type World } from '../../src/sim/world.ts';

const RT = { slowBelow: 0.8, recoverAbove: 0.9 };

/**
 * Servers of 2 RUs, each with a resident neighbour that the scheduler sees as harmless (declared
 * 0) but that presses 99 on every resource; the job under test declares 0 but really uses 50
 * (tolerating 49), so wherever it runs, each of its tasks runs at 1/8.5 of its expected rate.
 * One job of `tasks` tasks of `work` ms each arrives at 0.
 */
function slowCell(o: { servers: number; tasks: number; work: number; maxTasks?: number }): Workload {
  const servers: ServerSpec[] = Array.from({ length: o.servers }, (_, i) => ({
    id: `s${i}`,
    platform: 'r3-2xlarge',
    rack: 'r0',
    rus: 2,
    speed: 1,
    attributes: {},
  }));
  const zero = new Array<number>(N_RESOURCES).fill(0);
  return {
    name: 'slow cell',
    servers,
    interference: true,
    env: {},
    warmupMs: 0,
    offered: 0,
    setup(world) {
      let id = -1;
      for (const s of world.servers) {
        const job = makeJob({
          id: id--,
          profile: SYNTHETIC,
          declared: zero,
          real: new Array<number>(N_RESOURCES).fill(99),
          arrival: 0,
          work: [Infinity],
          maxPerf: 1,
          label: 'resident',
        });
        world.placeResident(job, s.base);
      }
    },
    *jobs() {
      yield makeJob({
        id: 1,
        profile: SYNTHETIC,
        declared: zero,
        real: new Array<number>(N_RESOURCES).fill(50),
        arrival: 0,
        work: new Array<number>(o.tasks).fill(o.work),
        maxPerf: 1,
        ...(o.maxTasks === undefined ? {} : { scaleOut: { maxTasks: o.maxTasks } }),
      });
    },
  };
}

function only(w: World): SimJob {
  const j = w.completed.find((x) => x.id === 1);
  if (!j) throw new Error('job 1 did not finish');
  return j;
}

describe('autoscale in the simulator', () => {
  it('gives a slow scale-out job more tasks, up to its limit, and it finishes sooner', () => {
    const cell = { servers: 8, tasks: 2, work: 100_000, maxTasks: 4 };
    const off = runSim({ workload: slowCell(cell), policy: { name: 'tarcil', agents: 1 }, seed: 3, keepWorld: true });
    const on = runSim({ workload: slowCell(cell), policy: { name: 'tarcil', agents: 1, runtime: { autoscale: true, config: RT } }, seed: 3, keepWorld: true });
    const a = only(off.world as World);
    const b = only(on.world as World);
    expect(a.tasks).toHaveLength(2);
    // Six RUs were still free, but the job stopped at its limit.
    expect(b.tasks).toHaveLength(4);
    expect(b.scaledOut).toBe(2);
    expect(on.counters.scaleOuts).toBe(2);
    expect(on.counters.scaleOutMaxed).toBeGreaterThan(0);
    // At most one new task per wait: both tasks turned slow at once, yet the second new task was
    // asked a wait (moveAfterMs, 5 s) after the first (each placement takes a few ms of its own).
    const added = b.tasks.slice(2);
    expect(added.every((t) => t.state === 'done')).toBe(true);
    expect((added[1]?.start as number) - (added[0]?.start as number)).toBeGreaterThan(4_900);
    expect(on.counters.scaleOutHeld).toBeGreaterThan(0);
    // The work the job had left was spread, not added: every task's work sums to the job's.
    const total = b.tasks.reduce((s, t) => s + t.work, 0);
    expect(total).toBeCloseTo(2 * cell.work, 3);
    // Four slow tasks share what two did alone: the job ends well before it did.
    expect(b.finish).toBeLessThan(0.7 * a.finish);
    expect(on.summary.perfMean).toBeGreaterThan(off.summary.perfMean);
  });

  it('grows only while the cell has room: more than growHeadroom of its RUs free and no task waiting', () => {
    // 16 RUs: 8 resident, the job's 2 tasks; 6 free (37.5%).
    const cell = { servers: 8, tasks: 2, work: 100_000, maxTasks: 6 };
    const run = (growHeadroom: number) =>
      runSim({
        workload: slowCell(cell),
        policy: { name: 'tarcil', agents: 1, runtime: { autoscale: true, config: { ...RT, growHeadroom } } },
        seed: 3,
        keepWorld: true,
      });
    // Above 30% free (4.8 RUs) it grows: 6 → 5 → 4 free, then stops short of its limit of 6.
    const some = run(0.3);
    expect(only(some.world as World).tasks).toHaveLength(4);
    expect(some.counters.scaleOuts).toBe(2);
    expect(some.counters.scaleOutNoRoom).toBeGreaterThan(0);
    // 37.5% free is not above 50%: it never grows.
    const none = run(0.5);
    expect(only(none.world as World).tasks).toHaveLength(2);
    expect(none.counters.scaleOuts).toBe(0);
    expect(none.counters.scaleOutNoRoom).toBeGreaterThan(0);
    expect(() => run(1)).toThrow(/runtime.growHeadroom: must be a number in \[0, 1\)/);
  });

  it('never scales a job that is not scale-out, nor anything with autoscale off', () => {
    const plain = runSim({
      workload: slowCell({ servers: 8, tasks: 2, work: 100_000 }),
      policy: { name: 'tarcil', agents: 1, runtime: { autoscale: true, config: RT } },
      seed: 3,
      keepWorld: true,
    });
    expect(only(plain.world as World).tasks).toHaveLength(2);
    expect(plain.counters.scaleOutChecks).toBe(0);
    expect(plain.counters.scaleOuts).toBe(0);
    const off = runSim({
      workload: slowCell({ servers: 8, tasks: 2, work: 100_000, maxTasks: 4 }),
      policy: { name: 'tarcil', agents: 1, runtime: { move: true, config: RT } },
      seed: 3,
      keepWorld: true,
    });
    expect(only(off.world as World).tasks).toHaveLength(2);
    expect(off.counters.scaleOuts).toBe(0);
  });

  it('on W3 with its long-running classes scale-out: only those grow, within their limits, and every task runs once', () => {
    // The paper's one-sided Q: with the default two-sided Q, these 300 jobs leave no task slow enough to grow its job.
    const res = runSim({
      workload: w3({ jobs: 300, scaleOut: true }),
      policy: { name: 'tarcil', core: { twoSided: false }, runtime: { autoscale: true, config: RT } },
      seed: 2,
      keepWorld: true,
    });
    const w = res.world as World;
    const c = res.counters;
    expect(c.scaleOuts).toBeGreaterThan(0);
    // Every ask ends one way or the other.
    expect(c.scaleOutAsks).toBe(c.scaleOuts! + c.scaleOutObsolete!);
    let added = 0;
    for (const j of w.completed) {
      expect(j.done).toBe(j.tasks.length);
      j.tasks.forEach((t, i) => {
        expect(t.index).toBe(i);
        expect(t.state).toBe('done');
      });
      if (W3_SCALE_OUT.includes(j.profile.name)) {
        expect(j.scaleOut).toBeDefined();
        expect(j.tasks.length).toBeLessThanOrEqual(j.scaleOut!.maxTasks);
      } else {
        expect(j.scaleOut).toBeUndefined();
        expect(j.scaledOut).toBeUndefined();
      }
      added += j.scaledOut ?? 0;
    }
    expect(added).toBe(c.scaleOuts);
    expect(w.tasksStarted).toBe(w.completed.reduce((n, j) => n + j.tasks.length, 0));
    expect(w.busy).toBe(0);
  });

  it('marking W3 scale-out changes nothing without autoscale', () => {
    const a = runSim({ workload: w3({ jobs: 200 }), policy: { name: 'tarcil', runtime: { move: true, config: RT } }, seed: 4 });
    const b = runSim({ workload: w3({ jobs: 200, scaleOut: true }), policy: { name: 'tarcil', runtime: { move: true, config: RT } }, seed: 4 });
    expect(b.summary).toEqual(a.summary);
    expect(b.counters).toEqual(a.counters);
  });
});
