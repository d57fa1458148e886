/**
 * A production trace's busiest stretch replayed on a live hollow cell (bench/trace-live.ts): the
 * trace's node list as hollow nodes (trace-cell.ts) on etcd, `tarcil server` front-ends, the
 * soak's auditor, and each pod of the window submitted over gRPC at its (compressed) creation
 * time as a job of its cores' tasks, with its platforms, its QoS class's priority, `mode: gang` and
 * `locality: {mode: 'pack', required: true}` (every task on one server). Beside it, the
 * simulator's tarcil policy on exactly the same jobs (src/sim/experiments/trace-run.ts) and
 * production's own wait for them.
 *
 * A job's wait is from the bench's sending of SubmitJob until the last of its tasks is seen
 * running by the bench's watch of the task records (the soak's "running"). What the placements
 * were is checked from the stored records, not from the specs the bench sent: each task's servers
 * from its task records (running) and its RU records (busy), each server's platform from the
 * cell's server records; a pod whose tasks ran on more than one server, and a task on a server of
 * a platform its job did not allow, are counted (both must be 0). Preemption is off in the
 * front-ends' agents, as in the simulator's replay.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { picksPerTxn } from '../../src/agent/attempt.ts';
import { replayTrace, type TraceRun } from '../../src/sim/experiments/trace-run.ts';
import { Keys } from '../../src/state/keys.ts';
import { LiveKeys } from '../../src/state/live-records.ts';
import { openStore } from '../../src/store/index.ts';
import type { WatchHandle } from '../../src/store/types.ts';
import type { Trace, TraceJob } from '../../src/workload/trace.ts';
import { ensureEtcd, startEtcd, type EtcdProcess } from '../../test/support/etcd.ts';
import type { TarcilProc } from '../../test/support/procs.ts';
import { startFrontEnd, startHollowCell, type LiveFrontEnd } from './live-cell.ts';
import { ruStates, scrape } from './metrics.ts';
import { SoakAuditor } from './soak-audit.ts';
import { livePlatforms, writeTraceCell } from './trace-cell.ts';
import { chunkJob, chunkTaskRecords } from '../../src/state/task-chunks.ts';

export interface TraceLiveOptions {
  /** The whole trace, loaded with its compression. */
  trace: Trace;
  /** The window's length in trace seconds (before compression). */
  windowS: number;
  seed: number;
  frontEnds: number;
  agents: number;
  /** An etcd to use (a test's); absent: the run starts its own, as the soak does. */
  etcdEndpoint?: string;
  /** Allocation is sampled this often (wall ms). */
  sampleMs: number;
  /** How long the run waits for the last jobs to end after the last arrival and its longest pod. */
  drainMarginMs: number;
  say: (line: string) => void;
  /** The processes' output is handed here before they are stopped (name, text). */
  keepLog?: (name: string, text: string) => void;
}

/** One job of the window: its live outcome beside the simulator's and production's. */
export interface LiveJob {
  id: string;
  qos: string;
  tasks: number;
  neverScheduled: boolean;
  /** Submission → all tasks seen running, wall ms; absent: never all running. */
  liveWaitMs?: number;
  /** The same in trace seconds (× the compression), and the simulator's and production's. */
  liveWaitS?: number;
  simWaitS?: number;
  productionWaitS?: number;
  /** Servers its tasks were seen on (task records running, RU records busy). */
  servers: number;
  /** The bench sent SubmitJob this long after the pod's (compressed) creation time (ms). */
  sendLagMs?: number;
}

export interface AllocationPoint {
  /** Trace hours since the window's start. */
  hour: number;
  allocated: number;
}

