/**
 * Evaluation: what moves an owned job towards a final state. One evaluation at a time per job
 * (a promise chain); it looks at the tasks whose records changed, marks tasks of departed nodes
 * lost, waits (or fails) when the cell cannot take the job, starts the agent's scheduling call for
 * what is unplaced, stops tasks of a cancelled job, and writes the job's summary.
 */
import { trace } from '../util/trace.ts';
import type { DecisionRecord } from '../agent/agent.ts';
import { attemptHistory, type LiveTaskRecord } from '../state/live-records.ts';
import { errorMessage, isTarcilError, isTransient } from '../util/errors.ts';
import { commitFence, taskKeyRev, YIELD_EVERY, yieldNow, type OwnerContext, type Owned } from './context.ts';
import { planCancel, planTasks, planUnplaced, replaceDue, serversToCheck, type Facts, type NodeFact, type TaskStep } from './plan.ts';
import { keepFirstAndLatest, KEPT_DECISIONS, persistDecisions } from './decisions.ts';
import { writeSummary } from './summary.ts';
import { claimPreempted, markLost, reconcileGang, setTaskStates, settleQuota, stopTask } from './transitions.ts';

/** A failed evaluation is tried again after at least this long; while the store keeps timing out the shared pause doubles up to EVAL_RETRY_MAX_MS. */
export const EVAL_RETRY_MIN_MS = 500;
export const EVAL_RETRY_MAX_MS = 10_000;

/**
 * Queues an evaluation of the job (at most one waits behind the running one). It starts on a
 * later turn of the event loop: the changes of one burst (many tasks ending together) are then
 * looked at in one evaluation, and the turn that brought them is not lengthened by it.
 */
