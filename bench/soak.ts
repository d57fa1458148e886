/**
 * The soak benchmark: a large live cell for a long time, with faults, audited.
 *
 * A real etcd (default quota), one `tarcil hollow` process running the cell's nodes (default
 * 10,000 servers × 16 RUs of a heterogeneous spec), 3 `tarcil server` front-ends with 4 agents
 * each and retention on, and a load generator that submits catalog jobs over gRPC (Poisson
 * arrivals, retried with the same request id on another front-end when one does not answer) at
 * 80% of the cell's capacity, then at 120% for an overload phase, then drains. During the 80%
 * phase it SIGKILLs one front-end (restarted 10 s later), kills 5% of the hollow nodes, restarts
 * etcd once, and then pauses the front-end that is the housekeeper (SIGSTOP, SIGCONT --pause-s
 * later, 15 by default: longer than its leases live), so that the election must hand over after
 * the restart. Every row (a minute; 15 s with --quick) records placements/s, submit → running
 * p50/p99, commit conflicts, etcd's DB size and key count, and each process's RSS and CPU; the
 * auditor (lib/soak-audit.ts) checks every write as it happens and the store at the end.
 *
 * Run: npx tsx bench/soak.ts [--quick] [--minutes 30] [--overload-minutes 5] [--servers 10000]
 *      [--cluster hollow-10k] [--front-ends 3] [--agents 4] [--load 0.8] [--task-s 20] [--retain 5m]
 *      [--compact-margin 2m] [--disconnect-grace 10s] [--drain-minutes 20] [--no-faults] [--pause-s 15]
 *      [--name soak]
 *      [--etcd-profile-at MIN[,MIN…]] [--etcd-handling] (etcd with --metrics extensive: its handling time of transactions per row)
 *      [--max-pending-tasks N] [--launch-after D] [--max-txn-ops 128] (etcd's, and every tarcil process told it)
 *      [--agent key=value …] (agent options of every front-end, as `tarcil server --agent`; repeatable)
 *      [--etcd-flag=--name=value …] (a flag given to the soak's etcd as is; repeatable)
 * Results: bench/results/soak/<name>/<name>.{md,json} and <name>-*.svg (--dir <experiment>: under
 * bench/results/<experiment>/ instead; --quick: bench/results/quick/).
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Etcd3 } from 'etcd3';
import type { SchedulerClient } from '../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { loadCatalog } from '../src/model/catalog.ts';
import { Keys } from '../src/state/keys.ts';
import { openStore } from '../src/store/index.ts';
import { renderSvg, type Point } from '../src/sim/charts.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import type { TarcilProc } from '../test/support/procs.ts';
import { startFrontEnd as startLiveFrontEnd, startHollowCell } from './lib/live-cell.ts';
import { cpuShare, procSample, type ProcSample } from './lib/proc-stats.ts';
import { MEAN_TASKS, pickSize } from './lib/jobs.ts';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';
import { pprofTop, pprofTopText } from './lib/pprof-top.ts';
import { SoakAuditor, sizeClasses } from './lib/soak-audit.ts';
import { counterIncreases, metricSum, perTaskDelta, requestsByRecord, requestsTable, ruStates, scrape, sumMaps } from './lib/metrics.ts';
import { picksPerTxn } from '../src/agent/attempt.ts';
import { CONFLICT_CAUSES, FRONT_END_RACES } from '../src/agent/conflict-cause.ts';
import { HANDOFF_OUTCOMES as HANDOFFS } from '../src/agent/handoff.ts';

/** The outcomes of tarcil_freed_handoffs_total. */
const HANDOFF_OUTCOMES = Object.keys(HANDOFFS);

function flag(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}
const quick = process.argv.includes('--quick');
const NAME = flag('name', 'soak');
/** The experiment folder under bench/results: soak, or the experiment that runs this soak (ceiling). */
const DIR = flag('dir', 'soak');
/** The run's folder: bench/results/<DIR>/<NAME>/ (a --quick run: bench/results/quick/). */
const OUT = quick ? resultsDir(true) : join(resultsDir(false, DIR), NAME);
const MINUTES = Number(flag('minutes', quick ? '2' : '30'));
const OVERLOAD_MIN = Number(flag('overload-minutes', quick ? '0.5' : '5'));
const SERVERS = Number(flag('servers', quick ? '1000' : '10000'));
const CLUSTER = flag('cluster', 'hollow-10k');
const FRONT_ENDS = Number(flag('front-ends', '3'));
const AGENTS = Number(flag('agents', '4'));
const LOAD = Number(flag('load', '0.8'));
const TASK_S = Number(flag('task-s', quick ? '5' : '20'));
const RETAIN = flag('retain', quick ? '30s' : '5m');
const COMPACT_MARGIN = flag('compact-margin', quick ? '30s' : '2m');
const GRACE = flag('disconnect-grace', '10s');
/** How long the pause fault stops the housekeeper's front-end. */
const PAUSE_S = Number(flag('pause-s', '15'));
/** prom-client's event-loop sampling interval (its default `eventLoopMonitoringPrecision`). */
const LOOP_SAMPLE_MS = 10;
/** Each front-end's back-pressure limit (`tarcil server --max-pending-tasks`); empty: the server's default. */
const MAX_PENDING = flag('max-pending-tasks', '');
/** When a front-end sends a placed task to its node directly (`tarcil server --launch-after`); empty: the server's default. */
const LAUNCH_AFTER = flag('launch-after', '');
/** etcd's --max-txn-ops, and every tarcil process told it (`--etcd-max-txn-ops`); 128 is etcd's default. */
const MAX_TXN_OPS = Number(flag('max-txn-ops', '128'));
/** The placements an agent puts in one commit transaction under that limit. */
const ONE_TXN = picksPerTxn(MAX_TXN_OPS);
const TXN_FLAGS = MAX_TXN_OPS !== 128 ? ['--etcd-max-txn-ops', String(MAX_TXN_OPS)] : [];
/** `--etcd-flag=--x=y`, repeatable: given to the soak's etcd as is (e.g. `--etcd-flag=--backend-batch-interval=10ms`). */
const ETCD_FLAGS = process.argv.filter((a) => a.startsWith('--etcd-flag=')).map((a) => a.slice('--etcd-flag='.length));
/** `--agent key=value`, repeatable: passed to every front-end as is. */
const AGENT_OPTIONS = process.argv.flatMap((a, i) => (a === '--agent' && process.argv[i + 1] !== undefined ? ['--agent', process.argv[i + 1] as string] : []));
/**
 * Minutes after the start of the load at which etcd's CPU is profiled for 30 s (etcd runs with
 * --enable-pprof): each profile is kept as `etcd-cpu-<min>.pb.gz` with its summary by function
 * and package in `etcd-cpu-<min>.txt`, in the run's log directory.
 */
const ETCD_PROFILE_AT = flag('etcd-profile-at', '')
  .split(',')
  .filter((x) => x !== '')
  .map(Number);
/**
 * `--etcd-handling`: etcd runs with `--metrics extensive`, and each row gives how long etcd took
 * to handle the cell's transactions (its gRPC server's own histogram, from request to answer).
 */
const ETCD_HANDLING = process.argv.includes('--etcd-handling');
const ROW_MS = quick ? 15_000 : 60_000;
/** Read at the start: the code the processes run is the tree as it was then. */
const COMMIT = commit();
const MAX_IN_FLIGHT = 400;
const PREFIX = '/tarcil/soak/';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const say = (line: string): void => void process.stdout.write(`${new Date().toISOString().slice(11, 19)} [soak] ${line}\n`);

