/**
 * What an evaluation finds out before it plans (plan.ts Facts), and the only reads it makes
 * before applying: the tasks to look at (taken from the job's changed set), for the nodes of its
 * live tasks that are not registered here whether the store still has them (one read per node)
 * and if not since when they are known gone; for a gang that may be half-done, its placed
 * tasks' RU records; and the cell's feasibility for the job, asked only if something is placed.
 */
import type { RuRef } from '../model/types.ts';
import { parseJson, type PlacedRuRecord } from '../state/records.ts';
import type { KeyValue } from '../store/types.ts';
import { YIELD_EVERY, yieldNow, type OwnerContext } from './context.ts';
import { admitted, type Owned } from './job.ts';
import { replaceDue, serversToCheck, type Facts, type GangRu, type NodeFact } from './plan.ts';

/** A gang's placed task, its RU record as read, and the key-value to compare when writing it. */
export interface GangRead extends GangRu {
  ref: RuRef;
  kv?: KeyValue;
}

/** The facts of one evaluation, with what the applier writes against. */
export interface OwnerFacts extends Facts {
  gang?: readonly GangRead[];
}

export async function gatherFacts(m: OwnerContext, o: Owned): Promise<OwnerFacts> {
  const now = m.o.clock.now();
  const registered = (server: string): boolean => m.servers.has(server);
  const base = { now, registered, admitted: admitted(o), feasibility: () => m.feasibility(o.spec), unplaceableTimeoutMs: m.unplaceableTimeoutMs };
  // A gang that may be half-done is settled first, alone: its changed tasks wait in the set.
  if (o.reconcile && o.scheduling.size === 0) return { ...base, tasks: [], nodes: new Map(), gang: await readGang(m, o) };
  const tasks = await takeDirty(o);
  const nodes = new Map<string, NodeFact>();
  if (!o.rec.cancelRequested) {
    for (const server of serversToCheck(o, tasks, registered)) {
      if (await m.o.store.get(m.o.keys.server(server))) nodes.set(server, { kind: 'up' });
      else nodes.set(server, nodeGone(m, server));
    }
  }
  return { ...base, tasks, nodes };
}

/**
 * The tasks to look at: those whose records changed since the last evaluation, or all of them
 * after adoption, a cancellation or a failed evaluation (`full`). A full pass over a large job
 * yields to the event loop now and then.
 */
async function takeDirty(o: Owned): Promise<number[]> {
  if (!o.full) {
    const list = [...o.dirty];
    o.dirty.clear();
    return list;
  }
  o.full = false;
  o.dirty.clear();
  const all: number[] = [];
  for (let t = 0; t < o.spec.tasks; t++) {
    if (t > 0 && t % YIELD_EVERY === 0) await yieldNow();
    all.push(t);
  }
  return all;
}

/** Each placed task's RU as the store has it (what the plan says to settle is among these). */
async function readGang(m: OwnerContext, o: Owned): Promise<GangRead[]> {
  const rus: GangRead[] = [];
  for (const [t, v] of o.tasks) {
    if (v.rec.state !== 'placed' || !v.rec.ru) continue;
    const kv = await m.o.store.get(m.o.keys.ru(v.rec.ru));
    rus.push({ task: t, ru: parseJson<PlacedRuRecord>(kv), ref: v.rec.ru, ...(kv ? { kv } : {}) });
  }
  return rus;
}

/** A node gone from the store: seen leaving (with its grace), or never seen registered here (since when this process knows it gone). */
function nodeGone(m: OwnerContext, server: string): Exclude<NodeFact, { kind: 'up' }> {
  const c = m.cell.get(server);
  if (c?.leftAt !== undefined) return { kind: 'left', leftAt: c.leftAt, graceMs: (c.spec as { disconnectGraceMs?: number }).disconnectGraceMs ?? 0 };
  let since = m.unseenSince.get(server);
  if (since === undefined) m.unseenSince.set(server, (since = m.o.clock.now()));
  return { kind: 'unseen', since };
}

/**
 * When the tasks of a node that left may be placed elsewhere: its lease expired when it left,
 * and its monitor and the tasks' supervisors kill them no later than its disconnect grace after
 * that; the margin is state/node-fence.ts's (the same numbers the supervisors use).
 * A node this process never saw registered left before it was first found gone; its grace is
 * the one written in the task record (`recordedGraceMs`: by the placing agent, then by the node's
 * monitor with `running`), else the default.
 */
export function replaceAt(m: OwnerContext, server: string, recordedGraceMs?: number): number {
  return replaceDue(nodeGone(m, server), recordedGraceMs);
}
