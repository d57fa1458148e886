/**
 * The node monitor's writes about one task attempt, each fenced so that it cannot undo what an
 * owner or an agent decided meanwhile: reporting a journalled outcome (freeing the RU if it still
 * holds the attempt, else writing the task record alone), adopting a task that kept running
 * through a lost lease, and recording lost a task the store says ran here but that this node
 * knows nothing of. Every write compares the task record's mod revision (an owner's "mark lost"
 * compares the same revision, so of two competing writes exactly one lands) and the RU record's.
 */
import type { RuRef } from '../model/types.ts';
import type { Keys } from '../state/keys.ts';
import type { LiveTaskRecord } from '../state/live-records.ts';
import { FREE_RU_VALUE, lastOfFreedRu, parseJson, type PlacedRuRecord } from '../state/records.ts';
import { outcomeTaskRecord, releaseRu, type TaskOutcome } from '../state/release.ts';
import { impliedFromRu, readFromBlock } from '../state/task-chunks.ts';
import type { ClusterStore, Compare, KeyValue } from '../store/types.ts';
import { TarcilError } from '../util/errors.ts';
import type { OutcomeEntry } from './journal.ts';

/** What the monitor's store writes need. */
export interface NodeStore {
  store: ClusterStore;
  keys: Keys;
  server: string;
  /** The lease a freed RU is bound to; undefined while the monitor holds no usable lease. */
  leaseId(): string | undefined;
}

/** One attempt that runs (or ran) here, as the monitor knows it. */
export interface HeldAttempt {
  job: string;
  task: number;
  commitId: string;
  ruIndex: number;
  rec: PlacedRuRecord;
  /** Revision of the RU record that placed the attempt. */
  placedRevision: number;
}

/** How many times a write is tried again when what it compared changed in between. */
const TRIES = 8;

interface Current {
  ruKv: KeyValue | undefined;
  ru: PlacedRuRecord | undefined;
  taskKv: KeyValue | undefined;
  tk: LiveTaskRecord | undefined;
}

async function read(n: NodeStore, a: { job: string; task: number; ruIndex: number }): Promise<Current> {
  const ref: RuRef = { server: n.server, index: a.ruIndex };
  const [ruKv, taskKv] = await Promise.all([n.store.get(n.keys.ru(ref)), n.store.get(n.keys.task(a.job, a.task))]);
  const ru = parseJson<PlacedRuRecord>(ruKv);
  let tk = taskOrImplied(parseJson<LiveTaskRecord>(taskKv), ref, ru, ruKv, a);
  if (!tk && !taskKv) {
    // No record of its own, and the RU no longer says: its chunk's, if its placement started it.
    tk = await readFromBlock(n.store, n.keys, a.job, a.task);
  }
  return { ruKv, ru, taskKv, tk };
}

/**
 * The task's record: its own (`tk`), or while it has none, the one its chunk implies when the RU
 * holds an attempt of it that its placement started (state/task-chunks.ts): running here.
 */
export function taskOrImplied(
  tk: LiveTaskRecord | undefined,
  ref: RuRef,
  ru: PlacedRuRecord | undefined,
  ruKv: KeyValue | undefined,
  a: { job: string; task: number },
): LiveTaskRecord | undefined {
  if (tk || !ru || !ruKv || !ru.startRecorded || ru.state !== 'busy' || ru.job !== a.job || ru.task !== a.task) return tk;
  return impliedFromRu(ref, ru, ruKv.modRevision);
}

/** The RU record holds exactly this attempt. */
export function ruHolds(ru: PlacedRuRecord | undefined, a: { job: string; task: number; commitId: string }): boolean {
  return !!ru && (ru.state === 'busy' || ru.state === 'reserved') && ru.job === a.job && ru.task === a.task && ru.commitId === a.commitId;
}

/** The freed RU's record carries this attempt's outcome (state/release.ts outcomeSummary). */
function carriesOutcome(value: string, a: { job: string; task: number; commitId: string }): boolean {
  const last = lastOfFreedRu(value);
  return !!last && last.job === a.job && last.index === a.task && last.commitId === a.commitId;
}

/** The task record still says this attempt is placed on, or running on, this RU of this node. */
export function taskHere(tk: LiveTaskRecord | undefined, server: string, a: { commitId: string; ruIndex: number }): boolean {
  return !!tk && (tk.state === 'placed' || tk.state === 'running') && tk.commitId === a.commitId && tk.ru?.server === server && tk.ru.index === a.ruIndex;
}

function taskFence(n: NodeStore, job: string, task: number, kv: KeyValue | undefined): Compare {
  return { key: n.keys.task(job, task), target: 'mod', op: '==', value: kv?.modRevision ?? 0 };
}

function usableLease(n: NodeStore): string {
  const lease = n.leaseId();
  if (!lease) throw new TarcilError('UNAVAILABLE', `monitor of ${n.server} holds no lease to free an RU under`);
  return lease;
}