interface Row {
  minute: number;
  phase: string;
  placementsPerS: number;
  runningP50: number;
  runningP99: number;
  /** p50 / p99 of submit → running for tasks of jobs placed in one commit transaction. */
  runningOneTxn?: [number, number];
  /**
   * submit → running by the size of the task's job (`sizeClasses`): tasks seen running, p50, p99,
   * and the p50 / p99 of its three stages (as `stages`).
   */
  runningBySize?: { size: string; n: number; p50: number; p99: number; placed: [number, number]; started: [number, number]; seen: [number, number] }[];
  /** p50 / p99 of submit → running for tasks of jobs the scheduler did not hold, and how many tasks it held. */
  runningUnheld?: [number, number];
  held?: number;
  /** p50 / p99 of the three stages of submit → running (see MinuteCounts.stages). */
  stages?: { placed: [number, number]; started: [number, number]; seen: [number, number]; accepted?: [number, number] };
  /**
   * The row's slowest tasks (submit → running at or above its p99): how many, and the mean of each
   * of the three stages over them (ms), to say which stage the tail comes from.
   */
  tail?: { n: number; placed: number; started: number; seen: number };
  submitted: number;
  finals: number;
  conflicts: number;
  /** The row's conflicts by cause (tarcil_commit_conflicts_by_cause_total: front-end, sibling, stale, other). */
  conflictCauses?: Record<string, number>;
  /** Of the row's front-end conflicts, by race (tarcil_commit_conflicts_front_end_total: turn, split, unsplit), and their mean lag in ms. */
  frontEndRaces?: Record<string, number> & { lagMs?: number };
  /** Freed RUs held for their home front-end during the row, and of those, woken for after the window or taken meanwhile (tarcil_freed_handoffs_total, all front-ends). */
  handoffs?: Record<string, number>;
  /** RUs placed again during the row: ms from their freeing to that placement, p50 / p99 / max (count). */
  reuse?: { p50: number; p99: number; max: number; n: number };
  /** Placement transactions sent by the front-ends' agents during the row, conflicts included (tarcil_commits). */
  commits?: number;
  /** Sampling rounds (one per decision of a chunk) and candidates scored by the front-ends' agents during the row (tarcil_samples, tarcil_candidates_scored). */
  sampling?: { rounds: number; candidates: number; placed: number };
  /** The front-ends that said they were the housekeeper (tarcil_housekeeper_leading) at the row's end. */
  housekeeper?: string;
  /** Owner leases fenced (all front-ends) and jobs adopted, during the row. */
  fenced: number;
  adopted: number;
  /** Tasks recorded failed because their outcome was compacted away before it was recorded (tarcil_task_outcomes_compacted), during the row. */
  compacted?: number;
  /** Outcomes not yet recorded, found in the next placement's RU record instead of the history (tarcil_task_outcomes_carried), during the row. */
  carried?: number;
  /**
   * The hollow process's task-start writes (a node records its task running, then starts it):
   * waiting for a slot at the row's end, the oldest one's wait (s), and the mean time of those
   * answered during the row, from the node's asking to the store's answer (ms).
   */
  hollowStarts?: { waiting: number; oldestS: number; meanMs: number };
  /**
   * What the row's tasks cost the store, per task placed in it: keys written (etcd's own count of
   * puts and deletes) and watch events delivered to the cell's processes (every front-end's and the
   * hollow process's `tarcil_store_watch_events_total`; the auditor's watch is not counted).
   */
  perTask?: { keys: number; events: number };
  /**
   * Requests to etcd per task placed in the row, by `kind records` (read or write, and the kinds of
   * record each touches: `tarcil_store_requests_by_record_total`), summed over the front-ends and
   * the hollow process's own.
   */
  requests?: { frontEnds: Record<string, number>; hollow: Record<string, number> };
  /** etcd: requests slower than 100 ms during the row, and watch events waiting for slow watchers at its end. */
  slowApplies: number;
  /** With --etcd-handling: etcd's own handling time of the row's transactions, p50 / p99 ms, and how many. */
  etcdTxn?: { p50: number; p99: number; n: number };
  /** etcd's disk during the row: its WAL fsyncs and its backend (bbolt) commits, p50 / p99 ms and how many. */
  etcdDisk?: { fsync: { p50: number; p99: number; n: number }; commit: { p50: number; p99: number; n: number } };
  watchPending: number;
  dbMb: number;
  keys: number;
  /**
   * The cell's RUs at the row's end as one live front-end sees them (`tarcil_rus`): busy
   * (or reserved), free, free on a server taking no placements (its load monitor saw a task well
   * below its rate, or cordoned), and down. Busy over all live RUs is the cell's real occupancy,
   * which interference slowdown and blocked servers raise above the nominal load.
   */
  rus?: { busy: number; free: number; unschedulable: number; down: number };
  rss: Record<string, number>;
  cpu: Record<string, number>;
  /**
   * Each process's event loop over the row: the p99 and the longest delay of a 10-ms sampling
   * timer past its due time (ms), and the time spent in GC (s; NaN in a process's first row).
   * The tarcil processes' from prom-client (reset at each scrape); the bench's own (its watch
   * times the tasks running, so its delays are in the latencies it reports), without GC.
   */
  loop?: Record<string, { p99: number; max: number; gcS: number }>;
  /** Each tarcil process's writes to etcd during the row as it timed them (`tarcil_store_request_seconds`): p50 / p99 ms, and how many. */
  storeWrites?: Record<string, { p50: number; p99: number; n: number }>;
  inFlight: number;
  dropped: number;
}

/** "RUs busy 81.2% (busy/live), 3,100 free, 900 unschedulable, 0 down", or "RUs -". */
function occupancy(r: Row['rus']): string {
  if (!r) return 'RUs -';
  const live = r.busy + r.free + r.unschedulable;
  return `RUs busy ${fmt((100 * r.busy) / live, 1)}% (${r.busy}/${live}), ${r.free} free, ${r.unschedulable} unschedulable, ${r.down} down`;
}

interface FrontEnd {
  proc: TarcilProc;
  port: number;
  metricsPort: number;
  client: SchedulerClient;
  conflictsBase: number;
}

/** Every child the bench starts, for the interrupt handler. */
let onChild: (p: TarcilProc) => void = () => undefined;
/** Takes the cell down (every child, then etcd); set once they exist. */
let teardown: (() => Promise<void>) | undefined;

/** How long the RUs placed again in a row had stayed free. */
function reuseText(r: Pick<Row, 'reuse'>): string {
  return r.reuse
    ? `RUs placed again ${fmt(r.reuse.p50, 0)}/${fmt(r.reuse.p99, 0)}/${fmt(r.reuse.max, 0)} ms after their freeing (p50/p99/max, ${r.reuse.n})`
    : 'no RU placed again';
}

/** A row's sampling rounds and candidates scored per task placed, e.g. "3.1 · 84". */
function perPlacement(r: Pick<Row, 'sampling'>): string {
  const x = r.sampling;
  return x && x.placed > 0 ? `${fmt(x.rounds / x.placed, 1)} · ${fmt(x.candidates / x.placed, 0)}` : '-';
}

/** The row's front-end conflicts by race, and their mean lag, from the row's increases of the counters summed over the front-ends. */
function raceRow(up: Record<string, number>): Record<string, number> & { lagMs?: number } {
  const out: Record<string, number> & { lagMs?: number } = {};
  let n = 0;
  for (const c of FRONT_END_RACES) {
    out[c] = up[c] ?? 0;
    n += out[c];
  }
  if (n > 0) out.lagMs = (up.lag ?? 0) / n;
  return out;
}

/** A row's conflicts as a share of its commits (front-ends that count them), e.g. " (4.2%)". */
function conflictShare(r: Pick<Row, 'conflicts' | 'commits' | 'conflictCauses' | 'frontEndRaces'>): string {
  const share = r.commits !== undefined && r.commits > 0 ? `${fmt((100 * r.conflicts) / r.commits, 1)}%` : '';
  const causes = r.conflicts > 0 && r.conflictCauses ? CONFLICT_CAUSES.map((c) => `${c} ${r.conflictCauses?.[c] ?? 0}`).join(' · ') : '';
  const fr = r.frontEndRaces;
  const raced = fr ? FRONT_END_RACES.reduce((n, c) => n + (fr[c] ?? 0), 0) : 0;
  const races = fr && raced > 0 ? `front-end by race: ${FRONT_END_RACES.map((c) => `${c} ${fr[c] ?? 0}`).join(' · ')}, lag ${fmt(fr.lagMs ?? NaN, 0)} ms` : '';
  return share || causes ? ` (${[share, causes, races].filter(Boolean).join('; ')})` : '';
}

