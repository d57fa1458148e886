/** Summaries of a run: response times against ideal, overheads, and the W5 short/long slowdowns. */
import { mean, quantileSorted } from 'simple-statistics';
import { PERF } from './constants.ts';
import type { SimJob } from './world.ts';

/** What is kept of each measured job (or query chain). */
export interface JobRecord {
  arrival: number;
  response: number;
  ideal: number;
  /** Submission to last task start, over the chain. */
  sched: number;
  decision: number;
  commit: number;
  label: string;
  short: boolean;
  conflicts: number;
  commits: number;
  R: number;
  tasks: number;
  local: number;
  waits: { estimate: number; realised: number }[];
  /** Longest task's real execution time (Pigeon's "job execution time"). */
  exec: number;
  /** Where response − ideal went, ms, summed over the chain's stages (see lossSplit). */
  loss: LossSplit;
}

/**
 * Response − ideal of a job split along the stage's last task: time before it started (scheduling,
 * admission and capacity waits), running on a slower platform than the best, interference from
 * neighbours, reading input remotely; `other` is what is left (a last task shorter than the
 * longest one, rounding).
 */
export interface LossSplit {
  wait: number;
  platform: number;
  interference: number;
  remote: number;
  other: number;
}

export function lossSplit(head: SimJob): LossSplit {
  const l: LossSplit = { wait: 0, platform: 0, interference: 0, remote: 0, other: 0 };
  for (let j: SimJob | undefined = head; j; j = j.next) {
    let last: SimJob['tasks'][number] | undefined;
    for (const t of j.tasks) if (!last || t.end > last.end) last = t;
    if (!last) continue;
    const stage = j.finish - j.arrival;
    const base = last.remote ? last.work / (1 + PERF.REMOTE_READ_FRACTION) : last.work;
    const wait = last.start - j.arrival;
    const platform = base / last.speed - base / j.maxPerf;
    const remote = (last.work - base) / last.speed;
    const interference = last.end - last.start - last.work / last.speed;
    l.wait += wait;
    l.platform += platform;
    l.remote += remote;
    l.interference += interference;
    l.other += stage - j.ideal - wait - platform - remote - interference;
  }
  return l;
}

export function record(job: SimJob): JobRecord {
  const head = job.head;
  let tasks = 0;
  let exec = 0;
  for (let j: SimJob | undefined = head; j; j = j.next) {
    tasks += j.tasks.length;
    for (const t of j.tasks) if (t.end - t.start > exec) exec = t.end - t.start;
  }
  return {
    arrival: head.arrival,
    response: job.finish - head.arrival,
    ideal: job.chainIdeal,
    sched: head.schedMs,
    decision: head.decisionMs,
    commit: head.commitMs,
    label: head.label,
    short: head.short,
    conflicts: head.conflicts,
    commits: head.commits,
    R: head.Rn > 0 ? head.Rsum / head.Rn : 0,
    tasks,
    local: head.local,
    waits: head.waits,
    exec,
    loss: lossSplit(head),
  };
}

export interface Dist {
  n: number;
  mean: number;
  p5: number;
  p25: number;
  p50: number;
  p75: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
}

export function dist(xs: readonly number[]): Dist {
  if (xs.length === 0) return { n: 0, mean: NaN, p5: NaN, p25: NaN, p50: NaN, p75: NaN, p90: NaN, p95: NaN, p99: NaN, max: NaN };
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number): number => quantileSorted(s, p);
  return {
    n: s.length,
    mean: mean(s),
    p5: q(0.05),
    p25: q(0.25),
    p50: q(0.5),
    p75: q(0.75),
    p90: q(0.9),
    p95: q(0.95),
    p99: q(0.99),
    max: s[s.length - 1] as number,
  };
}

export interface Summary {
  jobs: number;
  response: Dist;
  /** response / ideal. */
  ratio: Dist;
  /** ideal / response: "performance normalised to optimal" (Tarcil Fig. 15a). */
  perfMean: number;
  perfWorst: number;
  /** Jobs within 10% of ideal (response ≤ 1.1 × ideal). */
  within10: number;
  /** Jobs more than 10% slower than ideal. */
  degraded: number;
  sched: Dist;
  decisionMean: number;
  commitMean: number;
  queueMean: number;
  conflictsPerCommit: number;
  meanR: number;
  /** Admission waits: mean estimate and mean realised, and their count. */
  waits: { n: number; estimate: number; realised: number };
  locality: number;
}

export function summarize(recs: readonly JobRecord[]): Summary {
  const ratios = recs.map((r) => r.response / r.ideal);
  const perf = recs.map((r) => Math.min(1, r.ideal / r.response));
  const commits = recs.reduce((a, r) => a + r.commits, 0);
  const conflicts = recs.reduce((a, r) => a + r.conflicts, 0);
  const withR = recs.filter((r) => r.R > 0);
  const waits = recs.flatMap((r) => r.waits).filter((w) => Number.isFinite(w.estimate));
  const dataTasks = recs.reduce((a, r) => a + (r.label.startsWith('q') ? 33 : 0), 0);
  const local = recs.reduce((a, r) => a + r.local, 0);
  const avg = (xs: number[]): number => (xs.length ? mean(xs) : NaN);
  const decisionMean = avg(recs.map((r) => r.decision));
  const commitMean = avg(recs.map((r) => r.commit));
  const schedMean = avg(recs.map((r) => r.sched));
  return {
    jobs: recs.length,
    response: dist(recs.map((r) => r.response)),
    ratio: dist(ratios),
    perfMean: avg(perf),
    perfWorst: perf.length ? Math.min(...perf) : NaN,
    within10: recs.length ? ratios.filter((x) => x <= 1.1).length / recs.length : NaN,
    degraded: recs.length ? ratios.filter((x) => x > 1.1).length / recs.length : NaN,
    sched: dist(recs.map((r) => r.sched)),
    decisionMean,
    commitMean,
    queueMean: Math.max(0, schedMean - decisionMean - commitMean),
    conflictsPerCommit: commits > 0 ? conflicts / commits : 0,
    meanR: withR.length ? avg(withR.map((r) => r.R)) : 0,
    waits: { n: waits.length, estimate: avg(waits.map((w) => w.estimate)), realised: avg(waits.map((w) => w.realised)) },
    locality: dataTasks > 0 ? local / dataTasks : NaN,
  };
}

/** Pigeon §4.2: the p-th percentile slowdown is the p-th percentile completion time over the p-th percentile execution time. */
export function pigeonSlowdowns(recs: readonly JobRecord[]): Record<'short' | 'long', { p50: number; p90: number; p99: number; n: number }> {
  const one = (sel: readonly JobRecord[]): { p50: number; p90: number; p99: number; n: number } => {
    if (sel.length === 0) return { p50: NaN, p90: NaN, p99: NaN, n: 0 };
    const c = sel.map((r) => r.response).sort((a, b) => a - b);
    const e = sel.map((r) => r.exec).sort((a, b) => a - b);
    const q = (p: number): number => quantileSorted(c, p) / quantileSorted(e, p);
    return { p50: q(0.5), p90: q(0.9), p99: q(0.99), n: sel.length };
  };
  return { short: one(recs.filter((r) => r.short)), long: one(recs.filter((r) => !r.short)) };
}
