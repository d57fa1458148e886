/**
 * A/B of one benchmark between two commits, run on this machine in one session: each commit is
 * checked out in a temporary git worktree (sharing this checkout's node_modules) and the benchmark
 * runs alternately, A B B A A B B A …, each run a fresh process, so drift of the machine falls on
 * both sides alike. Every run's JSON is kept; the report gives per row the median of each metric on
 * each side (a row repeated within a run counts as the median of its repeats), the range over
 * runs, B / A, and a permutation test's two-sided p-value of the difference of means.
 *
 * Run: npx tsx bench/ab.ts --a <ref> --b <ref> --bench decision-cost --runs 4
 *        [--key rus,R] [--metrics p50us,meanus] [--lower-is-better] [--name ab-decision-cost]
 *        [-- <arguments for the benchmark>]
 * Results: bench/results/<bench>/<name>.{md,json} (default name ab-<bench>) and each run's JSON in
 * bench/results/<bench>/<name>-runs/.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median, permutationTest } from 'simple-statistics';
import { fmt, machine, mdTable, RESULTS_DIR, writeResults } from './lib/report.ts';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..');

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  const end = process.argv.indexOf('--');
  return i >= 0 && (end < 0 || i < end) ? process.argv[i + 1] : undefined;
}
function need(name: string): string {
  const v = flag(name);
  if (v === undefined) {
    process.stderr.write(`bench/ab: --${name} is required (see the header of bench/ab.ts)\n`);
    process.exit(2);
  }
  return v;
}

const refA = need('a');
const refB = need('b');
const bench = need('bench');
const runs = Number(flag('runs') ?? '4');
if (!Number.isInteger(runs) || runs < 2) {
  process.stderr.write('bench/ab: --runs must be an integer ≥ 2 (runs per side)\n');
  process.exit(2);
}
const sep = process.argv.indexOf('--');
const benchArgs = sep >= 0 ? process.argv.slice(sep + 1) : [];
const name = flag('name') ?? `ab-${bench}`;

type Row = Record<string, unknown>;
interface Run {
  side: 'A' | 'B';
  n: number;
  seconds: number;
  rows: Row[];
}

function sha(ref: string): string {
  return execFileSync('git', ['-C', REPO, 'rev-parse', '--short', ref], { encoding: 'utf8' }).trim();
}

function worktree(ref: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tarcil-ab-'));
  execFileSync('git', ['-C', REPO, 'worktree', 'add', '--detach', '--force', dir, ref], { stdio: 'ignore' });
  symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'));
  if (!existsSync(join(dir, 'bench', `${bench}.ts`))) throw new Error(`bench/${bench}.ts does not exist at ${ref}`);
  return dir;
}

function numericKeys(row: Row): string[] {
  return Object.keys(row).filter((k) => typeof row[k] === 'number');
}

const shaA = sha(refA);
const shaB = sha(refB);
const dirs = { A: worktree(refA), B: worktree(refB) };
const outDir = join(RESULTS_DIR, bench);
const runsDir = join(outDir, `${name}-runs`);
mkdirSync(runsDir, { recursive: true });
const all: Run[] = [];
try {
  // A B B A, repeated: each side has as many first and second places as the other.
  const order: ('A' | 'B')[] = [];
  for (let i = 0; order.length < 2 * runs; i++) order.push(...(i % 2 === 0 ? (['A', 'B'] as const) : (['B', 'A'] as const)));
  order.forEach((side, i) => {
    const t0 = performance.now();
    process.stdout.write(`run ${i + 1}/${order.length}: ${side} (${side === 'A' ? shaA : shaB}) bench/${bench}.ts ${benchArgs.join(' ')}\n`);
    // A quick run writes under results/quick/: whichever of the two this run wrote is its result
    // (both are removed first, so a committed result file is never read as a run's).
    const candidates = [
      join(dirs[side], 'bench', 'results', 'quick', `${bench}.json`),
      join(dirs[side], 'bench', 'results', bench, `${bench}.json`),
      join(dirs[side], 'bench', 'results', `${bench}.json`),
    ];
    for (const c of candidates) rmSync(c, { force: true });
    const res = spawnSync('npx', ['tsx', `bench/${bench}.ts`, ...benchArgs], { cwd: dirs[side], stdio: ['ignore', 'ignore', 'inherit'] });
    if (res.status !== 0) throw new Error(`bench/${bench}.ts failed on side ${side} (exit ${res.status})`);
    const out = candidates.find((c) => existsSync(c));
    if (!out) throw new Error(`bench/${bench}.ts wrote no ${bench}.json under bench/results/ or bench/results/quick/ on side ${side}`);
    copyFileSync(out, join(runsDir, `${side}-${i + 1}.json`));
    const data = JSON.parse(readFileSync(out, 'utf8')) as { rows?: Row[] };
    if (!Array.isArray(data.rows)) throw new Error(`bench/${bench}.ts wrote no "rows" array`);
    all.push({ side, n: i + 1, seconds: (performance.now() - t0) / 1000, rows: data.rows });
  });
} finally {
  for (const dir of Object.values(dirs)) {
    spawnSync('git', ['-C', REPO, 'worktree', 'remove', '--force', dir], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  }
}

const first = all[0]!.rows;
// Rows are matched across runs by the --key fields (default: the non-numeric ones).
const keys = flag('key')?.split(',') ?? Object.keys(first[0] ?? {}).filter((k) => typeof first[0]![k] !== 'number');
const metrics = flag('metrics')?.split(',') ?? numericKeys(first[0] ?? {}).filter((k) => !keys.includes(k));
const label = (r: Row): string => keys.map((k) => String(r[k])).join(' / ');
const side = (s: 'A' | 'B') => all.filter((r) => r.side === s);

interface Cell {
  row: string;
  metric: string;
  a: number[];
  b: number[];
  medianA: number;
  medianB: number;
  ratio: number;
  p: number;
}
const cells: Cell[] = [];
// A benchmark that repeats a row within one run (reps) counts the median of its repeats.
const ids = [...new Set(first.map(label))];
for (const id of ids) {
  const pick = (s: 'A' | 'B', m: string) =>
    side(s)
      .map((r) => {
        const xs = r.rows
          .filter((x) => label(x) === id)
          .map((x) => x[m])
          .filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
        return xs.length > 0 ? median(xs) : NaN;
      })
      .filter((v) => Number.isFinite(v));
  for (const m of metrics) {
    const a = pick('A', m);
    const b = pick('B', m);
    if (a.length < 2 || b.length < 2) continue;
    const medianA = median(a);
    const medianB = median(b);
    cells.push({ row: id, metric: m, a, b, medianA, medianB, ratio: medianB / medianA, p: permutationTest(a, b, 'two_side', 2000) });
  }
}

const range = (xs: number[]) => `${fmt(Math.min(...xs), 1)}–${fmt(Math.max(...xs), 1)}`;
const gm = (xs: number[]) => Math.exp(xs.reduce((s, x) => s + Math.log(x), 0) / xs.length);
const byMetric = metrics.map((m) => {
  const rs = cells.filter((c) => c.metric === m).map((c) => c.ratio);
  return [m, rs.length > 0 ? fmt(gm(rs), 3) : '-', cells.filter((c) => c.metric === m && c.p < 0.05).length + ` of ${rs.length}`];
});
const md = [
  `# A/B: bench/${bench}.ts, ${shaA} (A) against ${shaB} (B)`,
  '',
  `\`npx tsx bench/ab.ts ${process.argv.slice(2).join(' ')}\` on ${machine()}.`,
  `${all.length} runs, alternating (${all.map((r) => r.side).join(' ')}), each a fresh process; ${fmt(
    all.reduce((s, r) => s + r.seconds, 0),
    0,
  )} s in all.`,
  'Median over runs per side, the range over runs, B / A of the medians, and the two-sided p-value of a',
  'permutation test of the difference of means (2,000 permutations; with few runs per side the',
  'smallest p-values it can give are coarse).',
  '',
  mdTable(
    ['row', 'metric', 'A median', 'A range', 'B median', 'B range', 'B / A', 'p'],
    cells.map((c) => [c.row, c.metric, fmt(c.medianA, 2), range(c.a), fmt(c.medianB, 2), range(c.b), fmt(c.ratio, 3), fmt(c.p, 3)]),
  ),
  '',
  'Per metric: geometric mean of B / A over the rows, and the rows whose difference has p < 0.05:',
  '',
  mdTable(['metric', 'geometric mean B / A', 'rows with p < 0.05'], byMetric),
].join('\n');
const files = writeResults(
  name,
  {
    machine: machine(),
    a: { ref: refA, sha: shaA },
    b: { ref: refB, sha: shaB },
    bench,
    benchArgs,
    runs: all.map(({ side: s, n, seconds }) => ({ side: s, n, seconds })),
    cells,
  },
  md,
  outDir,
);
process.stdout.write(`${md}\n\nwrote ${files.join(', ')} and ${runsDir}\n`);