async function startFrontEnd(url: string, i: number): Promise<FrontEnd> {
  const fe = await startLiveFrontEnd(
    {
      url,
      prefix: PREFIX,
      agents: AGENTS,
      name: `fe${i}`,
      retain: RETAIN,
      compactMargin: COMPACT_MARGIN,
      extra: [
        ...TXN_FLAGS,
        ...(MAX_PENDING ? ['--max-pending-tasks', MAX_PENDING] : []),
        ...(LAUNCH_AFTER ? ['--launch-after', LAUNCH_AFTER] : []),
        ...AGENT_OPTIONS,
      ],
    },
    onChild,
  );
  return { ...fe, conflictsBase: 0 };
}

async function main(): Promise<void> {
  const etcdBin = ensureEtcd(say);
  // etcd as the README tells an operator to run it: an 8 GiB quota (the default 2 GiB was reached
  // in soak-10k-80-lease, and etcd then refuses every write).
  const etcd = await startEtcd({
    bin: etcdBin,
    extraArgs: [
      '--quota-backend-bytes',
      '8589934592',
      ...(MAX_TXN_OPS !== 128 ? ['--max-txn-ops', String(MAX_TXN_OPS)] : []),
      ...(ETCD_PROFILE_AT.length > 0 ? ['--enable-pprof'] : []),
      ...(ETCD_HANDLING ? ['--metrics', 'extensive'] : []),
      ...ETCD_FLAGS,
    ],
  });
  const url = `etcd://127.0.0.1:${etcd.clientPort}`;
  const etcdPid = (): number | undefined => pidOf(etcd.dataDir);
  const client = new Etcd3({ hosts: etcd.endpoint });
  const store = await openStore(url);
  const keys = new Keys(PREFIX);
  const catalog = loadCatalog();
  const profiles = [...catalog.workloads.keys()];
  const started = Date.now();
  say(
    `etcd on ${etcd.endpoint}; ${SERVERS} hollow servers of ${CLUSTER}; ${FRONT_ENDS} front-ends × ${AGENTS} agents; load ${LOAD} for ${MINUTES} min, 120% for ${OVERLOAD_MIN} min`,
  );

  // Interrupted (Ctrl-C, a kill): take the cell down with the bench, leaving no process behind.
  const children: TarcilProc[] = [];
  onChild = (p) => children.push(p);
  teardown = async () => {
    for (const c of children) c.child.kill('SIGKILL');
    await etcd.stop();
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      void teardown?.().finally(() => process.exit(130));
    });
  }
  const cell = await startHollowCell({ url, prefix: PREFIX, servers: SERVERS, cluster: CLUSTER, disconnectGrace: GRACE, extra: TXN_FLAGS }, (p) =>
    children.push(p),
  );
  const hollow = cell.proc;
  const totalRus = cell.totalRus;
  const hollowMetricsPort = cell.metricsPort;
  say(`hollow cell of ${cell.nodes} nodes, ${totalRus} RUs registered in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const fes: FrontEnd[] = [];
  /** The indexes of the front-ends that say they are the housekeeper (tarcil_housekeeper_leading 1). */
  // The front-ends that say they lead housekeeping, from scrapes already taken (one per front-end) or new ones.
  const leadingFrontEnds = async (texts?: (string | undefined)[]): Promise<number[]> => {
    const out: number[] = [];
    for (const [i, f] of fes.entries()) if (metricSum(texts ? texts[i] : await scrape(f.metricsPort), 'tarcil_housekeeper_leading') === 1) out.push(i);
    return out;
  };
  for (let i = 0; i < FRONT_ENDS; i++) fes.push(await startFrontEnd(url, i));
  say(`front-ends listening on ${fes.map((f) => f.port).join(', ')}`);

  const auditor = new SoakAuditor(store, keys, ONE_TXN);
  await auditor.start((await store.revision()) + 1);

  const capacityJobsPerS = totalRus / (MEAN_TASKS * TASK_S);
  const acked: string[] = [];
  let inFlight = 0;
  let dropped = 0;
  let submitted = 0;
  let rate = LOAD * capacityJobsPerS;
  let rr = 0;
  let seq = 0;
  let failedSubmissions = 0;
  /** Submissions a front-end refused with RESOURCE_EXHAUSTED (back-pressure), each tried again. */
  let refused = 0;
  const submitErrors = new Set<string>();

  const submit = async (): Promise<void> => {
    const spec = {
      name: `soak-${++seq}`,
      profile: profiles[Math.floor(Math.random() * profiles.length)],
      tasks: pickSize(Math.random()),
      durationMs: Math.round(TASK_S * 1000 * (0.5 + Math.random())),
    };
    const requestId = randomUUID();
    let lastError = '';
    const at = Date.now();
    for (let attempt = 0; attempt < 20; attempt++) {
      const fe = fes[rr++ % fes.length] as FrontEnd;
      try {
        const res = await new Promise<{ jobId: string }>((resolve, reject) => {
          fe.client.SubmitJob({ specJson: JSON.stringify(spec), requestId }, { deadline: new Date(Date.now() + 10_000) }, (err, r) =>
            err || !r ? reject(err ?? new Error('empty')) : resolve(r),
          );
        });
        acked.push(res.jobId);
        auditor.acked(res.jobId, at);
        submitted++;
        return;
      } catch (err) {
        lastError = err instanceof Error ? err.message : String(err);
        if (lastError.includes('RESOURCE_EXHAUSTED')) refused++;
        await sleep(200);
      }
    }
    failedSubmissions++;
    if (!submitErrors.has(lastError)) {
      submitErrors.add(lastError);
      say(`a submission failed 20 times (${spec.name}): ${lastError}`);
    }
  };

  let generating = true;
  const generator = (async () => {
    let last = Date.now();
    while (generating) {
      await sleep(50);
      const now = Date.now();
      const expected = (rate * (now - last)) / 1000;
      last = now;
      // Poisson count for the interval (Knuth; the mean is small).
      let n = 0;
      let p = Math.exp(-expected);
      let u = Math.random();
      while (u > p && n < 10_000) {
        u -= p;
        n++;
        p = (p * expected) / n;
      }
      for (let i = 0; i < n; i++) {
        if (inFlight >= MAX_IN_FLIGHT) {
          dropped++;
          continue;
        }
        inFlight++;
        void submit().finally(() => inFlight--);
      }
    }
  })();

  const rows: Row[] = [];
  let prev = new Map<string, ProcSample | undefined>();
  const pids = (): Map<string, number | undefined> =>
    new Map<string, number | undefined>([
      ['hollow', hollow.child.pid],
      ...fes.map((f, i) => [`fe${i}`, f.proc.child.pid] as [string, number | undefined]),
      ['etcd', etcdPid()],
      ['bench', process.pid],
    ]);
  let prevAt = Date.now();
  const increase = counterIncreases();
  let startsPrev = { n: 0, s: 0 };
  let storePrev: { keys: number; events: number } | undefined;
  let requestsPrev: { frontEnds: Map<string, number>; hollow: Map<string, number> } | undefined;
  const gcPrev = new Map<string, { total: number; start: number }>();
  let txnPrev: [number, number][] | undefined;
  let fsyncPrev: [number, number][] | undefined;
  let commitPrev: [number, number][] | undefined;
  const writesPrev = new Map<string, { buckets: [number, number][]; start: number }>();
  // The bench's own loop: its watch sees the tasks running, so its delays are in the latencies it reports.
  const benchLoop = monitorEventLoopDelay({ resolution: LOOP_SAMPLE_MS });
  benchLoop.enable();
  const sampleRow = async (phase: string): Promise<void> => {
    const now = Date.now();
    const m = auditor.takeMinute();
    const rss: Record<string, number> = {};
    const cpu: Record<string, number> = {};
    const next = new Map<string, ProcSample | undefined>();
    for (const [name, pid] of pids()) {
      const s = pid === undefined ? undefined : procSample(pid);
      next.set(name, s);
      rss[name] = s?.rssMb ?? NaN;
      cpu[name] = cpuShare(prev.get(name), s, now - prevAt);
    }
    prev = next;
    let conflicts = 0;
    const causes: Record<string, number> = Object.fromEntries(CONFLICT_CAUSES.map((c) => [c, 0]));
    const races: Record<string, number> = Object.fromEntries([...FRONT_END_RACES, 'lag'].map((c) => [c, 0]));
    const handoffs: Record<string, number> = Object.fromEntries(HANDOFF_OUTCOMES.map((c) => [c, 0]));
    let commits = 0;
    let rounds = 0;
    let candidates = 0;
    let fenced = 0;
    let adopted = 0;
    let compacted = 0;
    let carried = 0;
    const feTexts = await Promise.all(fes.map((f) => scrape(f.metricsPort)));
    const hollowText = await scrape(hollowMetricsPort);
    const leaders = (await leadingFrontEnds(feTexts)).map((i) => `fe${i}`);
    for (const [i, text] of feTexts.entries()) {
      // Each front-end's increase over the row: a dead one answers nothing (NaN) and adds 0.
      const start = metricSum(text, 'process_start_time_seconds');
      const up = (series: string): number => increase(`fe${i}@${start} ${series}`, metricSum(text, series));
      conflicts += up('tarcil_commit_conflicts_total');
      for (const c of CONFLICT_CAUSES) causes[c] = (causes[c] ?? 0) + up(`tarcil_commit_conflicts_by_cause_total{cause="${c}"}`);
      for (const c of FRONT_END_RACES) races[c] = (races[c] ?? 0) + up(`tarcil_commit_conflicts_front_end_total{race="${c}"}`);
      races.lag = (races.lag ?? 0) + up('tarcil_commit_conflicts_front_end_lag_ms');
      for (const c of HANDOFF_OUTCOMES) handoffs[c] = (handoffs[c] ?? 0) + up(`tarcil_freed_handoffs_total{outcome="${c}"}`);
      commits += up('tarcil_commits');
      rounds += up('tarcil_samples');
      candidates += up('tarcil_candidates_scored');
      fenced += up('tarcil_owner_leases_fenced');
      adopted += up('tarcil_jobs_adopted');
      compacted += up('tarcil_task_outcomes_compacted');
      carried += up('tarcil_task_outcomes_carried');
    }
    let rus: Row['rus'];
    for (const text of feTexts) rus ??= ruStates(text);
    // Each process's event loop over the row: its longest delay and p99 (ms), and its GC time (s).
    const loop: Record<string, { p99: number; max: number; gcS: number }> = {};
    const storeWrites: Record<string, { p50: number; p99: number; n: number }> = {};
    for (const [name, text] of [...feTexts.map((t, i) => [`fe${i}`, t] as const), ['hollow', hollowText] as const]) {
      const gc = { total: metricSum(text, 'nodejs_gc_duration_seconds_sum'), start: metricSum(text, 'process_start_time_seconds') };
      // prom-client samples the loop with a 10-ms timer and reports the intervals: the delay is what lies beyond 10 ms.
      const delay = (metric: string): number => Math.max(0, metricSum(text, metric) * 1000 - LOOP_SAMPLE_MS);
      loop[name] = { p99: delay('nodejs_eventloop_lag_p99_seconds'), max: delay('nodejs_eventloop_lag_max_seconds'), gcS: gcSince(gc, gcPrev.get(name)) };
      if (Number.isFinite(gc.total)) gcPrev.set(name, gc);
      // Its writes to etcd as it timed them, from sending to the answer (a restarted process counts from 0).
      const w = histBuckets(text, 'tarcil_store_request_seconds', 'kind="write"');
      const prevW = writesPrev.get(name);
      if (w) {
        storeWrites[name] = bucketQuantiles(w, prevW && prevW.start === gc.start ? prevW.buckets : undefined);
        writesPrev.set(name, { buckets: w, start: gc.start });
      }
    }
    loop.bench = { p99: Math.max(0, benchLoop.percentile(99) / 1e6 - LOOP_SAMPLE_MS), max: Math.max(0, benchLoop.max / 1e6 - LOOP_SAMPLE_MS), gcS: NaN };
    benchLoop.reset();
    const startsNow = { n: metricSum(hollowText, 'tarcil_hollow_start_writes_total'), s: metricSum(hollowText, 'tarcil_hollow_start_write_seconds_total') };
    const hollowStarts = {
      waiting: metricSum(hollowText, 'tarcil_hollow_start_writes_waiting'),
      oldestS: metricSum(hollowText, 'tarcil_hollow_start_write_oldest_wait_seconds'),
      meanMs: startsNow.n > startsPrev.n ? ((startsNow.s - startsPrev.s) * 1000) / (startsNow.n - startsPrev.n) : NaN,
    };
    if (Number.isFinite(startsNow.n)) startsPrev = startsNow;
    const etcdText = await fetch(`${etcd.endpoint}/metrics`)
      .then((r) => r.text())
      .catch(() => '');
    const etcdMetric = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(etcdText)?.[1] ?? NaN);
    // A restarted etcd (a new process) counts from 0 again.
    const slowApplies = increase(`etcd@${etcdPid() ?? ''} slow applies`, etcdMetric('etcd_server_slow_apply_total'));
    const txnBuckets = handlingBuckets(etcdText, 'Txn');
    const etcdTxn = txnBuckets ? bucketQuantiles(txnBuckets, txnPrev) : undefined;
    if (txnBuckets) txnPrev = txnBuckets;
    // A restarted etcd counts from 0 again: its first row after the restart is taken whole.
    const since = (now: [number, number][], prev: [number, number][] | undefined) =>
      prev && (prev.at(-1)?.[1] ?? 0) <= (now.at(-1)?.[1] ?? 0) ? prev : undefined;
    const fsyncB = histBuckets(etcdText, 'etcd_disk_wal_fsync_duration_seconds', '');
    const commitB = histBuckets(etcdText, 'etcd_disk_backend_commit_duration_seconds', '');
    const etcdDisk =
      fsyncB && commitB
        ? { fsync: bucketQuantiles(fsyncB, since(fsyncB, fsyncPrev)), commit: bucketQuantiles(commitB, since(commitB, commitPrev)) }
        : undefined;
    if (fsyncB) fsyncPrev = fsyncB;
    if (commitB) commitPrev = commitB;
    const watchPending = etcdMetric('etcd_debugging_mvcc_pending_events_total');
    // Keys written and events delivered since the last row (a restarted process or etcd counts from 0: that row has none).
    const storeNow = {
      keys: etcdMetric('etcd_mvcc_put_total') + etcdMetric('etcd_mvcc_delete_total'),
      events: [...feTexts, hollowText].reduce((a, t) => a + (metricSum(t, 'tarcil_store_watch_events_total') || 0), 0),
    };
    const perTask =
      storePrev && m.placements > 0 && storeNow.keys >= storePrev.keys && storeNow.events >= storePrev.events
        ? { keys: (storeNow.keys - storePrev.keys) / m.placements, events: (storeNow.events - storePrev.events) / m.placements }
        : undefined;
    storePrev = storeNow;
    const requestsNow = { frontEnds: sumMaps(feTexts.map(requestsByRecord)), hollow: requestsByRecord(hollowText) };
    const requests = requestsPrev && m.placements > 0 ? perTaskDelta(requestsNow, requestsPrev, m.placements) : undefined;
    requestsPrev = requestsNow;
    const status = await client.maintenance.status().catch(() => undefined);
    const keyCount = await client
      .getAll()
      .prefix(PREFIX)
      .count()
      .catch(() => NaN);
    const row: Row = {
      minute: (now - started) / 60_000,
      phase,
      placementsPerS: (m.placements * 1000) / (now - prevAt),
      runningP50: pct(m.running, 0.5),
      runningP99: pct(m.running, 0.99),
      ...(m.reuseMs.length > 0
        ? { reuse: { p50: pct(m.reuseMs, 0.5), p99: pct(m.reuseMs, 0.99), max: m.reuseMs.reduce((a, b) => Math.max(a, b), 0), n: m.reuseMs.length } }
        : {}),
      runningOneTxn: [pct(m.runningOneTxn, 0.5), pct(m.runningOneTxn, 0.99)],
      runningBySize: sizeClasses(ONE_TXN).map((size, i) => {
        const xs = m.runningBySize[i] ?? [];
        const col = (k: number): number[] => xs.map((x) => x[k] as number).filter(Number.isFinite);
        const both = (k: number): [number, number] => [pct(col(k), 0.5), pct(col(k), 0.99)];
        return { size, n: xs.length, p50: pct(col(0), 0.5), p99: pct(col(0), 0.99), placed: both(1), started: both(2), seen: both(3) };
      }),
      runningUnheld: [pct(m.runningUnheld, 0.5), pct(m.runningUnheld, 0.99)],
      held: m.held,
      stages: {
        placed: [pct(m.stages.placed, 0.5), pct(m.stages.placed, 0.99)],
        started: [pct(m.stages.started, 0.5), pct(m.stages.started, 0.99)],
        seen: [pct(m.stages.seen, 0.5), pct(m.stages.seen, 0.99)],
        accepted: [pct(m.stages.accepted, 0.5), pct(m.stages.accepted, 0.99)],
      },
      tail: tailSplit(m.split),
      submitted,
      finals: m.finals,
      hollowStarts,
      ...(perTask ? { perTask } : {}),
      ...(requests ? { requests } : {}),
      conflicts,
      conflictCauses: causes,
      frontEndRaces: raceRow(races),
      handoffs,
      commits,
      sampling: { rounds, candidates, placed: m.placements },
      housekeeper: leaders.join('+') || 'none',
      fenced,
      adopted,
      compacted,
      carried,
      slowApplies,
      ...(etcdTxn ? { etcdTxn } : {}),
      ...(etcdDisk ? { etcdDisk } : {}),
      watchPending,
      dbMb: status ? Number(status.dbSize) / 2 ** 20 : NaN,
      keys: keyCount,
      ...(rus ? { rus } : {}),
      rss,
      cpu,
      loop,
      storeWrites,
      inFlight,
      dropped,
    };
    prevAt = now;
    rows.push(row);
    say(
      `${phase} t=${fmt(row.minute, 1)} min: ${fmt(row.placementsPerS, 0)} placements/s, running p50/p99 ${fmt(row.runningP50, 0)}/${fmt(row.runningP99, 0)} ms (jobs of one transaction ${fmt(row.runningOneTxn?.[0] ?? NaN, 0)}/${fmt(row.runningOneTxn?.[1] ?? NaN, 0)}, jobs not held ${fmt(row.runningUnheld?.[0] ?? NaN, 0)}/${fmt(row.runningUnheld?.[1] ?? NaN, 0)} with ${row.held ?? 0} tasks held; p99 to placed ${fmt(row.stages?.placed[1] ?? NaN, 0)} of which to the front-end ${fmt(row.stages?.accepted?.[1] ?? NaN, 0)}, placed→taken up ${fmt(row.stages?.started[1] ?? NaN, 0)}, taken up→running ${fmt(row.stages?.seen[1] ?? NaN, 0)}; the slowest ${row.tail?.n ?? 0}: ${fmt(row.tail?.placed ?? NaN, 0)} + ${fmt(row.tail?.started ?? NaN, 0)} + ${fmt(row.tail?.seen ?? NaN, 0)}), hollow starts waiting ${fmt(hollowStarts.waiting, 0)} (oldest ${fmt(hollowStarts.oldestS, 1)} s, mean write ${fmt(hollowStarts.meanMs, 0)} ms), ${occupancy(rus)}, ${fmt(row.conflicts, 0)} conflicts${conflictShare(row)}, freed RUs handed off ${HANDOFF_OUTCOMES.map((c) => `${c} ${row.handoffs?.[c] ?? 0}`).join(' · ')}, ${reuseText(row)}, db ${fmt(row.dbMb, 0)} MB, ${row.keys} keys, RSS ${Object.entries(
        rss,
      )
        .map(([k, v]) => `${k} ${fmt(v, 0)}`)
        .join(
          ' ',
        )}, ${row.etcdTxn ? `etcd handled ${row.etcdTxn.n} txns, p50/p99 ${fmt(row.etcdTxn.p50, 1)}/${fmt(row.etcdTxn.p99, 1)} ms, ` : ''}${row.etcdDisk ? `etcd WAL fsync p50/p99 ${fmt(row.etcdDisk.fsync.p50, 1)}/${fmt(row.etcdDisk.fsync.p99, 1)} ms (${row.etcdDisk.fsync.n}), backend commit ${fmt(row.etcdDisk.commit.p50, 1)}/${fmt(row.etcdDisk.commit.p99, 1)} ms (${row.etcdDisk.commit.n}), ` : ''}store writes p50/p99 ms ${Object.entries(
        storeWrites,
      )
        .map(([k, w]) => `${k} ${fmt(w.p50, 1)}/${fmt(w.p99, 1)}`)
        .join(' ')}, event loop p99/max ms and GC s ${Object.entries(loop)
        .map(([k, l]) => `${k} ${fmt(l.p99, 0)}/${fmt(l.max, 0)} ${fmt(l.gcS, 2)}`)
        .join(' ')}`,
    );
  };

  const faults: { at: string; what: string }[] = [];
  const fault = (what: string): void => {
    faults.push({ at: new Date().toISOString(), what });
    say(`fault: ${what}`);
  };
  const steady = MINUTES * 60_000;
  const plan = [
    {
      at: 0.4 * steady,
      run: async () => {
        const f = fes[FRONT_ENDS - 1] as FrontEnd;
        fault(`SIGKILL front-end fe${FRONT_ENDS - 1}`);
        await f.proc.kill('SIGKILL');
        await sleep(10_000);
        fes[FRONT_ENDS - 1] = await startFrontEnd(url, FRONT_ENDS - 1);
        fault(`front-end fe${FRONT_ENDS - 1} restarted`);
      },
    },
    {
      at: 0.5 * steady,
      run: async () => {
        fault('kill 5% of the hollow nodes');
        hollow.child.kill('SIGUSR2');
        await Promise.resolve();
      },
    },
    {
      at: 0.6 * steady,
      run: async () => {
        fault('etcd restart');
        await etcd.restart({ downMs: 2000 });
        fault('etcd back');
      },
    },
    {
      at: 0.7 * steady,
      run: async () => {
        // A process that stops answering for longer than its leases live (a long GC pause, a host
        // stall): the housekeeper's, after the etcd restart, so that the election must hand over.
        const leading = await leadingFrontEnds();
        const i = leading[0] ?? 0;
        const f = fes[i] as FrontEnd;
        fault(
          `SIGSTOP front-end fe${i} for ${PAUSE_S} s (${leading.length === 1 ? 'the housekeeper' : `housekeepers: ${leading.map((j) => `fe${j}`).join('+') || 'none'}`})`,
        );
        f.proc.child.kill('SIGSTOP');
        await sleep(PAUSE_S * 1000);
        f.proc.child.kill('SIGCONT');
        fault(`front-end fe${i} resumed`);
      },
    },
  ];
  const logs = join(OUT, `${NAME}-logs`);
  mkdirSync(logs, { recursive: true });
  const profileRuns = ETCD_PROFILE_AT.map((min) =>
    sleep(min * 60_000)
      .then(async () => {
        const res = await fetch(`${etcd.endpoint}/debug/pprof/profile?seconds=30`);
        if (!res.ok) throw new Error(`etcd pprof: HTTP ${res.status}`);
        const gz = new Uint8Array(await res.arrayBuffer());
        writeFileSync(join(logs, `etcd-cpu-${min}.pb.gz`), gz);
        const text = pprofTopText(pprofTop(gz));
        writeFileSync(join(logs, `etcd-cpu-${min}.txt`), `etcd CPU profile, 30 s from minute ${min} of the load\n\n${text}\n`);
        say(`etcd CPU profile at minute ${min}: ${text.split('\n')[0]}`);
      })
      .catch((e: unknown) => say(`etcd profile failed: ${String(e)}`)),
  );
  const faultRuns: Promise<void>[] = [...profileRuns];
  for (const p of process.argv.includes('--no-faults') ? [] : plan) {
    faultRuns.push(
      sleep(p.at)
        .then(p.run)
        .catch((e: unknown) => say(`fault failed: ${String(e)}`)),
    );
  }

  const phaseEnd = started + steady;
  while (Date.now() < phaseEnd) {
    await sleep(Math.min(ROW_MS, phaseEnd - Date.now()));
    await sampleRow(`${Math.round(LOAD * 100)}%`);
  }
  await Promise.all(faultRuns);
  rate = 1.2 * capacityJobsPerS;
  const overEnd = Date.now() + OVERLOAD_MIN * 60_000;
  while (Date.now() < overEnd) {
    await sleep(Math.min(ROW_MS, overEnd - Date.now()));
    await sampleRow('120%');
  }
  generating = false;
  await generator;
  // Drain: until every acknowledged job is final, or a bound (the backlog may be long).
  const drainBound = Date.now() + Number(flag('drain-minutes', quick ? '5' : '20')) * 60_000;
  while (Date.now() < drainBound && (inFlight > 0 || auditor.notFinal(acked).length > 0)) {
    await sleep(Math.min(ROW_MS, 5000));
    if (rows.length === 0 || Date.now() - prevAt >= ROW_MS) await sampleRow('drain');
  }
  await sampleRow('end');
  // The processes' own logs (warnings and errors), for a look at what happened; saved before the
  // audit, which may fail against an overloaded etcd.
  writeFileSync(join(logs, 'hollow.log'), hollow.output());
  fes.forEach((f, i) => writeFileSync(join(logs, `fe${i}.log`), f.proc.output()));
  await auditor.finalAudit(acked);
  const counts = auditor.counts();
  say(
    `audit: ${acked.length} jobs acknowledged, ${counts.final} seen final, ${counts.deleted} deleted by retention; ${auditor.violations.length} violations; watch errors ${auditor.watchErrors.length}`,
  );

  await auditor.close();
  for (const f of fes) await f.proc.kill();
  await hollow.kill();
  client.close();
  await store.close();
  await etcd.stop();

  report({
    rows,
    faults,
    acked: acked.length,
    failedSubmissions,
    refused,
    counts,
    violations: auditor.violations,
    watchErrors: auditor.watchErrors,
    dropped,
    totalRus,
    capacityJobsPerS,
    frees: auditor.frees,
    placedAgain: placedAgainWaits(faults, auditor.placedAgain),
  });
  await charts(rows);
}

function pidOf(dataDir: string): number | undefined {
  // The etcd child of startEtcd: the process whose command line names its data dir.
  try {
    const out = execFileSync('pgrep', ['-f', '--', `--data-dir ${dataDir}`])
      .toString()
      .trim()
      .split('\n')[0];
    return out ? Number(out) : undefined;
  } catch {
    return undefined;
  }
}

/** How bursty the frees were: the share of them that came in a revision freeing several RUs. */
function freesLine(f: Summary['frees']): string {
  if (!f || f.total === 0) return 'none recorded';
  const single = f.byRevision[1] ?? 0;
  const over = (n: number): number => f.byRevision.slice(n + 1).reduce((a, b) => a + b, 0);
  const pct = (x: number): string => `${fmt((100 * x) / f.total, 1)}%`;
  return `${f.total} in ${f.revisions} revisions; alone in their revision ${pct(single)}, in revisions freeing more than 1 RU ${pct(f.total - single)}, more than 4 ${pct(over(4))}, more than 15 ${pct(over(15))}; largest ${f.largest}`;
}

/** Seconds from the node kill to each placement again of a killed node's task, by quantile. */
interface PlacedAgain {
  tasks: number;
  killAt?: string;
  first?: number;
  p50?: number;
  p99?: number;
  last?: number;
  /** The same by the process whose agent placed them again: how many, and the last wait. */
  by?: Record<string, { tasks: number; last: number }>;
}

/**
 * How long the tasks of the killed hollow nodes waited before their owners placed them again
 * (they wait out the nodes' disconnect grace and a margin), from the auditor's times.
 */
function placedAgainWaits(faults: { at: string; what: string }[], placed: { at: number; agent: string }[]): PlacedAgain {
  const kill = faults.find((f) => f.what.startsWith('kill ') && f.what.includes('hollow nodes'));
  if (!kill || placed.length === 0) return { tasks: placed.length, ...(kill ? { killAt: kill.at } : {}) };
  const at = Date.parse(kill.at);
  const wait = (t: number): number => Math.round((t - at) / 100) / 10;
  const waits = placed.map((p) => wait(p.at)).sort((a, b) => a - b);
  const q = (p: number): number => waits[Math.min(waits.length - 1, Math.floor(p * waits.length))] ?? NaN;
  const by: Record<string, { tasks: number; last: number }> = {};
  for (const p of placed) {
    // Agents are named "<process>/<agent>"; the soak's processes are fe0, fe1, …
    const proc = p.agent.split('/')[0] ?? '?';
    const b = (by[proc] ??= { tasks: 0, last: -Infinity });
    b.tasks++;
    b.last = Math.max(b.last, wait(p.at));
  }
  return { tasks: waits.length, killAt: kill.at, first: waits[0], p50: q(0.5), p99: q(0.99), last: waits[waits.length - 1], by };
}

function placedAgainLine(p: PlacedAgain | undefined): string {
  if (!p) return 'not recorded';
  if (p.killAt === undefined) return p.tasks > 0 ? `${p.tasks} placed again, no node kill recorded` : 'no node kill';
  if (p.tasks === 0) return 'none placed again';
  return `${p.tasks} placed again ${fmt(p.first ?? NaN, 1)} / ${fmt(p.p50 ?? NaN, 1)} / ${fmt(p.p99 ?? NaN, 1)} / ${fmt(p.last ?? NaN, 1)} s after the kill (first / p50 / p99 / last; the nodes' grace is ${GRACE}, plus a 2 s margin); by the process that placed them again: ${Object.entries(
    p.by ?? {},
  )
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([proc, b]) => `${proc} ${b.tasks} (last ${fmt(b.last, 1)} s)`)
    .join(', ')}`;
}

/** Who was the housekeeper over the rows, and in how many rows none was (retention and compaction stood still). */
function housekeeperLine(rows: Row[]): string {
  const seen = rows.filter((r) => r.housekeeper !== undefined);
  if (seen.length === 0) return 'not recorded';
  const none = seen.filter((r) => r.housekeeper === 'none');
  const who = [...new Set(seen.map((r) => r.housekeeper).filter((h) => h !== 'none'))];
  return `${who.join(', ') || 'nobody'} led; rows with no housekeeper: ${none.length} of ${seen.length}${none.length > 0 ? ` (minutes ${none.map((r) => fmt(r.minute, 1)).join(', ')})` : ''}`;
}

interface Summary {
  rows: Row[];
  faults: { at: string; what: string }[];
  acked: number;
  failedSubmissions: number;
  refused: number;
  counts: { jobs: number; final: number; deleted: number };
  /** RU frees by the number of RUs their revision freed (SoakAuditor.frees). */
  frees?: { total: number; revisions: number; largest: number; byRevision: number[] };
  /** How long after the node kill the tasks of the killed nodes were placed again (placedAgainWaits). */
  placedAgain?: PlacedAgain;
  violations: { kind: string; detail: string }[];
  watchErrors: string[];
  dropped: number;
  totalRus: number;
  capacityJobsPerS: number;
}

/** The commit the run measured (with "+changes" when the tree differed from it). */
function commit(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no', 'src', 'bench/soak.ts', 'bench/lib'], { encoding: 'utf8' }).trim();
    return dirty ? `${head}+changes` : head;
  } catch {
    return 'unknown';
  }
}

/** The slowest 1% of a row's tasks (at or above the p99 of the whole), with their stages' means. */
function tailSplit(split: [number, number, number, number][]): Row['tail'] {
  if (split.length === 0) return undefined;
  const p99 = pct(
    split.map((x) => x[0]),
    0.99,
  );
  const slow = split.filter((x) => x[0] >= p99);
  const mean = (i: number): number => slow.reduce((a, x) => a + (x[i] ?? 0), 0) / slow.length;
  return { n: slow.length, placed: mean(1), started: mean(2), seen: mean(3) };
}

/** One histogram's buckets in a scrape, for the samples with the label `label`: [upper bound s, cumulative count], or undefined. */
function histBuckets(text: string | undefined, metric: string, label: string): [number, number][] | undefined {
  if (text === undefined) return undefined;
  const out: [number, number][] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}_bucket{`) || !line.includes(label)) continue;
    const m = /le="([^"]+)"[^}]*\} (\S+)$/.exec(line);
    if (m) out.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]);
  }
  return out.length > 0 ? out.sort((a, b) => a[0] - b[0]) : undefined;
}

