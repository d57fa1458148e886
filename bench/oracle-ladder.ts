/**
 * Where the oracle's lead over tarcil comes from: the oracle with one thing it knows taken away
 * at a time, on W3 under every truth of `tarcil bench truths`, read against the full oracle on the
 * same jobs (mean performance, % of the oracle's; the 5th-percentile job, % of the oracle's figure
 * for it). The rungs, each keeping the ones above taken away (src/sim/policies/oracle.ts
 * OracleOptions):
 *
 *   1. sampled: only the servers of R·m free RUs drawn uniformly for a job of m tasks (tarcil's R);
 *   2. declared: each job's declared vector instead of its real one (differs under profile error);
 *   3. believes committed: scores by the committed truth's constants (differs under gain and power);
 *   4. own speed only: scores the newcomer's own predicted speed, not what it costs the residents;
 *
 * and then tarcil's default. What is left between rung 3 and tarcil is what tarcil reads and does
 * differently with the same knowledge: Q (lexicographic, by tolerance) instead of the slowdown
 * model, run times it does not know, its waiters' order, its view and commits. Rung 4 tells how
 * much of rung 3's lead is its weighing of the residents (it scores as one-sided Q does).
 *
 * Run: npx tsx bench/oracle-ladder.ts [--seeds 1,2,3 | ''] [--r 8] [--out bench/results/truths/oracle-ladder]
 * Each run's row is added to `ladder.json` in the folder (a row of the same truth, rung and seed
 * replaced), and `ladder.md` is written from all of them, so seeds may run one after another into
 * one folder (processes run side by side each need a folder of their own, their rows merged after).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { quantileSorted } from 'simple-statistics';
import { COMMITTED_TRUTH } from '../src/model/perf.ts';
import { perfByJob, ratiosToOracle, TRUTHS } from '../src/sim/experiments/truths.ts';
import type { PolicySpec } from '../src/sim/policies/index.ts';
import { runSim } from '../src/sim/run.ts';
import { w3 } from '../src/sim/workloads.ts';
import { ladderTable, type LadderRow } from './lib/ladder-table.ts';

const { values } = parseArgs({
  options: {
    seeds: { type: 'string', default: '1,2,3' },
    r: { type: 'string', default: '8' },
    out: { type: 'string', default: join('bench', 'results', 'truths', 'oracle-ladder') },
  },
});
// `--seeds ''` runs nothing and writes the reports from the rows kept.
const seeds = values.seeds
  .split(',')
  .filter((x) => x.trim() !== '')
  .map(Number);
if (seeds.some((s) => !Number.isInteger(s) || s < 1)) throw new Error(`--seeds: must be positive integers between commas (got '${values.seeds}')`);
const R = Number(values.r);
if (!Number.isInteger(R) || R < 1) throw new Error(`--r: must be an integer ≥ 1 (got '${values.r}')`);

const RUNGS: { name: string; spec: PolicySpec }[] = [
  { name: `oracle, sampled (R = ${R})`, spec: { name: 'oracle', oracle: { sampleR: R } } },
  { name: 'oracle, sampled, declared profiles', spec: { name: 'oracle', oracle: { sampleR: R, declared: true } } },
  { name: 'oracle, sampled, declared, committed constants', spec: { name: 'oracle', oracle: { sampleR: R, declared: true, believes: COMMITTED_TRUTH.perf } } },
  {
    name: 'oracle, sampled, declared, committed constants, own speed only',
    spec: { name: 'oracle', oracle: { sampleR: R, declared: true, believes: COMMITTED_TRUTH.perf, ownOnly: true } },
  },
  { name: 'tarcil (default)', spec: { name: 'tarcil' } },
];

type Row = LadderRow;

mkdirSync(values.out, { recursive: true });
const file = join(values.out, 'ladder.json');
const rows: Row[] = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Row[]) : [];
const keep = (r: Row): void => {
  const i = rows.findIndex((x) => x.truth === r.truth && x.rung === r.rung && x.seed === r.seed);
  if (i >= 0) rows[i] = r;
  else rows.push(r);
  writeFileSync(file, `${JSON.stringify(rows, null, 1)}\n`);
};

for (const seed of seeds) {
  for (const truth of TRUTHS) {
    const o = runSim({ workload: w3({ jobs: 7200 }), policy: { name: 'oracle' }, seed, truth });
    const byJob = perfByJob(o.records);
    for (const rung of RUNGS) {
      const t0 = performance.now();
      const r = runSim({ workload: w3({ jobs: 7200 }), policy: rung.spec, seed, truth });
      const ratios = ratiosToOracle(r.records, byJob).map((x) => x.ratio);
      const row: Row = {
        truth: truth.name,
        rung: rung.name,
        seed,
        pctOracle: (100 * r.summary.perfMean) / o.summary.perfMean,
        p5PctOracle: 100 * quantileSorted(ratios, 0.05),
        s: Math.round((performance.now() - t0) / 1000),
      };
      console.log(JSON.stringify(row));
      keep(row);
    }
  }
}

const md = [
  "# The oracle's lead, rung by rung (`bench/oracle-ladder.ts`)",
  '',
  "W3 (7,200 jobs) under every truth. Each rung takes one more thing away from the oracle; the last column is tarcil's default.",
  '',
  ladderTable(rows),
  '',
].join('\n');
writeFileSync(join(values.out, 'ladder.md'), md);
console.log(`wrote ${join(values.out, 'ladder.{json,md}')}`);
