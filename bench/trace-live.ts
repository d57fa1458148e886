/**
 * A production trace's busiest stretch replayed live: the trace's node list as a hollow cell on a
 * real etcd (one `tarcil hollow` process; each GPU model, or cpu, and core count a platform of its
 * own, bench/lib/trace-cell.ts), 3 `tarcil server` front-ends, the soak's auditor, and the pods of
 * the window of --window-s trace seconds whose arrivals ask the most cores, submitted over gRPC at
 * their creation times, times and durations divided by --compress. Beside the live waits: the
 * simulator's tarcil policy on exactly the same jobs, and production's own wait for them
 * (bench/lib/trace-live-run.ts says what is measured). A pod of several cores is a gang with
 * `locality: {mode: 'pack', required: true}`; the report checks from the stored records that
 * none ran on more than one server nor off its platforms (the exit code is 1 otherwise).
 *
 * Run: npx tsx bench/trace-live.ts --nodes <file> --pods <file> [--format alibaba|generic]
 *      [--compress 200] [--window-s S (default: 10 minutes of wall time, 600 × compress)]
 *      [--name live] [--seed 1] [--front-ends 3] [--agents 4] [--drain-s 120] [--quick]
 * --quick: a window of 2 minutes of wall time, results under bench/results/quick/.
 * Results: bench/results/trace-alibaba-2023/live-<name>.{md,json} and live-<name>-*.svg
 * (trace-generic/ for the generic format).
 */
import { writeFileSync, mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { loadCatalog } from '../src/model/catalog.ts';
import { renderSvg, type Point } from '../src/sim/charts.ts';
import { SIZE_BUCKETS, sizeBucket } from '../src/sim/experiments/trace-run.ts';
import { isTarcilError } from '../src/util/errors.ts';
import { loadTrace, type TraceFormat } from '../src/workload/trace.ts';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';
import { runTraceLive, type LiveJob, type TraceLiveResult } from './lib/trace-live-run.ts';

const argv = process.argv.slice(2);
function flag(name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}
function fail(field: string, rule: string): never {
  process.stderr.write(`trace-live: ${field}: ${rule}\n`);
  process.exit(2);
}
function num(name: string, dflt: number, min: number, integer = false): number {
  const v = flag(name);
  if (v === undefined) return dflt;
  const x = Number(v);
  if (!Number.isFinite(x) || x < min || (integer && !Number.isInteger(x))) fail(`--${name}`, `must be a${integer ? ' whole' : ''} number ≥ ${min}, is '${v}'`);
  return x;
}

const quick = argv.includes('--quick');
const NODES = flag('nodes') ?? fail('--nodes', "the trace's node list is required (--nodes <file>)");
const PODS = flag('pods') ?? fail('--pods', "the trace's pod list is required (--pods <file>)");
const FORMAT = (flag('format') ?? 'alibaba') as TraceFormat;
if (FORMAT !== 'alibaba' && FORMAT !== 'generic') fail('--format', `must be alibaba or generic, is '${String(FORMAT)}'`);
const COMPRESS = num('compress', 200, 1);
const WINDOW_S = num('window-s', (quick ? 120 : 600) * COMPRESS, 1);
const NAME = flag('name') ?? 'live';
if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(NAME)) fail('--name', `must be 1–64 letters, digits, '.', '_' or '-', is '${NAME}'`);
const SEED = num('seed', 1, 0, true);
const FRONT_ENDS = num('front-ends', 3, 1, true);
const AGENTS = num('agents', 4, 1, true);
const DRAIN_S = num('drain-s', 120, 0);
const EXPERIMENT = FORMAT === 'alibaba' ? 'trace-alibaba-2023' : 'trace-generic';
const OUT = quick ? resultsDir(true) : resultsDir(false, EXPERIMENT);
const FILE = `live-${NAME}`;
/** Allocation samples, wall seconds apart. */
const SAMPLE_S = 5;
const QOS_ORDER = ['LS', 'Guaranteed', 'Burstable', 'BE', 'generic'];

