/**
 * The simulator itself: calibration of the ground-truth model and the engine's speed.
 */
import { calibrate } from '../calibrate.ts';
import { runSim } from '../run.ts';
import { w3, w4 } from '../workloads.ts';
import { type Runner, f1, f2, base } from './common.ts';

export const calibrateExp: Runner = (ctx) => {
  const t0 = performance.now();
  const loads = [0.5, 0.8, 0.9];
  const rowsC = calibrate({ loads, seed: ctx.seed });
  const rows = rowsC.map((r) => ({
    load: r.load,
    profile: r.profile,
    latencyCritical: r.latencyCritical ? 'yes' : 'no',
    p50: r.slowdown.p50,
    p95: r.slowdown.p95,
  }));
  return {
    ...base('calibrate', 'Performance model calibration: slowdown under interference-blind random placement (hetero-400, W3 mix)', ctx, t0),
    rows,
    tables: [
      {
        title: 'Median [p95] slowdown by profile and load',
        head: ['profile', 'latency-critical', ...loads.map((l) => `${l * 100}%`)],
        rows: [...new Set(rows.map((r) => r.profile))].map((p) => [
          p,
          rows.find((r) => r.profile === p)?.latencyCritical ?? '',
          ...loads.map((l) => {
            const x = rows.find((r) => r.profile === p && r.load === l);
            return x ? `${f2(x.p50)} [${f2(x.p95)}]` : '-';
          }),
        ]),
      },
    ],
    charts: [
      {
        file: 'calibrate.svg',
        title: 'Median slowdown under random placement',
        xTitle: 'profile',
        yTitle: 'median slowdown',
        points: rows.map((r) => ({ x: r.profile, y: r.p50, series: `load ${r.load * 100}%` })),
        pointsOnly: true,
      },
    ],
    paper: 'Tarcil Fig. 1a, 15a: interference-blind placement at 80% load slows sensitive jobs 1.5–3× (the calibration target of the ground-truth model).',
  };
};

export const speed: Runner = (ctx) => {
  const t0 = performance.now();
  const jobs = ctx.quick ? 2000 : 10_000;
  let peak = 0;
  const sample = (): void => {
    const m = process.memoryUsage().rss;
    if (m > peak) peak = m;
  };
  ctx.progress(0, 2, 'W4 sparrow 80%');
  const r4 = runSim({ workload: w4({ load: 0.8, jobs }), policy: { name: 'sparrow' }, seed: ctx.seed, onProgress: sample });
  sample();
  ctx.progress(1, 2, 'W3 tarcil');
  const r3 = runSim({ workload: w3({ jobs: ctx.quick ? 1200 : 7200 }), policy: { name: 'tarcil' }, seed: ctx.seed, onProgress: sample });
  sample();
  ctx.progress(2, 2, 'done');
  const rows = [r4, r3].map((r) => ({
    workload: r.workload,
    policy: r.policy,
    tasks: r.stats.tasks,
    events: r.stats.events,
    wallS: r.stats.wallMs / 1000,
    tasksPerSec: r.stats.tasks / (r.stats.wallMs / 1000),
    tasksPerMin: (60 * r.stats.tasks) / (r.stats.wallMs / 1000),
    eventsPerSec: r.stats.events / (r.stats.wallMs / 1000),
    simS: r.stats.simMs / 1000,
  }));
  return {
    ...base('speed', 'Simulator speed: task placements per second and peak memory', ctx, t0),
    rows,
    tables: [
      {
        title: `Speed (peak RSS of the process ${(peak / 2 ** 20).toFixed(0)} MiB)`,
        head: ['workload', 'policy', 'tasks', 'events', 'wall s', 'tasks/s', 'tasks/min', 'events/s', 'virtual s'],
        rows: rows.map((x) => [
          x.workload,
          x.policy,
          x.tasks,
          x.events,
          f1(x.wallS),
          Math.round(x.tasksPerSec),
          Math.round(x.tasksPerMin),
          Math.round(x.eventsPerSec),
          f1(x.simS),
        ]),
      },
    ],
    charts: [],
    extra: { peakRssMiB: peak / 2 ** 20 },
    paper: 'Target: ≥ 1 million simulated tasks a minute; a W3 run in under 30 s.',
  };
};
