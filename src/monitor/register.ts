/**
 * Registering a node under a lease (at start, and again after the store said its lease was gone)
 * without wiping what it runs: reconcile, then free. First, per task, each write fenced on the
 * task record and the RU record (outcomes.ts): a journalled outcome is written; a task still
 * running here (same job, task and commit) is adopted, its RU record put back busy; a local run
 * whose task record moved on (lost, placed elsewhere, final) is handed back to be killed; an RU
 * that holds an attempt this node knows nothing of is recorded lost. Then one transaction, which
 * compares every RU record of the node, puts the server record under the lease and every RU not
 * held by an adopted task free under it.
 */
import type { ServerSpec } from '../model/types.ts';
import type { HeldLease } from '../state/lease.ts';
import { FREE_RU_VALUE, parseJson, type PlacedRuRecord } from '../state/records.ts';
import type { Compare, KeyValue, Op } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import { entryKey, type OutcomeEntry, type OutcomeJournal } from './journal.ts';
import { adoptAttempt, reportOutcome, settleUnknown, type HeldAttempt, type NodeStore } from './outcomes.ts';

export interface RegisterInput {
  /** The node's store; its leaseId() is the new lease's. */
  n: NodeStore;
  lease: HeldLease;
  server: ServerSpec;
  serverJson: () => string;
  journal: OutcomeJournal;
  /** The tasks whose processes run here now. */
  runs: () => HeldAttempt[];
  /** A local run whose task is no longer this node's: stop it. */
  onMovedOn: (a: HeldAttempt, why: string) => void;
  /** A journalled outcome is in the store now. */
  onWritten: (e: OutcomeEntry) => void;
  clock: Clock;
  log: Logger;
}

export interface Registration {
  /** RU index → the adopted attempt's commit and its RU record's new revision. */
  adopted: Map<number, { commitId: string; rev: number }>;
  /** Attempts this node knew nothing of, recorded lost. */
  lost: number;
}

const ATTEMPTS = 20;

export async function registerNode(r: RegisterInput): Promise<Registration> {
  const { n } = r;
  const k = n.keys;
  const adopted = new Map<number, { commitId: string; rev: number }>();
  let lost = 0;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    if (attempt > 0) await r.clock.sleep(Math.min(50 * 2 ** attempt, 1000));
    // Outcomes this node has that the store may not.
    for (const e of r.journal.entries()) {
      const how = await reportOutcome(n, e);
      await r.journal.remove(entryKey(e));
      if (how === 'written') r.onWritten(e);
    }
    // Tasks that kept running through the lost lease.
    adopted.clear();
    for (const a of r.runs()) {
      const res = await adoptAttempt(n, a);
      if ('rev' in res) adopted.set(a.ruIndex, { commitId: a.commitId, rev: res.rev });
      else r.onMovedOn(a, res.movedOn);
    }
    // Attempts the store says are here that nobody here knows of.
    const held = (kvs: KeyValue[]): { i: number; kv: KeyValue; rec: PlacedRuRecord | undefined }[] =>
      kvs.flatMap((kv) => {
        const ref = k.parseRu(kv.key);
        return ref ? [{ i: ref.index, kv, rec: parseJson<PlacedRuRecord>(kv) }] : [];
      });
    const busy = (rec: PlacedRuRecord | undefined): rec is PlacedRuRecord => !!rec && (rec.state === 'busy' || rec.state === 'reserved') && rec.job !== undefined;
    const ours = (i: number, rec: PlacedRuRecord): boolean => adopted.get(i)?.commitId === rec.commitId || r.journal.has(entryKey(rec));
    for (const { i, kv, rec } of held((await n.store.range(k.serverRus(n.server))).kvs)) {
      if (i >= r.server.rus || !busy(rec) || ours(i, rec)) continue;
      const how = await settleUnknown(n, kv, rec, `monitor of ${n.server} restarted; the task did not run here any more`, r.clock.now());
      if (how === 'lost') lost++;
    }
    // Then free what is free, in one transaction over every RU of the node.
    const now = held((await n.store.range(k.serverRus(n.server))).kvs);
    const byIndex = new Map(now.map((x) => [x.i, x]));
    const compare: Compare[] = [];
    const success: Op[] = [
      { type: 'put', key: k.server(n.server), value: r.serverJson(), lease: r.lease.id },
      { type: 'put', key: k.epoch(n.server), value: `register:${n.server}` },
    ];
    let unsettled = false;
    for (let i = 0; i < r.server.rus; i++) {
      const cur = byIndex.get(i);
      const key = k.ru({ server: n.server, index: i });
      compare.push({ key, target: 'mod', op: '==', value: cur?.kv.modRevision ?? 0 });
      if (busy(cur?.rec) && adopted.get(i)?.commitId === cur.rec.commitId) continue;
      if (busy(cur?.rec)) unsettled = true;
      success.push({ type: 'put', key, value: FREE_RU_VALUE, lease: r.lease.id });
    }
    for (const x of now) {
      if (x.i < r.server.rus) continue;
      compare.push({ key: x.kv.key, target: 'mod', op: '==', value: x.kv.modRevision });
      success.push({ type: 'delete', key: x.kv.key });
    }
    if (unsettled) {
      r.log.info({ server: n.server, attempt }, 'an RU was placed on while registering; looking again');
      continue;
    }
    const res = await n.store.txn({ compare, success });
    if (res.succeeded) return { adopted, lost };
  }
  throw new Error(`could not register server ${n.server}: its RUs keep changing`);
}
