// The simulator tables of bench/README.md and the live cell's full ceiling run, rendered from
// the committed results files under bench/results/<experiment>/. Each generated table sits in the README between
// `<!-- table:ID -->` and `<!-- /table -->`; `renderBlocks` rewrites those blocks and
// `checkBlocks` names each block whose text differs from what its results file gives.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ladderTable, type LadderRow } from './ladder-table.ts';

/** One experiment's JSON report, as `tarcil bench <experiment>` writes it. */
export interface ResultsDoc {
  name?: string;
  rows: Record<string, unknown>[];
  tables?: { title: string; head: string[]; rows: unknown[][] }[];
}

/** The results files a table reads: path under the results root → parsed JSON. */
export type ResultsSet = Map<string, unknown>;

export interface TableSpec {
  id: string;
  /** Results files the table needs, relative to the results root. */
  files: (root: string) => string[];
  render: (set: ResultsSet) => string;
}

export interface BlockDiff {
  id: string;
  problem: 'differs' | 'unknown table' | 'unclosed marker';
  expected?: string;
  actual?: string;
}

// ---- formatting -------------------------------------------------------------------------------

const fixed = (x: number, d: number): string => (Number.isFinite(x) ? x.toFixed(d) : '–');
const f1 = (x: number): string => fixed(x, 1);
const f2 = (x: number): string => fixed(x, 2);
const f3 = (x: number): string => fixed(x, 3);
const pct = (share: number): string => `${f1(share * 100)}%`;
const thousands = (x: number): string => Math.round(x).toLocaleString('en-US');
const loadLabel = (load: number): string => `${Math.round(load * 1000) / 10}%`;

/** A markdown table, one line per row, no trailing newline. */
export function markdownTable(head: string[], rows: string[][]): string {
  const line = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}

// ---- reading results --------------------------------------------------------------------------

function doc(set: ResultsSet, file: string): ResultsDoc {
  const value = set.get(file);
  if (value === undefined) throw new Error(`readme-tables: results file ${file} was not loaded`);
  const d = value as ResultsDoc;
  if (!Array.isArray(d.rows)) throw new Error(`readme-tables: ${file}: field "rows" must be an array`);
  return d;
}

function num(row: Record<string, unknown>, field: string, file: string): number {
  const v = row[field];
  if (typeof v !== 'number') throw new Error(`readme-tables: ${file}: field "${field}" must be a number in every row (got ${JSON.stringify(v)})`);
  return v;
}

/** The one row of `file` matching every key of `where`; throws naming the file and the keys when none or several match. */
function row(set: ResultsSet, file: string, where: Record<string, unknown>): Record<string, unknown> {
  const found = doc(set, file).rows.filter((r) => Object.entries(where).every(([k, v]) => r[k] === v));
  if (found.length !== 1) {
    throw new Error(`readme-tables: ${file}: ${found.length} rows match ${JSON.stringify(where)}, expected exactly one`);
  }
  return found[0]!;
}

const value = (set: ResultsSet, file: string, where: Record<string, unknown>, field: string): number => num(row(set, file, where), field, file);

function distinct<T>(set: ResultsSet, file: string, field: string): T[] {
  const out: T[] = [];
  for (const r of doc(set, file).rows) if (!out.includes(r[field] as T)) out.push(r[field] as T);
  return out;
}

function experimentTable(set: ResultsSet, file: string, titleStart: string): { head: string[]; rows: string[][] } {
  const t = doc(set, file).tables?.find((x) => x.title.startsWith(titleStart));
  if (!t) throw new Error(`readme-tables: ${file}: no table titled "${titleStart}…"`);
  return { head: t.head, rows: t.rows.map((r) => r.map(String)) };
}

/** Seed folders of an experiment that runs one seed at a time: seed 1 at the top, seed N in `seed-N/`. */
function seedFiles(root: string, experiment: string, file: string): { seed: number; path: string }[] {
  const out = [{ seed: 1, path: `${experiment}/${file}` }];
  const dir = join(root, experiment);
  if (existsSync(dir)) {
    for (const entry of readdirSync(dir)) {
      const m = /^seed-(\d+)$/.exec(entry);
      if (m && existsSync(join(dir, entry, file))) out.push({ seed: Number(m[1]), path: `${experiment}/${entry}/${file}` });
    }
  }
  return out.sort((a, b) => a.seed - b.seed);
}

