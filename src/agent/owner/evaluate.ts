/**
 * Evaluation: what moves an owned job towards a final state. One evaluation at a time per job
 * (a promise chain); it looks at the tasks whose records changed, marks tasks of departed nodes
 * lost, waits (or fails) when the cell cannot take the job, starts the agent's scheduling call for
 * what is unplaced, stops tasks of a cancelled job, and writes the job's summary.
 */
import { trace } from '../../util/trace.ts';
import { attemptHistory, isFinalTask, type LiveTaskRecord } from '../../state/live-records.ts';
import { replaceAfter } from '../../state/node-fence.ts';
import { errorMessage, isTarcilError, isTransient } from '../../util/errors.ts';
import { commitFence, fmtDuration, taskKeyRev, YIELD_EVERY, yieldNow, type OwnerContext, type Owned } from './context.ts';
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
 * after adoption, a cancellation or a failed evaluation (`full`).
 */
function takeDirty(o: Owned): Iterable<number> {
  if (o.full) {
    o.full = false;
    o.dirty.clear();
    const n = o.spec.tasks;
    return (function* () {
      for (let t = 0; t < n; t++) yield t;
    })();
  }
  const list = [...o.dirty];
  o.dirty.clear();
  return list;
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

async function evaluateTasks(m: OwnerContext, o: Owned): Promise<void> {
  const toSchedule: number[] = [];
  let seen = 0;
  for (const t of takeDirty(o)) {
    if (++seen % YIELD_EVERY === 0) await yieldNow();
    if (o.scheduling.has(t)) continue;
    const cur = o.tasks.get(t);
    const st = cur?.rec.state;
    if (cur && st === 'placed' && cur.rec.movedFrom) {
      // A move's new copy, held until the old one stopped (moves.ts; it also handles nodes gone).
      m.finishMove(o, t);
      continue;
    }
    if (cur && (st === 'placed' || st === 'running') && cur.rec.ru && !m.servers.has(cur.rec.ru.server)) {
      // The node's lease expired (or it never registered with us yet): confirm with the store.
      const server = cur.rec.ru.server;
      const alive = await m.o.store.get(m.o.keys.server(server));
      if (!alive) {
        // The node may still be running the task, cut off from the store: it keeps its tasks for
        // its disconnect grace, so they are placed elsewhere only once that has run out.
        const due = replaceAt(m, server, cur.rec.nodeGraceMs);
        if (m.o.clock.now() < due) {
          awaitNode(m, o, server, due);
          continue;
        }
        const lost = await markLost(m, o, t, cur, `server ${server} left the cluster`);
        if (o.dropped) return;
        if (lost) toSchedule.push(t);
        continue;
      }
    }
    if (!cur || st === 'queued' || st === 'lost') toSchedule.push(t);
  }
  if (toSchedule.length === 0) return;
  const f = m.feasibility(o.spec);
  if (f.kind !== 'ok') {
    await holdUnplaceable(m, o, toSchedule, f.reason);
    return;
  }
  if (o.blockedSince !== undefined) {
    o.blockedSince = undefined;
    o.note = undefined;
  }
  await startSchedule(m, o, toSchedule);
}

/** The grace assumed for a node never seen registered whose grace no record gives (the monitor's default). */
export const ASSUMED_GRACE_MS = 60_000;

/**
 * When the tasks of a node that left may be placed elsewhere: its lease expired when it left,
 * and its monitor and the tasks' supervisors kill them no later than its disconnect grace after
 * that; the margin is state/node-fence.ts's (the same numbers the supervisors use).
 * A node this process never saw registered left before it was first found gone; its grace is
 * the one written in the task record (`recordedGraceMs`: by the placing agent, then by the node's
 * monitor with `running`), else the default.
 */
export function replaceAt(m: OwnerContext, server: string, recordedGraceMs?: number): number {
  const c = m.cell.get(server);
  if (c?.leftAt !== undefined) {
    const grace = (c.spec as { disconnectGraceMs?: number }).disconnectGraceMs ?? 0;
    return replaceAfter(c.leftAt, grace);
  }
  let since = m.unseenSince.get(server);
  if (since === undefined) m.unseenSince.set(server, (since = m.o.clock.now()));
  return replaceAfter(since, recordedGraceMs ?? ASSUMED_GRACE_MS);
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

/** The cell (as it is now) cannot take the job: wait with the reason, and fail after the bound. */
async function holdUnplaceable(m: OwnerContext, o: Owned, tasks: number[], reason: string): Promise<void> {
  const now = m.o.clock.now();
  o.blockedSince ??= now;
  if (now - o.blockedSince < m.unplaceableTimeoutMs) {
    o.note = blockedNote(m, reason, o.blockedSince);
    for (const t of tasks) o.dirty.add(t); // looked at again on the next tick (persistProgress)
    return;
  }
  o.note = `${reason}; gave up after ${fmtDuration(m.unplaceableTimeoutMs)}`;
  const per = Math.max(1, m.o.store.maxTxnOps - 2);
  for (let i = 0; i < tasks.length && !o.dropped; i += per) await setTaskStates(m, o, tasks.slice(i, i + per), 'failed', o.note);
}

export function blockedNote(m: OwnerContext, reason: string, since: number): string {
  return `${reason}; waiting for them, the job fails at ${new Date(since + m.unplaceableTimeoutMs).toISOString()} if they are not back`;
}

/**
 * Cancellation: stop the scheduling call, stop placed and running tasks through their monitors,
 * and record the queued ones as cancelled, many per transaction. Tasks that never had a record
 * get none: the summary counts them as cancelled.
 */
async function evaluateCancel(m: OwnerContext, o: Owned): Promise<void> {
  if (o.scheduling.size > 0) o.agent.abort(o.id);
  const unplaced: number[] = [];
  let seen = 0;
  for (const t of takeDirty(o)) {
    if (++seen % YIELD_EVERY === 0) await yieldNow();
    if (o.scheduling.has(t) || o.stopping.has(t)) continue;
    const cur = o.tasks.get(t);
    if (!cur || isFinalTask(cur.rec.state)) continue;
    if (cur.rec.state === 'queued' || cur.rec.state === 'lost') unplaced.push(t);
    else stopTask(m, o, t, cur);
  }
  const per = Math.max(1, m.o.store.maxTxnOps - 2);
  for (let i = 0; i < unplaced.length && !o.dropped; i += per) {
    await setTaskStates(m, o, unplaced.slice(i, i + per), 'cancelled', 'cancelled before it was placed');
  }
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
      async (rec) => {
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
          m.o.log.debug(
            { job: o.id, agent: rec.agent, placed, R: rec.samples.at(-1)?.R, conflicts: rec.conflicts, queuedMs: rec.queuedMs },
            'scheduling call done',
          );
        }
      },
      async (err: unknown) => {
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
      },
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