const say = (line: string): void => void process.stdout.write(`${new Date().toISOString().slice(11, 19)} [trace-live] ${line}\n`);
/** Seconds: three decimals under 1 s, one under 100 s, none above (as bench trace prints them). */
const secs = (x: number): string => (!Number.isFinite(x) ? '-' : x < 1 ? x.toFixed(3) : x < 100 ? x.toFixed(1) : x.toFixed(0));
const pc = (x: number): string => (Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : '-');
const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, x) => a + x, 0) / xs.length : NaN);

type Which = 'live' | 'liveMs' | 'sim' | 'simMs' | 'production';
function values(jobs: LiveJob[], which: Which): { xs: number[]; never: number } {
  const xs: number[] = [];
  let never = 0;
  for (const j of jobs) {
    const v =
      which === 'live'
        ? j.liveWaitS
        : which === 'liveMs'
          ? j.liveWaitMs
          : which === 'sim'
            ? j.simWaitS
            : which === 'simMs'
              ? j.simWaitS === undefined
                ? undefined
                : (j.simWaitS * 1000) / COMPRESS
              : j.productionWaitS;
    if (v === undefined) never++;
    else xs.push(v);
  }
  return { xs, never };
}
function cell(jobs: LiveJob[], which: Which): string {
  const { xs } = values(jobs, which);
  if (xs.length === 0) return '-';
  return which === 'liveMs' || which === 'simMs' ? `${fmt(pct(xs, 0.5), 0)} / ${fmt(pct(xs, 0.99), 0)}` : `${secs(pct(xs, 0.5))} / ${secs(pct(xs, 0.99))}`;
}

function waitTable(r: TraceLiveResult, by: 'qos' | 'size'): string {
  // Pods production scheduled, as `bench trace` compares them.
  const scheduled = r.jobs.filter((j) => !j.neverScheduled);
  const seen = new Set(scheduled.map((j) => j.qos));
  const groups =
    by === 'qos'
      ? [...QOS_ORDER.filter((q) => seen.has(q)), ...[...seen].filter((q) => !QOS_ORDER.includes(q)).sort()]
      : SIZE_BUCKETS.map((b) => b.label).filter((l) => scheduled.some((j) => sizeBucket(j.tasks) === l));
  const of = (g: string): LiveJob[] => scheduled.filter((j) => (by === 'qos' ? j.qos === g : sizeBucket(j.tasks) === g));
  const line = (label: string, which: Which): (string | number)[] => [label, cell(scheduled, which), ...groups.map((g) => cell(of(g), which))];
  return mdTable(
    ['scheduler', `all (${scheduled.length})`, ...groups.map((g) => `${g} (${of(g).length})`)],
    [
      line('production (trace s)', 'production'),
      line('simulator, tarcil (trace s)', 'sim'),
      line('live, tarcil (trace s)', 'live'),
      line('simulator, tarcil (wall ms)', 'simMs'),
      line('live, tarcil (wall ms)', 'liveMs'),
    ],
  );
}

/** The waits' p50 / p99 (and counts) per scheduler, over all pods production scheduled, by QoS class and by size. */
function waitFigures(jobs: LiveJob[]): Record<string, Record<string, { n: number; never: number; p50: number; p99: number }>> {
  const scheduled = jobs.filter((j) => !j.neverScheduled);
  const groups: [string, (j: LiveJob) => boolean][] = [
    ['all', () => true],
    ...[...new Set(scheduled.map((j) => j.qos))].map((q): [string, (j: LiveJob) => boolean] => [`qos ${q}`, (j) => j.qos === q]),
    ...SIZE_BUCKETS.map((b): [string, (j: LiveJob) => boolean] => [`cores ${b.label}`, (j) => sizeBucket(j.tasks) === b.label]),
  ];
  const out: Record<string, Record<string, { n: number; never: number; p50: number; p99: number }>> = {};
  for (const which of ['production', 'sim', 'live', 'liveMs'] as const) {
    const by: Record<string, { n: number; never: number; p50: number; p99: number }> = {};
    for (const [name, keep] of groups) {
      const { xs, never } = values(scheduled.filter(keep), which);
      if (xs.length + never > 0) by[name] = { n: xs.length, never, p50: pct(xs, 0.5), p99: pct(xs, 0.99) };
    }
    out[which === 'sim' ? 'simulatorS' : which === 'live' ? 'liveS' : which === 'liveMs' ? 'liveWallMs' : 'productionS'] = by;
  }
  return out;
}

