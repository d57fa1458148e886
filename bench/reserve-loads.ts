/**
 * What the short-task reserve (src/agent/short-reserve.ts) does as the cell fills: W3 at several
 * loads (`--gaps`, the mean gap between arrivals in ms: 1000 is W3's own, 54% of the cell's cores
 * in nominal work; 800 is 68%, 700 77%, 600 90%), under the ground truths of `tarcil bench truths`,
 * tarcil at each reserve share of `--shares` (0: none; by default 0 and the default share) and
 * the oracle at each share other than the default's. Every figure is against the oracle of the default (the reserve's default share), as
 * in `bench truths`. One JSON line per run: % of the oracle, the 5th-percentile job as % of the
 * oracle's figure for it, the share of response lost to waiting, the mean performance of the jobs
 * of long classes and of short ones (% of ideal), and how often the reserve held a job back.
 *
 * Run: npx tsx bench/reserve-loads.ts [--truths 'committed,gain 2.5'] [--seed 1] [--gaps 1000,700] [--shares 0,0.05,0.1]
 */
import { parseArgs } from 'node:util';
import { quantileSorted } from 'simple-statistics';
import { SHORT_RESERVE } from '../src/agent/defaults.ts';
import { ratiosToOracle } from '../src/sim/experiments/truths.ts';
import { w3Flags } from './lib/w3-flags.ts';
import type { PolicySpec } from '../src/sim/policies/index.ts';
import { runSim } from '../src/sim/run.ts';
import { w3 } from '../src/sim/workloads.ts';

const { values } = parseArgs({
  options: {
    truths: { type: 'string', default: 'committed,gain 2.5,profile error sd 10' },
    seed: { type: 'string', default: '1' },
    jobs: { type: 'string', default: '7200' },
    gaps: { type: 'string', default: '1000,800,700,600' },
    shares: { type: 'string', default: `0,${SHORT_RESERVE}` },
  },
});
const { truths, seed, jobs, gaps } = w3Flags(values);
const shares = values.shares.split(',').map(Number);
if (shares.some((s) => !(s >= 0 && s < 1))) throw new Error('--shares: must be numbers in [0, 1), between commas');

/** W3's families whose tasks run longer than its mean task (about 2 minutes): the key-value services, streaming, SPEC, PARSEC. */
const LONG_FAMILIES = new Set(['memcached', 'cassandra', 'storm', 'spec-cpu2006', 'parsec']);

for (const truth of truths) {
  for (const gap of gaps) {
    const workload = () => w3({ jobs, interArrivalMs: gap });
    const o = runSim({ workload: workload(), policy: { name: 'oracle' }, seed, truth });
    const byJob = new Map(o.records.map((x) => [x.arrival, Math.min(1, x.ideal / x.response)]));
    const runs: { policy: string; spec: PolicySpec }[] = [
      ...shares.map((s) => ({ policy: `tarcil, reserve ${s}`, spec: { name: 'tarcil', core: { shortReserve: s } } })),
      // The oracle at the default share is the run above, the yardstick.
      ...shares.filter((s) => s !== SHORT_RESERVE).map((s) => ({ policy: `oracle, reserve ${s}`, spec: { name: 'oracle', oracle: { reserve: s } } })),
    ];
    console.log(
      JSON.stringify({ truth: truth.name, seed, offered: +workload().offered.toFixed(3), policy: `oracle, reserve ${SHORT_RESERVE}`, pctOracle: 100 }),
    );
    for (const { policy, spec } of runs) {
      const r = runSim({ workload: workload(), policy: spec, seed, truth });
      const ratios = ratiosToOracle(r.records, byJob).map((x) => x.ratio);
      let resp = 0;
      let wait = 0;
      const perf = { long: { sum: 0, n: 0 }, short: { sum: 0, n: 0 } };
      for (const x of r.records) {
        resp += x.response;
        wait += x.loss.wait;
        const side = LONG_FAMILIES.has(x.label) ? perf.long : perf.short;
        side.sum += Math.min(1, x.ideal / x.response);
        side.n++;
      }
      console.log(
        JSON.stringify({
          truth: truth.name,
          seed,
          offered: +workload().offered.toFixed(3),
          policy,
          pctOracle: +((100 * r.summary.perfMean) / o.summary.perfMean).toFixed(2),
          p5PctOracle: +(100 * quantileSorted(ratios, 0.05)).toFixed(1),
          lostWaitPct: +((100 * wait) / resp).toFixed(2),
          longPctIdeal: +((100 * perf.long.sum) / (perf.long.n || 1)).toFixed(1),
          shortPctIdeal: +((100 * perf.short.sum) / (perf.short.n || 1)).toFixed(1),
          reserveHolds: r.counters.reserveHolds ?? 0,
        }),
      );
    }
  }
}
