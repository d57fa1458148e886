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
  /** Filled with the sum of the occupants' vectors, when given. */
  sumOut?: number[],
): { run: R; rate: number }[] {
  const slow = model ?? ((own, sum, n) => perfSlowdown(own, sum, n));
  const sum = sumOut ?? new Array<number>(N_RESOURCES);
  sum.length = N_RESOURCES;
  sum.fill(0);
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

/**
 * What one task's run tells the profile learner: the time-weighted means of its share of the
 * expected rate and of its neighbours' pressure, over the time it had neighbours.
 */
export class RunObservation {
  private at = NaN;
  private share = NaN;
  private readonly C = new Array<number>(N_RESOURCES).fill(0);
  private readonly sumC = new Array<number>(N_RESOURCES).fill(0);
  private sumShare = 0;
  private ms = 0;

  /** From `now` on the task runs at `share` amid pressure C (NaN share: no neighbours, not counted). */
  update(now: number, share: number, C?: readonly number[]): void {
    this.close(now);
    this.share = share;
    if (C) for (let i = 0; i < N_RESOURCES; i++) this.C[i] = C[i] as number;
  }

  /** The means up to `now` (undefined if the task never had neighbours while observed). */
  result(now: number): { share: number; pressure: number[]; ms: number } | undefined {
    this.close(now);
    this.share = NaN;
    if (!(this.ms > 0)) return undefined;
    return { share: round(this.sumShare / this.ms, 4), pressure: this.sumC.map((v) => round(v / this.ms, 2)), ms: Math.round(this.ms) };
  }

  private close(now: number): void {
    if (Number.isFinite(this.share) && now > this.at) {
      const dt = now - this.at;
      this.sumShare += this.share * dt;
      for (let i = 0; i < N_RESOURCES; i++) this.sumC[i] = (this.sumC[i] as number) + (this.C[i] as number) * dt;
      this.ms += dt;
    }
    this.at = now;
  }
}

function round(v: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}

/** Scratch of observeRuns: one task's neighbours' pressure. */
const NEIGHBOURS = new Array<number>(N_RESOURCES).fill(0);

/**
 * Each running task's share of its expected rate and its neighbours' pressure from `now` on, for
 * the profile learner (the means over its run go with its outcome: state/profiles.ts). `sum` is
 * the occupants' summed vectors, as assessLoad leaves it.
 */
export function observeRuns(
  rus: Iterable<{ rec: PlacedRuRecord | undefined }>,
  runs: Iterable<LoadedRun & { obs: RunObservation | undefined }>,
  sum: readonly number[],
  ruCount: number,
  now: number,
): void {
  const others = ruCount - 1;
  let busy = 0;
  for (const r of rus) if (r.rec?.state === 'busy' && Array.isArray(r.rec.caused)) busy++;
  for (const run of runs) {
    if (!run.handle) continue;
    run.obs ??= new RunObservation();
    const own = run.rec.caused;
    if (busy < 2 || others <= 0 || !Array.isArray(own)) {
      run.obs.update(now, NaN);
      continue;
    }
    for (let i = 0; i < N_RESOURCES; i++) NEIGHBOURS[i] = ((sum[i] as number) - (own[i] ?? 0)) / others;
    run.obs.update(now, run.handle.rate(), NEIGHBOURS);
  }
}
