import type { JobSpec } from '../../src/model/types.ts';
import { makeJob, TEST_PROFILES } from '../../test/support/jobs.ts';

/** Job n of a commit benchmark: the test profiles in turn, placed at once (never queued). */
export function benchJob(n: number, tasks: number): JobSpec {
  const job = makeJob(`b${n}`, TEST_PROFILES[n % TEST_PROFILES.length]!, tasks, { maxQueueMs: 0 });
  delete job.durationMs;
  return job;
}

/** The soak's job sizes (tasks per job) and their weights: mean ≈ 15, a few large jobs. */
export const SIZES: readonly [number, number][] = [
  [1, 20],
  [2, 15],
  [4, 20],
  [8, 20],
  [16, 12],
  [32, 8],
  [64, 4],
  [128, 1],
];
export const MEAN_TASKS = SIZES.reduce((s, [n, w]) => s + n * w, 0) / SIZES.reduce((s, [, w]) => s + w, 0);

/** A job size drawn from SIZES by `r` uniform in [0, 1). */
export function pickSize(r: number): number {
  let total = 0;
  for (const [, w] of SIZES) total += w;
  let x = r * total;
  for (const [n, w] of SIZES) {
    if (x < w) return n;
    x -= w;
  }
  return 1;
}
