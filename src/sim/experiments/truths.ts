/**
 * `tarcil bench truths`: every policy on W3 under every ground truth of the robustness table — the
 * committed one, the interference gain at 1.0 and 2.5, the power at 1.5, and each job's real vector
 * drawn around its declared one at sd 5 and 10 points — each reported as % of
 * ideal and % of the oracle (src/sim/policies/oracle.ts: the clairvoyant greedy bound), with the
 * worst jobs against the oracle's figure for the same job. So a change to the core shows its effect
 * under every truth at once, and "% of ideal" (which no scheduler reaches: the ideal has no
 * interference term) is read against what is attainable.
 *
 * The run also writes `truths-summary.json`: one row per truth, policy and seed. A run into a folder
 * that already holds one adds to it (mergeSummary): `--seed 2` after `--seed 1` leaves the rows of
 * both, a rerun of a seed replaces that seed's rows of the policies it ran.
 */
import { makeTruth, COMMITTED_TRUTH, type Truth } from '../../model/perf.ts';
import { quantileSorted } from 'simple-statistics';
import type { JobRecord } from '../metrics.ts';
import { defaultSimRuntime, type PolicySpec } from '../policies/index.ts';
import { runSim, type RunResult } from '../run.ts';
import { w3 } from '../workloads.ts';
import { base, f1, sweep, type ExperimentContext, type ExperimentResult, type Runner, type Table } from './common.ts';

/** The truths of the table, the committed one first. */
export const TRUTHS: readonly Truth[] = [
  COMMITTED_TRUTH,
  makeTruth('gain 1.0', { gain: 1 }),
  makeTruth('gain 2.5', { gain: 2.5 }),
  makeTruth('power 1.5', { power: 1.5 }),
  makeTruth('profile error sd 5', { profileErrorSd: 5 }),
  makeTruth('profile error sd 10', { profileErrorSd: 10 }),
];

export interface TruthPolicy {
  /** The name in the tables and the summary; the default configuration is `tarcil`. */
  name: string;
  spec: PolicySpec;
  /** Kept in the quick run. */
  quick?: boolean;
}

export const ORACLE = 'oracle';

/**
 * Every policy of the table, the practical ones in the order of the table, the oracle last.
 * `tarcil` is the default configuration, live and simulated (DEFAULT_AGENT_CONFIG and
 * DEFAULT_RUNTIME, src/agent/defaults.ts); the other tarcil rows take one part away, add moves, serve waiting jobs by arrival, weigh the neighbours below T_W fully (the default before), hold jobs with admission control (the default before), keep no short-task reserve (the default before) or half the default's. The
 * oracle rows after the bound show it without the reserve (the bound before) and with a larger one.
 */
export const TRUTH_POLICIES: readonly TruthPolicy[] = [
  { name: 'tarcil', spec: { name: 'tarcil' }, quick: true },
  { name: 'tarcil, no run-time loop', spec: { name: 'tarcil', runtime: {} } },
  { name: "tarcil, paper's Q, no loop", spec: { name: 'tarcil', core: { twoSided: false }, runtime: {} } },
  { name: 'tarcil + moves', spec: { name: 'tarcil', runtime: { ...defaultSimRuntime(), move: true } } },
  { name: 'tarcil, arrival order', spec: { name: 'tarcil', core: { waitOrder: 'arrival' } } },
  { name: 'tarcil, neighbours at full weight', spec: { name: 'tarcil', core: { neighbourWeight: 1 } } },
  { name: 'tarcil, admission on', spec: { name: 'tarcil', core: { admission: true } } },
  { name: 'tarcil, no reserve', spec: { name: 'tarcil', core: { shortReserve: 0 } } },
  { name: 'tarcil, reserve 5%', spec: { name: 'tarcil', core: { shortReserve: 0.05 } } },
  { name: 'centralized', spec: { name: 'centralized' }, quick: true },
  { name: 'delay', spec: { name: 'delay-dynamic' } },
  { name: 'pigeon', spec: { name: 'pigeon' } },
  { name: 'sparrow', spec: { name: 'sparrow' }, quick: true },
  { name: 'random', spec: { name: 'random' } },
  { name: ORACLE, spec: { name: 'oracle' }, quick: true },
  { name: 'oracle, no reserve', spec: { name: 'oracle', oracle: { reserve: 0 } } },
  { name: 'oracle, reserve 40%', spec: { name: 'oracle', oracle: { reserve: 0.4 } } },
];