/** etcd's gRPC handling histogram of one method (`--metrics extensive`). */
function handlingBuckets(text: string, method: string): [number, number][] | undefined {
  return histBuckets(text, 'grpc_server_handling_seconds', `grpc_method="${method}"`);
}

/** p50 / p99 (ms, interpolated within a bucket) of what a cumulative histogram counted since `prev`. */
function bucketQuantiles(now: [number, number][], prev: [number, number][] | undefined): { p50: number; p99: number; n: number } {
  const counts = now.map(([le, c], i) => [le, c - (prev?.[i]?.[1] ?? 0)] as [number, number]);
  const n = counts[counts.length - 1]?.[1] ?? 0;
  const q = (p: number): number => {
    if (n <= 0) return NaN;
    const want = p * n;
    let lo = 0;
    let below = 0;
    for (const [le, c] of counts) {
      if (c >= want) return Number.isFinite(le) ? (lo + ((want - below) / Math.max(1, c - below)) * (le - lo)) * 1000 : lo * 1000;
      lo = le;
      below = c;
    }
    return NaN;
  };
  return { p50: q(0.5), p99: q(0.99), n };
}

/** GC seconds since the last row, from a process's running total (a restarted process counts from 0 again). */
function gcSince(now: { total: number; start: number }, prev: { total: number; start: number } | undefined): number {
  if (prev === undefined) return NaN;
  return now.start === prev.start ? now.total - prev.total : now.total;
}

