/**
 * What the dashboard shows besides the cell: the jobs (a store watch on the job records, opened
 * with the first browser and closed with the last), the admission buckets (read from the first
 * agent's admission state, as `tarcil cluster` shows them) and the throughput and latency of the
 * last minutes (a sample a second of the same prom-client counters /metrics serves).
 */
import type { JobManager } from '../../owner/manager.ts';
import type { Keys } from '../../state/keys.ts';
import type { LiveJobRecord } from '../../state/live-records.ts';
import { parseJson } from '../../state/records.ts';
import type { ClusterStore, WatchBatch, WatchHandle } from '../../store/types.ts';
import { taskStateCounts } from '../convert.ts';
import type { Metrics } from '../metrics.ts';

export interface JobSummary {
  id: string;
  name: string;
  state: string;
  profile: string;
  tasks: number;
  /** Tasks by state (queued, placed, running, succeeded, failed, cancelled, lost). */
  taskStates: Record<string, number>;
  submittedAt: number;
  updatedAt: number;
  finishedAt?: number;
  message?: string;
}

export function jobSummary(id: string, rec: LiveJobRecord): JobSummary {
  const states = taskStateCounts(rec);
  return {
    id,
    name: rec.spec.name,
    state: rec.state,
    profile: rec.spec.profile.name,
    tasks: rec.spec.tasks,
    taskStates: states,
    submittedAt: rec.submittedAt,
    updatedAt: rec.updatedAt,
    ...(rec.finishedAt !== undefined ? { finishedAt: rec.finishedAt } : {}),
    ...(rec.message ? { message: rec.message } : {}),
  };
}

/**
 * The job records of the cell, kept by one list and a watch while `start` is in effect. Changes
 * are collected until `drain` (the fan-out's tick) takes them: a job that changed ten times
 * between two ticks is sent once.
 */
export class JobsFeed {
  readonly jobs = new Map<string, JobSummary>();
  private changed = new Set<string>();
  private watch: WatchHandle | undefined;
  private opening: Promise<void> | undefined;
  private generation = 0;

