/**
 * `tarcil bench trace --nodes <file> --pods <file>`: a production trace (src/workload/trace.ts)
 * replayed in the simulator by every policy that honours one-server packing and platform
 * constraints (trace-run.ts), beside the production scheduler's own wait. Two replays: the trace's
 * own times ("recorded"), and the same pods arriving faster, their run times kept, so that they
 * offer half the cores over the arrival window ("sped up": a load the recorded pod list, a sample
 * of the cluster's pods, never offers).
 */
import { basename } from 'node:path';
import { loadCatalog } from '../../model/catalog.ts';
import { TarcilError } from '../../util/errors.ts';
import { loadTrace, type Trace, type TraceFormat } from '../../workload/trace.ts';
import type { ChartSpec, Point } from '../charts.ts';
import { base, f1, f2, f3, pc, type ExperimentContext, type Runner, type Table } from './common.ts';
import {
  NOT_REPLAYED,
  QUICK_TRACE_POLICIES,
  replayTrace,
  SIZE_BUCKETS,
  sizeBucket,
  speedupFor,
  TRACE_POLICIES,
  waitStats,
  type JobOutcome,
  type TraceRun,
} from './trace-run.ts';

/** What `bench trace` reads: the two files, their format and the compression. */
export interface TraceInput {
  nodes: string;
  pods: string;
  format: TraceFormat;
  compress: number;
}

/** The context `bench trace` runs with: the usual one and the trace's files. */
export interface TraceContext extends ExperimentContext {
  trace?: TraceInput;
}

/** The offered load (share of cores over the arrival window) of the sped-up replay. */
export const SPED_UP_LOAD = 0.5;
/** Samples of each replay's allocation and fragmentation (the charts' points). */
const SAMPLES = 200;
/** Unmappable pods listed in the tables (all are in the JSON). */
const LISTED_UNMAPPABLE = 20;
const QOS_ORDER = ['LS', 'Guaranteed', 'Burstable', 'BE', 'generic'];

interface Scenario {
  name: 'recorded' | 'sped up';
  speedup: number;
  runs: TraceRun[];
}

/** Seconds: three decimals under 1 s, one under 100 s, none above. */
const secs = (x: number): string => (!Number.isFinite(x) ? '-' : x < 1 ? x.toFixed(3) : x < 100 ? x.toFixed(1) : x.toFixed(0));
const cell = (s: { n: number; p50: number; p99: number }): string => (s.n === 0 ? '-' : `${secs(s.p50)} / ${secs(s.p99)}`);
const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, x) => a + x, 0) / xs.length : NaN);

function classesOf(outs: readonly JobOutcome[]): string[] {
  const seen = new Set(outs.map((o) => o.qos));
  return [...QOS_ORDER.filter((q) => seen.has(q)), ...[...seen].filter((q) => !QOS_ORDER.includes(q)).sort()];
}

/** The production scheduler's own allocation over the replay's sample hours (recorded times only). */
function productionSeries(trace: Trace, hours: number[]): number[] {
  const rus = trace.servers.reduce((a, s) => a + s.rus, 0);
  const sec = trace.compress / 1000;
  const first = trace.jobs.reduce((m, j) => Math.min(m, j.arrivalMs), Infinity);
  const spans = trace.jobs
    .filter((j) => j.productionWaitMs !== undefined)
    .map((j) => ({
      from: (j.arrivalMs + (j.productionWaitMs as number) - first) * sec,
      to: (j.arrivalMs + (j.productionWaitMs as number) + (j.durationMs ?? 0) - first) * sec,
      cores: j.tasks,
    }));
  return hours.map((h) => spans.reduce((a, s) => (s.from <= h * 3600 && h * 3600 < s.to ? a + s.cores : a), 0) / rus);
}

function readTrace(ctx: TraceContext): Trace {
  const t = ctx.trace;
  if (!t?.nodes) throw new TarcilError('INVALID_ARGUMENT', '--nodes: bench trace needs the node list (--nodes <file>)', { field: '--nodes' });
  if (!t.pods) throw new TarcilError('INVALID_ARGUMENT', '--pods: bench trace needs the pod list (--pods <file>)', { field: '--pods' });
  return loadTrace(t.nodes, t.pods, { format: t.format, compress: t.compress, profiles: [...loadCatalog().workloads.keys()], seed: ctx.seed });
}