/** The processes whose event loop the rows record. */
function loopNames(rows: Row[]): string[] {
  return Object.keys(rows.find((r) => r.loop)?.loop ?? {});
}

/** "p99/max gc" per process, e.g. "3/41 0.52 · …". */
function loopCell(r: Row, names: string[]): string {
  return names
    .map((n) => {
      const l = r.loop?.[n];
      return l ? `${fmt(l.p99, 0)}/${fmt(l.max, 0)} ${fmt(l.gcS, 2)}` : '-';
    })
    .join(' · ');
}

/**
 * submit → running by job size over the rows with arrivals but the first (it holds the warm-up):
 * each size's share of the tasks seen running, and the median and range of the rows' p50 and p99.
 */
function bySizeTable(rows: Row[]): string {
  const steady = rows.filter((r) => r.phase !== 'drain' && r.phase !== 'end' && r.runningBySize).slice(1);
  if (steady.length === 0) return 'submit → running by job size: no row with arrivals after the first.';
  const total = steady.reduce((a, r) => a + (r.runningBySize ?? []).reduce((b, c) => b + c.n, 0), 0);
  const spread = (xs: number[]): string => {
    const v = xs.filter(Number.isFinite);
    return v.length === 0 ? '-' : `${fmt(pct(v, 0.5), 0)} (${fmt(Math.min(...v), 0)}–${fmt(Math.max(...v), 0)})`;
  };
  return [
    "submit → running by the size of the task's job, the rows with arrivals but the first (median of the rows, and their range):",
    '',
    mdTable(
      [
        'job size',
        'tasks seen running',
        'share of tasks',
        'p50 ms',
        'p99 ms',
        'of which submit→placed · →taken up by the node · →recorded running: p50 / p99 ms',
      ],
      sizeClasses(ONE_TXN).map((size, i) => {
        const cells = steady.map((r) => r.runningBySize?.[i]).filter((c): c is NonNullable<typeof c> => c !== undefined);
        const n = cells.reduce((a, c) => a + c.n, 0);
        const stage = (pick: (c: (typeof cells)[number]) => [number, number] | undefined): string => {
          const v = cells.map(pick).filter((x): x is [number, number] => x !== undefined);
          const med = (k: 0 | 1): number => {
            const xs = v.map((x) => x[k]).filter(Number.isFinite);
            return xs.length === 0 ? NaN : pct(xs, 0.5);
          };
          return `${fmt(med(0), 0)} / ${fmt(med(1), 0)}`;
        };
        return [
          size,
          n,
          `${fmt(total > 0 ? (100 * n) / total : NaN, 1)}%`,
          spread(cells.map((c) => c.p50)),
          spread(cells.map((c) => c.p99)),
          [stage((c) => c.placed), stage((c) => c.started), stage((c) => c.seen)].join(' · '),
        ];
      }),
    ),
  ].join('\n');
}