export interface TraceLiveResult {
  window: { startS: number; endS: number; pods: number; cores: number; compress: number };
  cell: { servers: number; rus: number; platforms: number; registeredRus: number; maxTxnOps: number };
  jobs: LiveJob[];
  allocation: { live: AllocationPoint[]; sim: AllocationPoint[]; production: AllocationPoint[] };
  sim: { splitJobs: number; platformViolations: number; quality: TraceRun['quality'] };
  /** The placements as the store recorded them (see the header). */
  placements: PlacementAudit;
  audit: {
    acked: number;
    failedSubmissions: number;
    final: number;
    notFinal: string[];
    violations: { kind: string; detail: string }[];
    watchErrors: string[];
  };
  wallS: number;
}

export interface PlacementAudit {
  /** Tasks whose server was read from a task or RU record. */
  tasksSeen: number;
  /** Pods of several cores that must share one server (gangs packed by server) and were placed (all their tasks seen). */
  multiCorePlaced: number;
  /** Of those, pods whose tasks were seen on more than one server. */
  splitPods: number;
  /** Tasks seen on a server whose platform (its server record) the job's spec did not allow. */
  offPlatformTasks: number;
  /** Tasks seen on a server with no server record. */
  unknownServerTasks: number;
  /** Up to 10 of the above, as "job: what". */
  examples: string[];
}

/** The busiest stretch: the window of `windowMs` (compressed ms) whose arrivals ask the most cores. */
export function busiestWindow(jobs: readonly TraceJob[], windowMs: number): { startMs: number; jobs: TraceJob[]; cores: number } {
  const js = [...jobs].sort((a, b) => a.arrivalMs - b.arrivalMs);
  let best = -1;
  let bestLo = 0;
  let bestHi = -1;
  let sum = 0;
  let lo = 0;
  for (let hi = 0; hi < js.length; hi++) {
    sum += (js[hi] as TraceJob).tasks;
    while ((js[hi] as TraceJob).arrivalMs - (js[lo] as TraceJob).arrivalMs > windowMs) sum -= (js[lo++] as TraceJob).tasks;
    if (sum > best) {
      best = sum;
      bestLo = lo;
      bestHi = hi;
    }
  }
  const win = js.slice(bestLo, bestHi + 1);
  return { startMs: win[0]?.arrivalMs ?? 0, jobs: win, cores: Math.max(0, best) };
}

/** Operations of a node's registration beyond its RUs' records (its server record and the like), with room to spare. */
const TXN_MARGIN = 8;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The job spec a pod is submitted as: a pod packed on one server (a gang) requires it
 * (`locality.required`), as the simulator's replay does.
 */
export function liveSpec(j: TraceJob, platforms: string[] | undefined): Record<string, unknown> {
  if (j.durationMs === undefined) throw new Error(`job ${j.id} (line ${j.line}) has a command, not a duration: hollow nodes run simulated tasks only`);
  const oneServer = j.mode === 'gang' && j.locality.mode === 'pack';
  return {
    name: j.id,
    profile: j.profile,
    tasks: j.tasks,
    priority: j.priority,
    mode: j.mode,
    locality: oneServer ? { ...j.locality, required: true } : j.locality,
    ...(platforms ? { constraints: { platforms } } : {}),
    durationMs: j.durationMs,
  };
}

/**
 * Follows the task records (when each task was first seen running, and on which servers it ran)
 * and the RU records (which RUs each task held busy).
 */
