/**
 * The owner's part of the run-time loop (paper §2, §5.2): a node's load monitor reports a task
 * running well below its expected rate (`reports/<job>/<task>`, deleted once it recovers). For a
 * job that allows it (`migratable`), the owner waits `moveAfterMs`, then evaluates the job: if
 * the task is still slow, its plan has a `move-slow` step (plan.ts), and the applier calls
 * `moveSlow`: if a move would finish it sooner (runtime-loop.ts) and the process's move budget
 * allows, one of its agents places a new copy on an acceptable RU off the slow server
 * (SchedulingAgent.move). The move is thus one of the job's evaluation steps, never concurrent
 * with another write about the job.
 *
 * Never two copies at once: the move's one transaction holds the new RU (its monitor does not
 * start it) and tells the old RU to stop its copy; the old node stops it and frees its RU; only
 * then does the owner write the new RU's record without the hold, and the new copy starts. The
 * task record names the new placement from the move's commit on, so the old copy's outcome can
 * no longer be written over it (it is fenced like any other). An owner that takes the job over
 * finds the move from the task record (`movedFrom`) and finishes it the same way.
 */
import { moveWorthIt, roomToGrow, type MoveBudget, type RuntimeLoopConfig } from '../monitor/runtime-loop.ts';
import { attemptHistory, type LiveTaskRecord, type LoadReportRecord } from '../state/live-records.ts';
import { parseJson, type PlacedRuRecord } from '../state/records.ts';
import { freeReservation } from '../state/release.ts';
import type { KeyValue } from '../store/types.ts';
import { own } from '../util/dict.ts';
import { errorMessage, isTarcilError } from '../util/errors.ts';
import { decisionsDue, KEPT_DECISIONS, keepFirstAndLatest } from './decisions.ts';
import type { OwnerContext } from './context.ts';
import { setRecord, taskKeyRev, type Owned, type TaskView } from './job.ts';
import { commitFence, fencedTxn } from './fence.ts';
import type { RuRef } from '../model/types.ts';
import type { HeldLease } from '../state/lease.ts';
import { replaceAt } from './facts.ts';
import { markLost } from './transitions.ts';

/** What the owner needs beyond its context: the loop's rules and the process's move budget. */
export interface MoveHost extends OwnerContext {
  readonly runtime: RuntimeLoopConfig;
  readonly moveBudget: MoveBudget;
  readonly moveStats: MoveStats;
}

export interface MoveStats {
  /** Moves committed (new copy placed and held, old one told to stop). */
  moved: number;
  /** Moves whose new copy was released after the old one stopped. */
  completed: number;
  /** Tasks added to scale-out jobs. */
  scaledOut: number;
  /** Slow tasks looked at and left where they are, by reason. */
  declined: Record<'no-gain' | 'no-budget' | 'no-room' | 'max-moves' | 'no-better-ru' | 'conflict' | 'changed', number>;
}

export function newMoveStats(): MoveStats {
  return {
    moved: 0,
    completed: 0,
    scaledOut: 0,
    declined: { 'no-gain': 0, 'no-budget': 0, 'no-room': 0, 'max-moves': 0, 'no-better-ru': 0, conflict: 0, changed: 0 },
  };
}

/** A load report appeared or went: note the task slow (or not) and, for a migratable job, look again after the wait. */
export function onReport(m: MoveHost, kv: KeyValue, deleted: boolean): void {
  const r = m.live.parseReport(kv.key);
  if (!r) return;
  const ref = { job: r.job, task: r.index };
  const o = m.owned.get(ref.job);
  if (!o) return;
  if (deleted) {
    o.moves.slow.delete(ref.task);
    o.moves.due.delete(ref.task);
    return;
  }
  const rep = parseJson<LoadReportRecord>(kv);
  if (!rep) return;
  const since = m.o.clock.now();
  o.moves.slow.set(ref.task, { since, rate: rep.rate, rev: kv.modRevision });
  if (o.spec.migratable || o.spec.scaleOut) armMove(m, o, ref.task, kv.modRevision);
}

