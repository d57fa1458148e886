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
import { placedRevisionOf, type LiveTaskRecord } from '../state/live-records.ts';
import { FREE_RU_VALUE, parseJson, type PlacedRuRecord } from '../state/records.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, Compare, KeyValue, Op, TxnRequest } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import { entryKey, type OutcomeEntry, type OutcomeJournal } from './journal.ts';
import type { TaskOutcome } from '../state/release.ts';
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
  /**
   * What the executor knows of an attempt that this process does not run (a previous life of the
   * monitor started it): how it ended, read from its exit record, after stopping it if it was
   * still running. Undefined: nothing known, the attempt is recorded lost.
   */
  previousRun?: (a: { job: string; task: number; revision: number }) => Promise<TaskOutcome | undefined>;
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
  // Placements made after this point were made for this life of the node: they are started once
  // it is registered, never settled as unknown (they would be recorded lost without ever running).
  const since = (await n.store.range(k.serverRus(n.server), { limit: 1 })).revision;
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
    const busy = (rec: PlacedRuRecord | undefined): rec is PlacedRuRecord =>
      !!rec && (rec.state === 'busy' || rec.state === 'reserved') && rec.job !== undefined;
    const ours = (i: number, rec: PlacedRuRecord): boolean => adopted.get(i)?.commitId === rec.commitId || r.journal.has(entryKey(rec));
    const fresh = new Map<number, { commitId: string }>();
    for (const { i, kv, rec } of held((await n.store.range(k.serverRus(n.server))).kvs)) {
      if (i >= r.server.rus || !busy(rec) || ours(i, rec)) continue;
      if (kv.modRevision > since && !r.runs().some((a) => a.ruIndex === i)) {
        fresh.set(i, { commitId: rec.commitId });
        continue;
      }
      if (rec.hold && !r.runs().some((a) => a.ruIndex === i)) {
        // A move's new copy that never started: the RU is freed and the move's owner, seeing its
        // held RU gone, places the task again (it is not lost: it never ran here).
        await settleUnknown(n, kv, rec, { state: 'lost', endedAt: r.clock.now() }, { freeOnly: true });
        continue;
      }
      // The attempt's files are named by the RU record's revision when it started: the task
      // record's placedRevision (the RU record itself changes when an attempt is adopted).
      let ended: TaskOutcome | undefined;
      if (r.previousRun) {
        const taskKv = await n.store.get(k.task(rec.job, rec.task));
        const taskRec = parseJson<LiveTaskRecord>(taskKv);
        const placed = taskRec && taskKv ? placedRevisionOf(taskRec, taskKv.modRevision) : undefined;
        for (const revision of new Set([placed ?? kv.modRevision, kv.modRevision])) {
          ended ??= await r.previousRun({ job: rec.job, task: rec.task, revision });
        }
      }
      const outcome: TaskOutcome = ended ?? {
        state: 'lost',
        message: `monitor of ${n.server} restarted; the task did not run here any more`,
        endedAt: r.clock.now(),
      };
      if (ended)
        r.log.info(
          { job: rec.job, task: rec.task, state: ended.state },
          'an attempt of a previous life of this monitor ended by itself; recording its outcome',
        );
      const how = await settleUnknown(n, kv, rec, outcome);
      if (how === 'lost') lost++;
    }
    // Then free what is free, in one transaction over every RU of the node.
    const keep = new Map<number, { commitId: string }>([...fresh, ...adopted]);
    const { req, unsettled } = registrationTxn(k, r.server, r.serverJson(), r.lease.id, (await n.store.range(k.serverRus(n.server))).kvs, keep);
    if (unsettled) {
      r.log.info({ attempt }, 'an RU was placed on while registering; looking again');
      continue;
    }
    const res = await n.store.txn(req);
    if (res.succeeded) return { adopted, lost };
  }
  throw new Error(`could not register server ${n.server}: its RUs keep changing`);
}

const isBusy = (rec: PlacedRuRecord | undefined): rec is PlacedRuRecord => !!rec && (rec.state === 'busy' || rec.state === 'reserved') && rec.job !== undefined;

/**
 * The transaction that registers a node once what runs on it is settled: it compares every RU
 * record of the node (as `ruKvs`, one range of `rus/<server>/`, says they are), puts the server
 * record under the lease, bumps the epoch, puts every RU not held by an adopted task free under
 * the lease and deletes RU records past the node's RU count. `unsettled`: an RU holds a task
 * that is neither adopted nor settled, so the node must not be registered yet.
 */
