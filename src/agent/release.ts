import type { RuRef } from '../model/types.ts';
import type { Keys } from '../store/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import type { PlacedRuRecord } from './records.ts';

export interface TaskOutcome {
  state: 'succeeded' | 'failed' | 'lost' | 'cancelled';
  endedAt: number;
  exitCode?: number;
  message?: string;
}

/**
 * Frees an RU when its task ends, fenced on the RU's revision at placement: if the RU was
 * reassigned since (preemption, a reschedule after loss), nothing is written and false returned.
 * The same transaction bumps the server epoch (neighbourhood changed) and records the outcome.
 */
export async function releaseRu(
  store: ClusterStore,
  keys: Keys,
  ref: RuRef,
  placedRevision: number,
  placed: PlacedRuRecord,
  outcome: TaskOutcome,
  opts: { lease?: string; taskFields?: Record<string, unknown> } = {},
): Promise<boolean> {
  const res = await store.txn({
    compare: [{ key: keys.ru(ref), target: 'mod', op: '==', value: placedRevision }],
    success: [
      // A monitor passes its lease: a free RU then leaves the store with the monitor.
      { type: 'put', key: keys.ru(ref), value: JSON.stringify({ state: 'free' }), ...(opts.lease ? { lease: opts.lease } : {}) },
      { type: 'put', key: keys.epoch(ref.server), value: `release:${placed.job}#${placed.task}` },
      {
        type: 'put',
        key: keys.task(placed.job, placed.task),
        value: JSON.stringify({
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
          ...opts.taskFields,
        }),
      },
    ],
  });
  return res.succeeded;
}
