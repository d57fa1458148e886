/**
 * What a simulated scheduling policy is: it sees jobs as they are submitted and acts on the
 * simulated world.
 */
import type { Rng } from '../../util/rng.ts';
import type { SimJob, World } from '../world.ts';

/** One scheduler under test. It sees jobs as they are submitted and acts on the world. */
export interface Policy {
  readonly name: string;
  submit(job: SimJob): void;
  /** Policy-specific counters (conflicts, probes, cancellations, queue service, ...). */
  counters(): Record<string, number>;
  /** Wall-clock measurements of the policy's own work (not deterministic, kept apart from the counters). */
  timing?(): Record<string, number>;
}

export type PolicyFactory = (world: World, rng: Rng) => Policy;

/** Per-run knobs that several policies share. */
export interface PolicyEnv {
  /** Short/long cutoff on a job's mean task time, ms (Pigeon's classes). */
  shortCutoffMs?: number;
  /** Pigeon's reserved share of each group. */
  reserved?: number;
}

/** The index of a free RU on server `s` (first fit; the truth's RUs of a server are equivalent). */
export function freeRuOn(world: World, s: number): number {
  const srv = world.servers[s];
  if (!srv) return -1;
  for (let i = 0; i < srv.rus; i++) if (world.occ[srv.base + i] === null) return srv.base + i;
  return -1;
}