// ---- the tables -------------------------------------------------------------------------------

const one = (experiment: string) => (): string[] => [`${experiment}/${experiment}.json`];
const F = (experiment: string): string => `${experiment}/${experiment}.json`;

const SAMPLE_LOADS = [0.1, 0.5, 0.7, 0.8, 0.9];
const LOAD_LOADS = [0.1, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95];
const W2_LOADS = [0.1, 0.15, 0.2, 0.25, 0.3, 0.35];
const SPARROW_LOADS = [0.5, 0.7, 0.8, 0.9];
const SPARROW_POLICIES: [string, string][] = [
  ['random', 'random'],
  ['sparrow-per-task', 'per-task'],
  ['sparrow-batch', 'batch'],
  ['sparrow', 'batch + late binding'],
];
/** The truths table's columns, each shown when the run has it (a reduced run has fewer): the default first. */
const TRUTH_POLICIES: [name: string, head: string][] = [
  ['tarcil', 'tarcil (default)'],
  ['tarcil, no run-time loop', 'no run-time loop'],
  ["tarcil, paper's Q, no loop", "paper's Q, no loop"],
  ['tarcil + moves', '+ moves'],
  ['tarcil, arrival order', 'arrival order'],
  ['tarcil, neighbours at full weight', 'neighbours at full weight'],
  ['tarcil, admission on', 'admission on'],
  ['tarcil, no reserve', 'no reserve'],
  ['tarcil, reserve 5%', 'reserve 5%'],
  ...['centralized', 'delay', 'pigeon', 'sparrow', 'random'].map((p): [string, string] => [p, p]),
  ['oracle, no reserve', 'oracle, no reserve'],
  ['oracle, reserve 40%', 'oracle, reserve 40%'],
];
const W3_PAPER: Record<string, string> = {
  tarcil: '97% mean, worst −8%',
  centralized: '82% mean',
  sparrow: '> 75% of jobs degraded',
  random: '—',
};
const W2_PAPER: Record<string, string> = {
  'W2-unloaded': 'Sparrow within 8% on average; tarcil p95 1.8–2.4× lower',
  'W2-resident': 'tarcil within 6% of unloaded, ahead of Sparrow',
  'W2-hetero': 'tarcil close to unloaded',
};

