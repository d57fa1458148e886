/**
 * The cell's throughput ceiling on this machine: the soak's hollow cell (no faults) run at a rising
 * arrival rate, one `bench/soak.ts` run per load, and a table of what each placed, how fast jobs
 * started and what every process spent per task.
 *
 * Tasks are short (`--task-s`, 60 s by default) so that each run's rows hold whole lifecycles
 * (placed, started, ended, freed) and the CPU per task is the full cost of one, not only its
 * placement. The offered rate is load × RUs / task-s tasks a second.
 *
 *   npx tsx bench/ceiling.ts [--servers 10000] [--task-s 60] [--minutes 5]
 *       [--loads 0.025,0.05,0.1,0.15,0.2,0.3] [--name ceiling-10k-60s] [--report-only]
 *
 * Each run writes bench/results/ceiling/<run>/<run>.{md,json} (and its SVGs) as the soak does, <run>
 * being <name>-<load without its dot>, and its output to <run>-bench.log there; then this writes
 * <name>.md, <name>.json and <name>-*.svg in bench/results/ceiling/, and the machine-readable summary
 * (the top sustained rate's placedPerSec, cpuMsPerTask, keysPerTask, eventsPerTask and the commit)
 * as ceiling-summary.json (<name>-summary.json for another --name). `--report-only` skips the runs
 * and summarises the results already there.
 * Rows are the soak's minutes with arrivals, from the second on (the first holds the warm-up).
 */
