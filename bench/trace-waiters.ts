/**
 * The pods that wait in the sped-up replay of a production trace, seed by seed: `tarcil bench
 * trace` reports p99 waits by size, and for the largest pods (a few dozen) that p99 is the wait of
 * one or two of them, which moves by minutes from one seed to the next. This runs the sped-up
 * replay (the trace's arrivals at 50% of the cores, durations kept) of one or more policies over
 * several seeds, counts the pods that production scheduled and the replay made wait more than a
 * second, and lists those that waited more than --over seconds, with the quality of all
 * placements, so that a change to how pods are placed is judged over seeds, not by one.
 *
 * Run: npx tsx bench/trace-waiters.ts --nodes <node list> --pods <pod list> [--seeds 1,2,3,4,5]
 *      [--policies tarcil] [--over 60] [--name trace-waiters]
 * Results: bench/results/trace-alibaba-2023/<name>.{md,json}.
 */
import { parseArgs } from 'node:util';
import { loadCatalog } from '../src/model/catalog.ts';
import { SPED_UP_LOAD } from '../src/sim/experiments/trace.ts';
import { replayTrace, speedupFor, TRACE_POLICIES, type TracePolicy } from '../src/sim/experiments/trace-run.ts';
import { loadTrace } from '../src/workload/trace.ts';
import { fmt, machine, mdTable, resultsDir, writeResults } from './lib/report.ts';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string' },
    pods: { type: 'string' },
    seeds: { type: 'string', default: '1,2,3,4,5' },
    policies: { type: 'string', default: 'tarcil' },
    over: { type: 'string', default: '60' },
    name: { type: 'string', default: 'trace-waiters' },
  },
});
if (!values.nodes || !values.pods) throw new Error("--nodes and --pods: the trace's node and pod lists (their format: docs/traces.md)");
const seeds = values.seeds.split(',').map(Number);
const over = Number(values.over);
const policies = values.policies.split(',') as TracePolicy[];
for (const p of policies) if (!TRACE_POLICIES.includes(p)) throw new Error(`--policies: each one of ${TRACE_POLICIES.join(', ')}`);

interface Row {
  policy: string;
  seed: number;
  /** Pods production scheduled that the replay made wait more than 1 s. */
  waiting: number;
  /** Those that waited more than --over s: [cores, wait s], largest first. */
  long: [number, number][];
  /** The sum of their waits. */
  sumLongS: number;
  maxWaitS: number;
  meanQ: number;
  p5Q: number;
  wallS: number;
}

const rows: Row[] = [];
const t0 = performance.now();
for (const seed of seeds) {
  const trace = loadTrace(values.nodes, values.pods, { format: 'alibaba', compress: 1, profiles: [...loadCatalog().workloads.keys()], seed });
  const speedup = speedupFor(trace, SPED_UP_LOAD);
  for (const policy of policies) {
    const r = replayTrace(trace, policy, { seed, speedup });
    const waiting = r.outcomes
      .filter((o) => !o.neverScheduled && (o.waitS === undefined || o.waitS > 1))
      .map((o): [number, number] => [o.tasks, o.waitS ?? Infinity])
      .sort((a, b) => b[0] - a[0] || b[1] - a[1]);
    const long = waiting.filter((w) => w[1] > over);
    const waits = waiting.map((w) => w[1]);
    const row: Row = {
      policy,
      seed,
      waiting: waiting.length,
      long,
      sumLongS: long.reduce((a, w) => a + w[1], 0),
      maxWaitS: waits.length ? Math.max(...waits) : 0,
      meanQ: r.quality.meanQ,
      p5Q: r.quality.p5Q,
      wallS: r.wallMs / 1000,
    };
    rows.push(row);
    console.log(JSON.stringify(row));
  }
}

const md = [
  '# Pods that wait in the sped-up trace replay, seed by seed',
  '',
  `\`npx tsx bench/trace-waiters.ts --nodes ${values.nodes.split('/').pop()} --pods ${values.pods.split('/').pop()} --seeds ${values.seeds} --policies ${values.policies} --over ${values.over} --name ${values.name}\` on ${machine()}; ${fmt((performance.now() - t0) / 1000, 0)} s.`,
  '',
  `Of the pods production scheduled: how many waited more than 1 s in the replay, those that waited more than ${over} s (cores: wait in s) and the sum of their waits, the longest wait, and the quality Q of all placements.`,
  '',
  mdTable(
    ['policy', 'seed', 'pods waiting > 1 s', `pods waiting > ${over} s (cores: s)`, 'sum of their waits, s', 'longest, s', 'mean Q', 'p5 Q'],
    rows.map((r) => [
      r.policy,
      String(r.seed),
      String(r.waiting),
      r.long.map(([c, w]) => `${c}: ${fmt(w, 0)}`).join(', ') || '-',
      fmt(r.sumLongS, 0),
      fmt(r.maxWaitS, 0),
      fmt(r.meanQ, 4),
      fmt(r.p5Q, 4),
    ]),
  ),
  '',
].join('\n');
writeResults(values.name, { seeds, policies, rows }, md, resultsDir(false, 'trace-alibaba-2023'));
console.log(md);