/**
 * Writes a journalled outcome. While the RU still holds the attempt: the fenced release (RU
 * freed under the monitor's lease, outcome recorded), also comparing the task
 * record. Otherwise, while the task record still names the attempt here: the outcome alone,
 * fenced on the task record. Otherwise the store already has it or has moved on ('settled').
 * Throws when the store does not answer, or when the RU must be freed and there is no lease.
 */
export async function reportOutcome(n: NodeStore, e: OutcomeEntry): Promise<'written' | 'settled'> {
  const ref: RuRef = { server: n.server, index: e.ruIndex };
  const outcome: TaskOutcome = { state: e.state, endedAt: e.endedAt };
  if (e.exitCode !== undefined) outcome.exitCode = e.exitCode;
  if (e.message !== undefined) outcome.message = e.message;
  const fields: Record<string, unknown> = { startedAt: e.startedAt, server: n.server, placedRevision: e.placedRevision };
  if (e.logPath) fields.logPath = e.logPath;
  if (e.observed) fields.observed = e.observed;
  // The common case in one transaction: the RU still holds the attempt at the revision the
  // monitor last saw. Whoever else writes about the attempt (an owner marking it lost, an owner
  // cancelling it, a preemption) changes or deletes the RU record too, so this fence suffices.
  if (e.ruRev !== undefined) {
    const lease = n.leaseId();
    if (lease && (await releaseRu(n.store, n.keys, ref, e.ruRev, e.rec, outcome, { lease, taskFields: fields }))) return 'written';
  }
  for (let i = 0; i < TRIES; i++) {
    const c = await read(n, e);
    // Already written: by this report's earlier try whose answer was lost, or by another report
    // of the same journalled entry (the reporter and a re-registration). A success or a
    // cancellation is then only in the freed RU, and the task record still says running here.
    if (c.ruKv && carriesOutcome(c.ruKv.value, e)) return 'settled';
    if (c.ruKv && ruHolds(c.ru, e)) {
      const ok = await releaseRu(n.store, n.keys, ref, c.ruKv.modRevision, e.rec, outcome, {
        lease: usableLease(n),
        taskFields: fields,
        compare: [taskFence(n, e.job, e.task, c.taskKv)],
      });
      if (ok) return 'written';
    } else if (taskHere(c.tk, n.server, e)) {
      const res = await n.store.txn({
        compare: [taskFence(n, e.job, e.task, c.taskKv), { key: n.keys.ru(ref), target: 'mod', op: '==', value: c.ruKv?.modRevision ?? 0 }],
        success: [{ type: 'put', key: n.keys.task(e.job, e.task), value: JSON.stringify(outcomeTaskRecord(ref, e.placedRevision, e.rec, outcome, fields)) }],
      });
      if (res.succeeded) return 'written';
    } else {
      if (e.state === 'succeeded' && c.taskKv && c.tk) {
        const late = await cancelLaterCopy(n, e, c.taskKv, c.tk);
        if (late === 'written') return 'written';
        if (late === 'changed') continue;
      }
      return 'settled';
    }
  }
  throw new Error(`the records of ${e.job}#${e.task} kept changing while its outcome was written`);
}

/**
 * A success reported after the task was placed again (its node was silent past its lease and
 * grace: frozen, cut off): a success stays a success. If the new copy has not started (its task
 * record says `placed`, not `running`), one transaction, fenced on the task record and on the
 * new copy's RU record (the revision its monitor's start compares), records the success and gives
 * the new copy's RU back, so that copy never runs. A copy already running, or a record that moved
 * on otherwise, is left alone ('settled'); 'changed' when the fence failed.
 */
async function cancelLaterCopy(n: NodeStore, e: OutcomeEntry, taskKv: KeyValue, tk: LiveTaskRecord): Promise<'written' | 'settled' | 'changed'> {
  const later = tk.commitId;
  if (
    tk.state !== 'placed' ||
    later === undefined ||
    later === e.commitId ||
    tk.attempt <= e.attempt ||
    tk.ru === undefined ||
    (tk as { movedFrom?: unknown }).movedFrom !== undefined
  )
    return 'settled';
  const other = tk.ru;
  const [ruKv, serverKv] = await Promise.all([n.store.get(n.keys.ru(other)), n.store.get(n.keys.server(other.server))]);
  const ru = parseJson<PlacedRuRecord>(ruKv);
  if (!ruKv || !ruHolds(ru, { job: e.job, task: e.task, commitId: later }) || ru?.hold) return 'settled';
  const ref: RuRef = { server: n.server, index: e.ruIndex };
  const outcome: TaskOutcome = { state: 'succeeded', endedAt: e.endedAt, ...(e.exitCode !== undefined ? { exitCode: e.exitCode } : {}) };
  const previous = (tk.previous ?? []).filter((a) => a.attempt !== e.attempt);
  const rec = outcomeTaskRecord(ref, e.placedRevision, e.rec, outcome, {
    startedAt: e.startedAt,
    server: n.server,
    placedRevision: e.placedRevision,
    ...(e.logPath ? { logPath: e.logPath } : {}),
    message: `succeeded on ${n.server} before its monitor could report it; the later placement on ${other.server} was given back before it started`,
  });
  if (previous.length > 0) rec.previous = previous;
  else delete rec.previous;
  const res = await n.store.txn({
    compare: [taskFence(n, e.job, e.task, taskKv), { key: ruKv.key, target: 'mod', op: '==', value: ruKv.modRevision }],
    success: [
      serverKv
        ? { type: 'put', key: ruKv.key, value: FREE_RU_VALUE, ...(serverKv.lease !== '0' ? { lease: serverKv.lease } : {}) }
        : { type: 'delete', key: ruKv.key },
      { type: 'put', key: n.keys.epoch(other.server), value: `${n.server}:late-success` },
      { type: 'put', key: taskKv.key, value: JSON.stringify(rec) },
    ],
  });
  return res.succeeded ? 'written' : 'changed';
}