/** After the wait, the job is evaluated with the task marked due: its plan says whether it still moves. */
function armMove(m: MoveHost, o: Owned, t: number, rev: number): void {
  m.later(m.runtime.moveAfterMs, () => {
    // Recovered, or reported again since (that report set its own wait).
    if (o.dropped || o.moves.slow.get(t)?.rev !== rev) return;
    o.moves.due.set(t, rev);
    o.dirty.add(t);
    m.queue.add(o);
  });
}

/**
 * The plan's `move-slow` step: the wait is over and the task is still slow. A scale-out job gets
 * one more task; a migratable task moves if that pays and the budget allows. Either may look again
 * after another wait.
 */
export async function moveSlow(m: MoveHost, o: Owned, t: number, how: 'scale-out' | 'move'): Promise<void> {
  const rev = o.moves.due.get(t);
  o.moves.due.delete(t);
  const slow = o.moves.slow.get(t);
  const cur = o.tasks.get(t);
  if (rev === undefined || !slow || !cur?.rec.ru) return;
  const rearm = (): void => {
    // Still slow: the report is rewritten by nothing, so look again after another wait.
    armMove(m, o, t, rev);
  };
  const cfg = m.runtime;
  if (how === 'scale-out') return scaleOut(m, o, t, slow, rearm);
  const moves = cur.rec.moves ?? 0;
  if (moves >= cfg.maxMovesPerTask) {
    m.moveStats.declined['max-moves']++;
    return;
  }
  const now = m.o.clock.now();
  if (!moveWorthIt(estimate(m, o, cur.rec, slow, now), cfg)) {
    m.moveStats.declined['no-gain']++;
    return rearm();
  }
  if (!m.moveBudget.take(now)) {
    m.moveStats.declined['no-budget']++;
    return rearm();
  }
  const lease = m.lease;
  if (!lease || !lease.confirmed) return rearm();
  o.moves.moving.add(t);
  try {
    await moveTask(m, o, { t, cur, from: cur.rec.ru, slow, lease }, rearm);
  } catch (err) {
    if (!isTarcilError(err, 'CANCELLED') && !isTarcilError(err, 'CLOSED')) {
      m.o.log.warn({ job: o.id, task: t, err: errorMessage(err) }, 'moving a task failed');
    }
    m.moveStats.declined.changed++;
  } finally {
    o.moves.moving.delete(t);
  }
}

/** A slow task, the move decided: check its RU still holds this copy, then the agent's move commit. */
async function moveTask(
  m: MoveHost,
  o: Owned,
  mv: { t: number; cur: TaskView; from: RuRef; slow: { rate: number }; lease: HeldLease },
  rearm: () => void,
): Promise<void> {
  const { t, cur, from, slow, lease } = mv;
  const moves = cur.rec.moves ?? 0;
  const oldKv = await m.o.store.get(m.o.keys.ru(from));
  const old = parseJson<PlacedRuRecord>(oldKv);
  const now2 = o.tasks.get(t);
  if (!oldKv || !old || old.state !== 'busy' || old.commitId !== cur.rec.commitId || old.stop !== undefined || now2?.rev !== cur.rev) {
    m.moveStats.declined.changed++;
    return;
  }
  const reason = `ran at ${slow.rate.toFixed(2)} of its expected rate on ${from.server}`;
  o.agent.setFence(o.id, commitFence(m.o.keys, lease, o));
  const res = await o.agent.move(o.spec, {
    task: t,
    from,
    fromRev: oldKv.modRevision,
    fromRec: old,
    taskRev: taskKeyRev(cur),
    attempt: cur.rec.attempt + 1,
    previous: attemptHistory({ ...cur.rec, message: `moved: ${reason}` }) ?? [],
    moves,
    rate: slow.rate,
    reason,
  });
  if (!res.moved) {
    m.moveStats.declined[res.why === 'conflict' ? 'conflict' : 'no-better-ru']++;
    return rearm();
  }
  m.moveStats.moved++;
  o.moves.slow.delete(t);
  o.decisions.kept = keepFirstAndLatest([...o.decisions.kept, res.rec], KEPT_DECISIONS);
  m.o.onDecision?.(o.spec, res.rec);
  decisionsDue(m, o, 'done');
  const to = res.rec.placements[0]?.ru;
  m.o.log.info(
    { job: o.id, task: t, from: `${from.server}/${from.index}`, to: to ? `${to.server}/${to.index}` : undefined, rate: slow.rate },
    'moving a slow task',
  );
  // The commit's record (with movedFrom) is in o.tasks already: finish the move from it.
  o.dirty.add(t);
  m.queue.add(o);
}

