/**
 * What puts tarcil's worst W3 jobs where they are against the oracle, under one ground truth of
 * `tarcil bench truths`: runs a policy (default: tarcil, the default configuration) and the oracle
 * on the same jobs and prints, as JSON lines,
 *
 * - `cell`: every 600 s of virtual time, each run's free RUs, tasks running and RU time held per
 *   family so far (a placement that runs slower holds its RU longer and fills the cell sooner);
 * - `worst`: the worst 5% (and 1%) against the oracle's figure for the same job: families, arrival
 *   tenths, tasks, ideal, and where the time went — before the first task started, between the
 *   first and the last task's start (a job placed in part), and running — in both runs, with the
 *   free RUs at the job's arrival in both;
 * - `tenths`: per tenth of the arrival window, the mean and 5th percentile against the oracle.
 *
 * Run: npx tsx bench/truths-worst.ts [--truth 'gain 2.5'] [--seed 1] [--jobs 7200] [--policy tarcil]
 */
import { parseArgs } from 'node:util';
import { quantile } from 'simple-statistics';
import { TRUTH_POLICIES, TRUTHS } from '../src/sim/experiments/truths.ts';
import { runSim } from '../src/sim/run.ts';
import type { SimJob, SimTask, World } from '../src/sim/world.ts';
import { w3 } from '../src/sim/workloads.ts';

const { values } = parseArgs({
  options: {
    truth: { type: 'string', default: 'gain 2.5' },
    jobs: { type: 'string', default: '7200' },
    seed: { type: 'string', default: '1' },
    policy: { type: 'string', default: 'tarcil' },
  },
});
const truth = TRUTHS.find((t) => t.name === values.truth);
if (!truth) throw new Error(`--truth: one of ${TRUTHS.map((t) => t.name).join(', ')}`);
const found = TRUTH_POLICIES.find((p) => p.name === values.policy);
if (!found) throw new Error(`--policy: one of ${TRUTH_POLICIES.map((p) => p.name).join(', ')}`);
const pol = found;
const jobs = Number(values.jobs);
const seed = Number(values.seed);

interface JobInfo {
  arrival: number;
  label: string;
  tasks: number;
  ideal: number;
  firstStart: number;
  lastStart: number;
  finish: number;
  /** Tasks placed on an RU the scheduler judged acceptable. */
  acceptable: number;
  /** Free RUs in the world when the job arrived. */
  freeAtArrival: number;
  /** Slowest task's platform speed over the job's best. */
  slowestSpeed: number;
}

interface Run {
  jobs: Map<number, JobInfo>;
  cell: { t: number; free: number; running: number; heldS: Record<string, number> }[];
  counters: Record<string, number>;
  /** Per family: finished tasks, Σ run time over the time alone on its platform (interference), Σ platform speed / best, tasks judged acceptable. */
  fam: Record<string, { n: number; slow: number; speed: number; acceptable: number }>;
}