/** Jobs never placed, pods split over servers, and how late the bench sent the submissions. */
function outcome(jobs: LiveJob[]): Record<string, number> {
  const lags = jobs.map((j) => j.sendLagMs).filter((x): x is number => x !== undefined);
  return {
    pods: jobs.length,
    productionNeverScheduled: jobs.filter((j) => j.neverScheduled).length,
    simulatorNeverPlaced: jobs.filter((j) => j.simWaitS === undefined).length,
    liveNeverPlaced: jobs.filter((j) => j.liveWaitMs === undefined).length,
    livePlacedOfSeveralCores: jobs.filter((j) => j.tasks > 1 && j.liveWaitMs !== undefined).length,
    liveOnSeveralServers: jobs.filter((j) => j.servers > 1).length,
    sendLagP50Ms: pct(lags, 0.5),
    sendLagP99Ms: pct(lags, 0.99),
    sendLagMaxMs: lags.length ? Math.max(...lags) : NaN,
  };
}

function allocStats(points: { allocated: number }[]): string {
  return points.length === 0 ? '-' : `${pc(mean(points.map((p) => p.allocated)))} / ${pc(Math.max(...points.map((p) => p.allocated)))}`;
}

/** Pods split over servers and tasks off their platforms or on unknown servers, from the stored records: must be 0. */
function placementProblems(r: TraceLiveResult): number {
  return r.placements.splitPods + r.placements.offPlatformTasks + r.placements.unknownServerTasks;
}