export function evaluate(m: OwnerContext, o: Owned): void {
  if (o.dropped || o.evalQueued || m.closed) return;
  // Paused (the owner lease unconfirmed): nothing is acted on; the job is looked at in full on
  // resuming, so what changes meanwhile is not taken and then skipped.
  if (m.lease && !m.lease.confirmed) {
    o.full = true;
    return;
  }
  o.evalQueued = true;
  const p = o.chain.then(async () => {
    await yieldNow();
    o.evalQueued = false;
    if (o.dropped || m.closed) return;
    try {
      await evaluateNow(m, o);
      m.evalRetries.eased();
    } catch (err) {
      if (m.closed) return;
      // A store that times out is shared by every job: their retries wait out one pause that
      // grows while the failures go on, so a loaded etcd gets fewer evaluations, not more.
      m.evalRetries.failed(err);
      const delay = Math.round(isTransient(err) ? m.evalRetries.delayMs() : EVAL_RETRY_MIN_MS);
      m.o.log.warn({ job: o.id, err: errorMessage(err), delay }, 'job evaluation failed; retrying');
      m.later(delay, () => m.evaluate(o));
    }
  });
  o.chain = p;
  m.track(p);
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

async function evaluateNow(m: OwnerContext, o: Owned): Promise<void> {
  trace('evaluate', o.id);
  if (o.quota) {
    await settleQuota(m, o);
    if (o.dropped) return;
  }
  if (o.reconcile && o.scheduling.size === 0) {
    await reconcileGang(m, o);
    if (o.dropped) return;
    o.reconcile = false;
  }
  try {
    if (o.rec.cancelRequested) await evaluateCancel(m, o);
    else await evaluateTasks(m, o);
  } catch (err) {
    o.full = true; // what was taken from `dirty` is looked at again on the retry
    throw err;
  }
  if (o.dropped) return;
  await writeSummary(m, o);
}

/** The tasks that changed: facts gathered, a plan made (plan.ts), the plan applied. */
async function evaluateTasks(m: OwnerContext, o: Owned): Promise<void> {
  const tasks = await takeDirty(o);
  const facts = await gatherFacts(m, o, tasks);
  if (o.dropped) return;
  const steps = planTasks(o, tasks, facts);
  if (steps.length > 0) await applyTasks(m, o, steps, facts);
}

/**
 * What planning needs from outside the job: for the nodes of its live tasks that are not
 * registered here, whether the store still has them (one read per node), and if not since when
 * they are known gone; the cell's feasibility for the job, asked only if there is something to place.
 */
async function gatherFacts(m: OwnerContext, o: Owned, tasks: readonly number[]): Promise<Facts> {
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

/**
 * The plan's steps, in order: moves finished, departed nodes awaited, lost tasks recorded (each
 * its own fenced write), then the tasks to place (those never placed or queued, and the lost
 * ones whose write landed) scheduled, held or failed as planUnplaced says.
 */
async function applyTasks(m: OwnerContext, o: Owned, steps: readonly TaskStep[], facts: Facts): Promise<void> {
  const toPlace: number[] = [];
  for (const s of steps) {
    if (o.dropped) return;
    if (s.kind === 'finish-move') m.finishMove(o, s.task);
    else if (s.kind === 'await-node') awaitNode(m, o, s.server, s.due);
    else if (s.kind === 'place') toPlace.push(s.task);
    else {
      const cur = o.tasks.get(s.task);
      if (cur && (await markLost(m, o, s.task, cur, s.why))) toPlace.push(s.task);
    }
  }
  if (o.dropped || toPlace.length === 0) return;
  const u = planUnplaced(o, facts);
  if (u.kind === 'hold') {
    o.blockedSince = u.since;
    o.note = u.note;
    for (const t of toPlace) o.dirty.add(t); // looked at again on the next tick (persistProgress)
  } else if (u.kind === 'fail') {
    o.blockedSince ??= facts.now;
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
    m.evaluate(o);
  });
}

/**
 * Cancellation: stop the scheduling call, stop placed and running tasks through their monitors,
 * and record the queued ones as cancelled, many per transaction (plan.ts planCancel).
 */
async function evaluateCancel(m: OwnerContext, o: Owned): Promise<void> {
  if (o.scheduling.size > 0) o.agent.abort(o.id);
  const plan = planCancel(o, await takeDirty(o));
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
  if (!lease || !lease.confirmed) return;
  await claimPreempted(m, o, tasks);
  let again = 0;
  for (const t of tasks) if (o.tasks.get(t)?.rec.state === 'lost') again++;
  if (again > 0) {
    m.stats.rescheduled += again;
    o.rec = { ...o.rec, rescheduled: (o.rec.rescheduled ?? 0) + again };
  }
  for (const t of tasks) o.scheduling.add(t);
  o.agent.setFence(o.id, commitFence(m.o.keys, lease));
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
      if (!o.dropped) {
        m.track(persistDecisions(m, o, false));
        m.evaluate(o);
      }
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
  o.decisions = keepFirstAndLatest([...o.decisions, rec], KEPT_DECISIONS);
  m.o.onDecision?.(o.spec, rec);
  if (m.o.log.isLevelEnabled('debug')) {
    const placed = rec.placements.length + (rec.omittedPlacements ?? 0);
    m.o.log.debug({ job: o.id, agent: rec.agent, placed, R: rec.samples.at(-1)?.R, conflicts: rec.conflicts, queuedMs: rec.queuedMs }, 'scheduling call done');
  }
}

/** The scheduling call failed: cancelled or closed, nothing; tasks changed under it, read them; otherwise a pause before the next evaluation. */
async function scheduleFailed(m: OwnerContext, o: Owned, tasks: readonly number[], err: unknown): Promise<void> {
  if (isTarcilError(err, 'CANCELLED') || isTarcilError(err, 'CLOSED')) return;
  if (isTarcilError(err, 'ABORTED')) {
    // A task was placed meanwhile (a commit whose answer was lost landed late): look again.
    m.o.log.info({ job: o.id, err: errorMessage(err) }, 'tasks changed under the scheduling call; evaluating again');
    // Their records changed without this owner seeing it (it follows no task record).
    await m.refreshTasks(o, tasks);
    return;
  }
  m.o.log.warn({ job: o.id, err: errorMessage(err) }, 'scheduling failed; retrying');
  // A gang attempt may have stopped between its reservation transactions.
  if (o.spec.mode === 'gang') o.reconcile = true;
  await m.o.clock.sleep(500);
}