class RunningTracker {
  private handle: WatchHandle | undefined;
  private ruHandle: WatchHandle | undefined;
  /** Job id → task index → [first seen running (ms since the epoch), server]. */
  readonly seen = new Map<string, Map<number, [number, string]>>();
  /** Job id → task index → every server a task or RU record put it on. */
  readonly placedOn = new Map<string, Map<number, Set<string>>>();
  private note(job: string, task: number, server: string): void {
    let tasks = this.placedOn.get(job);
    if (!tasks) this.placedOn.set(job, (tasks = new Map<number, Set<string>>()));
    let set = tasks.get(task);
    if (!set) tasks.set(task, (set = new Set<string>()));
    set.add(server);
  }
  /** The watch's interruptions (tasks seen running after one may be missing: reported with the audit's). */
  readonly errors: string[] = [];
  constructor(private readonly live: LiveKeys) {}
  async start(store: Awaited<ReturnType<typeof openStore>>, keys: Keys, fromRevision: number): Promise<void> {
    this.handle = await store.watch({
      prefix: keys.allTasks(),
      fromRevision,
      onEvents: (b) => {
        const now = Date.now();
        for (const ev of b.events) {
          if (ev.type === 'delete') continue;
          // A chunk record (src/state/task-chunks.ts): every task it names started with it.
          const chunkOf = chunkJob(keys, ev.kv.key);
          const started =
            chunkOf !== undefined ? chunkTaskRecords(chunkOf, ev.kv).map((t) => ({ job: chunkOf, index: t.index, server: t.ru?.server ?? '?' })) : [];
          if (chunkOf === undefined) {
            if (!ev.kv.value.includes('"state":"running"')) continue;
            const ref = this.live.parseTask(ev.kv.key);
            if (!ref) continue;
            const rec = JSON.parse(ev.kv.value) as { ru?: { server?: string }; server?: string };
            started.push({ job: ref.job, index: ref.index, server: rec.ru?.server ?? rec.server ?? '?' });
          }
          for (const { job, index, server } of started) {
            let tasks = this.seen.get(job);
            if (!tasks) this.seen.set(job, (tasks = new Map<number, [number, string]>()));
            this.note(job, index, server);
            if (tasks.has(index)) continue;
            tasks.set(index, [now, server]);
          }
        }
      },
      onError: (e) => void this.errors.push(`running tracker, ${new Date().toISOString()}: ${e.message}`),
    });
    this.ruHandle = await store.watch({
      prefix: keys.rus(),
      fromRevision,
      onEvents: (b) => {
        for (const ev of b.events) {
          if (ev.type === 'delete' || !ev.kv.value.includes('"state":"busy"')) continue;
          const ref = keys.parseRu(ev.kv.key);
          const rec = JSON.parse(ev.kv.value) as { state?: string; job?: string; task?: number };
          if (!ref || rec.state !== 'busy' || rec.job === undefined || rec.task === undefined) continue;
          this.note(rec.job, rec.task, ref.server);
        }
      },
      onError: (e) => void this.errors.push(`RU tracker, ${new Date().toISOString()}: ${e.message}`),
    });
  }
  async close(): Promise<void> {
    await this.handle?.close();
    await this.ruHandle?.close();
  }
}

/** The window's production allocation: the cores of its pods running in production at each hour. */
function productionAllocation(jobs: readonly TraceJob[], startMs: number, rus: number, compress: number, hours: number[]): AllocationPoint[] {
  const sec = compress / 1000;
  const spans = jobs
    .filter((j) => j.productionWaitMs !== undefined)
    .map((j) => {
      const from = (j.arrivalMs + (j.productionWaitMs as number) - startMs) * sec;
      return { from, to: from + (j.durationMs ?? 0) * sec, cores: j.tasks };
    });
  return hours.map((h) => ({ hour: h, allocated: spans.reduce((a, s) => (s.from <= h * 3600 && h * 3600 < s.to ? a + s.cores : a), 0) / rus }));
}

