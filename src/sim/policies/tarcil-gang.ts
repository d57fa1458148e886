/**
 * The simulated tarcil's gangs and namespace quotas (tarcil.ts): a gang's reservations held in
 * the world (World.hold) until confirmed or given back, and each namespace's RUs held against
 * its quota (TarcilOptions.quotas), checked by a commit at the store as the live agent's commit
 * checks the usage record (tenancy/quota.ts): refused in advance when its picks would exceed it.
 */
import type { Pick } from '../../sampling/batch.ts';
import { namespaceOfJob } from '../../tenancy/namespace.ts';
import { quotaMessage } from '../../tenancy/quota.ts';
import { simJobId, type SimJob, type SimTask, type World } from '../world.ts';
import type { Request } from './tarcil-types.ts';

/** RUs held by each namespace with a quota (placed or reserved), and the quota's room. */
export class QuotaBook {
  private readonly used = new Map<string, number>();

  constructor(private readonly quotas: Readonly<Record<string, number>>) {}

  /** Room left under `ns`'s quota (undefined: none). */
  room(ns: string): number | undefined {
    const max = this.quotas[ns];
    return max === undefined || max <= 0 ? undefined : Math.max(0, max - (this.used.get(ns) ?? 0));
  }

  /** A commit of `picks` RUs for `ns` refused in advance, as the live commit refuses it; undefined: it may go on. */
  refusal(ns: string, picks: number): { room: number; message: string } | undefined {
    const room = this.room(ns);
    if (room === undefined || room >= picks) return undefined;
    const maxRus = this.quotas[ns] as number;
    return { room, message: quotaMessage({ ns, maxRus, usage: { total: maxRus - room, jobs: {} } }) };
  }

  add(ns: string, n: number): void {
    if (this.quotas[ns] !== undefined) this.used.set(ns, (this.used.get(ns) ?? 0) + n);
  }

  /** A task of `job` let go of its RU. */
  freed(job: SimJob): void {
    this.add(namespaceOfJob(simJobId(job)), -1);
  }
}

/** Whether a pick's RU is still as the decision read it (etcd's compare on mod revision). */
export function unchanged(world: World, p: Pick): boolean {
  return world.occ[p.id] === null && world.rev[p.id] === p.ruRev;
}

/**
 * A gang's chunk reserved at the store: all its picks or none. Returns the picks that conflicted
 * (0: reserved, its tasks held in `r.held`).
 */
export function reserveAtStore(world: World, r: Request, picks: readonly Pick[], tasks: readonly SimTask[]): number {
  const bad = picks.filter((p) => !unchanged(world, p)).length;
  if (bad > 0) return bad;
  picks.forEach((p, k) => {
    const task = tasks[k] as SimTask;
    world.hold(task, p.id);
    (r.held ??= []).push({ task, ru: p.id, Q: p.quality.Q, acceptable: p.quality.acceptable });
  });
  return 0;
}

/** Gives every reservation of the request back: its tasks pending again. Returns the RUs freed. */
export function releaseHeld(world: World, r: Request): number[] {
  const held = r.held ?? [];
  r.held = [];
  for (const h of held) world.unhold(h.ru);
  r.pending = held.map((h) => h.task).concat(r.pending);
  return held.map((h) => h.ru);
}

/** Starts every reserved task where it is reserved (the confirm); returns them. */
export function confirmHeld(world: World, r: Request): { task: SimTask; acceptable: boolean; Q: number }[] {
  const held = r.held ?? [];
  r.held = [];
  for (const h of held) {
    h.task.Q = h.Q;
    h.task.acceptable = h.acceptable;
    world.startTask(h.task, h.ru);
  }
  return held;
}