export const TABLES: TableSpec[] = [
  {
    id: 'sample-size',
    files: one('sample-size'),
    render: (s) => {
      const f = F('sample-size');
      return markdownTable(
        ['R', ...SAMPLE_LOADS.map(loadLabel)],
        distinct<number>(s, f, 'R').map((R) => [String(R), ...SAMPLE_LOADS.map((load) => f1(value(s, f, { R, load }, 'respMeanMs')))]),
      );
    },
  },
  {
    id: 'agents',
    files: one('agents'),
    render: (s) => {
      const f = F('agents');
      const loads = [0.7, 0.8, 0.9];
      return markdownTable(
        ['agents', ...loads.map((l) => `${loadLabel(l)}`)],
        distinct<number>(s, f, 'agents').map((agents) => [String(agents), ...loads.map((load) => f2(value(s, f, { agents, load }, 'schedMeanMs')))]),
      );
    },
  },
  {
    id: 'load',
    files: one('load'),
    render: (s) => {
      const f = F('load');
      return markdownTable(
        ['load', ...LOAD_LOADS.map(loadLabel)],
        [
          ['mean ms', ...LOAD_LOADS.map((load) => f1(value(s, f, { load }, 'meanMs')))],
          ['p95 ms', ...LOAD_LOADS.map((load) => f1(value(s, f, { load }, 'p95Ms')))],
        ],
      );
    },
  },
  {
    id: 'duration',
    files: one('duration'),
    render: (s) => {
      const f = F('duration');
      const ds = distinct<number>(s, f, 'durationMs');
      const label = (ms: number): string => (ms < 1000 ? `${ms} ms` : `${ms / 1000} s`);
      return markdownTable(
        ['duration', ...ds.map(label)],
        [
          ['mean / ideal', ...ds.map((durationMs) => f3(value(s, f, { durationMs }, 'meanRatio')))],
          ['p95 / ideal', ...ds.map((durationMs) => f3(value(s, f, { durationMs }, 'p95Ratio')))],
        ],
      );
    },
  },
  {
    id: 'sparrow',
    files: one('sparrow'),
    render: (s) => {
      const f = F('sparrow');
      const ratio = (policy: string, load: number): number => value(s, f, { policy, load }, 'meanMs') / value(s, f, { policy: 'omniscient', load }, 'meanMs');
      return markdownTable(
        ['policy', ...SPARROW_LOADS.map(loadLabel)],
        SPARROW_POLICIES.map(([policy, label]) => [
          label,
          // Sparrow's claim (within 5% of omniscient at 80%) is the figure the section is about.
          ...SPARROW_LOADS.map((load) => (policy === 'sparrow' && load === 0.8 ? `**${f3(ratio(policy, load))}**` : f3(ratio(policy, load)))),
        ]),
      );
    },
  },
  {
    id: 'sparrow-claims',
    files: one('sparrow'),
    render: (s) => {
      const f = F('sparrow');
      const m = (policy: string, load = 0.8, field = 'meanMs'): number => value(s, f, { policy, load }, field);
      const x = (a: number, b: number): string => `${f2(a / b)}×`;
      const signed = (share: number): string => `${share < 0 ? '−' : ''}${f1(Math.abs(share) * 100)}%`;
      const [off, on] = [m('sparrow-nocancel', 0.95, 'p50Ms'), m('sparrow', 0.95, 'p50Ms')];
      return markdownTable(
        ['claim (Sparrow §3, 80% load)', 'paper', 'ours'],
        [
          ['per-task against random', '> 3× better', `${x(m('random'), m('sparrow-per-task'))} better`],
          ['per-task against omniscient', '2.6×', x(m('sparrow-per-task'), m('omniscient'))],
          ['batch against per-task', '0.73×', x(m('sparrow-batch'), m('sparrow-per-task'))],
          ['batch against omniscient', '1.92×', x(m('sparrow-batch'), m('omniscient'))],
          ['batch + late binding against omniscient', 'within 5%', signed(m('sparrow') / m('omniscient') - 1)],
          ['proactive cancellation, median at 95%', '−6%', `${signed(on / off - 1)} (${f1(off)} → ${f1(on)} ms)`],
        ],
      );
    },
  },
  {
    id: 'pigeon',
    files: one('pigeon'),
    render: (s) => {
      const f = F('pigeon');
      const rows: string[][] = [];
      for (const trace of distinct<string>(s, f, 'trace')) {
        for (const load of distinct<number>(s, f, 'load')) {
          const pg = row(s, f, { trace, load, policy: 'pigeon' });
          const sp = row(s, f, { trace, load, policy: 'sparrow' });
          const short = (r: Record<string, unknown>): string =>
            `${f2(num(r, 'shortP50', f))} / ${f2(num(r, 'shortP90', f))} / **${f2(num(r, 'shortP99', f))}**`;
          const long = (r: Record<string, unknown>): string => `${f2(num(r, 'longP50', f))} / ${f2(num(r, 'longP99', f))}`;
          const name = `${trace.charAt(0).toUpperCase()}${trace.slice(1)}`;
          rows.push([`${name} ${loadLabel(load)} (${thousands(num(pg, 'workers', f))})`, short(pg), short(sp), `${long(pg)} against ${long(sp)}`]);
        }
      }
      return markdownTable(
        ['trace, load (workers)', 'pigeon short p50 / p90 / p99', 'sparrow short p50 / p90 / p99', 'long p50 / p99, pigeon against sparrow'],
        rows,
      );
    },
  },
  {
    id: 'fairshare',
    files: one('fairshare'),
    render: (s) => {
      const f = F('fairshare');
      const names: Record<string, string> = { fair: 'fair share', 'no-fair': 'no fair share', 'b-alone': 'B alone' };
      return markdownTable(
        ['run', 'admission', 'B wait p50 / p99 ms', 'A wait p50 / p99 ms', 'A holds', 'B holds'],
        doc(s, f).rows.map((r) => {
          const a = r.aJobs === 0 ? '—' : `${f1(num(r, 'aWaitP50Ms', f))} / ${f1(num(r, 'aWaitP99Ms', f))}`;
          return [
            names[String(r.cell)] ?? String(r.cell),
            String(r.admission),
            `${f1(num(r, 'bWaitP50Ms', f))} / ${f1(num(r, 'bWaitP99Ms', f))}`,
            a,
            pct(num(r, 'aHeldShare', f)),
            pct(num(r, 'bHeldShare', f)),
          ];
        }),
      );
    },
  },
  {
    id: 'speed',
    files: one('speed'),
    render: (s) => {
      const f = F('speed');
      return markdownTable(
        ['workload', 'policy', 'tasks', 'wall s', 'tasks a minute'],
        doc(s, f).rows.map((r) => [
          String(r.workload),
          String(r.policy),
          thousands(num(r, 'tasks', f)),
          f1(num(r, 'wallS', f)),
          thousands(num(r, 'tasksPerMin', f)),
        ]),
      );
    },
  },
  {
    id: 'w2-load',
    files: one('w2-load'),
    render: (s) => {
      const f = F('w2-load');
      const rows: string[][] = [];
      for (const [variant, cluster] of [
        ['resident', 'homogeneous'],
        ['hetero', 'heterogeneous'],
      ] as const) {
        for (const policy of ['tarcil', 'sparrow']) {
          rows.push([
            `${cluster}, ${policy}`,
            ...W2_LOADS.map((load) => {
              const r = row(s, f, { variant, policy, load });
              return `${f2(num(r, 'meanRatio', f))}${r.saturated === 'yes' ? ' *' : ''}`;
            }),
          ]);
        }
      }
      return markdownTable(['cluster, policy', ...W2_LOADS.map(loadLabel)], rows);
    },
  },
  {
    id: 'compare-w3',
    files: one('compare'),
    render: (s) => {
      const f = F('compare');
      return markdownTable(
        ['policy', 'mean perf', 'worst job', '> 10% degraded', 'overhead mean / p95 ms', 'paper (Fig. 15a/d)'],
        Object.entries(W3_PAPER).map(([policy, paper]) => {
          const r = row(s, f, { workload: 'W3', policy });
          const mean = pct(num(r, 'perfMean', f));
          return [
            policy,
            policy === 'tarcil' ? `**${mean}**` : mean,
            pct(num(r, 'perfWorst', f)),
            pct(num(r, 'degraded', f)),
            `${f1(num(r, 'schedMeanMs', f))} / ${f1(num(r, 'schedP95Ms', f))}`,
            paper,
          ];
        }),
      );
    },
  },
  {
    id: 'compare-w2',
    files: one('compare'),
    render: (s) => {
      const t = experimentTable(s, F('compare'), 'W2 per query type');
      const cell = (workload: string, policy: string): string => {
        const r = t.rows.find((x) => x[0] === workload && x[1] === policy);
        if (!r) throw new Error(`readme-tables: compare.json: no per-type ratio for ${workload} / ${policy}`);
        return `${r[2]} / ${r[3]}`;
      };
      const names: Record<string, string> = { 'W2-unloaded': 'unloaded', 'W2-resident': '40% resident', 'W2-hetero': 'heterogeneous + resident' };
      const policies = ['sparrow', 'centralized', 'delay-fixed', 'delay-dynamic'];
      return markdownTable(
        ['W2 variant', 'sparrow mean / p95', ...policies.slice(1), 'paper (Fig. 13)'],
        Object.entries(W2_PAPER).map(([w, paper]) => [names[w]!, ...policies.map((p) => cell(w, p)), paper]),
      );
    },
  },
  {
    id: 'ablation',
    files: one('ablation'),
    render: (s) => {
      const f = F('ablation');
      return markdownTable(
        ['variant', 'mean perf', 'worst', '> 10% degraded', 'lost: wait / platform / interference'],
        doc(s, f).rows.map((r) => [
          String(r.variant),
          pct(num(r, 'perfMean', f)),
          pct(num(r, 'perfWorst', f)),
          pct(num(r, 'degraded', f)),
          ['lostWait', 'lostPlatform', 'lostInterference'].map((k) => pct(num(r, k, f))).join(' / '),
        ]),
      );
    },
  },
  {
    id: 'mechanisms',
    files: one('mechanisms'),
    render: (s) => {
      const f = F('mechanisms');
      const workloads = distinct<string>(s, f, 'workload');
      const variants = distinct<string>(s, f, 'variant');
      return markdownTable(
        ['variant', ...workloads],
        variants.map((variant) => [
          variant,
          ...workloads.map((workload) => {
            const r = doc(s, f).rows.find((x) => x.workload === workload && x.variant === variant);
            return r ? pct(num(r, 'perfMean', f)) : '—';
          }),
        ]),
      );
    },
  },
  {
    id: 'mechanisms-error',
    files: one('mechanisms-error'),
    render: (s) => {
      const f = F('mechanisms-error');
      const sds = distinct<number>(s, f, 'profileErrorSd');
      return markdownTable(
        ['variant', ...sds.map((sd) => `sd ${sd}`)],
        distinct<string>(s, f, 'variant').map((variant) => [
          variant,
          ...sds.map((profileErrorSd) => pct(value(s, f, { variant, profileErrorSd }, 'perfMean'))),
        ]),
      );
    },
  },
  {
    id: 'robustness',
    files: one('robustness'),
    render: (s) => {
      const f = F('robustness');
      const sds = distinct<number>(s, f, 'profileErrorSd');
      const kinds: [string, number, string][] = [
        ['tarcil', 0, 'tarcil'],
        ['tarcil', 1, 'tarcil, profiles that learn'],
        ['centralized', 0, 'centralized'],
      ];
      return markdownTable(
        ['policy', ...sds.map((sd) => `sd ${sd}`)],
        kinds.map(([policy, learn, label]) => [
          label,
          ...sds.map((profileErrorSd) => {
            const r = row(s, f, { policy, learn, profileErrorSd });
            return `${pct(num(r, 'perfMean', f))} [${pct(num(r, 'perfWorst', f))}]`;
          }),
        ]),
      );
    },
  },
  {
    id: 'truths',
    files: (root) => seedFiles(root, 'truths', 'truths-summary.json').map((x) => x.path),
    render: (s) => {
      // A row per truth, policy and seed (several seeds' runs add to one summary; a seed-N folder's adds its own).
      const byKey = new Map<string, Record<string, unknown>>();
      for (const file of [...s.keys()].filter((k) => k.startsWith('truths/') && k.endsWith('truths-summary.json')).sort((a, b) => seedOf(a) - seedOf(b))) {
        const v = s.get(file);
        if (!Array.isArray(v)) throw new Error(`readme-tables: ${file} must be an array of rows`);
        for (const r of v as Record<string, unknown>[]) {
          const seed = typeof r.seed === 'number' ? r.seed : seedOf(file);
          const key = `${String(r.truth)}|${String(r.policy)}|${seed}`;
          if (!byKey.has(key)) byKey.set(key, { ...r, seed, file });
        }
      }
      const rows = [...byKey.values()];
      const seeds = [...new Set(rows.map((r) => r.seed as number))].sort((a, b) => a - b);
      const at = (truth: string, policy: string, seed: number, field: string): string => {
        const r = rows.find((x) => x.truth === truth && x.policy === policy && x.seed === seed);
        return r ? f1(num(r, field, String(r.file))) : '–';
      };
      const truths: string[] = [];
      for (const r of rows) if (!truths.includes(String(r.truth))) truths.push(String(r.truth));
      const across = (truth: string, policy: string, field: string): string => seeds.map((seed) => at(truth, policy, seed, field)).join(' / ');
      const caption = `Mean performance as % of the oracle (the 5th-percentile job as % of the oracle's figure for it; last column: the oracle as % of ideal), seed${seeds.length > 1 ? 's' : ''} ${seeds.join(' / ')}; – where a seed's run did not have the policy:`;
      const cols = TRUTH_POLICIES.filter(([p]) => rows.some((r) => r.policy === p));
      // The 5th-percentile job of the default, and of the rows it was chosen against when the run has them.
      const P5 = new Set([
        'tarcil',
        "tarcil, paper's Q, no loop",
        'tarcil, arrival order',
        'tarcil, neighbours at full weight',
        'tarcil, admission on',
        'tarcil, no reserve',
        'tarcil, reserve 5%',
      ]);
      const p5 = TRUTH_POLICIES.filter(([p]) => P5.has(p) && rows.some((r) => r.policy === p));
      return `${caption}\n\n${markdownTable(
        ['truth', ...cols.map(([, head]) => head), ...p5.map(([, head]) => `${head}: 5th-percentile job`), 'oracle (% of ideal)'],
        truths.map((t) => [
          t,
          ...cols.map(([p]) => across(t, p, 'pctOracle')),
          ...p5.map(([p]) => across(t, p, 'p5PctOracle')),
          across(t, 'oracle', 'pctIdeal'),
        ]),
      )}`;
    },
  },
  {
    id: 'oracle-ladder',
    files: () => ['truths/oracle-ladder/ladder.json'],
    render: (s) => ladderTable(s.get('truths/oracle-ladder/ladder.json') as LadderRow[]),
  },
  {
    id: 'priorities',
    files: one('priorities'),
    render: (s) => {
      const f = F('priorities');
      const rows: string[][] = [];
      for (const load of distinct<number>(s, f, 'load')) {
        for (const highShare of distinct<number>(s, f, 'highShare')) {
          const cls = (c: string): string => {
            const r = row(s, f, { load, highShare, class: c });
            return `${f1(num(r, 'meanMs', f))} / ${f1(num(r, 'noPrioMeanMs', f))}`;
          };
          rows.push([loadLabel(load), loadLabel(highShare), cls('high'), cls('low')]);
        }
      }
      return markdownTable(['load', 'high-priority share', 'high: mean ms with / without', 'low: mean ms with / without'], rows);
    },
  },
  {
    id: 'calibrate',
    files: one('calibrate'),
    render: (s) => {
      const f = F('calibrate');
      const loads = distinct<number>(s, f, 'load');
      return markdownTable(
        ['profile', 'latency-critical', ...loads.map(loadLabel)],
        distinct<string>(s, f, 'profile').map((profile) => {
          const at = loads.map((load) => row(s, f, { profile, load }));
          return [profile, String(at[0]!.latencyCritical), ...at.map((r) => `${f2(num(r, 'p50', f))} [${f2(num(r, 'p95', f))}]`)];
        }),
      );
    },
  },
  {
    id: 'ceiling',
    files: () => ['ceiling/ceiling-10k-60s.json', 'ceiling/ceiling-summary.json'],
    render: (s) => {
      const f = 'ceiling/ceiling-10k-60s.json';
      const run = s.get(f) as { steps?: Record<string, unknown>[] } | undefined;
      const summary = s.get('ceiling/ceiling-summary.json') as { commit?: unknown; machine?: unknown } | undefined;
      if (!Array.isArray(run?.steps)) throw new Error(`readme-tables: ${f}: field "steps" must be an array`);
      const list = (r: Record<string, unknown>, field: string): number[] => {
        const v = r[field];
        if (!Array.isArray(v) || v.length < 1 || !v.every((x) => typeof x === 'number')) {
          throw new Error(`readme-tables: ${f}: field "${field}" must be a list of numbers (median, low, high) in every step`);
        }
        return v;
      };
      /** A step's split by process (`cores`, `msPerTask`): every part a number, or an error naming it. */
      const parts = (r: Record<string, unknown>, field: string): Record<'all' | 'frontEnds' | 'hollow' | 'etcd' | 'bench', number> => {
        const v = r[field] as Record<string, unknown> | undefined;
        for (const k of ['all', 'frontEnds', 'hollow', 'etcd', 'bench']) {
          if (typeof v?.[k] !== 'number') throw new Error(`readme-tables: ${f}: field "${field}.${k}" must be a number in every step`);
        }
        return v as Record<'all' | 'frontEnds' | 'hollow' | 'etcd' | 'bench', number>;
      };
      const split = (x: Record<'all' | 'frontEnds' | 'hollow' | 'etcd' | 'bench', number>): string =>
        `${f2(x.all)} (${[x.frontEnds, x.hollow, x.etcd, x.bench].map(f2).join(' · ')})`;
      const head = `Commit ${String(summary?.commit)}, ${String(summary?.machine)}; medians of the minutes from the second on, (low–high):`;
      const table = markdownTable(
        [
          'offered tasks/s',
          'placed/s',
          'submit → running p50 / p99 ms',
          'cores busy of 2',
          'CPU ms per task: all (front-ends · hollow · etcd · bench)',
          'keys / events per task',
          'acknowledged = final, audit violations',
        ],
        run.steps.map((r) => {
          const [placed, lo, hi] = list(r, 'placed');
          const p99 = list(r, 'p99');
          return [
            thousands(num(r, 'offered', f)),
            `${thousands(placed!)} (${thousands(lo!)}–${thousands(hi!)})`,
            `${thousands(list(r, 'p50')[0]!)} / ${thousands(p99[0]!)} (${thousands(p99[1]!)}–${thousands(p99[2]!)})`,
            f2(parts(r, 'cores').all),
            split(parts(r, 'msPerTask')),
            `${f2(num(r, 'keysPerTask', f))} / ${f1(num(r, 'eventsPerTask', f))}`,
            `${thousands(num(r, 'acked', f))}${num(r, 'acked', f) === num(r, 'final', f) ? '' : ` (final ${thousands(num(r, 'final', f))})`}, ${num(r, 'violations', f)}`,
          ];
        }),
      );
      return `${head}\n\n${table}`;
    },
  },
  {
    id: 'sim-speed',
    files: one('sim-speed'),
    render: (s) => {
      const f = F('sim-speed');
      return markdownTable(
        ['case', 'wall s', 'peak RSS MiB', 'mean response ms'],
        doc(s, f).rows.map((r) => [String(r.case), f1(num(r, 'wallS', f)), thousands(num(r, 'peakRssMb', f)), f1(num(r, 'meanResponseMs', f))]),
      );
    },
  },
];