  constructor(
    private readonly store: ClusterStore,
    private readonly keys: Keys,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Lists and watches the job records (once: later calls share the first). */
  start(): Promise<void> {
    if (!this.opening) {
      const opening = this.open(++this.generation);
      this.opening = opening;
      // A list or watch that failed is tried again by the next call.
      opening.catch(() => {
        if (this.opening === opening) this.opening = undefined;
      });
    }
    return this.opening;
  }

  /** Listed and watching, or on the way. */
  get running(): boolean {
    return this.opening !== undefined;
  }

  private async open(gen: number): Promise<void> {
    const prefix = this.keys.jobs();
    const res = await this.store.range(prefix);
    if (gen !== this.generation) return;
    // Jobs gone while nothing watched are sent as deleted (drain finds no summary for them).
    for (const id of this.jobs.keys()) this.changed.add(id);
    this.jobs.clear();
    for (const kv of res.kvs) {
      const id = kv.key.slice(prefix.length);
      const rec = parseJson<LiveJobRecord>(kv);
      if (rec) this.jobs.set(id, jobSummary(id, rec));
      // Listed again after a watch ended: the browsers get every job again.
      this.changed.add(id);
    }
    const w = await this.store.watch({
      prefix,
      fromRevision: res.revision + 1,
      onEvents: (b: WatchBatch) => {
        for (const e of b.events) {
          const id = e.kv.key.slice(prefix.length);
          if (e.type === 'delete') this.jobs.delete(id);
          else {
            const rec = parseJson<LiveJobRecord>(e.kv);
            if (rec) this.jobs.set(id, jobSummary(id, rec));
          }
          this.changed.add(id);
        }
      },
      onError: (err) => {
        // The watch ended (compaction, the store went away): list and watch again on next use.
        this.stop();
        this.onError(err);
      },
    });
    if (gen !== this.generation) void w.close().catch(() => undefined);
    else this.watch = w;
  }

  stop(): void {
    this.generation++;
    this.opening = undefined;
    const w = this.watch;
    this.watch = undefined;
    this.changed.clear();
    void w?.close().catch(() => undefined);
  }

  /** Stops, and forgets the jobs (no browser is left to show them to). */
  close(): void {
    this.stop();
    this.jobs.clear();
  }

  /** Jobs changed since the last drain: their summaries, and the ids of those deleted. */
  drain(): { jobs: JobSummary[]; deleted: string[] } {
    const jobs: JobSummary[] = [];
    const deleted: string[] = [];
    for (const id of this.changed) {
      const j = this.jobs.get(id);
      if (j) jobs.push(j);
      else deleted.push(id);
    }
    this.changed = new Set();
    return { jobs, deleted };
  }

  /** The newest `limit` jobs. */
  newest(limit: number): JobSummary[] {
    return [...this.jobs.values()].sort((a, b) => b.submittedAt - a.submittedAt).slice(0, limit);
  }
}

export interface BucketView {
  bucket: number;
  band: number;
  cell: number;
  /** The bucket's range of RMS contention (hi null: unbounded). */
  rms: [number, number | null];
  free: number;
  total: number;
  /** Free events in the sliding window. */
  history: number;
  /**
   * The agents' admission estimate of the wait for one RU of this bucket (AdmissionCounters.bucketWait,
   * the formula behind their verdicts): 0 when one is free, null without the history to predict it.
   */
  waitMs: number | null;
  /** The bound the estimate is compared with before a job waits (kμ + 2√k·σ); null without history. */
  boundMs: number | null;
  /** Inter-free intervals behind μ and σ. */
  samples: number;
}

const finite = (v: number): number | null => (Number.isFinite(v) ? Math.round(v) : null);

/**
 * The admission buckets as the first agent sees them, each with the wait the agents' admission
 * estimates for one RU of it (the same computation as their verdicts: the Erlang quantile of the
 * bucket's inter-free intervals over the history window, see src/admission/counters.ts).
 */
export function admissionBuckets(
  manager: JobManager,
  watchingSince: number,
  now = Date.now(),
): { buckets: BucketView[]; windowMs: number; quantile: number; waiting: { job: string; waiting: string; queuedMs: number }[] } {
  const agent = manager.agents[0];
  if (!agent) return { buckets: [], windowMs: 0, quantile: 0, waiting: [] };
  const adm = agent.admission;
  // The part of the agents' history window this front-end has watched.
  const windowMs = Math.max(1000, Math.min(adm.historyWindowMs, now - watchingSince));
  const buckets = adm.snapshot().map((b): BucketView => {
    const w = adm.bucketWait(b.bucket);
    return {
      bucket: b.bucket,
      band: b.band,
      cell: b.cell,
      rms: [b.rms[0], Number.isFinite(b.rms[1]) ? b.rms[1] : null],
      free: b.free,
      total: b.total,
      history: b.history,
      waitMs: finite(w.estimateMs),
      boundMs: finite(w.boundMs),
      samples: w.samples,
    };
  });
  const waiting: { job: string; waiting: string; queuedMs: number }[] = [];
  for (const a of manager.agents) {
    for (const r of a.inflight.values()) if (r.waiting) waiting.push({ job: r.job, waiting: r.waiting, queuedMs: r.queuedMs });
  }
  return { buckets, windowMs, quantile: adm.waitQuantile, waiting: waiting.slice(0, 200) };
}

/** Per-second counts of one point. */
interface Rates {
  t: number;
  /** Tasks placed per second. */
  placements: number;
  decisions: number;
  conflicts: number;
  submitted: number;
  finished: number;
}

/** One second of the counters /metrics serves, as rates and quantiles. */
export interface ThroughputPoint extends Rates {
  /** Submission → last placement of the decisions of the last 10 s, in ms (null: none). */
  p50: number | null;
  p99: number | null;
  /** The counters themselves: tasks placed and commit conflicts since the process started. */
  placedTotal: number;
  conflictsTotal: number;
}

interface Raw extends Rates {
  /** Cumulative latency bucket counts (le → count). */
  buckets: Map<number, number>;
}

/** The last 10 minutes, a point a second. */
export const THROUGHPUT_POINTS = 600;
const QUANTILE_WINDOW_S = 10;

/** Samples the metrics' counters once a second (one read of five in-memory counters). */
export class ThroughputSampler {
  readonly points: ThroughputPoint[] = [];
  private readonly raw: Raw[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly metrics: Metrics) {}

