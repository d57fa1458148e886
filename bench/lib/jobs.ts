import type { JobSpec } from '../../src/model/types.ts';
import { makeJob, TEST_PROFILES } from '../../test/support/jobs.ts';

/** Job n of a commit benchmark: the test profiles in turn, placed at once (never queued). */
export function benchJob(n: number, tasks: number): JobSpec {
  const job = makeJob(`b${n}`, TEST_PROFILES[n % TEST_PROFILES.length]!, tasks, { maxQueueMs: 0 });
  delete job.durationMs;
  return job;
}
