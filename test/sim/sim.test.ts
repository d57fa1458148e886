import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/sim/engine.ts';
import { PigeonPolicy } from '../../src/sim/policies/pigeon.ts';
import { SparrowPolicy } from '../../src/sim/policies/sparrow.ts';
import { runSim, type RunConfig } from '../../src/sim/run.ts';
import { fitParetoShape, boundedParetoMean, w1, w2, w3, w4, w5, w5Trace, SYNTHETIC } from '../../src/sim/workloads.ts';
import { COPYSET_ATTR } from '../../src/sim/constants.ts';
import { makeJob, World } from '../../src/sim/world.ts';
import { slowdown } from '../../src/model/perf.ts';
import { EXPERIMENTS } from '../../src/sim/experiments/index.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { vegaSpec, renderSvg } from '../../src/sim/charts.ts';

const quiet = { quick: true, seed: 3, progress: () => undefined };

/** Wraps World.startTask to check that no RU ever holds two tasks and every task runs once. */
function checked(cfg: RunConfig): { res: ReturnType<typeof runSim>; starts: number } {
  const res = runSim({ ...cfg, keepWorld: true });
  const w = res.world as World;
  return { res, starts: w.tasksStarted };
}

describe('engine', () => {
  it('fires events in time order, ties in scheduling order', () => {
    const e = new Engine();
    const out: string[] = [];
    e.setTimer(5, () => out.push('b'));
    e.setTimer(1, () => out.push('a'));
    e.setTimer(5, () => out.push('c'));
    const t = e.setTimer(3, () => out.push('x'));
    t.cancel();
    e.run();
    expect(out).toEqual(['a', 'b', 'c']);
    expect(e.now()).toBe(5);
  });
});

describe('determinism', () => {
  for (const policy of ['tarcil', 'sparrow', 'centralized', 'pigeon', 'delay-dynamic']) {
    it(`same seed, same numbers (${policy}, W2)`, () => {
      const run = (): unknown => {
        const r = runSim({ workload: w2({ variant: 'resident', queries: 15 }), policy: { name: policy, agents: 3 }, seed: 7 });
        return { s: r.summary, c: r.counters, n: r.records.map((x) => x.response) };
      };
      expect(run()).toEqual(run());
    });
  }
  it('a different seed gives different numbers', () => {
    const a = runSim({ workload: w1({ load: 0.6, jobs: 300 }), policy: { name: 'tarcil', agents: 3 }, seed: 1 });
    const b = runSim({ workload: w1({ load: 0.6, jobs: 300 }), policy: { name: 'tarcil', agents: 3 }, seed: 2 });
    expect(a.summary.response.mean).not.toBe(b.summary.response.mean);
  });
});

describe('policy invariants: every task runs exactly once, no RU double-booked', () => {
  // World.startTask throws on a taken RU or a task started twice, finish() on a second finish.
  const cases: [string, () => RunConfig['workload']][] = [
    ['tarcil', () => w1({ load: 0.9, jobs: 400 })],
    ['fixed-R64', () => w1({ load: 0.9, jobs: 400 })],
    ['tarcil', () => w3({ jobs: 60, interArrivalMs: 200 })],
    ['sparrow', () => w4({ load: 0.9, jobs: 40, workers: 100, tasksPerJob: 20 })],
    ['sparrow-batch', () => w4({ load: 0.9, jobs: 40, workers: 100, tasksPerJob: 20 })],
    ['sparrow-per-task', () => w4({ load: 0.9, jobs: 40, workers: 100, tasksPerJob: 20 })],
    ['random', () => w2({ variant: 'hetero', queries: 10 })],
    ['omniscient', () => w4({ load: 0.9, jobs: 40, workers: 100, tasksPerJob: 20 })],
    ['centralized', () => w2({ variant: 'resident', queries: 10 })],
    ['pigeon', () => w5({ trace: 'yahoo', load: 0.9, jobs: 80, maxFanout: 200 })],
    ['delay-fixed', () => w2({ variant: 'resident', queries: 10 })],
    ['delay-dynamic', () => w2({ variant: 'resident', queries: 10 })],
  ];
  for (const [policy, wl] of cases) {
    it(policy, () => {
      const { res, starts } = checked({ workload: wl(), policy: { name: policy, agents: 4 }, seed: 11 });
      const w = res.world as World;
      expect(res.stats.unfinished).toBe(0);
      expect(starts).toBe(w.tasksFinished);
      for (const j of w.completed) for (let x: typeof j | undefined = j.head; x; x = x.next) for (const t of x.tasks) expect(t.state).toBe('done');
      expect(w.busy).toBe(w.resident);
    });
  }
});