/**
 * Autoscale (paper §2): a scale-out job whose task runs slow gets one more task (placed like any
 * other), up to its spec's `scaleOut.maxTasks`, at most one per wait and within the process's
 * budget of run-time actions. The job record's spec grows in one owner-fenced write, so a new
 * owner sees the job as it now is.
 */
async function scaleOut(m: MoveHost, o: Owned, t: number, slow: { rate: number }, rearm: () => void): Promise<void> {
  const now = m.o.clock.now();
  // The cell as this process's agents see it (their shared view) and the tasks it holds unplaced.
  const view = m.pickAgent().admission;
  if (!roomToGrow({ freeRus: view.totalFree(), totalRus: view.size(), waitingTasks: m.pendingTasks() }, m.runtime)) {
    m.moveStats.declined['no-room']++;
    return rearm();
  }
  if (!m.moveBudget.take(now)) {
    m.moveStats.declined['no-budget']++;
    return rearm();
  }
  const lease = m.lease;
  if (!lease || !lease.confirmed || o.dropped) return;
  const index = o.spec.tasks;
  const spec = { ...o.spec, tasks: index + 1 };
  const next = { ...o.rec, spec, scaledOut: (o.rec.scaledOut ?? 0) + 1, updatedAt: now };
  const res = await fencedTxn(m, o, lease, {
    compare: [{ key: m.o.keys.job(o.id), target: 'mod', op: '==', value: o.jobRev }],
    success: [{ type: 'put', key: m.o.keys.job(o.id), value: JSON.stringify(next) }],
  });
  if (!res.succeeded) {
    m.moveStats.declined.changed++;
    return rearm();
  }
  setRecord(o, next, spec);
  o.jobRev = res.revision;
  m.moveStats.scaledOut++;
  m.o.log.info({ job: o.id, task: t, rate: slow.rate, tasks: spec.tasks, max: o.spec.scaleOut?.maxTasks }, 'scaling out: a task runs slow, adding one');
  o.dirty.add(index);
  m.queue.add(o);
  // Still slow after another wait: one more, up to the limit.
  rearm();
}

/**
 * What a move would gain, in the rules' terms: the work left at the rate now (assumed normal until
 * the report, slow since) against a restart at the expected rate. A task of unknown length (a
 * command without a duration) counts as never finishing where it is.
 */
function estimate(
  m: MoveHost,
  o: Owned,
  rec: LiveTaskRecord,
  slow: { since: number; rate: number },
  now: number,
): { remaining: number; rateNow: number; work: number; rateAfter: number } {
  const platform = rec.ru ? m.servers.get(rec.ru.server)?.platform : undefined;
  const perf = (platform && own(o.spec.profile.platformPerf, platform)) || 1;
  const work = o.spec.durationMs !== undefined ? o.spec.durationMs / perf : Infinity;
  const started = rec.startedAt ?? slow.since;
  const done = Math.max(0, slow.since - started) + Math.max(0, now - slow.since) * slow.rate;
  return { remaining: Math.max(0, work - done), rateNow: slow.rate, work: Number.isFinite(work) ? work : 0, rateAfter: 1 };
}

/** First and longest pause before a move's old copy is looked at again while it has not stopped. */
const FINISH_FIRST_MS = 50;
const FINISH_MAX_MS = 1000;

/**
 * The plan's `finish-move` step: a placed task whose record says it moved. Once its old copy has
 * stopped (its RU no longer holds it), the new copy's RU is written without the hold and the copy
 * starts; until then the step looks again after a growing pause (a node that left is waited for
 * as long as it may keep running its tasks cut off, then its RU goes with it). A held RU freed
 * before the copy started places the task again.
 */