export function registrationTxn(
  k: Keys,
  server: ServerSpec,
  serverJson: string,
  lease: string,
  ruKvs: readonly KeyValue[],
  adopted: ReadonlyMap<number, { commitId: string }> = new Map(),
): { req: TxnRequest; unsettled: boolean } {
  const byIndex = new Map<number, { kv: KeyValue; rec: PlacedRuRecord | undefined }>();
  const extra: KeyValue[] = [];
  for (const kv of ruKvs) {
    const ref = k.parseRu(kv.key);
    if (!ref || ref.server !== server.id) continue;
    if (ref.index < server.rus) byIndex.set(ref.index, { kv, rec: kv.value === FREE_RU_VALUE ? undefined : parseJson<PlacedRuRecord>(kv) });
    else extra.push(kv);
  }
  const compare: Compare[] = [];
  const success: Op[] = [
    { type: 'put', key: k.server(server.id), value: serverJson, lease },
    { type: 'put', key: k.epoch(server.id), value: `register:${server.id}` },
  ];
  let unsettled = false;
  for (let i = 0; i < server.rus; i++) {
    const cur = byIndex.get(i);
    const key = k.ru({ server: server.id, index: i });
    compare.push({ key, target: 'mod', op: '==', value: cur?.kv.modRevision ?? 0 });
    if (isBusy(cur?.rec) && adopted.get(i)?.commitId === cur.rec.commitId) continue;
    if (isBusy(cur?.rec)) unsettled = true;
    success.push({ type: 'put', key, value: FREE_RU_VALUE, lease });
  }
  for (const kv of extra) {
    compare.push({ key: kv.key, target: 'mod', op: '==', value: kv.modRevision });
    success.push({ type: 'delete', key: kv.key });
  }
  return { req: { compare, success }, unsettled };
}

/** A node for {@link registerIdle}: its spec, its server record, and its RU records now. */
export interface IdleNode {
  server: ServerSpec;
  serverJson: string;
  ruKvs: readonly KeyValue[];
}

/**
 * Registers nodes that hold nothing (nothing runs there, nothing is journalled, no RU record holds
 * a task) many at a time: each node's registration transaction ({@link registrationTxn}), nested
 * as independent transactions in as few requests as the store's op and size limits allow.
 * Returns the ids registered and those left over (a busy RU, an RU that changed meanwhile, a node
 * too large to nest): those go through {@link registerNode} one by one. A request that fails
 * stops it: `failed` is the error, and the nodes in neither list were not registered.
 */
export async function registerIdle(
  store: ClusterStore,
  k: Keys,
  lease: string,
  nodes: readonly IdleNode[],
  opts: { concurrency?: number } = {},
): Promise<{ registered: string[]; left: string[]; failed?: unknown }> {
  const registered: string[] = [];
  const left: string[] = [];
  let failed: unknown;
  const ready: { id: string; req: TxnRequest; ops: number; bytes: number }[] = [];
  for (const x of nodes) {
    const { req, unsettled } = registrationTxn(k, x.server, x.serverJson, lease, x.ruKvs);
    if (unsettled) {
      left.push(x.server.id);
      continue;
    }
    const bytes = req.success.reduce((b, op) => b + op.key.length * 2 + (op.type === 'put' ? op.value.length + 16 : 0) + 16, 0);
    ready.push({ id: x.server.id, req, ops: Math.max(req.compare.length, req.success.length), bytes });
  }
  // etcd's budget: n nested transactions of at most maxTxnOps − n ops per list each.
  const chunks: (typeof ready)[] = [];
  let cur: typeof ready = [];
  let bytes = 0;
  let widest = 0;
  const byteBudget = store.maxRequestBytes / 2;
  for (const r of ready) {
    if (r.ops + 1 > store.maxTxnOps || r.bytes > byteBudget) {
      left.push(r.id);
      continue;
    }
    const w = Math.max(widest, r.ops);
    if (cur.length > 0 && (cur.length + 1 + w > store.maxTxnOps || bytes + r.bytes > byteBudget)) {
      chunks.push(cur);
      cur = [];
      bytes = 0;
      widest = 0;
    }
    cur.push(r);
    bytes += r.bytes;
    widest = Math.max(widest, r.ops);
  }
  if (cur.length > 0) chunks.push(cur);
  // A request that fails (a store that times out) stops the batches: what was registered is
  // returned with the error, and the caller tries the rest again later rather than pressing on.
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < chunks.length && failed === undefined) {
      const chunk = chunks[next++] as typeof ready;
      try {
        const results = await store.txns(chunk.map((c) => c.req));
        chunk.forEach((c, i) => (results[i]?.succeeded ? registered : left).push(c.id));
      } catch (err) {
        failed ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, opts.concurrency ?? 4) }, worker));
  return failed === undefined ? { registered, left } : { registered, left, failed };
}