export const traceExp: Runner = (c) => {
  const ctx = c as TraceContext;
  const t0 = performance.now();
  const trace = readTrace(ctx);
  if (trace.jobs.length === 0)
    throw new TarcilError('INVALID_ARGUMENT', '--pods: no job of the trace could be mapped (see the unmappable rows: tarcil trace inspect)', {
      field: '--pods',
    });
  const input = ctx.trace as TraceInput;
  const policies = ctx.quick ? QUICK_TRACE_POLICIES : TRACE_POLICIES;
  const speedup = speedupFor(trace, SPED_UP_LOAD);
  const scenarios: Scenario[] = [
    { name: 'recorded', speedup: 1, runs: [] },
    { name: 'sped up', speedup, runs: [] },
  ];
  const total = scenarios.length * policies.length;
  let done = 0;
  for (const s of scenarios) {
    for (const p of policies) {
      ctx.progress(done, total, `${s.name}: ${p}`);
      s.runs.push(replayTrace(trace, p, { seed: ctx.seed, speedup: s.speedup, samples: SAMPLES }));
      done++;
    }
  }
  ctx.progress(total, total, 'done');

  const recorded = scenarios[0] as Scenario;
  const prodOuts = (recorded.runs[0] as TraceRun).outcomes;
  const classes = classesOf(prodOuts);
  const inProduction = (o: JobOutcome): boolean => !o.neverScheduled;
  const rows: Record<string, string | number>[] = [];
  const groupRows = (scenario: string, policy: string, outs: JobOutcome[], which: 'replay' | 'production'): void => {
    const groups: [string, string, (o: JobOutcome) => boolean][] = [
      ['all', 'all', () => true],
      ...classes.map((q): [string, string, (o: JobOutcome) => boolean] => ['qos', q, (o) => o.qos === q]),
      ...SIZE_BUCKETS.map((b): [string, string, (o: JobOutcome) => boolean] => ['cores', b.label, (o) => sizeBucket(o.tasks) === b.label]),
    ];
    for (const [kind, group, keep] of groups) {
      const st = waitStats(outs.filter(keep), which);
      if (st.n + st.never > 0) rows.push({ scenario, policy, kind, group, jobs: st.n + st.never, p50WaitS: st.p50, p99WaitS: st.p99, neverPlaced: st.never });
    }
  };
  groupRows('recorded', 'production', prodOuts.filter(inProduction), 'production');
  for (const s of scenarios) for (const r of s.runs) groupRows(s.name, r.policy, r.outcomes.filter(inProduction), 'replay');

  const waitTable = (by: 'qos' | 'cores'): Table => {
    const groups = by === 'qos' ? classes : SIZE_BUCKETS.map((b) => b.label).filter((l) => prodOuts.some((o) => sizeBucket(o.tasks) === l));
    const keep =
      (g: string) =>
      (o: JobOutcome): boolean =>
        inProduction(o) && (by === 'qos' ? o.qos === g : sizeBucket(o.tasks) === g);
    const line = (scenario: string, policy: string, outs: JobOutcome[], which: 'replay' | 'production'): (string | number)[] => [
      scenario,
      policy,
      ...groups.map((g) => cell(waitStats(outs.filter(keep(g)), which))),
    ];
    return {
      title: `Wait until all of a pod's cores run, by ${by === 'qos' ? 'QoS class' : 'size in cores'}: p50 / p99, s (pods production scheduled)`,
      head: ['replay', 'scheduler', ...groups.map((g) => `${g} (${prodOuts.filter(keep(g)).length})`)],
      rows: [
        line('recorded', 'production', prodOuts, 'production'),
        ...scenarios.flatMap((s) => s.runs.map((r) => line(s.name, r.policy, r.outcomes, 'replay'))),
      ],
    };
  };

  const perPolicy: Table = {
    title:
      'Per policy: jobs never placed, cores allocated and fragmented over the arrival window (its first 5% left out), quality Q of the placements (catalog model, seeded profiles)',
    head: [
      'replay',
      'policy',
      'never placed',
      'of which production never scheduled',
      'allocated mean / peak',
      'fragmented mean / peak',
      'mean Q',
      'p5 Q',
      'Q ≥ T_W',
      'split pods',
      'off-platform tasks',
      'wall s',
    ],
    rows: scenarios.flatMap((s) =>
      s.runs.map((r) => {
        const never = r.outcomes.filter((o) => o.waitS === undefined);
        const win = r.series.slice(0, Math.max(1, Math.ceil(r.series.length / 2)));
        return [
          s.name,
          r.policy,
          never.length,
          `${never.filter((o) => o.neverScheduled).length} (placed ${r.outcomes.filter((o) => o.neverScheduled && o.waitS !== undefined).length} of ${r.outcomes.filter((o) => o.neverScheduled).length})`,
          `${pc(mean(win.map((x) => x.allocated)))} / ${pc(Math.max(...win.map((x) => x.allocated)))}`,
          `${pc(mean(win.map((x) => x.fragmented)))} / ${pc(Math.max(...win.map((x) => x.fragmented)))}`,
          f3(r.quality.meanQ),
          f3(r.quality.p5Q),
          pc(r.quality.acceptable),
          r.splitJobs,
          r.platformViolations,
          f1(r.wallMs / 1000),
        ];
      }),
    ),
  };
  const rus = trace.servers.reduce((a, s) => a + s.rus, 0);
  const inputs: Table = {
    title: 'The trace as replayed',
    head: ['what', 'value'],
    rows: [
      ['servers, cores', `${trace.servers.length}, ${rus}`],
      ['jobs (pods mapped), cores asked', `${trace.jobs.length}, ${trace.jobs.reduce((a, j) => a + j.tasks, 0)}`],
      ['pods production never scheduled (replayed, counted apart)', trace.jobs.filter((j) => j.neverScheduled).length],
      ['pods not mapped', trace.unmappable.length],
      ['compression (arrivals and durations)', input.compress],
      ['sped up: arrivals faster by, durations kept', `${f1(speedup)}× (offered load ${pc(SPED_UP_LOAD)} of the cores over the arrival window)`],
      ['interference profiles', `the catalog's, by FNV-1a(seed/pod) with seed ${ctx.seed}: the Q figures depend on this rule`],
    ],
  };
  const unmappable: Table = {
    title: `Pods not mapped (${trace.unmappable.length}; the first ${LISTED_UNMAPPABLE})`,
    head: ['pod', 'line', 'reason'],
    rows: trace.unmappable.slice(0, LISTED_UNMAPPABLE).map((u) => [u.id, u.line, u.reason]),
  };
  const notRun: Table = { title: 'Policies not replayed, and why', head: ['policy', 'why'], rows: Object.entries(NOT_REPLAYED).map(([p, why]) => [p, why]) };

  const charts: ChartSpec[] = [];
  for (const s of scenarios) {
    const slug = s.name === 'recorded' ? 'recorded' : 'sped-up';
    const alloc: Point[] = s.runs.flatMap((r) => r.series.map((x) => ({ x: x.hour, y: 100 * x.allocated, series: r.policy })));
    const frag: Point[] = s.runs.flatMap((r) => r.series.map((x) => ({ x: x.hour, y: 100 * x.fragmented, series: r.policy })));
    if (s.name === 'recorded') {
      const hours = (s.runs[0] as TraceRun).series.map((x) => x.hour);
      productionSeries(trace, hours).forEach((y, i) => alloc.push({ x: hours[i] as number, y: 100 * y, series: 'production' }));
    }
    charts.push(
      {
        file: `trace-allocation-${slug}.svg`,
        title: `Cores allocated over time (${s.name}${s.speedup > 1 ? `, arrivals ${f1(s.speedup)}× faster` : ''})`,
        xTitle: 'trace hours',
        yTitle: 'allocated (% of cores)',
        points: alloc,
      },
      {
        file: `trace-fragmentation-${slug}.svg`,
        title: `Free cores too few together for the trace's pods (${s.name})`,
        xTitle: 'trace hours',
        yTitle: 'fragmented (% of cores)',
        points: frag,
      },
    );
    const waits: Point[] = [];
    const add = (name: string, outs: JobOutcome[], which: 'replay' | 'production'): void => {
      for (const q of classes) {
        const st = waitStats(
          outs.filter((o) => inProduction(o) && o.qos === q),
          which,
        );
        // A log axis: waits under a millisecond are drawn at 1 ms.
        if (st.n > 0) waits.push({ x: q, y: Math.max(1e-3, st.p99), series: name });
      }
    };
    if (s.name === 'recorded') add('production', prodOuts, 'production');
    for (const r of s.runs) add(r.policy, r.outcomes, 'replay');
    charts.push({
      file: `trace-wait-${slug}.svg`,
      title: `p99 wait by QoS class (${s.name}), s`,
      xTitle: 'QoS class',
      yTitle: 'p99 wait (s, log)',
      points: waits,
      pointsOnly: true,
      logY: true,
    });
  }

  const prod = waitStats(prodOuts, 'production');
  const name = input.format === 'alibaba' ? 'trace-alibaba-2023' : 'trace-generic';
  // The files by name only: where a trace lives is the user's (the Alibaba one may not be copied).
  const flags = `--nodes ${basename(input.nodes)} --pods ${basename(input.pods)}${input.format === 'alibaba' ? '' : ' --format generic'}${input.compress === 1 ? '' : ` --compress ${input.compress}`}`;
  return {
    ...base(name, `A production trace replayed in the simulator, per policy, beside the production scheduler's wait (${policies.join(', ')})`, ctx, t0),
    rows,
    tables: [inputs, waitTable('qos'), waitTable('cores'), perPolicy, notRun, ...(trace.unmappable.length > 0 ? [unmappable] : [])],
    charts,
    paper: `The production scheduler's own wait (scheduled − creation) over the ${prod.n} pods it scheduled: p50 ${f2(prod.p50)} s, p99 ${f2(prod.p99)} s; ${prod.never} pods it never scheduled. It placed them on the whole cluster, GPUs included, among pods this list does not hold; the replay counts cores only.`,
    extra: {
      command: `tarcil bench trace ${flags}${ctx.quick ? ' --quick' : ''} --seed ${ctx.seed}`,
      speedup,
      policies,
      notReplayed: NOT_REPLAYED,
      unmappable: trace.unmappable,
      counters: Object.fromEntries(scenarios.flatMap((s) => s.runs.map((r) => [`${s.name}/${r.policy}`, { ...r.counters, events: r.events }]))),
    },
  };
};
