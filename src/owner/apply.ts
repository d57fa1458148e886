/**
 * The applier: the one place an evaluation's plan (plan.ts planJob) is carried out, in the
 * plan's order — quota tokens given back, a half-done gang settled, a cancellation's stops and
 * records, the tasks' steps (moves finished, departed nodes awaited, lost tasks recorded, slow
 * tasks moved or their scale-out job grown), then the tasks to place scheduled, held or failed.
 * The fenced writes are transitions.ts's, the scheduling call is the job's agent's; what they
 * change is merged into the job as they land.
 */
import type { DecisionRecord } from '../agent/agent.ts';
import { attemptHistory, type LiveTaskRecord } from '../state/live-records.ts';
import { errorMessage, isTarcilError } from '../util/errors.ts';
import { OUTCOME_COMPACTED } from '../state/ru-history.ts';
import type { OwnerContext } from './context.ts';
import { setRecord, taskKeyRev, type Owned } from './job.ts';
import { checkOwnership, commitFence, dropJob } from './fence.ts';
import type { JobPlan, TaskStep, Unplaced } from './plan.ts';
import type { OwnerFacts } from './facts.ts';
import { finishMove, giveBackHeld, moveSlow, type MoveHost } from './moves.ts';
import { decisionsDue, keepFirstAndLatest, KEPT_DECISIONS } from './decisions.ts';
import { claimPreempted, markLost, repairGang, returnQuota, setTaskStates, stopTask } from './transitions.ts';

/** Applies one evaluation's plan; stops where the job is dropped (no longer ours). */
export async function applyPlan(m: MoveHost, o: Owned, plan: JobPlan, facts: OwnerFacts): Promise<void> {
  if (plan.quota) {
    await returnQuota(m, o, plan.quota);
    if (o.dropped) return;
  }
  if (plan.gang) {
    await repairGang(m, o, plan.gang, facts.gang ?? []);
    if (o.dropped) return;
    o.reconcile = false;
    // The tasks it gave back, and those that changed meanwhile, are the next evaluation's.
    m.queue.add(o);
    return;
  }
  if (plan.cancel) {
    await applyCancel(m, o, plan.cancel);
    return;
  }
  if (plan.tasks.length > 0) await applyTasks(m, o, plan.tasks, plan.unplaced);
}

/**
 * The plan's steps, in order: tasks whose outcome was compacted away recorded failed, moves
 * finished, departed nodes awaited, lost tasks recorded and slow tasks moved (each its own fenced
 * write), then the tasks to place (those never placed or queued, and the lost ones whose write
 * landed) scheduled, held or failed as planUnplaced says.
 */
async function applyTasks(m: MoveHost, o: Owned, steps: readonly TaskStep[], unplaced: Unplaced | undefined): Promise<void> {
  const toPlace: number[] = [];
  const compacted = steps.filter((s) => s.kind === 'fail-compacted').map((s) => s.task);
  if (compacted.length > 0) {
    await setTaskStatesChunked(m, o, compacted, 'failed', OUTCOME_COMPACTED);
    // A write that did not land (the record changed) is planned again from the record as read.
    for (const t of compacted) {
      const rec = o.tasks.get(t)?.rec;
      if (rec?.state === 'placed' || rec?.state === 'running') continue;
      o.outcomes.compacted.delete(t);
      if (rec?.state === 'failed' && rec.message === OUTCOME_COMPACTED) m.stats.outcomesCompacted++;
    }
  }
  for (const s of steps) {
    if (o.dropped) return;
    if (s.kind === 'fail-compacted') continue;
    if (s.kind === 'finish-move') await finishMove(m, o, s.task);
    else if (s.kind === 'give-back-held') await giveBackHeld(m, o, s.task);
    else if (s.kind === 'await-node') awaitNode(m, o, s.server, s.due);
    else if (s.kind === 'place') toPlace.push(s.task);
    else if (s.kind === 'move-slow') await moveSlow(m, o, s.task, s.how);
    else {
      const cur = o.tasks.get(s.task);
      if (cur && (await markLost(m, o, s.task, cur, s.why))) toPlace.push(s.task);
    }
  }
  if (o.dropped || toPlace.length === 0 || !unplaced) return;
  const u = unplaced;
  if (u.kind === 'hold') {
    o.blockedSince = u.since;
    o.note = u.note;
    for (const t of toPlace) o.dirty.add(t); // looked at again on the next tick (persistProgress)
  } else if (u.kind === 'fail') {
    o.blockedSince ??= m.o.clock.now();
    o.note = u.note;
    await setTaskStatesChunked(m, o, toPlace, 'failed', u.note);
  } else {
    if (o.blockedSince !== undefined) {
      o.blockedSince = undefined;
      o.note = undefined;
    }
    await startSchedule(m, o, toPlace);
  }
}