describe('late binding accounting', () => {
  for (const cancel of [true, false]) {
    it(`probes = launched + no-ops + cancelled (cancel=${cancel})`, () => {
      const wl = w4({ load: 0.8, jobs: 60, workers: 200, tasksPerJob: 30 });
      const eng = new Engine();
      const rng = new SeededRng(5);
      const world = new World(eng, rng, wl.servers, { interference: false, utilEvery: 0 });
      const p = new SparrowPolicy(world, rng.fork(), { mode: 'batch-lb', cancel });
      const gen = wl.jobs(world, rng.fork());
      for (const job of gen) eng.at(job.arrival, () => p.submit(job));
      eng.run();
      expect(p.c.launched).toBe(p.c.tasks);
      expect(p.c.probes).toBe(p.c.launched + p.c.noops + p.c.cancelled);
      if (!cancel) expect(p.c.cancelled).toBe(0);
      else expect(p.c.cancelled).toBeGreaterThan(0);
    });
  }
});

describe('pigeon', () => {
  it('honours the queue weight: of every W dispatches while both queues wait, one is long', () => {
    const servers = w4({ load: 0.5, jobs: 1, workers: 25 }).servers; // 100 RUs = one group
    const eng = new Engine();
    const rng = new SeededRng(9);
    const world = new World(eng, rng, servers, { interference: false, utilEvery: 0 });
    const W = 5;
    const p = new PigeonPolicy(world, rng.fork(), { shortCutoffMs: 3000, weight: W, reserved: 0.1, groupSize: 100 });
    p.record = true;
    let id = 1;
    // Long jobs fill the group and queue; then a burst of short ones queues behind them.
    eng.at(0, () => p.submit(makeJob({ id: id++, profile: SYNTHETIC, arrival: 0, work: new Array<number>(300).fill(5000), maxPerf: 1 })));
    eng.at(1, () => p.submit(makeJob({ id: id++, profile: SYNTHETIC, arrival: 1, work: new Array<number>(400).fill(2000), maxPerf: 1 })));
    eng.run();
    const m = p.masters[0];
    expect(m).toBeDefined();
    const served = m?.served ?? [];
    expect(p.c.weightForced).toBeGreaterThan(0);
    // Within the stretch where both queues were non-empty, no W consecutive dispatches are all short.
    let run = 0;
    let maxRun = 0;
    for (const s of served.slice(400)) {
      run = s === 'h' ? run + 1 : 0;
      maxRun = Math.max(maxRun, run);
    }
    expect(maxRun).toBeLessThanOrEqual(W - 1 + Math.ceil(0.1 * 100));
    // Reserved workers never run long tasks.
    expect(world.tasksFinished).toBe(700);
  });
});

