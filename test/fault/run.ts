/**
 * One seeded fault-injection run, shared by the short test (test/fault/faults.test.ts) and the long
 * benchmark (bench/faults.ts): start the cell, run the workload while the nemesis injects its plan,
 * stop submitting, wait for every job to end, read etcd's whole history and the execution
 * records, and check them. The cell is always stopped, and every child process killed, before
 * this resolves or throws.
 */
import { readFileSync } from 'node:fs';
import { LiveKeys } from '../../src/state/live-records.ts';
import { Keys } from '../../src/state/keys.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { history, pendingJobs } from '../support/audit.ts';
import { check, parseRecords, type CheckReport, type FinalState } from '../support/fault-checker.ts';
import { Nemesis, planFaults, type FaultRecord, type PlannedFault, type PlanOptions } from '../support/nemesis.ts';
import { FaultCell } from './cell.ts';
import { Workload } from './workload.ts';

export interface ScenarioOptions {
  seed: number;
  leaseTtlS: number;
  /** The monitors' disconnect grace, ms (default: the monitor's own, 60 s). */
  graceMs?: number;
  /** Task durations of the workload (see WorkloadOptions). */
  taskSeconds?: [number, number];
  longShare?: number;
  plan: PlanOptions;
  /** Workload after the last fault is repaired, ms. */
  tailMs?: number;
  /** How long to wait for every job to reach a final state once submissions stop. */
  drainMs?: number;
  meanGapMs?: number;
  /** Each submission tries one front-end until its deadline (WorkloadOptions.sticky). */
  sticky?: boolean;
  say?: (line: string) => void;
  /** Keep the run directory (process logs, task logs, execution records). */
  keep?: boolean;
  /** Called with the cell as soon as it runs (so a test can stop it from afterAll). */
  onCell?: (cell: FaultCell) => void;
}

export interface ScenarioResult {
  seed: number;
  plan: PlannedFault[];
  faults: FaultRecord[];
  report: CheckReport;
  /** Jobs not final when the drain ended. */
  pending: string[];
  ms: { setup: number; faults: number; drain: number; check: number; total: number };
  /** Last lines of every process's output, when something went wrong. */
  outputs?: string;
  dir: string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function runScenario(o: ScenarioOptions): Promise<ScenarioResult> {
  const say = o.say ?? ((): void => undefined);
  const t0 = Date.now();
  const rng = new SeededRng(o.seed);
  const plan = planFaults(rng.fork(), o.leaseTtlS * 1000, o.plan, o.graceMs);
  const cell = await FaultCell.start({ leaseTtlS: o.leaseTtlS, ...(o.graceMs !== undefined ? { graceMs: o.graceMs } : {}), say });
  o.onCell?.(cell);
  let keep = o.keep ?? false;
  try {
    const tSetup = Date.now();
    say(`[faults] seed ${o.seed}: cell up in ${tSetup - t0} ms (${cell.dir}); plan ${plan.map((f) => f.kind).join(', ')}`);
    const store = await cell.store();
    const keys = new Keys(cell.prefix);
    const live = new LiveKeys(keys);
    const workload = new Workload({
      rng: rng.fork(),
      addrs: cell.feAddrs,
      taskScript: cell.taskScript,
      recordsFile: cell.recordsFile,
      meanGapMs: o.meanGapMs ?? 600,
      ...(o.taskSeconds ? { taskSeconds: o.taskSeconds } : {}),
      ...(o.longShare !== undefined ? { longShare: o.longShare } : {}),
      ...(o.sticky ? { sticky: true } : {}),
    });
    const windowStart = Date.now();
    workload.start();
    const nemesis = new Nemesis(cell.target(), say);
    const faults = await nemesis.run(plan);
    await sleep(o.tailMs ?? 4000);
    await workload.stop();
    const windowEnd = Date.now();
    const tFaults = Date.now();

    const acked = workload.acked().map((s) => s.jobId as string);
    const deadline = Date.now() + (o.drainMs ?? 30_000);
    let pending = await pendingJobs(store, keys, acked);
    while (pending.length > 0 && Date.now() < deadline) {
      await sleep(500);
      pending = await pendingJobs(store, keys, acked);
    }
    // Let the last releases and summaries land before the end state is read.
    await sleep(2000);
    const tDrain = Date.now();

    const range = async (prefix: string): Promise<FinalState['jobs']> => (await store.range(prefix)).kvs;
    const final: FinalState = {
      jobs: await range(keys.jobs()),
      tasks: await range(keys.allTasks()),
      owners: await range(keys.owners()),
      queue: await range(keys.queue()),
      rus: await range(keys.rus()),
      servers: await range(keys.servers()),
      requests: await range(`${cell.prefix}requests/`),
      decisions: await range(`${cell.prefix}decisions/`),
      reports: await range(live.reports()),
    };
    const events = await history(store, cell.prefix, 1);
    cell.watcher.poll();
    const { runs, malformed } = parseRecords(readFileSync(cell.recordsFile, 'utf8'), cell.watcher.gone);
    const report = check({
      prefix: cell.prefix,
      events,
      final,
      runs,
      malformed,
      submissions: workload.submissions,
      servers: cell.monitors.map((m) => m.name),
      faults,
      window: { start: windowStart, end: windowEnd },
    });
    const tCheck = Date.now();
    const result: ScenarioResult = {
      seed: o.seed,
      plan,
      faults,
      report,
      pending,
      ms: { setup: tSetup - t0, faults: tFaults - tSetup, drain: tDrain - tFaults, check: tCheck - tDrain, total: tCheck - t0 },
      dir: cell.dir,
    };
    if (report.violations.length > 0 || pending.length > 0) {
      result.outputs = cell.outputs();
      keep ||= process.env.FAULT_KEEP === '1';
    }
    return result;
  } finally {
    await cell.stop({ keep });
  }
}
