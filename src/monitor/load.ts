/**
 * The node monitor's load check (paper §5.2), apart from its bookkeeping: the interference each
 * running task suffers from the others on its server (fed to the simulated executor, which
 * stretches its run), and which tasks run well below their expected rate. The monitor reports
 * those tasks and keeps new placements away from its server while any of them stays slow.
 */
import { N_RESOURCES } from '../model/types.ts';
import { slowdown as perfSlowdown } from '../model/perf.ts';
import type { PlacedRuRecord } from '../state/records.ts';
import type { TaskHandle } from './executor.ts';

/** Interference slowdown of a task on a server: the shared performance model by default. */
export type SlowdownModel = (own: readonly number[], sum: readonly number[], ruCount: number) => number;

export interface LoadedRun {
  rec: PlacedRuRecord;
  handle: TaskHandle | undefined;
}

/**
 * Tells each running task its slowdown and returns the tasks below `threshold` of their expected
 * rate, with the rate read.
 */
export function assessLoad<R extends LoadedRun>(
  rus: Iterable<{ rec: PlacedRuRecord | undefined }>,
  runs: Iterable<R>,
  ruCount: number,
  threshold: number,
  model?: SlowdownModel,
): { run: R; rate: number }[] {
  const slow = model ?? ((own, sum, n) => perfSlowdown(own, sum, n));
  const sum = new Array<number>(N_RESOURCES).fill(0);
  for (const r of rus) {
    if (r.rec?.state !== 'busy' || !Array.isArray(r.rec.caused)) continue;
    for (let i = 0; i < N_RESOURCES; i++) sum[i] = (sum[i] as number) + (r.rec.caused[i] ?? 0);
  }
  const below: { run: R; rate: number }[] = [];
  for (const run of runs) {
    if (!run.handle) continue;
    if (Array.isArray(run.rec.caused)) run.handle.setSlowdown(slow(run.rec.caused, sum, ruCount));
    const rate = run.handle.rate();
    if (rate < threshold) below.push({ run, rate });
  }
  return below;
}
