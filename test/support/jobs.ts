import { DEFAULT_PRIORITY, type JobSpec, type WorkloadProfile } from '../../src/model/types.ts';

/** Small synthetic profiles for tests that must not depend on the shipped catalog. */
export const TEST_PROFILES: WorkloadProfile[] = [
  profile('cpu-heavy', [90, 20, 20, 30, 40, 20, 10, 20, 5, 5]),
  profile('mem-heavy', [30, 10, 20, 40, 80, 85, 60, 50, 5, 10]),
  profile('net-heavy', [25, 10, 10, 15, 30, 20, 20, 10, 88, 10]),
  profile('disk-heavy', [20, 5, 5, 10, 20, 30, 30, 10, 20, 82]),
  profile('light', [15, 5, 5, 10, 12, 10, 10, 5, 5, 5]),
  profile('llc-sensitive', [40, 20, 30, 60, 92, 70, 40, 30, 10, 5]),
];

export function profile(name: string, caused: number[], perf: Record<string, number> = {}): WorkloadProfile {
  return {
    name,
    description: `test profile ${name}`,
    family: 'test',
    caused,
    platformPerf: { 'r3-2xlarge': 1, ...perf },
    typicalDurationMs: 100,
    latencyCritical: false,
  };
}

export function makeJob(id: string, p: WorkloadProfile, tasks: number, over: Partial<JobSpec> = {}): JobSpec {
  return {
    id,
    name: id,
    profile: p,
    tasks,
    priority: DEFAULT_PRIORITY,
    mode: 'incremental',
    locality: { mode: 'any', scope: 'server' },
    constraints: {},
    maxQueueMs: 2000,
    durationMs: 100,
    submittedAt: 0,
    ...over,
  };
}

/** Runs fn over items with at most `limit` in flight. */
export async function pool<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