export async function runTraceLive(o: TraceLiveOptions): Promise<TraceLiveResult> {
  const t0Run = Date.now();
  const { trace } = o;
  const compress = trace.compress;
  const win = busiestWindow(trace.jobs, (o.windowS * 1000) / compress);
  if (win.jobs.length === 0) throw new Error('--pods: the trace has no job to replay');
  const sub: Trace = { ...trace, jobs: win.jobs };
  const rus = trace.servers.reduce((a, s) => a + s.rus, 0);
  o.say(
    `window: ${win.jobs.length} pods asking ${win.cores} cores from trace second ${((win.startMs * compress) / 1000).toFixed(0)}, ${o.windowS} s long (${(o.windowS / compress / 60).toFixed(1)} min at ${compress}×)`,
  );

  // The simulator's tarcil policy on exactly these jobs.
  const sim = replayTrace(sub, 'tarcil', { seed: o.seed, samples: 200 });
  o.say(`simulator: ${sim.outcomes.filter((x) => x.waitS !== undefined).length} of ${sim.outcomes.length} placed in ${(sim.wallMs / 1000).toFixed(1)} s`);

  const work = mkdtempSync(join(tmpdir(), 'tarcil-trace-live-'));
  const cell = writeTraceCell(trace, work);
  const env = { TARCIL_PROFILES: cell.profilesDir };
  const specs = win.jobs.map((j) => liveSpec(j, livePlatforms(cell, j.platforms)));

  const children: TarcilProc[] = [];
  let etcd: EtcdProcess | undefined;
  const prefix = `/tarcil/trace-live-${randomUUID().slice(0, 8)}/`;
  // A node registers its server and all its RUs in one transaction: nodes of more cores than
  // etcd's default limit of operations (128) allows need a higher one, told to every process.
  const largest = trace.servers.reduce((m, s) => Math.max(m, s.rus), 0);
  const maxTxnOps = largest + TXN_MARGIN > 128 ? Math.max(256, largest + TXN_MARGIN) : 128;
  const txnFlags = maxTxnOps !== 128 ? ['--etcd-max-txn-ops', String(maxTxnOps)] : [];
  let endpoint = o.etcdEndpoint;
  if (endpoint === undefined) {
    etcd = await startEtcd({
      bin: ensureEtcd(o.say),
      extraArgs: ['--quota-backend-bytes', '8589934592', ...(maxTxnOps !== 128 ? ['--max-txn-ops', String(maxTxnOps)] : [])],
    });
    endpoint = etcd.endpoint;
  } else if (maxTxnOps !== 128)
    throw new Error(`--nodes: a node of ${largest} cores needs etcd's --max-txn-ops of ${maxTxnOps}; the etcd given has the default (128)`);
  const url = endpoint.replace(/^http:\/\//, 'etcd://');
  const stopAll = async (): Promise<void> => {
    for (const c of children) c.child.kill('SIGKILL');
    await etcd?.stop();
    rmSync(work, { recursive: true, force: true });
  };
  const onSignal = (): void => void stopAll().finally(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const store = await openStore(url);
  try {
    const hollow = await startHollowCell({ url, prefix, cluster: cell.clusterFile, disconnectGrace: '10s', extra: txnFlags, env }, (p) => children.push(p));
    o.say(
      `hollow cell: ${hollow.nodes} nodes, ${hollow.totalRus} RUs (${cell.platforms.size} trace platforms as ${[...cell.platforms.values()].flat().length} live ones)`,
    );
    const fes: LiveFrontEnd[] = [];
    for (let i = 0; i < o.frontEnds; i++) {
      fes.push(
        await startFrontEnd(
          { url, prefix, agents: o.agents, name: `fe${i}`, retain: '5m', compactMargin: '2m', extra: ['--agent', 'preemption=false', ...txnFlags], env },
          (p) => children.push(p),
        ),
      );
    }
    o.say(`front-ends listening on ${fes.map((f) => f.port).join(', ')}`);
    const keys = new Keys(prefix);
    // Each server's platform, from the cell's server records (for the placement audit).
    const platformOf = new Map<string, string>();
    for (const kv of (await store.range(keys.servers())).kvs) {
      const rec = JSON.parse(kv.value) as { id?: string; platform?: string };
      if (rec.id !== undefined && rec.platform !== undefined) platformOf.set(rec.id, rec.platform);
    }
    const auditor = new SoakAuditor(store, keys, picksPerTxn(maxTxnOps));
    const tracker = new RunningTracker(new LiveKeys(keys));
    const from = (await store.revision()) + 1;
    await auditor.start(from);
    await tracker.start(store, keys, from);

    // Allocation over time, from one front-end's count of the cell's RUs.
    const live: AllocationPoint[] = [];
    const t0 = Date.now() + 1000;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        for (const f of fes) {
          const r = ruStates(await scrape(f.metricsPort));
          if (!r) continue;
          const all = r.busy + r.free + r.unschedulable;
          if (all > 0) live.push({ hour: ((Date.now() - t0) * compress) / 3.6e6, allocated: r.busy / all });
          break;
        }
        await sleep(o.sampleMs);
      }
    })();

    // Each pod at its compressed creation time, round-robin over the front-ends, retried with its request id.
    const acked: string[] = [];
    const jobOf = new Map<string, number>();
    const sentAt = new Array<number>(win.jobs.length).fill(NaN);
    let failedSubmissions = 0;
    let rr = 0;
    const submitOne = async (k: number): Promise<void> => {
      const requestId = randomUUID();
      const at = Date.now();
      let last = '';
      for (let attempt = 0; attempt < 20; attempt++) {
        const fe = fes[rr++ % fes.length] as LiveFrontEnd;
        try {
          const res = await new Promise<{ jobId: string }>((resolve, reject) => {
            fe.client.SubmitJob({ specJson: JSON.stringify(specs[k]), requestId }, { deadline: new Date(Date.now() + 10_000) }, (err, r) =>
              err || !r ? reject(err ?? new Error('empty')) : resolve(r),
            );
          });
          sentAt[k] = at;
          acked.push(res.jobId);
          jobOf.set(res.jobId, k);
          auditor.acked(res.jobId, at);
          return;
        } catch (err) {
          last = err instanceof Error ? err.message : String(err);
          await sleep(200);
        }
      }
      failedSubmissions++;
      o.say(`a submission failed 20 times (${win.jobs[k]?.id}): ${last}`);
    };
    const inFlight: Promise<void>[] = [];
    for (let k = 0; k < win.jobs.length; k++) {
      const due = t0 + ((win.jobs[k] as TraceJob).arrivalMs - win.startMs);
      const wait = due - Date.now();
      if (wait > 0) await sleep(wait);
      inFlight.push(submitOne(k));
    }
    await Promise.all(inFlight);
    const longest = win.jobs.reduce((m, j) => Math.max(m, j.durationMs ?? 0), 0);
    o.say(
      `all ${win.jobs.length} pods submitted (${acked.length} acknowledged); waiting for them to end (at most ${((longest + o.drainMarginMs) / 1000).toFixed(0)} s)`,
    );
    const bound = Date.now() + longest + o.drainMarginMs;
    while (Date.now() < bound && auditor.notFinal(acked).length > 0) await sleep(1000);
    sampling = false;
    await sampler;
    for (const [i, f] of fes.entries()) o.keepLog?.(`fe${i}`, f.proc.output());
    o.keepLog?.('hollow', hollow.proc.output());
    await auditor.finalAudit(acked);
    const counts = auditor.counts();
    const notFinal = auditor.notFinal(acked);
    await auditor.close();
    await tracker.close();
    for (const f of fes) f.client.close();
    for (const c of [...children].reverse()) await c.kill();

    const sec = compress / 1000;
    const jobs: LiveJob[] = win.jobs.map((j, k) => {
      const s = sim.outcomes[k];
      return {
        id: j.id,
        qos: j.qos,
        tasks: j.tasks,
        neverScheduled: j.neverScheduled,
        servers: 0,
        ...(s?.waitS !== undefined ? { simWaitS: s.waitS } : {}),
        ...(s?.productionWaitS !== undefined ? { productionWaitS: s.productionWaitS } : {}),
      };
    });
    for (const [id, k] of jobOf) {
      const j = jobs[k] as LiveJob;
      const due = t0 + ((win.jobs[k] as TraceJob).arrivalMs - win.startMs);
      j.sendLagMs = (sentAt[k] as number) - due;
      const placed = tracker.placedOn.get(id);
      if (placed) j.servers = new Set([...placed.values()].flatMap((set) => [...set])).size;
      const tasks = tracker.seen.get(id);
      if (!tasks) continue;
      if (tasks.size < j.tasks) continue;
      const last = Math.max(...[...tasks.values()].map((t) => t[0]));
      j.liveWaitMs = Math.max(0, last - (sentAt[k] as number));
      j.liveWaitS = j.liveWaitMs * sec;
    }
    const placements = auditPlacements(jobOf, tracker.placedOn, specs, platformOf, jobs);
    const simAlloc = sim.series.map((p) => ({ hour: p.hour, allocated: p.allocated }));
    return {
      window: { startS: win.startMs * sec, endS: (win.startMs * compress + o.windowS * 1000) / 1000, pods: win.jobs.length, cores: win.cores, compress },
      cell: { servers: cell.servers, rus, platforms: [...cell.platforms.values()].flat().length, registeredRus: hollow.totalRus, maxTxnOps },
      jobs,
      allocation: {
        live,
        sim: simAlloc,
        production: productionAllocation(
          win.jobs,
          win.startMs,
          rus,
          compress,
          simAlloc.map((p) => p.hour),
        ),
      },
      sim: { splitJobs: sim.splitJobs, platformViolations: sim.platformViolations, quality: sim.quality },
      placements,
      audit: {
        acked: acked.length,
        failedSubmissions,
        final: counts.final,
        notFinal,
        violations: auditor.violations,
        watchErrors: [...auditor.watchErrors, ...tracker.errors],
      },
      wallS: (Date.now() - t0Run) / 1000,
    };
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    await store.close().catch(() => undefined);
    await stopAll();
  }
}