function run(spec: (typeof TRUTH_POLICIES)[number]['spec']): Run {
  const wl = w3({ jobs });
  const out: Run = { jobs: new Map(), cell: [], counters: {}, fam: {} };
  const held: Record<string, number> = {};
  const setup = (world: World): void => {
    const w = world as unknown as {
      startTask: (t: SimTask, ru: number, ...rest: unknown[]) => void;
      finish: (t: SimTask) => void;
    };
    const start = w.startTask.bind(world);
    w.startTask = (t, ru, ...rest) => {
      start(t, ru, ...rest);
      const j = t.job;
      let info = out.jobs.get(j.id);
      if (!info) {
        info = {
          arrival: j.arrival,
          label: j.label,
          tasks: j.tasks.length,
          ideal: j.ideal,
          firstStart: world.engine.now(),
          lastStart: 0,
          finish: 0,
          acceptable: 0,
          freeAtArrival: arrivals.get(j.id) ?? NaN,
          slowestSpeed: 1,
        };
        out.jobs.set(j.id, info);
      }
      info.lastStart = world.engine.now();
      if (t.acceptable) info.acceptable++;
    };
    const fin = w.finish.bind(world);
    w.finish = (t) => {
      const j: SimJob = t.job;
      held[j.label] = (held[j.label] ?? 0) + (world.engine.now() - t.start) / 1000;
      const f = (out.fam[j.label] ??= { n: 0, slow: 0, speed: 0, acceptable: 0 });
      f.n++;
      f.slow += (world.engine.now() - t.start) / (t.work / t.speed);
      f.speed += t.speed / j.maxPerf;
      if (t.acceptable) f.acceptable++;
      const info = out.jobs.get(j.id);
      if (info) {
        info.finish = Math.max(info.finish, world.engine.now());
        info.slowestSpeed = Math.min(info.slowestSpeed, t.speed / j.maxPerf);
      }
      fin(t);
    };
    // Free RUs at each arrival (W3 arrives every second from 0), and the cell every 600 s.
    for (let i = 0; i < jobs; i++) world.engine.post(i * 1000, () => arrivals.set(i + 1, world.free.size));
    for (let t = 0; t <= 4 * jobs * 1000; t += 600_000)
      world.engine.post(t, () => out.cell.push({ t: t / 1000, free: world.free.size, running: world.busy, heldS: { ...held } }));
  };
  const arrivals = new Map<number, number>();
  const r = runSim({ workload: { ...wl, setup }, policy: spec, seed, truth });
  out.counters = r.counters;
  return out;
}

const t0 = performance.now();
const mine = run(pol.spec);
const orc = run({ name: 'oracle' });
const perf = (j: JobInfo): number => Math.min(1, j.ideal / (j.finish - j.arrival));
const pairs: { id: number; ratio: number; a: JobInfo; o: JobInfo }[] = [];
for (const [id, a] of mine.jobs) {
  const o = orc.jobs.get(id);
  if (o && a.finish > 0 && o.finish > 0) pairs.push({ id, ratio: perf(a) / perf(o), a, o });
}
pairs.sort((x, y) => x.ratio - y.ratio);
const med = (xs: number[]): number => (xs.length ? quantile(xs, 0.5) : NaN);
const r1 = (x: number): number => Math.round(x * 10) / 10;

function describe(name: string, ps: typeof pairs): Record<string, unknown> {
  const fam = new Map<string, number>();
  for (const p of ps) fam.set(p.a.label, (fam.get(p.a.label) ?? 0) + 1);
  const tenths = new Array<number>(10).fill(0);
  for (const p of ps) {
    const k = Math.min(9, Math.floor((10 * p.a.arrival) / (jobs * 1000)));
    tenths[k] = (tenths[k] ?? 0) + 1;
  }
  const side = (k: 'a' | 'o'): Record<string, number> => ({
    beforeFirstS: r1(med(ps.map((p) => (p[k].firstStart - p[k].arrival) / 1000))),
    firstToLastS: r1(med(ps.map((p) => (p[k].lastStart - p[k].firstStart) / 1000))),
    runningS: r1(med(ps.map((p) => (p[k].finish - p[k].lastStart) / 1000))),
    responseS: r1(med(ps.map((p) => (p[k].finish - p[k].arrival) / 1000))),
    freeAtArrival: r1(med(ps.map((p) => p[k].freeAtArrival))),
    slowestSpeed: Math.round(1000 * med(ps.map((p) => p[k].slowestSpeed))) / 1000,
    acceptableShare: r1(
      (100 * ps.reduce((n, p) => n + p[k].acceptable, 0)) /
        Math.max(
          1,
          ps.reduce((n, p) => n + p[k].tasks, 0),
        ),
    ),
  });
  return {
    kind: 'worst',
    name,
    jobs: ps.length,
    ratioMax: r1(100 * (ps[ps.length - 1]?.ratio ?? NaN)),
    families: Object.fromEntries([...fam].sort((x, y) => y[1] - x[1])),
    arrivalTenths: tenths,
    tasksMedian: med(ps.map((p) => p.a.tasks)),
    idealMedianS: r1(med(ps.map((p) => p.a.ideal / 1000))),
    [pol.name]: side('a'),
    oracle: side('o'),
  };
}