/** Records tasks in a final state, as many per fenced transaction as the store takes. */
async function setTaskStatesChunked(m: OwnerContext, o: Owned, tasks: readonly number[], state: 'failed' | 'cancelled', message: string): Promise<void> {
  const per = Math.max(1, m.o.store.maxTxnOps - 2);
  for (let i = 0; i < tasks.length && !o.dropped; i += per) await setTaskStates(m, o, tasks.slice(i, i + per), state, message);
}

/** Looks at the job's tasks on `server` again when its grace runs out (once per job and node). */
function awaitNode(m: OwnerContext, o: Owned, server: string, due: number): void {
  if (o.awaitingNodes.has(server)) return;
  o.awaitingNodes.add(server);
  const n = o.byServer.get(server)?.size ?? 0;
  o.note ??= `server ${server} cannot be reached; its ${n} task(s) of this job keep their place until ${new Date(due).toISOString()}, then run elsewhere`;
  m.o.log.info(
    { job: o.id, server, until: new Date(due).toISOString() },
    'node unreachable; waiting for its disconnect grace before placing its tasks elsewhere',
  );
  m.later(due - m.o.clock.now() + 10, () => {
    o.awaitingNodes.delete(server);
    if (o.note?.startsWith(`server ${server} cannot be reached`)) o.note = undefined;
    for (const t of o.byServer.get(server) ?? []) o.dirty.add(t);
    m.queue.add(o);
  });
}

/**
 * Cancellation: stop the scheduling call, stop placed and running tasks through their monitors,
 * and record the queued ones as cancelled, many per transaction (plan.ts planCancel).
 */
async function applyCancel(m: OwnerContext, o: Owned, plan: NonNullable<JobPlan['cancel']>): Promise<void> {
  if (plan.abort) o.agent.abort(o.id);
  for (const t of plan.stop) {
    const cur = o.tasks.get(t);
    if (cur) stopTask(m, o, t, cur);
  }
  await setTaskStatesChunked(m, o, plan.cancel, 'cancelled', 'cancelled before it was placed');
}

/** The attempt number a new placement of the task gets: one more than its last placement's. */
export function nextAttempt(rec: LiveTaskRecord | undefined): number {
  if (!rec) return 0;
  return rec.state === 'lost' || rec.ru !== undefined ? rec.attempt + 1 : rec.attempt;
}

