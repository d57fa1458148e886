/**
 * The run-time loop's parts one at a time on W3 under one ground truth of `tarcil bench truths`:
 * what bench/README (truths) cites for the default's choice. One run after another in this
 * thread, one line of JSON per run: mean performance (% of ideal), the share of response time
 * spent before the last task's (re)start (a moved task restarts), and the counters of admission,
 * blocks, moves and learning.
 *
 * Run: npx tsx bench/truths-ablate.ts [--truth committed] [--jobs 7200] [--seed 1] variant...
 * Variants: none, block, move, learn, block+move+learn (any '+' of block, move, learn), each with
 * the default two-sided Q, or prefixed `one-sided:` for the paper's Q (`one-sided:move`).
 */
import { parseArgs } from 'node:util';
import { TRUTHS } from '../src/sim/experiments/truths.ts';
import type { PolicySpec } from '../src/sim/policies/index.ts';
import { runSim } from '../src/sim/run.ts';
import { w3 } from '../src/sim/workloads.ts';

const { values, positionals } = parseArgs({
  options: { truth: { type: 'string', default: 'committed' }, jobs: { type: 'string', default: '7200' }, seed: { type: 'string', default: '1' } },
  allowPositionals: true,
});
const truth = TRUTHS.find((t) => t.name === values.truth);
if (!truth) throw new Error(`--truth: one of ${TRUTHS.map((t) => t.name).join(', ')}`);
const PARTS = new Set(['block', 'move', 'learn']);

function spec(variant: string): PolicySpec {
  const [q, parts] = variant.startsWith('one-sided:') ? [false, variant.slice('one-sided:'.length)] : [true, variant];
  const runtime: Record<string, boolean> = {};
  if (parts !== 'none') {
    for (const p of parts.split('+')) {
      if (!PARTS.has(p)) throw new Error(`unknown part '${p}' (block, move, learn, or none)`);
      runtime[p] = true;
    }
  }
  return { name: 'tarcil', core: { twoSided: q }, runtime };
}

for (const variant of positionals.length ? positionals : ['none', 'block', 'move', 'learn']) {
  const t0 = performance.now();
  const r = runSim({ workload: w3({ jobs: Number(values.jobs) }), policy: spec(variant), seed: Number(values.seed), truth });
  let wait = 0;
  let resp = 0;
  for (const x of r.records) {
    wait += x.loss.wait;
    resp += x.response;
  }
  const c = r.counters;
  const keep = ['queued', 'bestEffort', 'conflicts', 'blocks', 'moves', 'moveLostWorkMs', 'moveNoGain', 'moveNoBetterRu', 'observations'];
  console.log(
    JSON.stringify({
      truth: truth.name,
      variant,
      seed: Number(values.seed),
      pctIdeal: +(100 * r.summary.perfMean).toFixed(2),
      waitPct: +((100 * wait) / resp).toFixed(2),
      ...Object.fromEntries(keep.filter((k) => k in c).map((k) => [k, Math.round(c[k] as number)])),
      s: Math.round((performance.now() - t0) / 1000),
    }),
  );
}
