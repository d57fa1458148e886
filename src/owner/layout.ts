/**
 * The store layout's version (`layout`), and the upgrade from the layout before it, which the
 * job owner runs at start. In that layout a job's owner record was bound to its owner's lease and
 * every front-end followed all of them; now it names the lease in its value and outlives it
 * (adoption.ts, members.ts). A cell written by the older layout therefore holds non-final jobs
 * whose owner record went with a lease that ended, and records of front-ends still running that
 * name no lease in their value. The second kind the adoption scan takes up like the jobs of a
 * member that went (the older front-ends wrote no member record, and are fenced out of those jobs
 * by the rewrite). The first kind only a read of every job shows: the upgrade adopts each, and
 * once every non-final job has an owner record it writes the layout's version. Every front-end
 * that starts on a cell without that version does the same; adoption decides who takes what. A
 * cell of a newer layout is refused.
 */
import type { ClusterStore } from '../store/types.ts';
import type { Keys } from '../state/keys.ts';
import { isFinalJob, type LiveJobRecord } from '../state/live-records.ts';
import { parseJson } from '../state/records.ts';
import { TarcilError } from '../util/errors.ts';
import { scheduleAdopt } from './adoption.ts';
import type { OwnerContext } from './context.ts';

/**
 * 3: a task's first placement writes its chunk's record, not its own (state/task-chunks.ts). A
 * front-end of layout 2 would take a task whose record is its chunk's for one never placed.
 * 4: a task that succeeded or was cancelled writes no record of its own; its owner records it in
 * the job's outcome records (state/task-outcomes.ts). A front-end of layout 3 would take such a
 * task for one still running, and wait for it forever once its RU is placed again.
 * The records of layouts 2 and 3 read the same under 4, so their upgrade only writes the
 * version; a front-end of an older layout refuses a cell of a newer one at start.
 */
export const LAYOUT_VERSION = 4;

/** The cell's layout as stored: `current` when it is this one's; throws for a newer one. */
export async function readLayout(store: ClusterStore, keys: Keys): Promise<{ current: boolean; rev: number }> {
  const kv = await store.get(keys.layout());
  if (!kv) return { current: false, rev: 0 };
  const v = Number(kv.value);
  if (!Number.isInteger(v) || v > LAYOUT_VERSION) {
    throw new TarcilError(
      'FAILED_PRECONDITION',
      `the cell under ${keys.prefix} was written with store layout ${kv.value}, newer than this tarcil's (${LAYOUT_VERSION}): run the version of tarcil that wrote it`,
    );
  }
  return { current: v === LAYOUT_VERSION, rev: kv.modRevision };
}

/** Upgrades a cell of the older layout (see above); resolves once the version is written. */
export async function upgradeLayout(m: OwnerContext, rev: number): Promise<void> {
  const k = m.o.keys;
  for (let round = 0; !m.closed; round++) {
    const { byPrefix } = await m.o.store.snapshot([k.jobs(), k.owners()]);
    const [jobs = [], owners = []] = byPrefix;
    const owned = new Set(owners.map((kv) => k.tail(k.owners(), kv.key)));
    const orphans: string[] = [];
    for (const kv of jobs) {
      const id = k.tail(k.jobs(), kv.key);
      const rec = parseJson<LiveJobRecord>(kv);
      if (id !== undefined && rec && !isFinalJob(rec.state) && !owned.has(id)) orphans.push(id);
    }
    if (orphans.length === 0) {
      const res = await m.o.store.txn({
        compare: [{ key: k.layout(), target: 'mod', op: '==', value: rev }],
        success: [{ type: 'put', key: k.layout(), value: String(LAYOUT_VERSION) }],
      });
      m.o.log.info({ layout: LAYOUT_VERSION, written: res.succeeded }, 'store layout is current');
      return;
    }
    m.o.log.info({ jobs: orphans.length, round }, 'upgrading the store layout: adopting the jobs left without an owner record');
    await Promise.all(orphans.map((id) => scheduleAdopt(m, id, { rev: 0, lease: undefined })));
    await m.o.clock.sleep(Math.min(5000, 250 * 2 ** round));
  }
}