async function startSchedule(m: OwnerContext, o: Owned, tasks: number[]): Promise<void> {
  const lease = m.lease;
  // Dropped while this evaluation awaited (its lease fenced, the job adopted elsewhere): setting
  // the fence below would clear the abort, and the agent would place a job that is not ours.
  if (!lease || !lease.confirmed || o.dropped) return;
  await claimPreempted(m, o, tasks);
  // The same, across the claim's reads and writes.
  if (o.dropped || m.lease !== lease) return;
  let again = 0;
  for (const t of tasks) if (o.tasks.get(t)?.rec.state === 'lost') again++;
  if (again > 0) {
    m.stats.rescheduled += again;
    setRecord(o, { ...o.rec, rescheduled: (o.rec.rescheduled ?? 0) + again });
  }
  for (const t of tasks) o.scheduling.add(t);
  o.agent.setFence(o.id, commitFence(m.o.keys, lease, o));
  const p = o.agent
    .schedule(o.spec, tasks, {
      attempt: (t) => nextAttempt(o.tasks.get(t)?.rec),
      taskRev: (t) => taskKeyRev(o.tasks.get(t)),
      previous: (t) => attemptHistory(o.tasks.get(t)?.rec),
    })
    .then(
      (rec) => scheduled(m, o, rec),
      (err: unknown) => scheduleFailed(m, o, tasks, err),
    )
    .catch((err: unknown) => m.o.log.warn({ job: o.id, err: errorMessage(err) }, 'scheduling cleanup failed'))
    .finally(() => {
      // What this call did not place is looked at again by the next evaluation.
      for (const t of tasks) {
        o.scheduling.delete(t);
        o.dirty.add(t);
      }
      if (!o.dropped) decisionsDue(m, o, 'done');
    });
  m.track(p);
}

/** The scheduling call returned: its decision record is kept (what it did not place, the next evaluation looks at). */
async function scheduled(m: OwnerContext, o: Owned, rec: DecisionRecord): Promise<void> {
  if (rec.unplaceable) {
    // The agent's view of the cell cannot take the job (it shrank since the last check):
    // the next evaluation checks the cell again, and waits or fails with the reason.
    o.note = rec.unplaceable.reason;
    await m.o.clock.sleep(500);
    return;
  }
  if (o.blockedSince === undefined) o.note = undefined;
  o.decisions.kept = keepFirstAndLatest([...o.decisions.kept, rec], KEPT_DECISIONS);
  m.o.onDecision?.(o.spec, rec);
  if (m.o.log.isLevelEnabled('debug')) {
    const placed = rec.placements.length + (rec.omittedPlacements ?? 0);
    m.o.log.debug({ job: o.id, agent: rec.agent, placed, R: rec.samples.at(-1)?.R, conflicts: rec.conflicts, queuedMs: rec.queuedMs }, 'scheduling call done');
  }
}

/** The scheduling call failed: cancelled or closed, nothing; tasks changed under it, read them; otherwise a pause before the next evaluation. */
async function scheduleFailed(m: OwnerContext, o: Owned, tasks: readonly number[], err: unknown): Promise<void> {
  if (isTarcilError(err, 'CLOSED')) return;
  if (isTarcilError(err, 'CANCELLED')) {
    // Stopped by this owner (the job dropped, cancelled), or a commit found the fence fallen: the
    // owner record rewritten (another process adopted the job) or our lease gone. The latter is
    // settled here: a job that is not ours any more is dropped, not scheduled again.
    if (!o.dropped && o.ownerRev !== undefined) {
      const lease = m.lease;
      const [member, owner] = await Promise.all([lease ? m.o.store.get(m.o.keys.member(lease.id)) : undefined, m.o.store.get(m.o.keys.owner(o.id))]);
      if (lease) checkOwnership(m, o, member, lease);
      if (!o.dropped && owner?.modRevision !== o.ownerRev) dropJob(m, o, owner ? 'owner record rewritten (adopted)' : 'owner record gone (the job is final)');
    }
    return;
  }
  if (isTarcilError(err, 'ABORTED')) {
    // A task was placed meanwhile (a commit whose answer was lost landed late): look again.
    m.o.log.info({ job: o.id, err: errorMessage(err) }, 'tasks changed under the scheduling call; evaluating again');
    // Their records changed without this owner seeing it (it follows no task record).
    await m.refresher.refresh(o, tasks);
    return;
  }
  m.o.log.warn({ job: o.id, err: errorMessage(err) }, 'scheduling failed; retrying');
  // A gang attempt may have stopped between its reservation transactions.
  if (o.spec.mode === 'gang') o.reconcile = true;
  await m.o.clock.sleep(500);
}