function report(r: TraceLiveResult, command: string): string {
  const live = values(r.jobs, 'live');
  const sim = values(r.jobs, 'sim');
  const lags = r.jobs.map((j) => j.sendLagMs).filter((x): x is number => x !== undefined);
  const byKind = new Map<string, number>();
  for (const v of r.audit.violations) byKind.set(v.kind, (byKind.get(v.kind) ?? 0) + 1);
  // The window's hours with arrivals (the allocation compared over them).
  const spanH = (r.window.endS - r.window.startS) / 3600;
  const inWindow = <T extends { hour: number }>(ps: T[]): T[] => ps.filter((p) => p.hour >= 0 && p.hour <= spanH);
  return [
    "# A production trace's busiest stretch, live on a hollow cell",
    '',
    `\`${command}\` on ${machine()}, ${new Date().toISOString().slice(0, 16)} UTC; ${fmt(r.wallS / 60, 1)} min.`,
    '',
    mdTable(
      ['what', 'value'],
      [
        [
          'cell',
          `${r.cell.servers} hollow nodes, ${r.cell.rus} RUs (${r.cell.registeredRus} registered), ${r.cell.platforms} platforms (one per GPU model or cpu and core count); etcd, ${FRONT_ENDS} front-ends × ${AGENTS} agents, preemption off (as in the simulator's replay)${r.cell.maxTxnOps !== 128 ? `; etcd's --max-txn-ops ${r.cell.maxTxnOps} (a node registers its RUs in one transaction), told to every process` : ''}`,
        ],
        [
          'window',
          `trace seconds ${fmt(r.window.startS, 0)}–${fmt(r.window.endS, 0)} (${fmt((r.window.endS - r.window.startS) / 3600, 2)} h): the ${fmt(WINDOW_S, 0)} s whose arrivals ask the most cores`,
        ],
        [
          'pods',
          `${r.window.pods}, asking ${r.window.cores} cores; ${r.jobs.filter((j) => j.neverScheduled).length} of them production never scheduled (replayed, left out of the wait tables)`,
        ],
        ['compression', `${r.window.compress}× (arrivals and durations): ${fmt(WINDOW_S / r.window.compress / 60, 1)} min of arrivals`],
        [
          'submission',
          `SubmitJob sent after the pod's compressed creation time by p50 ${fmt(pct(lags, 0.5), 0)} ms, p99 ${fmt(pct(lags, 0.99), 0)} ms, max ${fmt(lags.length ? Math.max(...lags) : NaN, 0)} ms`,
        ],
        ['interference profiles', `the catalog's, by FNV-1a(seed/pod), seed ${SEED}`],
      ],
    ),
    '',
    "Wait from submission until all of a pod's cores run, by QoS class: p50 / p99 (pods production scheduled). Trace seconds are the wall time × the compression; the live run's fixed costs (a submission, a commit, a node's start) are multiplied alike.",
    '',
    waitTable(r, 'qos'),
    '',
    'The same by size in cores:',
    '',
    waitTable(r, 'size'),
    '',
    mdTable(
      ['', 'production', 'simulator, tarcil', 'live, tarcil'],
      [
        [
          'pods never placed',
          `${r.jobs.filter((j) => j.neverScheduled).length} never scheduled`,
          `${sim.never} of ${r.jobs.length}`,
          `${live.never} of ${r.jobs.length}`,
        ],
        [
          'pods of several cores whose tasks ran on more than one server',
          "- (a pod is one node's)",
          `${r.sim.splitJobs} (the replay requires one server)`,
          `${r.placements.splitPods} of ${r.placements.multiCorePlaced} placed (${pc(r.placements.multiCorePlaced ? r.placements.splitPods / r.placements.multiCorePlaced : NaN)}), from the task and RU records (the spec requires one server: locality pack, required)`,
        ],
        [
          "cores allocated over the window's span, mean / peak",
          `${allocStats(inWindow(r.allocation.production))} (these pods only, at their recorded times)`,
          allocStats(inWindow(r.allocation.sim)),
          `${allocStats(inWindow(r.allocation.live))} (one front-end's count of busy RUs, every ${SAMPLE_S} s)`,
        ],
        [
          'tasks off their platforms',
          '-',
          String(r.sim.platformViolations),
          `${r.placements.offPlatformTasks} of ${r.placements.tasksSeen} (each task's servers from its task and RU records, their platforms from the cell's server records)${r.placements.unknownServerTasks > 0 ? `; ${r.placements.unknownServerTasks} on a server without a record` : ''}`,
        ],
      ],
    ),
    '',
    `Audit: ${r.audit.acked} jobs acknowledged (${r.audit.failedSubmissions} submissions not acknowledged after 20 tries), ${r.audit.final} seen final; not final: ${r.audit.notFinal.length === 0 ? 'none' : r.audit.notFinal.slice(0, 10).join(', ')}.`,
    `Violations: ${r.audit.violations.length === 0 ? 'none' : [...byKind].map(([k, n]) => `${k} ${n}`).join(', ')}.${
      r.audit.violations.length > 0
        ? `\n\n${r.audit.violations
            .slice(0, 10)
            .map((v) => `- ${v.kind}: ${v.detail}`)
            .join('\n')}`
        : ''
    }`,
    `Placement audit (from the stored records): ${placementProblems(r) === 0 ? 'no pod on more than one server, no task off its platforms' : `${r.placements.splitPods} pods on more than one server, ${r.placements.offPlatformTasks} tasks off their platforms, ${r.placements.unknownServerTasks} on a server without a record`}.${r.placements.examples.length > 0 ? `\n\n${r.placements.examples.map((e) => `- ${e}`).join('\n')}` : ''}`,
    `Auditor watch interruptions: ${r.audit.watchErrors.length === 0 ? 'none' : r.audit.watchErrors.join('; ')}.`,
  ].join('\n');
}