describe('performance model', () => {
  it('slows a task only where neighbours exceed its tolerance', () => {
    const own = [90, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    const calm = new Array<number>(10).fill(0);
    calm[0] = 90;
    expect(slowdown(own, calm, 8)).toBe(1);
    const busy = own.map((c) => c + 7 * 50);
    expect(slowdown(own, busy, 8)).toBeGreaterThan(1.5);
  });
  it('fits Pareto shapes to the Table 1 means', () => {
    const a = fitParetoShape(39.91, 1, 5900);
    expect(boundedParetoMean(a, 1, 5900)).toBeCloseTo(39.91, 1);
  });
});

describe('the x^R law on the simulator samples', () => {
  it('P[D_best < x] matches x^R within sampling error', () => {
    const r = EXPERIMENTS.uniformity?.(quiet);
    expect(r).toBeDefined();
    for (const row of r?.rows ?? []) {
      expect(Math.abs((row.empirical as number) - (row.theory as number))).toBeLessThan(0.05);
    }
  });
});

describe('charts', () => {
  it('renders an SVG with vega', async () => {
    const c = {
      file: 'x.svg',
      title: 't',
      xTitle: 'x',
      yTitle: 'y',
      points: [
        { x: 1, y: 2, series: 'a' },
        { x: 2, y: 3, series: 'a' },
      ],
    };
    expect(vegaSpec(c).marks).toBeDefined();
    const svg = await renderSvg(c);
    expect(svg.startsWith('<svg')).toBe(true);
  });
});

describe('workload load matches its nominal load', () => {
  it('W1: the arrival rate brings the nominal ideal load (within 5%)', () => {
    const wl = w1({ load: 0.6, jobs: 4000 });
    const world = new World(new Engine(), new SeededRng(1), wl.servers, { interference: false, utilEvery: 0 });
    let work = 0;
    let last = 0;
    for (const j of wl.jobs(world, new SeededRng(2))) {
      for (const t of j.tasks) work += t.work;
      last = j.arrival;
    }
    expect(work / (last * world.nRu)).toBeGreaterThan(0.57);
    expect(work / (last * world.nRu)).toBeLessThan(0.63);
  });
  for (const trace of ['yahoo', 'cloudera', 'google'] as const) {
    it(`W5 ${trace}: the cluster is sized so the drawn trace loads its arrival window at the nominal load`, () => {
      const o = { trace, load: 0.9, jobs: 300, maxFanout: 2000, seed: 4 };
      const tr = w5Trace(o);
      const wl = w5(o);
      const rus = wl.servers.reduce((a, s) => a + s.rus, 0);
      // Rounding up to whole 4-RU workers only lowers the load, by less than a worker's share.
      const realised = tr.occupancy / rus;
      let inside = 0;
      for (const j of tr.jobs) for (const x of j.work) inside += Math.min(x, tr.span - j.arrival);
      expect(tr.occupancy).toBeCloseTo(inside / tr.span, 6);
      expect(realised).toBeLessThanOrEqual(0.9 + 1e-9);
      expect(realised).toBeGreaterThan(0.9 * (1 - 4 / rus) - 1e-9);
      expect(wl.offered).toBeCloseTo(realised, 9);
    });
  }
  it('W2 with copysets: every first-stage task has its 3 replicas on one named copyset', () => {
    const wl = w2({ variant: 'resident', queries: 20, replication: 'copysets' });
    const world = new World(new Engine(), new SeededRng(1), wl.servers, { interference: false, utilEvery: 0 });
    for (const q of wl.jobs(world, new SeededRng(3))) {
      for (const t of q.tasks) {
        const sets = new Set((t.data ?? []).map((s) => wl.servers[s]?.attributes[COPYSET_ATTR]));
        expect(t.data).toHaveLength(3);
        expect(sets.size).toBe(1);
      }
    }
  });
});

describe('W2 rivals as their papers describe them', () => {
  it('tarcil and centralized honour the hard data constraint (every scan task local)', () => {
    for (const policy of ['tarcil', 'centralized']) {
      const r = runSim({ workload: w2({ variant: 'resident', queries: 30, load: 0.2 }), policy: { name: policy, agents: 4 }, seed: 5 });
      expect(r.summary.locality).toBe(1);
    }
  });
  it('centralized: a scan on the 100-server cluster stays within the 2 s timeout and rounds keep up with TPC-H', () => {
    const r = runSim({ workload: w2({ variant: 'unloaded', queries: 60, load: 0.2 }), policy: { name: 'centralized' }, seed: 5 });
    expect(r.counters.decisionMs).toBeLessThanOrEqual(2000);
    expect(r.counters.timeouts).toBe(0);
    // Three stages a query, each waiting at most for the round in progress and its own: bounded.
    expect(r.summary.sched.p95).toBeLessThan(3 * 2 * (r.counters.decisionMs ?? 0) + 1000);
  });
  it('centralized: past the timeout the scan covers only part of the cluster', () => {
    const r = runSim({ workload: w3({ jobs: 20, interArrivalMs: 500 }), policy: { name: 'centralized' }, seed: 5 });
    expect(r.counters.decisionMs).toBeLessThanOrEqual(2000);
  });
  it('delay-dynamic moves its interval with the reported overheads; delay-fixed keeps 3 s', () => {
    const wl = (): RunConfig['workload'] => w2({ variant: 'resident', queries: 60, load: 0.25 });
    const fixed = runSim({ workload: wl(), policy: { name: 'delay-fixed' }, seed: 5 });
    const dyn = runSim({ workload: wl(), policy: { name: 'delay-dynamic' }, seed: 5 });
    expect(fixed.counters.finalDelayMs).toBe(3000);
    expect(dyn.counters.reports).toBeGreaterThan(0);
    expect(dyn.counters.finalDelayMs).toBeLessThan(3000);
    expect(dyn.summary.response.mean).not.toBe(fixed.summary.response.mean);
  });
});

describe('priorities', () => {
  it('high-priority jobs bypass queued low-priority ones (same jobs, with vs without priorities)', () => {
    const run = (priorities: boolean): ReturnType<typeof runSim> =>
      runSim({
        workload: w1({ load: 0.95, jobs: 1500, highShare: 0.2, priorities }),
        policy: { name: 'tarcil', agents: 1, core: { preemption: false } },
        seed: 8,
      });
    const on = run(true);
    const off = run(false);
    const sched = (r: ReturnType<typeof runSim>, cls: string): number => {
      const xs = r.records.filter((x) => x.label === cls).map((x) => x.sched);
      return xs.reduce((a, b) => a + b, 0) / xs.length;
    };
    // One agent at 95%: its queue is long, so bypassing it must show.
    expect(sched(on, 'high')).toBeLessThan(0.5 * sched(off, 'high'));
    expect(sched(on, 'high')).toBeLessThan(sched(on, 'low'));
    expect(on.records.filter((x) => x.label === 'high').length).toBe(off.records.filter((x) => x.label === 'high').length);
  });
});

describe('loss split', () => {
  it('wait + platform + interference + remote + other adds up to response − ideal', () => {
    const r = runSim({ workload: w3({ jobs: 40, interArrivalMs: 200 }), policy: { name: 'tarcil', agents: 3 }, seed: 2 });
    for (const x of r.records) {
      const l = x.loss;
      expect(l.wait + l.platform + l.interference + l.remote + l.other).toBeCloseTo(x.response - x.ideal, 6);
      expect(l.wait).toBeGreaterThanOrEqual(0);
      expect(Math.abs(l.other)).toBeLessThan(1e-6 + 0.5 * x.ideal);
    }
  });
});

describe('quality at placement (Fig. 15c/17)', () => {
  it('scores every started task, for any policy, within [0, 1]', () => {
    for (const policy of ['tarcil', 'sparrow']) {
      const r = runSim({ workload: w3({ jobs: 30, interArrivalMs: 200 }), policy: { name: policy, agents: 3 }, seed: 4, keepWorld: true, scoreQ: true });
      const qs = (r.world as World).completed.flatMap((j) => j.tasks.map((t) => t.placedQ));
      expect(qs.length).toBeGreaterThan(0);
      for (const q of qs) {
        expect(q).toBeDefined();
        expect(q as number).toBeGreaterThanOrEqual(0);
        expect(q as number).toBeLessThanOrEqual(1);
      }
    }
  });
});