  start(onPoint?: (p: ThroughputPoint) => void): void {
    if (this.timer) return;
    const tick = async (): Promise<void> => {
      const p = await this.sample();
      if (p) onPoint?.(p);
    };
    void tick();
    this.timer = setInterval(() => void tick(), 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private async sample(): Promise<ThroughputPoint | undefined> {
    const sum = async (c: { get(): Promise<{ values: { value: number; metricName?: string }[] }> }): Promise<number> =>
      (await c.get()).values.reduce((a, v) => a + v.value, 0);
    const lat = await this.metrics.latency.get();
    const buckets = new Map<number, number>();
    for (const v of lat.values) {
      if (v.metricName !== 'tarcil_scheduling_latency_seconds_bucket') continue;
      const raw = (v.labels as Record<string, string | number | undefined>).le;
      const le = raw === '+Inf' ? Infinity : Number(raw);
      buckets.set(le, (buckets.get(le) ?? 0) + v.value);
    }
    const r: Raw = {
      t: Date.now(),
      placements: await sum(this.metrics.placements),
      decisions: await sum(this.metrics.decisions),
      conflicts: await sum(this.metrics.conflicts),
      submitted: await sum(this.metrics.submitted),
      finished: await sum(this.metrics.finished),
      buckets,
    };
    const prev = this.raw[this.raw.length - 1];
    this.raw.push(r);
    if (this.raw.length > QUANTILE_WINDOW_S + 1) this.raw.shift();
    if (!prev) return undefined;
    const dt = Math.max(0.001, (r.t - prev.t) / 1000);
    const rate = (k: 'placements' | 'decisions' | 'conflicts' | 'submitted' | 'finished'): number => Math.round(((r[k] - prev[k]) / dt) * 100) / 100;
    const old = this.raw[0] as Raw;
    const p: ThroughputPoint = {
      t: r.t,
      placements: rate('placements'),
      decisions: rate('decisions'),
      conflicts: rate('conflicts'),
      submitted: rate('submitted'),
      finished: rate('finished'),
      p50: quantile(old.buckets, r.buckets, 0.5),
      p99: quantile(old.buckets, r.buckets, 0.99),
      placedTotal: r.placements,
      conflictsTotal: r.conflicts,
    };
    this.points.push(p);
    if (this.points.length > THROUGHPUT_POINTS) this.points.shift();
    return p;
  }
}

/** The q-quantile (ms) of the observations between two cumulative histograms, interpolated in its bucket. */
export function quantile(before: Map<number, number>, after: Map<number, number>, q: number): number | null {
  const les = [...after.keys()].sort((a, b) => a - b);
  const counts = les.map((le) => (after.get(le) ?? 0) - (before.get(le) ?? 0));
  const total = counts[counts.length - 1] ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  let lo = 0;
  let below = 0;
  for (let i = 0; i < les.length; i++) {
    const le = les[i] as number;
    const c = counts[i] as number;
    if (c >= rank) {
      if (!Number.isFinite(le)) return Math.round(lo * 1000);
      const inBucket = c - below;
      const frac = inBucket > 0 ? (rank - below) / inBucket : 1;
      return Math.round((lo + (le - lo) * frac) * 1000 * 10) / 10;
    }
    below = c;
    lo = le;
  }
  return null;
}