/** The placement audit over what the task and RU records showed (see the header). */
export function auditPlacements(
  jobOf: ReadonlyMap<string, number>,
  placedOn: ReadonlyMap<string, Map<number, Set<string>>>,
  specs: readonly Record<string, unknown>[],
  platformOf: ReadonlyMap<string, string>,
  jobs: readonly LiveJob[],
): PlacementAudit {
  const a: PlacementAudit = { tasksSeen: 0, multiCorePlaced: 0, splitPods: 0, offPlatformTasks: 0, unknownServerTasks: 0, examples: [] };
  const example = (line: string): void => void (a.examples.length < 10 && a.examples.push(line));
  for (const [id, k] of jobOf) {
    const tasks = placedOn.get(id);
    const job = jobs[k] as LiveJob;
    // A pod whose cores must share a server (the spec's required pack); a generic job's tasks of one core each may spread.
    const oneServer = (specs[k]?.locality as { required?: boolean } | undefined)?.required === true;
    if (oneServer && job.tasks > 1 && job.liveWaitMs !== undefined) a.multiCorePlaced++;
    if (!tasks) continue;
    const allowed = (specs[k]?.constraints as { platforms?: string[] } | undefined)?.platforms;
    const servers = new Set<string>();
    for (const [task, set] of tasks) {
      a.tasksSeen++;
      for (const server of set) {
        servers.add(server);
        const platform = platformOf.get(server);
        if (platform === undefined) {
          a.unknownServerTasks++;
          example(`${id}: task ${task} on ${server}, which has no server record`);
        } else if (allowed && !allowed.includes(platform)) {
          a.offPlatformTasks++;
          example(`${id}: task ${task} on ${server} (${platform}), not one of ${allowed.join(', ')}`);
        }
      }
    }
    if (oneServer && servers.size > 1) {
      a.splitPods++;
      example(`${id}: ${job.tasks} tasks on ${servers.size} servers (${[...servers].slice(0, 4).join(', ')})`);
    }
  }
  return a;
}
