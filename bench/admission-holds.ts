/**
 * What admission's holds buy on W3: tarcil's default configuration with admission control on and
 * off, at the simulator's queue bound (twice each job's ideal time, within [10 ms, 10 s]) and at
 * fixed bounds (`--bounds`, ms: 30000 is a live job's default), under the ground truths of
 * `tarcil bench truths`, against the oracle on the same jobs. One JSON line per run: % of the
 * oracle, the 5th-percentile job as % of the oracle's figure for it, the shares of response lost
 * to waiting and to interference, and admission's verdicts (to wait, to place at best effort).
 *
 * `--gaps` runs W3 at other loads: the mean gap between arrivals, ms (W3's is 1000, 54% of the
 * cell's cores in nominal work; 800 is 68%, 700 77%, 600 90%).
 *
 * Run: npx tsx bench/admission-holds.ts [--truths 'committed,gain 2.5'] [--seed 1] [--bounds 0,5000,30000] [--gaps 1000,700]
 * (a bound of 0: the simulator's own, twice the ideal)
 */
import { parseArgs } from 'node:util';
import { quantileSorted } from 'simple-statistics';
import { ratiosToOracle } from '../src/sim/experiments/truths.ts';
import { w3Flags } from './lib/w3-flags.ts';
import type { PolicySpec } from '../src/sim/policies/index.ts';
import { runSim } from '../src/sim/run.ts';
import { w3 } from '../src/sim/workloads.ts';

const { values } = parseArgs({
  options: {
    truths: { type: 'string', default: 'committed,gain 2.5' },
    seed: { type: 'string', default: '1' },
    bounds: { type: 'string', default: '0,5000,30000' },
    jobs: { type: 'string', default: '7200' },
    gaps: { type: 'string', default: '1000' },
  },
});
const { truths, seed, jobs, gaps } = w3Flags(values);
const bounds = values.bounds.split(',').map(Number);
if (bounds.some((b) => !Number.isFinite(b) || b < 0)) throw new Error('--bounds: must be numbers ≥ 0 (ms), between commas');

for (const truth of truths) {
  for (const gap of gaps) {
    const workload = () => w3({ jobs, interArrivalMs: gap });
    const o = runSim({ workload: workload(), policy: { name: 'oracle' }, seed, truth });
    const byJob = new Map(o.records.map((x) => [x.arrival, Math.min(1, x.ideal / x.response)]));
    for (const bound of bounds) {
      for (const admission of [true, false]) {
        const spec: PolicySpec = { name: 'tarcil', core: { admission }, ...(bound > 0 ? { maxQueueMs: bound } : {}) };
        const r = runSim({ workload: workload(), policy: spec, seed, truth });
        const ratios = ratiosToOracle(r.records, byJob).map((x) => x.ratio);
        let resp = 0;
        let wait = 0;
        let interference = 0;
        for (const x of r.records) {
          resp += x.response;
          wait += x.loss.wait;
          interference += x.loss.interference;
        }
        console.log(
          JSON.stringify({
            truth: truth.name,
            seed,
            offered: +workload().offered.toFixed(3),
            bound: bound > 0 ? bound : '2 × ideal',
            admission,
            pctOracle: +((100 * r.summary.perfMean) / o.summary.perfMean).toFixed(2),
            p5PctOracle: +(100 * quantileSorted(ratios, 0.05)).toFixed(1),
            lostWaitPct: +((100 * wait) / resp).toFixed(2),
            lostInterferencePct: +((100 * interference) / resp).toFixed(2),
            verdictsWait: r.counters.queued ?? 0,
            verdictsBestEffort: r.counters.bestEffort ?? 0,
          }),
        );
      }
    }
  }
}