/** One row of `truths-summary.json`; every figure in percent. */
export interface TruthSummaryRow {
  truth: string;
  policy: string;
  seed: number;
  /** Mean over jobs of ideal / response. */
  pctIdeal: number;
  /** That mean over the oracle's mean on the same jobs (same truth, same seed). */
  pctOracle: number;
  /** 5th percentile over jobs of the job's performance over the oracle's for that job. */
  p5PctOracle: number;
}

const key = (x: TruthSummaryRow): string => `${x.truth}|${x.policy}|${x.seed}`;

/**
 * The summary of several runs: the previous rows, less those the new run has again (same truth,
 * policy and seed), then the new ones; ordered by seed, truth and policy (the tables' orders, names
 * they do not know after them). A run at another seed, or of other policies, adds to what is there.
 */
export function mergeSummary(previous: readonly TruthSummaryRow[], next: readonly TruthSummaryRow[]): TruthSummaryRow[] {
  const fresh = new Set(next.map(key));
  const rank = (names: readonly string[], n: string): number => {
    const k = names.indexOf(n);
    return k < 0 ? names.length : k;
  };
  const truths = TRUTHS.map((t) => t.name);
  const policies = TRUTH_POLICIES.map((p) => p.name);
  return [...previous.filter((x) => !fresh.has(key(x))), ...next].sort(
    (a, b) =>
      a.seed - b.seed ||
      rank(truths, a.truth) - rank(truths, b.truth) ||
      a.truth.localeCompare(b.truth) ||
      rank(policies, a.policy) - rank(policies, b.policy) ||
      a.policy.localeCompare(b.policy),
  );
}

/** The rows of a `truths-summary.json` as read back; anything else is refused, naming what is wrong. */
export function parseSummary(text: string): TruthSummaryRow[] {
  const v: unknown = JSON.parse(text);
  if (!Array.isArray(v)) throw new Error('truths-summary.json: must be an array of rows');
  return v.map((x: unknown, i) => {
    const r = x as Partial<TruthSummaryRow> | null;
    const ok =
      r !== null &&
      typeof r === 'object' &&
      typeof r.truth === 'string' &&
      typeof r.policy === 'string' &&
      Number.isInteger(r.seed) &&
      ['pctIdeal', 'pctOracle', 'p5PctOracle'].every((k) => typeof r[k as keyof TruthSummaryRow] === 'number');
    if (!ok) throw new Error(`truths-summary.json: row ${i} must have truth, policy, seed, pctIdeal, pctOracle and p5PctOracle`);
    return r as TruthSummaryRow;
  });
}

const summaryText = (rows: readonly TruthSummaryRow[]): string => `${JSON.stringify(rows, null, 1)}\n`;

interface Cell {
  truth: Truth;
  policy: TruthPolicy;
  seed: number;
}

/** A job's performance (Tarcil Fig. 15a: ideal / response, at most 1), keyed by its arrival (unique in W3). */
export function perfByJob(records: readonly JobRecord[]): Map<number, number> {
  const m = new Map<number, number>();
  for (const x of records) m.set(x.arrival, Math.min(1, x.ideal / x.response));
  return m;
}

/** Each job's performance over the oracle's for the same job, with its record, worst first; jobs one of the two did not finish are left out. */
export function ratiosToOracle(records: readonly JobRecord[], oracle: ReadonlyMap<number, number>): { ratio: number; rec: JobRecord }[] {
  const out: { ratio: number; rec: JobRecord }[] = [];
  for (const rec of records) {
    const o = oracle.get(rec.arrival);
    if (o !== undefined && o > 0) out.push({ ratio: Math.min(1, rec.ideal / rec.response) / o, rec });
  }
  return out.sort((a, b) => a.ratio - b.ratio);
}

