/**
 * The dashboard's admission page shows, for each LSH bucket, the wait the agents' admission
 * estimates (src/admission): the figure a verdict quotes for a job whose only acceptable bucket it
 * is, whatever the part of the window this front-end has watched.
 */
import { describe, expect, it } from 'vitest';
import { AdmissionCounters, erlangQuantile } from '../../src/admission/index.ts';
import type { JobManager } from '../../src/owner/manager.ts';
import { admissionBuckets } from '../../src/frontend/dashboard/feeds.ts';
import { jobTarget } from '../../src/quality/index.ts';
import { ManualClock } from '../../src/util/clock.ts';

const N = 10;
const zeros = (): number[] => new Array<number>(N).fill(0);
const full = (v: number): number[] => new Array<number>(N).fill(v);
/** Tolerates only low contention: the bucket of idle RUs, not the saturated one. */
const DEMANDING = jobTarget([90, 80, 70, 60, 50, 40, 30, 20, 10, 0]);

/** An agent's admission state with every idle RU busy and free events after the given intervals, as the dashboard reads it. */
function cell(intervals: number[]): { st: AdmissionCounters; clock: ManualClock; manager: JobManager } {
  const clock = new ManualClock(1_000_000);
  // margin 1: a verdict for one RU asks the estimate for exactly one.
  const st = new AdmissionCounters({ clock, seed: 5, margin: 1 });
  for (let i = 0; i < 20; i++) st.updateRu(i, zeros(), false);
  for (let i = 0; i < 20; i++) st.updateRu(100 + i, full(99), true);
  const free = (key: number, dt: number): void => {
    clock.advance(dt);
    st.updateRu(key, zeros(), true);
    st.updateRu(key, zeros(), false);
  };
  free(0, 50);
  intervals.forEach((dt, i) => free((i + 1) % 20, dt));
  const manager = { agents: [{ admission: st, inflight: new Map() }] } as unknown as JobManager;
  return { st, clock, manager };
}

describe('the admission page', () => {
  it("shows the agents' own wait estimate and bound for each bucket", () => {
    const intervals = [100, 100, 100, 1700];
    const { st, clock, manager } = cell(intervals);
    const idle = st.lsh.bucketOf(zeros());
    // Watched for 10 s or for an hour: the estimate is the agents', not a rate over the watch.
    for (const since of [clock.now() - 10_000, clock.now() - 3_600_000]) {
      const page = admissionBuckets(manager, since, clock.now());
      const b = page.buckets.find((x) => x.bucket === idle);
      expect(b).toMatchObject({ free: 0, total: 20, history: 5, samples: 4 });
      const agents = st.waitEstimate(DEMANDING, 1);
      expect(b?.waitMs).toBe(Math.round(agents.estimateMs));
      expect(b?.boundMs).toBe(Math.round(agents.boundMs));
      // μ = 500 ms, σ = 800 ms: 0.9 quantile of one free μ·ln 10, bound μ + 2σ.
      expect(b?.waitMs).toBe(Math.round(500 * Math.LN10));
      expect(b?.boundMs).toBe(2100);
      // What a verdict for a one-task job (queued: the estimate is under the bound) quotes.
      const v = st.verdict(DEMANDING, 1, { priority: 0, bypassAbove: 100 });
      expect(v.action).toBe('queue');
      expect(b?.waitMs).toBe(Math.round(v.estimateMs as number));
      expect(page.quantile).toBe(st.waitQuantile);
    }
  });

  it('agrees with the agents for more RUs of a bucket, with free RUs, and without history', () => {
    const intervals = [300, 80, 1200, 40, 650, 220, 900];
    const { st, clock, manager } = cell(intervals);
    const idle = st.lsh.bucketOf(zeros());
    const sat = st.lsh.bucketOf(full(99));
    for (const k of [1, 2, 5]) expect(st.bucketWait(idle, k).estimateMs).toBeCloseTo(st.waitEstimate(DEMANDING, k).estimateMs, 9);
    expect(st.bucketWait(idle, 3).estimateMs).toBeCloseTo((intervals.reduce((a, x) => a + x, 0) / intervals.length) * erlangQuantile(3, 0.9), 6);
    // One idle RU free: "now", as the agents' estimate for one RU.
    st.updateRu(3, zeros(), true);
    let page = admissionBuckets(manager, 0, clock.now());
    expect(page.buckets.find((x) => x.bucket === idle)).toMatchObject({ free: 1, waitMs: 0 });
    expect(st.waitEstimate(DEMANDING, 1).estimateMs).toBe(0);
    // A bucket that never freed an RU: no estimate, and no bound.
    page = admissionBuckets(manager, 0, clock.now());
    expect(page.buckets.find((x) => x.bucket === sat)).toMatchObject({ free: 20, waitMs: 0 });
    const empty = page.buckets.find((x) => x.total === 0);
    expect(empty).toMatchObject({ waitMs: null, boundMs: null, samples: 0 });
    // Past the history window, the frees no longer count: no history.
    clock.advance(st.historyWindowMs + 1);
    st.updateRu(3, zeros(), false);
    expect(admissionBuckets(manager, 0, clock.now()).buckets.find((x) => x.bucket === idle)).toMatchObject({ waitMs: null, samples: 0 });
  });
});
