/**
 * A node's side of a move (owner/moves.ts): the old copy's RU is freed once its copy has
 * stopped, and a held new copy whose task moved on (its owner away) is given back. Both writes are
 * fenced on the RU record's revision and made under the node's lease, like its other frees.
 */
import type { Keys } from '../state/keys.ts';
import type { LiveTaskRecord } from '../state/live-records.ts';
import { FREE_RU_VALUE, parseJson, type PlacedRuRecord } from '../state/records.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { errorMessage } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import { taskHere } from './outcomes.ts';

/** How often a node looks at the task record of a move's held copy (normally its owner releases it within a second). */
export const HOLD_CHECK_MS = 10_000;

/** What the node lends: the store under its lease, and its view of one RU. */
export interface MoveCopyNode {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
  server: string;
  usableLeaseId(): string | undefined;
  track(p: Promise<unknown>): void;
  ru(index: number): { rec: PlacedRuRecord | undefined; rev: number } | undefined;
  dead(): boolean;
}

/**
 * Frees an RU whose record tells its copy to stop (once it has), or that was held for a copy that
 * will never start. A store that does not answer is asked again (until it does, or the node
 * registers again, which frees it too); a record that changed meanwhile is someone else's.
 */
export async function freeStopped(n: MoveCopyNode, index: number, rec: PlacedRuRecord, rev: number): Promise<void> {
  const key = n.keys.ru({ server: n.server, index });
  for (let i = 0; !n.dead(); i++) {
    const lease = n.usableLeaseId();
    const cur = n.ru(index);
    if (cur && cur.rev > rev) return;
    if (lease) {
      try {
        const res = await n.store.txn({
          compare: [{ key, target: 'mod', op: '==', value: rev }],
          success: [
            { type: 'put', key, value: FREE_RU_VALUE, lease },
            { type: 'put', key: n.keys.epoch(n.server), value: `moved:${rec.job}#${rec.task}` },
          ],
          failure: [{ type: 'get', key }],
        });
        if (!res.succeeded)
          n.log.info(
            { server: n.server, ru: index, job: rec.job, task: rec.task, now: res.responses[0]?.[0]?.value },
            'RU changed before its stopped task freed it',
          );
        return;
      } catch (err) {
        n.log.debug({ server: n.server, ru: index, err: errorMessage(err) }, 'freeing an RU failed; will retry');
      }
    }
    await n.clock.sleep(Math.min(100 * 2 ** i, 2000));
  }
}

/**
 * A held copy starts when its owner writes the record without the hold. If its task record
 * stops naming it (the task ended or moved on while its owner was away), nobody will: free it.
 */
export function watchHold(n: MoveCopyNode, index: number, rec: PlacedRuRecord, rev: number): void {
  const check = async (): Promise<void> => {
    const cur = n.ru(index);
    if (n.dead() || !cur || cur.rev !== rev) return;
    try {
      const tk = parseJson<LiveTaskRecord>(await n.store.get(n.keys.task(rec.job, rec.task)));
      if (!taskHere(tk, n.server, { commitId: rec.commitId, ruIndex: index })) return await freeStopped(n, index, rec, rev);
    } catch {
      // the store did not answer: look again later
    }
    n.clock.setTimer(HOLD_CHECK_MS, () => n.track(check()));
  };
  n.clock.setTimer(HOLD_CHECK_MS, () => n.track(check()));
}