/** Where the response time of these jobs went beyond their ideal, % of their summed response (metrics.lossSplit). */
function lostShares(recs: readonly JobRecord[]): { wait: number; platform: number; interference: number } {
  let resp = 0;
  const l = { wait: 0, platform: 0, interference: 0 };
  for (const x of recs) {
    resp += x.response;
    l.wait += x.loss.wait;
    l.platform += x.loss.platform;
    l.interference += x.loss.interference;
  }
  const pct = (v: number): number => (resp > 0 ? (100 * v) / resp : NaN);
  return { wait: pct(l.wait), platform: pct(l.platform), interference: pct(l.interference) };
}

/** The most frequent label (workload family) among these jobs, with its share. */
function topLabel(recs: readonly JobRecord[]): string {
  const n = new Map<string, number>();
  for (const x of recs) n.set(x.label, (n.get(x.label) ?? 0) + 1);
  let best = '';
  let k = 0;
  for (const [l, c] of n) if (c > k) [best, k] = [l, c];
  return recs.length ? `${best} ${Math.round((100 * k) / recs.length)}%` : '-';
}

const mean = (xs: readonly number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

/** The cost of a cell for the worker threads: the tarcil variants under profile error or gain 2.5 run longest. */
function cost(c: Cell): number {
  const heavy = c.truth.profileErrorSd * 4 + (c.truth.perf.gain > 2 ? 60 : 0);
  if (c.policy.spec.name === 'tarcil') return (1 + heavy) * (c.policy.spec.runtime?.move ? 1.5 : 1);
  return c.policy.spec.name === 'centralized' ? 3 : 1;
}

/** What one `bench truths` run covers: the full and quick sizes, or a smaller one (tests). */
export interface TruthsSize {
  jobs: number;
  seeds: number[];
  truths: readonly Truth[];
  /** The oracle among them: every other policy is read against it. */
  policies: readonly TruthPolicy[];
}

/**
 * The full run is one seed (`--seed`, default 1): under gain 2.5 and profile error the tarcil
 * variants' W3 runs overload the cell in its second half and take minutes each, so seeds are run
 * one after another into the same folder (`--seed 2`, then `--seed 3`): `truths-summary.json` then
 * holds the rows of every seed run (mergeSummary), the report files the last run's.
 */
export function truthsSize(ctx: ExperimentContext): TruthsSize {
  return ctx.quick
    ? { jobs: 1000, seeds: [ctx.seed], truths: TRUTHS, policies: TRUTH_POLICIES.filter((p) => p.quick) }
    : { jobs: 7200, seeds: [ctx.seed], truths: TRUTHS, policies: onlyPolicies(TRUTH_POLICIES, process.env[TRUTHS_POLICIES_ENV]) };
}

/**
 * A reduced run: `TARCIL_TRUTHS_POLICIES=tarcil,centralized` runs those rows only, the oracle
 * always (every row is read against it); the report's command says so. Names with a comma of
 * their own ("tarcil, paper's Q, no loop") are given with `;` between the names instead.
 */
export const TRUTHS_POLICIES_ENV = 'TARCIL_TRUTHS_POLICIES';

export function onlyPolicies(all: readonly TruthPolicy[], names: string | undefined): readonly TruthPolicy[] {
  if (!names) return all;
  const want = new Set(
    names
      .split(names.includes(';') ? ';' : ',')
      .map((x) => x.trim())
      .filter(Boolean),
  );
  for (const n of want)
    if (!all.some((p) => p.name === n)) throw new Error(`${TRUTHS_POLICIES_ENV}: no policy '${n}' (known: ${all.map((p) => p.name).join(', ')})`);
  return all.filter((p) => want.has(p.name) || p.name === ORACLE);
}

export const truthsExp: Runner = (ctx) => runTruths(ctx, truthsSize(ctx));

export function runTruths(ctx: ExperimentContext, size: TruthsSize): ExperimentResult {
  const t0 = performance.now();
  const { jobs, seeds, policies, truths } = size;
  if (!policies.some((p) => p.name === ORACLE)) throw new Error(`bench truths: the policies must include '${ORACLE}'`);
  const cells: Cell[] = [];
  for (const seed of seeds) for (const truth of truths) for (const policy of policies) cells.push({ truth, policy, seed });
  const res = sweep(
    ctx,
    cells,
    (c) => `${c.truth.name} seed ${c.seed} ${c.policy.name}`,
    (c) => {
      const r = runSim({ workload: w3({ jobs }), policy: c.policy.spec, seed: c.seed, truth: c.truth });
      // Only the job records cross back from a worker: the utilisation series is not used here.
      return { ...r, util: [] } satisfies RunResult;
    },
    { cost },
  );
  const oracleOf = new Map<string, { mean: number; byJob: Map<number, number> }>();
  for (const { cell, r } of res) {
    if (cell.policy.name !== ORACLE) continue;
    oracleOf.set(`${cell.truth.name}|${cell.seed}`, { mean: r.summary.perfMean, byJob: perfByJob(r.records) });
  }
  const rows = res.map(({ cell, r }) => {
    const o = oracleOf.get(`${cell.truth.name}|${cell.seed}`);
    if (!o) throw new Error(`no oracle run for ${cell.truth.name}, seed ${cell.seed}`);
    const pairs = ratiosToOracle(r.records, o.byJob);
    const ratios = pairs.map((x) => x.ratio);
    const q = (p: number): number => (ratios.length ? quantileSorted(ratios, p) : NaN);
    // Where the time went: every job, and the worst 5% against the oracle.
    const all = lostShares(r.records);
    const worst = pairs.slice(0, Math.max(1, Math.ceil(pairs.length * 0.05))).map((x) => x.rec);
    const w = lostShares(worst);
    return {
      truth: cell.truth.name,
      policy: cell.policy.name,
      seed: cell.seed,
      jobs: r.summary.jobs,
      pctIdeal: 100 * r.summary.perfMean,
      pctOracle: (100 * r.summary.perfMean) / o.mean,
      p1PctOracle: 100 * q(0.01),
      p5PctOracle: 100 * q(0.05),
      below50PctOracle: ratios.length ? (100 * ratios.filter((x) => x < 0.5).length) / ratios.length : NaN,
      worstPctIdeal: 100 * r.summary.perfWorst,
      lostWaitPct: all.wait,
      lostPlatformPct: all.platform,
      lostInterferencePct: all.interference,
      worst5LostWaitPct: w.wait,
      worst5LostPlatformPct: w.platform,
      worst5LostInterferencePct: w.interference,
      worst5TopFamily: topLabel(worst),
      queued: r.counters.queued ?? 0,
      bestEffort: r.counters.bestEffort ?? 0,
      conflicts: r.counters.conflicts ?? 0,
      moves: r.counters.moves ?? 0,
      blocks: r.counters.blocks ?? 0,
      unfinished: r.stats.unfinished,
      wallMs: r.stats.wallMs,
    };
  });
  const summary: TruthSummaryRow[] = rows.map((x) => ({
    truth: x.truth,
    policy: x.policy,
    seed: x.seed,
    pctIdeal: x.pctIdeal,
    pctOracle: x.pctOracle,
    p5PctOracle: x.p5PctOracle,
  }));
  type Num = { [K in keyof (typeof rows)[number]]: (typeof rows)[number][K] extends number ? K : never }[keyof (typeof rows)[number]];
  const avg = (truth: string, policy: string, k: Num): number => mean(rows.filter((x) => x.truth === truth && x.policy === policy).map((x) => x[k]));
  const seedNote = seeds.length > 1 ? `mean of seeds ${seeds.join(', ')}` : `seed ${seeds[0]}`;
  const grid = (title: string, fmt: (truth: string, policy: string) => string): Table => ({
    title,
    head: ['truth', ...policies.map((p) => p.name)],
    rows: truths.map((t) => [t.name, ...policies.map((p) => fmt(t.name, p.name))]),
  });
  const tables: Table[] = [
    grid(
      `W3 (${jobs} jobs, hetero-400): mean performance, % of ideal [% of the oracle], ${seedNote}`,
      (t, p) => `${f1(avg(t, p, 'pctIdeal'))} [${f1(avg(t, p, 'pctOracle'))}]`,
    ),
    grid(
      `The worst jobs against the oracle's figure for the same job: 1st / 5th percentile of job performance as % of the oracle's, and the share of jobs below 50% of it (${seedNote})`,
      (t, p) => (p === ORACLE ? '-' : `${f1(avg(t, p, 'p1PctOracle'))} / ${f1(avg(t, p, 'p5PctOracle'))} / ${f1(avg(t, p, 'below50PctOracle'))}%`),
    ),
    {
      title: `Where the time went beyond ideal, % of response time: all jobs wait / platform / interference; the worst 5% against the oracle the same, and their most frequent family (${seedNote === `seed ${seeds[0]}` ? seedNote : `seed ${seeds[0]}`} for the family)`,
      head: ['truth', 'policy', 'all jobs', 'worst 5%', 'worst 5%: family', 'jobs held / best effort', 'conflicts', 'moves / blocks'],
      rows: truths.flatMap((t) =>
        policies
          .filter((p) => p.name.startsWith('tarcil') || p.name === 'centralized' || p.name === ORACLE)
          .map((p) => {
            const a = (k: Num): string => f1(avg(t.name, p.name, k));
            const first = rows.find((x) => x.truth === t.name && x.policy === p.name && x.seed === seeds[0]);
            return [
              t.name,
              p.name,
              `${a('lostWaitPct')} / ${a('lostPlatformPct')} / ${a('lostInterferencePct')}`,
              `${a('worst5LostWaitPct')} / ${a('worst5LostPlatformPct')} / ${a('worst5LostInterferencePct')}`,
              first?.worst5TopFamily ?? '-',
              `${a('queued')} / ${a('bestEffort')}`,
              a('conflicts'),
              `${a('moves')} / ${a('blocks')}`,
            ];
          }),
      ),
    },
  ];
  return {
    ...base('truths', 'Every policy under every ground truth: W3 as % of ideal and % of the oracle, and the worst jobs against the oracle', ctx, t0),
    ...(!ctx.quick && policies.length < TRUTH_POLICIES.length
      ? {
          extra: {
            command: `${TRUTHS_POLICIES_ENV}="${policies.map((p) => p.name).join(policies.some((p) => p.name.includes(',')) ? ';' : ',')}" tarcil bench truths --seed ${ctx.seed}`,
          },
        }
      : {}),
    rows,
    tables,
    charts: [
      {
        file: 'truths.svg',
        title: `W3: mean performance as % of the oracle by truth (${seedNote})`,
        xTitle: 'truth',
        yTitle: '% of the oracle',
        points: truths.flatMap((t) =>
          policies.filter((p) => p.name !== ORACLE).map((p) => ({ x: t.name, y: avg(t.name, p.name, 'pctOracle'), series: p.name })),
        ),
        pointsOnly: true,
      },
    ],
    files: [
      { name: 'truths-summary.json', text: summaryText(mergeSummary([], summary)), merge: (prev) => summaryText(mergeSummary(parseSummary(prev), summary)) },
    ],
    paper:
      "Tarcil §6.3 (Fig. 15a): Tarcil at 97% of optimal on W3 on average, the worst job 8% below; centralized 82%. The paper's optimal is measured, the simulator's ideal has no interference term; the oracle here is the attainable bound (clairvoyant greedy placement on the truth itself).",
  };
}
