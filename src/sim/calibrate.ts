/**
 * The calibration figure of the performance model: fill a cluster to a load with the W3 mix placed
 * at random (interference-blind), then read the model's slowdown for every task. The model is
 * calibrated to 1.5–3× on sensitive jobs at 80% load, what the paper measured (Tarcil Fig. 1a, 15a).
 */
import { N_RESOURCES } from '../model/types.ts';
import { SeededRng } from '../util/rng.ts';
import { dist, type Dist } from './metrics.ts';
import { slowdown, type PerfParams, DEFAULT_PERF } from '../model/perf.ts';
import { catalog } from './workloads.ts';
import { expandCluster } from '../model/catalog.ts';

export interface CalibrationRow {
  load: number;
  profile: string;
  latencyCritical: boolean;
  slowdown: Dist;
}

export function calibrate(opts: { loads: number[]; seed: number; cluster?: string; perf?: PerfParams }): CalibrationRow[] {
  const c = catalog();
  const spec = c.clusters.get(opts.cluster ?? 'hetero-400');
  if (!spec) throw new Error('unknown cluster');
  const servers = expandCluster(spec, c.platforms);
  const profiles = [...c.workloads.values()].filter((p) => p.family !== 'tpch');
  const rows: CalibrationRow[] = [];
  for (const load of opts.loads) {
    const rng = new SeededRng(opts.seed);
    const ids: { s: number; p: number }[] = [];
    for (let s = 0; s < servers.length; s++) for (let i = 0; i < (servers[s]?.rus ?? 0); i++) ids.push({ s, p: -1 });
    // Random placement: each RU is occupied with probability `load`, by a random profile.
    for (const x of ids) if (rng.next() < load) x.p = rng.int(profiles.length);
    const sums = servers.map(() => new Float64Array(N_RESOURCES));
    for (const x of ids) {
      if (x.p < 0) continue;
      const caused = (profiles[x.p] as { caused: number[] }).caused;
      const sum = sums[x.s] as Float64Array;
      for (let r = 0; r < N_RESOURCES; r++) sum[r] = (sum[r] as number) + (caused[r] as number);
    }
    const by = new Map<number, number[]>();
    for (const x of ids) {
      if (x.p < 0) continue;
      const p = profiles[x.p];
      const srv = servers[x.s];
      if (!p || !srv) continue;
      const list = by.get(x.p) ?? [];
      list.push(slowdown(p.caused, sums[x.s] as Float64Array, srv.rus, opts.perf ?? DEFAULT_PERF));
      by.set(x.p, list);
    }
    for (const [k, xs] of [...by].sort((a, b) => a[0] - b[0])) {
      const p = profiles[k];
      if (p) rows.push({ load, profile: p.name, latencyCritical: p.latencyCritical, slowdown: dist(xs) });
    }
  }
  return rows;
}