console.log(JSON.stringify({ kind: 'run', truth: truth.name, seed, jobs, policy: pol.name, counters: mine.counters }));
for (let i = 0; i < Math.max(mine.cell.length, orc.cell.length); i++) {
  const a = mine.cell[i];
  const o = orc.cell[i];
  if (!a && !o) continue;
  const sum = (h: Record<string, number> | undefined): number => Math.round(Object.values(h ?? {}).reduce((x, y) => x + y, 0) / 3600);
  console.log(
    JSON.stringify({
      kind: 'cell',
      t: (a ?? o)?.t,
      free: [a?.free, o?.free],
      running: [a?.running, o?.running],
      ruHours: [sum(a?.heldS), sum(o?.heldS)],
    }),
  );
}
const lastA = mine.cell[mine.cell.length - 1]?.heldS ?? {};
const lastO = orc.cell[orc.cell.length - 1]?.heldS ?? {};
console.log(
  JSON.stringify({
    kind: 'ruHoursByFamily',
    byFamily: Object.fromEntries(Object.keys({ ...lastA, ...lastO }).map((f) => [f, [Math.round((lastA[f] ?? 0) / 3600), Math.round((lastO[f] ?? 0) / 3600)]])),
  }),
);
console.log(
  JSON.stringify({
    kind: 'families',
    note: '[policy, oracle]: run time over time alone on its platform; platform speed over best; % judged acceptable',
    byFamily: Object.fromEntries(
      Object.keys(mine.fam).map((f) => {
        const a = mine.fam[f] as Run['fam'][string];
        const o = orc.fam[f] ?? { n: 1, slow: NaN, speed: NaN, acceptable: 0 };
        return [
          f,
          {
            slowdown: [a.slow / a.n, o.slow / o.n].map((x) => Math.round(100 * x) / 100),
            speed: [a.speed / a.n, o.speed / o.n].map((x) => Math.round(1000 * x) / 1000),
            acceptablePct: r1((100 * a.acceptable) / a.n),
          },
        ];
      }),
    ),
  }),
);
console.log(JSON.stringify(describe('worst 1%', pairs.slice(0, Math.ceil(pairs.length * 0.01)))));
console.log(JSON.stringify(describe('worst 5%', pairs.slice(0, Math.ceil(pairs.length * 0.05)))));
for (let k = 0; k < 10; k++) {
  const ps = pairs.filter((p) => Math.floor((10 * p.a.arrival) / (jobs * 1000)) === k).map((p) => p.ratio);
  ps.sort((x, y) => x - y);
  console.log(
    JSON.stringify({
      kind: 'tenth',
      tenth: k,
      jobs: ps.length,
      meanPctOracle: r1((100 * ps.reduce((x, y) => x + y, 0)) / ps.length),
      p5: r1(100 * quantile(ps, 0.05)),
    }),
  );
}
{
  const ps = pairs.map((p) => p.ratio).sort((x, y) => x - y);
  const mp = (k: 'a' | 'o'): number => r1((100 * pairs.reduce((x, p) => x + perf(p[k]), 0)) / pairs.length);
  console.log(JSON.stringify({ kind: 'perf', policyPctIdeal: mp('a'), oraclePctIdeal: mp('o'), pctOracle: r1((100 * mp('a')) / mp('o')) }));
  console.log(
    JSON.stringify({
      kind: 'all',
      jobs: ps.length,
      meanRatio: r1((100 * ps.reduce((x, y) => x + y, 0)) / ps.length),
      p1: r1(100 * quantile(ps, 0.01)),
      p5: r1(100 * quantile(ps, 0.05)),
      below50: r1((100 * ps.filter((x) => x < 0.5).length) / ps.length),
    }),
  );
}
console.log(JSON.stringify({ kind: 'done', s: Math.round((performance.now() - t0) / 1000) }));
