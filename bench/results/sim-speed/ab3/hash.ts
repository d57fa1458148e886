import { createHash } from 'node:crypto';
const root = process.argv[2] as string;
const { runSim } = await import(`${root}/src/sim/run.ts`);
const W = await import(`${root}/src/sim/workloads.ts`);
const cases: [string, () => unknown, string, boolean][] = [
  ['w4-1k-sparrow', () => W.w4({ load: 0.8, jobs: 1500, workers: 1000 }), 'sparrow', true],
  ['w4-1k-nocancel', () => W.w4({ load: 0.8, jobs: 800, workers: 1000 }), 'sparrow-nocancel', true],
  ['w4-1k-batch', () => W.w4({ load: 0.8, jobs: 800, workers: 1000 }), 'sparrow-batch', true],
  ['w4-1k-pertask', () => W.w4({ load: 0.8, jobs: 800, workers: 1000 }), 'sparrow-per-task', true],
  ['w4-1k-random', () => W.w4({ load: 0.8, jobs: 800, workers: 1000 }), 'random', true],
  ['w4-1k-omni', () => W.w4({ load: 0.8, jobs: 800, workers: 1000 }), 'omniscient', true],
  ['w4-1k-pigeon', () => W.w4({ load: 0.8, jobs: 800, workers: 1000 }), 'pigeon', true],
  ['w2-res-sparrow', () => W.w2({ variant: 'resident', queries: 150 }), 'sparrow', true],
  ['w2-res-sparrow-pt', () => W.w2({ variant: 'resident', queries: 100 }), 'sparrow-per-task', true],
  ['w2-res-tarcil', () => W.w2({ variant: 'resident', queries: 100 }), 'tarcil', true],
  ['w3-tarcil', () => W.w3({ jobs: 600 }), 'tarcil', true],
  ['w3-sparrow', () => W.w3({ jobs: 600 }), 'sparrow', true],
  ['w4-1k-stream', () => W.w4({ load: 0.8, jobs: 1500, workers: 1000 }), 'sparrow', false],
];
for (const seed of [1, 3]) for (const [name, wl, pol, keep] of cases) {
  const r = runSim({ workload: wl(), policy: { name: pol }, seed, keepRecords: keep });
  const { wallMs, ...stats } = r.stats;
  if (stats.timing) delete (stats as { timing?: unknown }).timing;
  const h = createHash('sha256').update(JSON.stringify({ s: r.summary, c: r.counters, stats, rec: r.records, util: r.util })).digest('hex').slice(0, 16);
  console.log(seed, name, h, r.summary.response?.mean, stats.events);
}