import { execFileSync, spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { median } from 'simple-statistics';
import { renderSvg, type Point } from '../src/sim/charts.ts';
import { fmt, machine, mdTable, RESULTS_DIR as ALL_RESULTS, writeResults } from './lib/report.ts';

const RESULTS_DIR = join(ALL_RESULTS, 'ceiling');

function flag(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}

const SERVERS = Number(flag('servers', '10000'));
const TASK_S = Number(flag('task-s', '60'));
const MINUTES = Number(flag('minutes', '5'));
const LOADS = flag('loads', '0.025,0.05,0.1,0.15,0.2,0.3').split(',').map(Number);
const NAME = flag('name', 'ceiling-10k-60s');
const REPORT_ONLY = process.argv.includes('--report-only');
for (const [what, v] of [
  ['--servers', SERVERS],
  ['--task-s', TASK_S],
  ['--minutes', MINUTES],
] as const) {
  if (!(v > 0)) throw new Error(`${what} must be a positive number`);
}
if (LOADS.length === 0 || LOADS.some((l) => !(l > 0 && l <= 1.5))) throw new Error('--loads must be a comma-separated list of numbers in (0, 1.5]');
if (MINUTES < 2) throw new Error('--minutes must be at least 2 (the first minute is warm-up)');

const runName = (load: number): string => `${NAME}-${String(load).replace('.', '')}`;

interface SoakRow {
  minute: number;
  phase: string;
  placementsPerS: number;
  runningP50: number | null;
  runningP99: number | null;
  runningOneTxn?: [number | null, number | null];
  cpu: Record<string, number | null>;
  perTask?: { keys: number; events: number };
  requests?: { frontEnds: Record<string, number>; hollow: Record<string, number> };
  hollowStarts?: { meanMs: number };
}
interface SoakResult {
  rows: SoakRow[];
  acked: number;
  counts: { final: number };
  violations: unknown[];
  totalRus: number;
}

function soakArgs(load: number): string[] {
  return [
    'bench/soak.ts',
    '--name',
    runName(load),
    '--dir',
    'ceiling',
    '--minutes',
    String(MINUTES),
    '--overload-minutes',
    '0',
    '--servers',
    String(SERVERS),
    '--load',
    String(load),
    '--task-s',
    String(TASK_S),
    '--drain-minutes',
    '5',
    '--no-faults',
  ];
}

async function run(load: number): Promise<void> {
  const dir = join(RESULTS_DIR, runName(load));
  mkdirSync(dir, { recursive: true });
  const log = createWriteStream(join(dir, `${runName(load)}-bench.log`));
  process.stdout.write(`[ceiling] npx tsx ${soakArgs(load).join(' ')}\n`);
  const child = spawn('npx', ['tsx', ...soakArgs(load)], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  const code = await new Promise<number | null>((res) => child.on('close', res));
  log.end();
  if (code !== 0) throw new Error(`the soak at load ${load} exited with ${code}; its output is in ${runName(load)}-bench.log`);
}

interface Step {
  load: number;
  offered: number;
  rows: number;
  placed: [number, number, number];
  p50: [number, number, number];
  p99: [number, number, number];
  p99OneTxn: [number, number, number];
  cores: { all: number; frontEnds: number; hollow: number; etcd: number; bench: number };
  msPerTask: { all: number; frontEnds: number; hollow: number; etcd: number; bench: number };
  acked: number;
  final: number;
  violations: number;
  /** Keys written and watch events delivered per task placed (the auditor's watch not counted); NaN from runs that did not count them. */
  keysPerTask: number;
  eventsPerTask: number;
  /** Requests to etcd per task placed, the front-ends' and the hollow process's (NaN from runs that did not count them; each run's table has them by kind). */
  requestsPerTask: { frontEnds: number; hollow: number };
  /** A hollow node's start, from its asking the store to the answer (mean, ms): the part of a task's way to running after its placement. */
  nodeStartMs: number;
}

const total = (r: Record<string, number>): number => Object.values(r).reduce((a, n) => a + n, 0);

/** [median, min, max] of the finite values. */
function spread(xs: (number | null)[]): [number, number, number] {
  const v = xs.filter((x): x is number => typeof x === 'number' && Number.isFinite(x));
  return v.length === 0 ? [NaN, NaN, NaN] : [median(v), Math.min(...v), Math.max(...v)];
}

function summarise(load: number): Step {
  const file = join(RESULTS_DIR, runName(load), `${runName(load)}.json`);
  if (!existsSync(file)) throw new Error(`${file} is missing: run without --report-only first`);
  const r = JSON.parse(readFileSync(file, 'utf8')) as SoakResult;
  const rows = r.rows.filter((x) => x.minute >= 2 && x.phase !== 'drain' && x.phase !== 'end');
  const sum = (x: SoakRow, pick: (k: string) => boolean): number =>
    Object.entries(x.cpu).reduce((a, [k, v]) => a + (pick(k) && typeof v === 'number' ? v : 0), 0);
  const parts = {
    all: (x: SoakRow) => sum(x, () => true),
    frontEnds: (x: SoakRow) => sum(x, (k) => k.startsWith('fe')),
    hollow: (x: SoakRow) => sum(x, (k) => k === 'hollow'),
    etcd: (x: SoakRow) => sum(x, (k) => k === 'etcd'),
    bench: (x: SoakRow) => sum(x, (k) => k === 'bench'),
  };
  const measured = rows.filter((x) => x.placementsPerS > 0 && parts.all(x) > 0);
  const cores = Object.fromEntries(Object.entries(parts).map(([k, f]) => [k, median(measured.map(f))])) as Step['cores'];
  const msPerTask = Object.fromEntries(
    Object.entries(parts).map(([k, f]) => [k, median(measured.map((x) => (1000 * f(x)) / x.placementsPerS))]),
  ) as Step['msPerTask'];
  return {
    load,
    offered: (load * r.totalRus) / TASK_S,
    rows: rows.length,
    placed: spread(rows.map((x) => x.placementsPerS)),
    p50: spread(rows.map((x) => x.runningP50)),
    p99: spread(rows.map((x) => x.runningP99)),
    p99OneTxn: spread(rows.map((x) => x.runningOneTxn?.[1] ?? null)),
    cores,
    msPerTask,
    acked: r.acked,
    final: r.counts.final,
    violations: r.violations.length,
    keysPerTask: spread(rows.map((x) => x.perTask?.keys ?? null))[0],
    eventsPerTask: spread(rows.map((x) => x.perTask?.events ?? null))[0],
    nodeStartMs: spread(rows.map((x) => x.hollowStarts?.meanMs ?? null))[0],
    requestsPerTask: {
      frontEnds: spread(rows.map((x) => (x.requests ? total(x.requests.frontEnds) : null)))[0],
      hollow: spread(rows.map((x) => (x.requests ? total(x.requests.hollow) : null)))[0],
    },
  };
}

/** The commit the runs measured (with `+changes` when the tree differed from it). */
function commitOf(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no', '--', 'src'], { encoding: 'utf8' }).trim() !== '';
    return dirty ? `${head}+changes` : head;
  } catch {
    return 'unknown';
  }
}

/**
 * The top sustained rate: the highest load whose runs placed at least 95% of what was offered
 * (median), with every acknowledged job final and no audit violation.
 */
function topSustained(steps: Step[]): Step | undefined {
  const ok = steps.filter((s) => s.placed[0] >= 0.95 * s.offered && s.final === s.acked && s.violations === 0);
  return ok.sort((a, b) => b.offered - a.offered)[0];
}

async function main(): Promise<void> {
  if (!REPORT_ONLY) for (const load of LOADS) await run(load);
  const steps = LOADS.map(summarise);
  const range = (s: [number, number, number], d = 0): string => `${fmt(s[0], d)} (${fmt(s[1], d)}–${fmt(s[2], d)})`;
  const table = mdTable(
    [
      'load',
      'offered tasks/s',
      'placed/s, median (range)',
      'submit → running p50 ms',
      'submit → running p99 ms',
      'p99 ms, tasks of jobs placed in one transaction',
      'cores busy: all (front-ends · hollow · etcd · bench)',
      'CPU ms per task: all (front-ends · hollow · etcd · bench)',
      'keys / events per task',
      'requests to etcd per task (front-ends · hollow)',
      'node start, mean ms',
      'jobs acknowledged / final / audit violations',
    ],
    steps.map((s) => [
      `${fmt(100 * s.load, 1)}%`,
      fmt(s.offered, 0),
      range(s.placed),
      range(s.p50),
      range(s.p99),
      range(s.p99OneTxn),
      `${fmt(s.cores.all, 2)} (${fmt(s.cores.frontEnds, 2)} · ${fmt(s.cores.hollow, 2)} · ${fmt(s.cores.etcd, 2)} · ${fmt(s.cores.bench, 2)})`,
      `${fmt(s.msPerTask.all, 2)} (${fmt(s.msPerTask.frontEnds, 2)} · ${fmt(s.msPerTask.hollow, 2)} · ${fmt(s.msPerTask.etcd, 2)} · ${fmt(s.msPerTask.bench, 2)})`,
      `${fmt(s.keysPerTask, 2)} / ${fmt(s.eventsPerTask, 1)}`,
      `${fmt(s.requestsPerTask.frontEnds, 2)} · ${fmt(s.requestsPerTask.hollow, 2)}`,
      fmt(s.nodeStartMs, 0),
      `${s.acked} / ${s.final} / ${s.violations}`,
    ]),
  );
  const md = [
    "# The cell's throughput ceiling (`bench/ceiling.ts`)",
    '',
    `\`npx tsx bench/ceiling.ts ${process.argv.slice(2).join(' ')}\` on ${machine()}, ${new Date().toISOString().slice(0, 16)} UTC${REPORT_ONLY ? " (a summary of the runs already written: each run's command, commit and time are in its own table)" : ''}.`,
    `One \`bench/soak.ts\` run per load (no faults; each run's own table is \`${NAME}-<load>.md\`): ${SERVERS} hollow servers, 3 front-ends × 4 agents, etcd, the auditor; tasks of ${TASK_S} s on average, so each row holds whole task lifecycles. Rows: the minutes with arrivals from the second on; medians over them.`,
    '',
    table,
  ].join('\n');
  const files = writeResults(NAME, { servers: SERVERS, taskS: TASK_S, minutes: MINUTES, steps }, md, RESULTS_DIR);
  // The machine-readable summary: the top sustained rate's figures and the commit measured.
  const top = topSustained(steps);
  const summary = {
    commit: REPORT_ONLY ? 'see each run' : commitOf(),
    machine: machine(),
    name: NAME,
    servers: SERVERS,
    taskS: TASK_S,
    top: top
      ? {
          load: top.load,
          offeredPerSec: top.offered,
          placedPerSec: top.placed[0],
          cpuMsPerTask: top.msPerTask.all,
          keysPerTask: top.keysPerTask,
          eventsPerTask: top.eventsPerTask,
          requestsPerTask: top.requestsPerTask,
          p99Ms: top.p99[0],
        }
      : null,
    steps: steps.map((s) => ({
      load: s.load,
      offeredPerSec: s.offered,
      placedPerSec: s.placed[0],
      cpuMsPerTask: s.msPerTask.all,
      keysPerTask: s.keysPerTask,
      eventsPerTask: s.eventsPerTask,
      p99Ms: s.p99[0],
      violations: s.violations,
    })),
  };
  const summaryFile = join(RESULTS_DIR, NAME === 'ceiling-10k-60s' ? 'ceiling-summary.json' : `${NAME}-summary.json`);
  writeFileSync(summaryFile, `${JSON.stringify(summary, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 1)}\n`);
  files.push(summaryFile);
  const pts = (series: string, f: (s: Step) => number): Point[] => steps.map((s) => ({ x: s.offered, y: f(s), series }));
  const charts: [string, string, string, Point[], boolean][] = [
    [`${NAME}-placed.svg`, 'Placed against offered', 'tasks/s', [...pts('placed (median)', (s) => s.placed[0]), ...pts('offered', (s) => s.offered)], false],
    [`${NAME}-latency.svg`, 'Submit → running against the offered rate', 'ms (log)', [...pts('p50', (s) => s.p50[0]), ...pts('p99', (s) => s.p99[0])], true],
    [
      `${NAME}-cpu.svg`,
      'CPU per task, all processes',
      'ms',
      [
        ...pts('all', (s) => s.msPerTask.all),
        ...pts('front-ends', (s) => s.msPerTask.frontEnds),
        ...pts('hollow', (s) => s.msPerTask.hollow),
        ...pts('etcd', (s) => s.msPerTask.etcd),
      ],
      false,
    ],
  ];
  for (const [file, title, yTitle, points, logY] of charts) {
    writeFileSync(join(RESULTS_DIR, file), await renderSvg({ file, title, xTitle: 'offered tasks/s', yTitle, points, logY }));
    files.push(join(RESULTS_DIR, file));
  }
  process.stdout.write(`${md}\n\nwrote ${files.join(', ')}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`ceiling failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