function seedOf(file: string): number {
  const m = /\/seed-(\d+)\//.exec(file);
  return m ? Number(m[1]) : 1;
}

// ---- blocks in the README ---------------------------------------------------------------------

const OPEN = /^<!-- table:([a-z0-9-]+) -->$/;
const CLOSE = '<!-- /table -->';

interface Block {
  id: string;
  /** Line index of the opening marker and of the closing one. */
  open: number;
  close: number;
  body: string;
}

/** The generated blocks of a README; a marker left open is reported as `close: -1`. */
export function findBlocks(text: string): Block[] {
  const lines = text.split('\n');
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = OPEN.exec(lines[i]!.trim());
    if (!m) continue;
    let j = i + 1;
    while (j < lines.length && lines[j]!.trim() !== CLOSE && !OPEN.test(lines[j]!.trim())) j++;
    if (j >= lines.length || lines[j]!.trim() !== CLOSE) {
      out.push({ id: m[1]!, open: i, close: -1, body: '' });
      continue;
    }
    out.push({ id: m[1]!, open: i, close: j, body: lines.slice(i + 1, j).join('\n') });
    i = j;
  }
  return out;
}

/** Loads every results file the given tables need. */
export function loadResults(root: string, specs: TableSpec[] = TABLES): ResultsSet {
  const set: ResultsSet = new Map();
  for (const spec of specs) {
    for (const file of spec.files(root)) {
      if (set.has(file)) continue;
      const path = join(root, file);
      if (!existsSync(path)) throw new Error(`readme-tables: table "${spec.id}" needs ${path}, which does not exist`);
      set.set(file, JSON.parse(readFileSync(path, 'utf8')) as unknown);
    }
  }
  return set;
}