function report(s: Summary): void {
  const procs = Object.keys(s.rows[0]?.rss ?? {});
  const handled = s.rows.some((r) => r.etcdTxn);
  const disk = s.rows.some((r) => r.etcdDisk);
  const writesNames = Object.keys(s.rows.find((r) => r.storeWrites && Object.keys(r.storeWrites).length > 0)?.storeWrites ?? {});
  const table = mdTable(
    [
      'min',
      'phase',
      'placements/s',
      'submit→running p50 / p99 ms (tasks of jobs placed in one transaction)',
      'submit→running p50 / p99 ms, tasks of jobs not held by admission or a wait for a free RU (tasks held)',
      'of which submit→placed (of that, submit→taken by a front-end) · →taken up by the node · →recorded running, p50 / p99 ms',
      'the slowest 1% (at or above the p99): tasks, mean ms of the three stages',
      'hollow task starts waiting / oldest wait s / mean start write ms',
      'conflicts (% of commits; by cause: another front-end took a pick · a sibling agent did · stale view · other compare)',
      'RU freed → placed again: p50 / p99 / max ms (RUs)',
      'sampling rounds · candidates scored, per placement',
      'finals',
      'owner leases fenced / jobs adopted / outcomes found in the next placement of their RU / tasks failed as compacted (their outcome compacted away before it was recorded)',
      'housekeeper',
      'RUs busy % of live / free / unschedulable / down',
      'etcd slow requests / pending watch events',
      'etcd DB MB',
      'keys',
      ...procs.map((p) => `${p} RSS MB / CPU`),
      `event loop delay p99 / max ms, GC s (${loopNames(s.rows).join(' · ')})`,
      ...(handled ? ['etcd txns handled: p50 / p99 ms (count)'] : []),
      ...(disk ? ['etcd WAL fsync · backend commit: p50 / p99 ms (count)'] : []),
      ...(writesNames.length > 0 ? [`store writes as each process timed them: p50 / p99 ms (${writesNames.join(' · ')})`] : []),
    ],
    s.rows.map((r) => [
      fmt(r.minute, 1),
      r.phase,
      fmt(r.placementsPerS, 0),
      `${fmt(r.runningP50, 0)} / ${fmt(r.runningP99, 0)}${r.runningOneTxn ? ` (${fmt(r.runningOneTxn[0], 0)} / ${fmt(r.runningOneTxn[1], 0)})` : ''}`,
      r.runningUnheld ? `${fmt(r.runningUnheld[0], 0)} / ${fmt(r.runningUnheld[1], 0)} (${r.held ?? 0})` : '-',
      r.stages
        ? [r.stages.placed, r.stages.started, r.stages.seen]
            .map(
              ([a, b], i) =>
                `${fmt(a, 0)} / ${fmt(b, 0)}${i === 0 && r.stages?.accepted ? ` (${fmt(r.stages.accepted[0], 0)} / ${fmt(r.stages.accepted[1], 0)})` : ''}`,
            )
            .join(' · ')
        : '-',
      r.tail ? `${r.tail.n}: ${fmt(r.tail.placed, 0)} · ${fmt(r.tail.started, 0)} · ${fmt(r.tail.seen, 0)}` : '-',
      r.hollowStarts ? `${fmt(r.hollowStarts.waiting, 0)} / ${fmt(r.hollowStarts.oldestS, 1)} / ${fmt(r.hollowStarts.meanMs, 0)}` : '-',
      `${r.conflicts}${conflictShare(r)}`,
      r.reuse ? `${fmt(r.reuse.p50, 0)} / ${fmt(r.reuse.p99, 0)} / ${fmt(r.reuse.max, 0)} (${r.reuse.n})` : '-',
      perPlacement(r),
      r.finals,
      `${r.fenced ?? '-'} / ${r.adopted ?? '-'} / ${r.carried ?? '-'} / ${r.compacted ?? '-'}`,
      r.housekeeper ?? '-',
      r.rus ? `${fmt((100 * r.rus.busy) / (r.rus.busy + r.rus.free + r.rus.unschedulable), 1)} / ${r.rus.free} / ${r.rus.unschedulable} / ${r.rus.down}` : '-',
      `${fmt(r.slowApplies ?? NaN, 0)} / ${fmt(r.watchPending ?? NaN, 0)}`,
      fmt(r.dbMb, 0),
      r.keys,
      ...procs.map((p) => `${fmt(r.rss[p] ?? NaN, 0)} / ${fmt(r.cpu[p] ?? NaN, 2)}`),
      loopCell(r, loopNames(s.rows)),
      ...(handled ? [r.etcdTxn ? `${fmt(r.etcdTxn.p50, 1)} / ${fmt(r.etcdTxn.p99, 1)} (${r.etcdTxn.n})` : '-'] : []),
      ...(disk ? [r.etcdDisk ? [r.etcdDisk.fsync, r.etcdDisk.commit].map((d) => `${fmt(d.p50, 1)} / ${fmt(d.p99, 1)} (${d.n})`).join(' · ') : '-'] : []),
      ...(writesNames.length > 0
        ? [
            writesNames
              .map((n) => {
                const w = r.storeWrites?.[n];
                return w ? `${fmt(w.p50, 1)}/${fmt(w.p99, 1)}` : '-';
              })
              .join(' · '),
          ]
        : []),
    ]),
  );
  const byKind = new Map<string, number>();
  for (const v of s.violations) byKind.set(v.kind, (byKind.get(v.kind) ?? 0) + 1);
  const md = [
    '# Soak: a hollow cell on etcd, with faults',
    '',
    `\`npx tsx bench/soak.ts ${process.argv.slice(2).join(' ')}\` on ${machine()}, ${new Date().toISOString().slice(0, 16)} UTC, commit ${COMMIT}.`,
    `${SERVERS} hollow servers of \`${CLUSTER}\` (${s.totalRus} RUs), ${FRONT_ENDS} front-ends × ${AGENTS} agents, retention ${RETAIN}, compaction ${COMPACT_MARGIN} behind, hollow nodes' disconnect grace ${GRACE}; jobs of ${fmt(MEAN_TASKS, 1)} tasks on average, tasks of ${TASK_S} s on average (0.5–1.5×); capacity ${fmt(s.capacityJobsPerS, 1)} jobs/s; ${LOAD * 100}% for ${MINUTES} min, 120% for ${OVERLOAD_MIN} min, then drain.`,
    '',
    table,
    '',
    bySizeTable(s.rows),
    '',
    requestsTable(s.rows),
    '',
    `Faults: ${s.faults.map((f) => `${f.at.slice(11, 19)} ${f.what}`).join('; ') || 'none'}.`,
    '',
    `Audit: ${s.acked} jobs acknowledged (${s.failedSubmissions} submissions not acknowledged after 20 tries), ${s.counts.final} seen final, ${s.counts.deleted} deleted by retention; arrivals the generator could not send (over ${MAX_IN_FLIGHT} in flight): ${s.dropped}; submissions refused by a front-end's back-pressure (RESOURCE_EXHAUSTED) and tried again: ${s.refused}.`,
    `Violations: ${s.violations.length === 0 ? 'none' : [...byKind].map(([k, n]) => `${k} ${n}`).join(', ')}.${
      s.violations.length > 0
        ? `\n\n${s.violations
            .slice(0, 10)
            .map((v) => `- ${v.kind}: ${v.detail}`)
            .join('\n')}`
        : ''
    }`,
    `Housekeeper: ${housekeeperLine(s.rows)}.`,
    `RU frees: ${freesLine(s.frees)}.`,
    `Tasks of the killed nodes: ${placedAgainLine(s.placedAgain)}.`,
    `Auditor watch interruptions: ${s.watchErrors.length === 0 ? 'none' : s.watchErrors.join('; ')}.`,
  ].join('\n');
  const files = writeResults(NAME, s, md, OUT);
  say(`wrote ${files.join(', ')}`);
}