/**
 * Keeps a task that still runs here under the monitor's new lease. While the task record still
 * names the attempt here and its RU holds it (or nothing else: the RU record may be gone), one
 * transaction fenced on both records' revisions puts the RU record back as it was placed (the
 * same record and commit; no lease, like a placement) and puts the task record again, so an
 * owner's "mark lost" read before it fails. Returns the RU record's new revision, or why the
 * task is no longer this node's to run.
 */
export async function adoptAttempt(n: NodeStore, a: HeldAttempt): Promise<{ rev: number } | { movedOn: string }> {
  for (let i = 0; i < TRIES; i++) {
    const c = await read(n, a);
    if (!c.tk || !taskHere(c.tk, n.server, a)) {
      return { movedOn: c.tk ? `task record is ${c.tk.state}${c.tk.commitId !== a.commitId ? ' for another placement' : ''}` : 'task record gone' };
    }
    if (c.ru && (c.ru.state === 'busy' || c.ru.state === 'reserved') && !ruHolds(c.ru, a)) {
      return { movedOn: `RU holds ${c.ru.job}#${c.ru.task}` };
    }
    const ruKey = n.keys.ru({ server: n.server, index: a.ruIndex });
    const res = await n.store.txn({
      compare: [taskFence(n, a.job, a.task, c.taskKv), { key: ruKey, target: 'mod', op: '==', value: c.ruKv?.modRevision ?? 0 }],
      success: [
        { type: 'put', key: ruKey, value: JSON.stringify(a.rec) },
        // Its own record, or the one its chunk implied, written out: an owner's "mark lost" read
        // before compares the record's revision (or its absence) and fails.
        { type: 'put', key: n.keys.task(a.job, a.task), value: c.taskKv ? c.taskKv.value : JSON.stringify(c.tk) },
      ],
    });
    if (res.succeeded) return { rev: res.revision };
  }
  throw new Error(`the records of ${a.job}#${a.task} kept changing while it was adopted`);
}

/**
 * An RU of this node holds an attempt that neither runs here nor has a journalled outcome (the
 * monitor restarted, or the attempt never started): record its outcome — lost, unless the
 * executor's exit record says how it ended — if its task record still names it here (fenced on
 * both records), and free the RU either way. `freeOnly`: just free it (a move's held copy).
 */
export async function settleUnknown(
  n: NodeStore,
  ruKv: KeyValue,
  rec: PlacedRuRecord,
  outcome: TaskOutcome,
  opts: { freeOnly?: boolean } = {},
): Promise<'lost' | 'ended' | 'freed' | 'changed'> {
  const ref: RuRef = { server: n.server, index: n.keys.parseRu(ruKv.key)?.index ?? -1 };
  const taskKv = opts.freeOnly ? undefined : await n.store.get(n.keys.task(rec.job, rec.task));
  const tk = opts.freeOnly ? undefined : taskOrImplied(parseJson<LiveTaskRecord>(taskKv), ref, rec, ruKv, rec);
  if (!opts.freeOnly && taskHere(tk, n.server, { commitId: rec.commitId, ruIndex: ref.index })) {
    const ok = await releaseRu(n.store, n.keys, ref, ruKv.modRevision, rec, outcome, {
      lease: usableLease(n),
      taskFields: { server: n.server, ...(tk?.startedAt !== undefined ? { startedAt: tk.startedAt } : {}) },
      compare: [taskFence(n, rec.job, rec.task, taskKv)],
    });
    if (!ok) return 'changed';
    return outcome.state === 'lost' ? 'lost' : 'ended';
  }
  const res = await n.store.txn({
    compare: [{ key: ruKv.key, target: 'mod', op: '==', value: ruKv.modRevision }],
    success: [{ type: 'put', key: ruKv.key, value: FREE_RU_VALUE, lease: usableLease(n) }],
  });
  return res.succeeded ? 'freed' : 'changed';
}
