/**
 * Frees an RU when its task ends: one transaction fenced on the revision at which the task was
 * placed, with the task's outcome in the freed RU record for the job's owner to see. A success or
 * a cancellation is recorded there alone (its owner writes it into the job's records,
 * task-outcomes.ts); a failure or a loss also in the task's own record (its message, exit code).
 */
import { fenceCompares, type OwnerFence } from './placement.ts';
import type { RuRef } from '../model/types.ts';
import type { Keys } from './keys.ts';
import type { ClusterStore, Compare } from '../store/types.ts';
import { FREE_RU_VALUE, freedRuValue, type PlacedRuRecord } from './records.ts';

export interface TaskOutcome {
  state: 'succeeded' | 'failed' | 'lost' | 'cancelled';
  endedAt: number;
  exitCode?: number;
  message?: string;
}

/**
 * The task record of a finished attempt: what {@link releaseRu} writes, and what a node monitor
 * writes on its own when the RU record is no longer there to free (its outcome journal).
 */
export function outcomeTaskRecord(
  ref: RuRef,
  placedRevision: number,
  placed: PlacedRuRecord,
  outcome: TaskOutcome,
  taskFields?: Record<string, unknown>,
): Record<string, unknown> {
  return {
    job: placed.job,
    index: placed.task,
    state: outcome.state,
    ru: ref,
    attempt: placed.attempt,
    placedAt: placed.since,
    endedAt: outcome.endedAt,
    basedOn: placed.basedOn,
    commitId: placed.commitId,
    agent: placed.agent,
    placedRevision,
    ...(outcome.exitCode !== undefined ? { exitCode: outcome.exitCode } : {}),
    ...(outcome.message !== undefined ? { message: outcome.message } : {}),
    ...(placed.previous ? { previous: placed.previous } : {}),
    ...taskFields,
  };
}

/**
 * What a freed RU carries of its last task's outcome (records.ts freedRuValue), the job first:
 * all that is recorded of a task that succeeded or was cancelled (its state, attempt, placement,
 * start and end, exit code, where its output is) and what the node measured (for the profile learner). Of
 * any other end (failed, lost) the owner reads the whole task record. A few dozen bytes instead
 * of the record's hundreds (every front-end and the node receive it, and a free RU keeps it until
 * placed again).
 */
export function outcomeSummary(rec: Record<string, unknown>): Record<string, unknown> {
  const { job, index, state, attempt, commitId, startedAt, endedAt, exitCode, logPath, observed } = rec;
  const out: Record<string, unknown> = { job, index, state, attempt, commitId };
  if (startedAt !== undefined) out.startedAt = startedAt;
  if (endedAt !== undefined) out.endedAt = endedAt;
  if (exitCode !== undefined) out.exitCode = exitCode;
  if (logPath !== undefined) out.logPath = logPath;
  if (observed !== undefined) out.observed = observed;
  return out;
}

/** Whether an outcome is recorded in the freed RU alone (see the file's comment). */
export function recordedInRu(state: TaskOutcome['state']): boolean {
  return state === 'succeeded' || state === 'cancelled';
}

/**
 * Frees an RU when its task ends, fenced on the RU's revision at placement: if the RU was
 * reassigned since (preemption, a reschedule after loss), nothing is written and false returned.
 * The same transaction records a failure or a loss in the task record (see the file's comment). It bumps no server epoch: only placements under the
 * `server` conflict scope do, and a freed neighbour can only lower a placement's interference.
 * `compare` adds fences (a node monitor also compares the task record's revision).
 */
export async function releaseRu(
  store: ClusterStore,
  keys: Keys,
  ref: RuRef,
  placedRevision: number,
  placed: PlacedRuRecord,
  outcome: TaskOutcome,
  opts: { lease?: string; taskFields?: Record<string, unknown>; compare?: Compare[] } = {},
): Promise<boolean> {
  const record = outcomeTaskRecord(ref, placedRevision, placed, outcome, opts.taskFields);
  const res = await store.txn({
    compare: [{ key: keys.ru(ref), target: 'mod', op: '==', value: placedRevision }, ...(opts.compare ?? [])],
    success: [
      // A monitor passes its lease: a free RU then leaves the store with the monitor. The freed
      // RU carries the outcome: that is how the job's owner learns it (it follows no task record).
      { type: 'put', key: keys.ru(ref), value: freedRuValue(JSON.stringify(outcomeSummary(record))), ...(opts.lease ? { lease: opts.lease } : {}) },
      ...(recordedInRu(outcome.state) ? [] : [{ type: 'put' as const, key: keys.task(placed.job, placed.task), value: JSON.stringify(record) }]),
    ],
  });
  return res.succeeded;
}

/**
 * Gives back an RU reserved for a gang task that will not run there: the RU becomes free (bound,
 * like the monitor's own free RUs, to its node's lease, so it leaves with the node; deleted if
 * the node is gone) and the task record is removed, so the task counts as not placed (unless
 * `keepTask`: a move's held copy of a task that ended meanwhile). Fenced on the RU's revision
 * and, when given, on the job owner's lease. Returns whether it was applied.
 */
export async function freeReservation(
  store: ClusterStore,
  keys: Keys,
  r: { ru: RuRef; ruRevision: number; job: string; task: number; by: string; keepTask?: boolean },
  fence?: OwnerFence,
): Promise<boolean> {
  const server = await store.get(keys.server(r.ru.server));
  const res = await store.txn({
    compare: [{ key: keys.ru(r.ru), target: 'mod', op: '==', value: r.ruRevision }, ...(fence ? fenceCompares(fence) : [])],
    success: [
      server
        ? { type: 'put', key: keys.ru(r.ru), value: FREE_RU_VALUE, ...(server.lease !== '0' ? { lease: server.lease } : {}) }
        : { type: 'delete', key: keys.ru(r.ru) },
      { type: 'put', key: keys.epoch(r.ru.server), value: `${r.by}:release` },
      ...(r.keepTask ? [] : [{ type: 'delete' as const, key: keys.task(r.job, r.task) }]),
    ],
  });
  return res.succeeded;
}