export async function finishMove(m: MoveHost, o: Owned, t: number): Promise<void> {
  const k = m.o.keys;
  const lease = m.lease;
  const cur = o.tasks.get(t);
  const from = cur?.rec.movedFrom;
  const to = cur?.rec.ru;
  if (!cur || cur.rec.state !== 'placed' || !from || !to) {
    o.moves.finishing.delete(t);
    return;
  }
  // Paused (the owner lease unconfirmed): looked at again once it may write.
  if (!lease || !lease.confirmed) return lookAgain(m, o, t, FINISH_MAX_MS);
  const oldKv = await m.o.store.get(k.ru(from));
  const old = parseJson<PlacedRuRecord>(oldKv);
  if (oldKv && old && (old.state === 'busy' || old.state === 'reserved') && old.commitId === from.commitId) {
    if (!m.servers.has(from.server) && !(await m.o.store.get(k.server(from.server))) && m.o.clock.now() >= replaceAt(m, from.server)) {
      await fencedTxn(m, o, lease, {
        compare: [{ key: oldKv.key, target: 'mod', op: '==', value: oldKv.modRevision }],
        success: [{ type: 'delete', key: oldKv.key }],
      });
      return lookAgain(m, o, t, 0);
    }
    const pause = o.moves.finishing.get(t) ?? FINISH_FIRST_MS;
    o.moves.finishing.set(t, Math.min(pause * 2, FINISH_MAX_MS));
    return lookAgain(m, o, t, pause);
  }
  o.moves.finishing.delete(t);
  const newKv = await m.o.store.get(k.ru(to));
  const held = parseJson<PlacedRuRecord>(newKv);
  // The placement is known by its attempt.
  if (newKv && held && held.state === 'busy' && held.job === o.id && held.task === t && held.attempt === cur.rec.attempt) {
    if (!held.hold) return;
    const { hold: _released, ...rest } = held;
    const res = await fencedTxn(m, o, lease, {
      compare: [
        { key: newKv.key, target: 'mod', op: '==', value: newKv.modRevision },
        { key: k.task(o.id, t), target: 'mod', op: '==', value: taskKeyRev(cur) },
      ],
      success: [{ type: 'put', key: newKv.key, value: JSON.stringify(rest) }],
    });
    if (!res.succeeded) return lookAgain(m, o, t, 0);
    m.moveStats.completed++;
    // Its monitor records it running without touching the RU: read until it does.
    m.refresher.watch(o, t);
    const endpoint = m.servers.get(to.server)?.endpoint;
    if (endpoint && m.o.nodes) {
      // Fast path only: the node follows its RUs and starts the copy anyway.
      m.track(m.o.nodes.launch(endpoint, { server: to.server, job: o.id, task: t, ruIndex: to.index, revision: res.revision }).catch(() => undefined));
    }
    return;
  }
  // The held RU was freed before the copy started (its node restarted): place the task again.
  await markLost(m, o, t, cur, `the RU held for its move (${to.server}/${to.index}) was freed before the task started there`);
}

/** The job's next evaluation looks at task `t` again after `ms` (one pending look per task). */
function lookAgain(m: MoveHost, o: Owned, t: number, ms: number): void {
  if (o.moves.looking.has(t)) return;
  o.moves.looking.add(t);
  m.later(ms, () => {
    o.moves.looking.delete(t);
    if (o.dropped || m.closed) return;
    o.dirty.add(t);
    m.queue.add(o);
  });
}

/**
 * The old copy of a moved task ended it (a success) before the new copy started: the RU held for
 * the new copy is given back, the task's records kept (job.ts recordOutcome). Fenced on the RU's
 * revision and the owner's lease; a copy no longer held there (freed, started) is left alone.
 */
export async function giveBackHeld(m: MoveHost, o: Owned, t: number): Promise<void> {
  const held = o.moves.heldAfterEnd.get(t);
  const lease = m.lease;
  if (!held || !lease || !lease.confirmed) return;
  const kv = await m.o.store.get(m.o.keys.ru(held.ru));
  const rec = parseJson<PlacedRuRecord>(kv);
  if (kv && rec && rec.state === 'busy' && rec.hold && rec.job === o.id && rec.task === t && rec.attempt === held.attempt) {
    const r = { ru: held.ru, ruRevision: kv.modRevision, job: o.id, task: t, by: 'move-ended', keepTask: true };
    if (!(await freeReservation(m.o.store, m.o.keys, r, commitFence(m.o.keys, lease, o)))) {
      // Changed meanwhile (started, freed): look again.
      o.dirty.add(t);
      m.later(200, () => m.queue.add(o));
      return;
    }
  }
  o.moves.heldAfterEnd.delete(t);
}