async function charts(rows: Row[]): Promise<void> {
  const dir = OUT;
  const series = (name: string, f: (r: Row) => number): Point[] => rows.map((r) => ({ x: r.minute, y: f(r), series: name }));
  const out: [string, string, string, Point[]][] = [
    [`${NAME}-throughput.svg`, 'Placements per second', 'placements/s', series('placements/s', (r) => r.placementsPerS)],
    [`${NAME}-latency.svg`, 'Submit → running', 'ms', [...series('p50', (r) => r.runningP50), ...series('p99', (r) => r.runningP99)]],
    [`${NAME}-etcd.svg`, 'etcd DB size', 'MB', series('DB MB', (r) => r.dbMb)],
    [
      `${NAME}-occupancy.svg`,
      "RUs busy, of the live RUs (one front-end's view)",
      '%',
      series('busy %', (r) => (r.rus ? (100 * r.rus.busy) / (r.rus.busy + r.rus.free + r.rus.unschedulable) : NaN)),
    ],
    [`${NAME}-keys.svg`, 'Keys in the cell', 'keys', series('keys', (r) => r.keys)],
    [`${NAME}-rss.svg`, 'Resident memory', 'MB', Object.keys(rows[0]?.rss ?? {}).flatMap((p) => series(p, (r) => r.rss[p] ?? NaN))],
  ];
  for (const [file, title, yTitle, points] of out) {
    writeFileSync(join(dir, file), await renderSvg({ file, title, xTitle: 'minutes', yTitle, points }));
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`soak failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    // A failed run takes the cell down too, as an interrupted one does.
    void (teardown?.() ?? Promise.resolve()).finally(() => process.exit(1));
  },
);