async function charts(r: TraceLiveResult): Promise<string[]> {
  const spanH = (r.window.endS - r.window.startS) / 3600;
  const along = (name: string, ps: { hour: number; allocated: number }[]): Point[] =>
    ps.filter((p) => p.hour >= 0).map((p) => ({ x: p.hour, y: 100 * p.allocated, series: name }));
  const files: [string, Parameters<typeof renderSvg>[0]][] = [];
  files.push([
    `${FILE}-allocation.svg`,
    {
      file: `${FILE}-allocation.svg`,
      title: `Cores allocated, the window's pods (${fmt(spanH, 1)} trace hours of arrivals)`,
      xTitle: "trace hours since the window's start",
      yTitle: 'allocated (% of cores)',
      points: [...along('live', r.allocation.live), ...along('simulator', r.allocation.sim), ...along('production', r.allocation.production)],
    },
  ]);
  const waits: Point[] = [];
  const scheduled = r.jobs.filter((j) => !j.neverScheduled);
  for (const q of QOS_ORDER) {
    const of = scheduled.filter((j) => j.qos === q);
    if (of.length === 0) continue;
    for (const [name, which] of [
      ['production', 'production'],
      ['simulator', 'sim'],
      ['live', 'live'],
    ] as const) {
      const { xs } = values(of, which);
      if (xs.length > 0) waits.push({ x: q, y: Math.max(1e-3, pct(xs, 0.99)), series: name });
    }
  }
  files.push([
    `${FILE}-wait.svg`,
    {
      file: `${FILE}-wait.svg`,
      title: 'p99 wait by QoS class, trace s',
      xTitle: 'QoS class',
      yTitle: 'p99 wait (s, log)',
      points: waits,
      pointsOnly: true,
      logY: true,
    },
  ]);
  const out: string[] = [];
  for (const [file, spec] of files) {
    writeFileSync(join(OUT, file), await renderSvg(spec));
    out.push(join(OUT, file));
  }
  return out;
}

async function main(): Promise<void> {
  let trace;
  try {
    trace = loadTrace(NODES, PODS, { format: FORMAT, compress: COMPRESS, profiles: [...loadCatalog().workloads.keys()], seed: SEED });
  } catch (err) {
    if (isTarcilError(err)) fail(err.field ?? 'trace', err.message);
    throw err;
  }
  if (trace.unmappable.length > 0) say(`${trace.unmappable.length} pods not mapped (tarcil trace inspect lists them), left out`);
  const logs = join(OUT, `${FILE}-logs`);
  mkdirSync(logs, { recursive: true });
  const r = await runTraceLive({
    trace,
    windowS: WINDOW_S,
    seed: SEED,
    frontEnds: FRONT_ENDS,
    agents: AGENTS,
    sampleMs: SAMPLE_S * 1000,
    drainMarginMs: DRAIN_S * 1000,
    say,
    keepLog: (name, text) => writeFileSync(join(logs, `${name}.log`), text),
  });
  // The files by name only: where a trace lives is the user's (the Alibaba one may not be copied).
  const command = `npx tsx bench/trace-live.ts --nodes ${basename(NODES)} --pods ${basename(PODS)}${FORMAT === 'alibaba' ? '' : ' --format generic'} --compress ${COMPRESS}${flag('window-s') !== undefined ? ` --window-s ${WINDOW_S}` : ''} --name ${NAME}${SEED !== 1 ? ` --seed ${SEED}` : ''}${quick ? ' --quick' : ''}`;
  // No per-pod rows: the trace's own rows are not copied into the results, only figures over them.
  const { jobs, ...rest } = r;
  const files = writeResults(FILE, { command, ...rest, waits: waitFigures(jobs), outcome: outcome(jobs) }, report(r, command), OUT);
  files.push(...(await charts(r)));
  say(`audit: ${r.audit.acked} acknowledged, ${r.audit.final} final, ${r.audit.notFinal.length} not final, ${r.audit.violations.length} violations`);
  say(`wrote ${files.join(', ')}`);
  say(
    `placement audit: ${r.placements.splitPods} pods on more than one server, ${r.placements.offPlatformTasks} tasks off their platforms, ${r.placements.unknownServerTasks} on a server without a record (${r.placements.tasksSeen} tasks seen)`,
  );
  if (r.audit.violations.length > 0 || r.audit.notFinal.length > 0 || placementProblems(r) > 0) process.exitCode = 1;
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (err: unknown) => {
    process.stderr.write(`trace-live failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
