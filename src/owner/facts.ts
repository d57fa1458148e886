/**
 * What an evaluation finds out before it plans (plan.ts Facts): for the nodes of a job's live
 * tasks that are not registered here, whether the store still has them (one read per node), and
 * if not since when they are known gone, with the grace their tasks keep their place for.
 */
import type { OwnerContext, Owned } from './context.ts';
import { replaceDue, serversToCheck, type Facts, type NodeFact } from './plan.ts';

/**
 * What planning needs from outside the job: for the nodes of its live tasks that are not
 * registered here, whether the store still has them (one read per node), and if not since when
 * they are known gone; the cell's feasibility for the job, asked only if there is something to place.
 */
export async function gatherFacts(m: OwnerContext, o: Owned, tasks: readonly number[]): Promise<Facts> {
  const registered = (server: string): boolean => m.servers.has(server);
  const nodes = new Map<string, NodeFact>();
  for (const server of serversToCheck(o, tasks, registered)) {
    if (await m.o.store.get(m.o.keys.server(server))) nodes.set(server, { kind: 'up' });
    else nodes.set(server, nodeGone(m, server));
  }
  return {
    now: m.o.clock.now(),
    nodes,
    registered,
    feasibility: () => m.feasibility(o.spec),
    unplaceableTimeoutMs: m.unplaceableTimeoutMs,
  };
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