const specById = (specs: TableSpec[]): Map<string, TableSpec> => new Map(specs.map((s) => [s.id, s]));

/** The README with every known block rewritten from `results`; unknown or unclosed blocks are left as they are. */
export function renderBlocks(text: string, results: ResultsSet, specs: TableSpec[] = TABLES): string {
  const byId = specById(specs);
  const lines = text.split('\n');
  const blocks = findBlocks(text).filter((b) => b.close >= 0 && byId.has(b.id));
  for (const b of blocks.reverse()) {
    lines.splice(b.open + 1, b.close - b.open - 1, ...byId.get(b.id)!.render(results).split('\n'));
  }
  return lines.join('\n');
}

/** Every block that does not match its results, is unknown, or is not closed; empty when all agree. */
export function checkBlocks(text: string, results: ResultsSet, specs: TableSpec[] = TABLES): BlockDiff[] {
  const byId = specById(specs);
  const out: BlockDiff[] = [];
  for (const b of findBlocks(text)) {
    if (b.close < 0) {
      out.push({ id: b.id, problem: 'unclosed marker' });
      continue;
    }
    const spec = byId.get(b.id);
    if (!spec) {
      out.push({ id: b.id, problem: 'unknown table' });
      continue;
    }
    const expected = spec.render(results);
    if (expected !== b.body) out.push({ id: b.id, problem: 'differs', expected, actual: b.body });
  }
  return out;
}

/** The first line where two renderings part, for a message a reader can act on. */
export function firstDifference(expected: string, actual: string): string {
  const e = expected.split('\n');
  const a = actual.split('\n');
  for (let i = 0; i < Math.max(e.length, a.length); i++) {
    if (e[i] !== a[i]) return `line ${i + 1}: README has ${JSON.stringify(a[i] ?? '(nothing)')}, results give ${JSON.stringify(e[i] ?? '(nothing)')}`;
  }
  return 'no difference';
}
