/**
 * Task transitions the owner writes itself: a task whose node is gone becomes lost (and is placed
 * again), a cancelled task is stopped through its monitor or released directly, queued tasks move
 * to a final state, preempted tasks are claimed back from the durable queue, and a gang left
 * half-reserved is settled all or nothing. Every write is owner-fenced (context.ts). A task whose
 * RU moved on may have ended first, its outcome in the RU's history: that is looked up before it
 * is recorded lost or cancelled.
 */
import type { RuRef, TaskState } from '../model/types.ts';
import { freeReservation } from '../state/release.ts';
import { parseQueueEntry } from '../state/queue.ts';
import type { LiveTaskRecord } from '../state/live-records.ts';
import { FREE_RU_VALUE, parseJson, type PlacedRuRecord } from '../state/records.ts';
import type { Compare, Op } from '../store/types.ts';
import { errorMessage, TarcilError } from '../util/errors.ts';
import type { QuotaChange } from './plan.ts';
import type { GangRead } from './facts.ts';
import { updateJobTokens } from '../tenancy/quota.ts';
import type { OwnerContext } from './context.ts';
import { forgetTask, mergeTask, recordOutcome, taskKeyRev, type Owned, type TaskView } from './job.ts';
import { findOutcome, OUTCOME_COMPACTED, type HistoryAnswer } from '../state/ru-history.ts';
import { checkOwnership, commitFence, fencedTxn } from './fence.ts';

/** The task's node is gone: record it lost (fenced), so that it is placed again. */
export async function markLost(m: OwnerContext, o: Owned, t: number, cur: TaskView, why: string): Promise<boolean> {
  const lease = m.lease;
  if (!lease) return false;
  const k = m.o.keys;
  const ref = cur.rec.ru as RuRef;
  const ruKv = await m.o.store.get(k.ru(ref));
  const ru = parseJson<PlacedRuRecord>(ruKv);
  let next: LiveTaskRecord = { ...cur.rec, state: 'lost', endedAt: m.o.clock.now(), message: why };
  if (!(ruKv && ru && ru.job === o.id && ru.task === t)) {
    // The RU moved on: a success or a cancellation is recorded in the freed RU alone until this
    // owner writes it (state/ru-history.ts). Once the RU moved on without one, none can land.
    const how = await endedInHistory(m, o, t, cur);
    if (how === 'ended' || how === 'held') return false;
    if (how === 'compacted') next = { ...next, state: 'failed', message: OUTCOME_COMPACTED };
  }
  // The task record is the fence against the node: a monitor that comes back and adopts the
  // task, or reports its outcome, rewrites it, and this write then fails.
  const compare: Compare[] = [{ key: k.task(o.id, t), target: 'mod', op: '==', value: taskKeyRev(cur) }];
  const success: Op[] = [{ type: 'put', key: k.task(o.id, t), value: JSON.stringify(next) }];
  if (ruKv && ru && ru.job === o.id && ru.task === t) {
    // The RU record goes with its server: a node that comes back registers its RUs afresh.
    compare.push({ key: ruKv.key, target: 'mod', op: '==', value: ruKv.modRevision });
    success.push({ type: 'delete', key: ruKv.key });
  }
  const res = await fencedTxn(m, o, lease, { compare, success });
  if (!res.succeeded) return false;
  mergeTask(o, t, next, res.revision);
  if (next.message === OUTCOME_COMPACTED) m.stats.outcomesCompacted++;
  if (next.state !== 'lost') return false;
  m.stats.lost++;
  m.o.log.info({ job: o.id, task: t, why }, 'task lost; rescheduling');
  return true;
}

/** Cancels a placed or running task: through its monitor if it answers, else directly. */
export function stopTask(m: OwnerContext, o: Owned, t: number, cur: TaskView): void {
  o.stopping.add(t);
  const run = async (): Promise<void> => {
    const ref = cur.rec.ru;
    const endpoint = ref ? m.servers.get(ref.server)?.endpoint : undefined;
    let done = false;
    if (ref && endpoint && m.o.nodes) {
      done = await m.o.nodes.kill(endpoint, { server: ref.server, job: o.id, task: t, reason: 'cancelled' }).catch(() => false);
    }
    if (!done) await releaseDirectly(m, o, t, cur);
  };
  m.track(
    run()
      .catch((err: unknown) => m.o.log.warn({ job: o.id, task: t, err: errorMessage(err) }, 'stopping a task failed; will retry'))
      .finally(() => {
        o.stopping.delete(t);
        // Evaluations skip a task while it is being stopped: look at it again now (it may have
        // been preempted meanwhile, and wait queued for a cancellation of its own).
        o.dirty.add(t);
        m.queue.add(o);
      }),
  );
}

async function releaseDirectly(m: OwnerContext, o: Owned, t: number, cur: TaskView): Promise<void> {
  const lease = m.lease;
  if (!lease) return;
  const k = m.o.keys;
  const ref = cur.rec.ru;
  const next: LiveTaskRecord = { ...cur.rec, state: 'cancelled', endedAt: m.o.clock.now(), message: 'cancelled' };
  const compare: Compare[] = [];
  const success: Op[] = [{ type: 'put', key: k.task(o.id, t), value: JSON.stringify(next) }];
  const ruKv = ref ? await m.o.store.get(k.ru(ref)) : undefined;
  const ru = parseJson<PlacedRuRecord>(ruKv);
  if (ref && ruKv && ru && ru.job === o.id && ru.task === t) {
    const server = await m.o.store.get(k.server(ref.server));
    compare.push({ key: ruKv.key, target: 'mod', op: '==', value: ruKv.modRevision });
    if (server) {
      // Free, and bound to the node's lease like the monitor's own free RUs.
      success.push({ type: 'put', key: ruKv.key, value: FREE_RU_VALUE, ...(server.lease !== '0' ? { lease: server.lease } : {}) });
      success.push({ type: 'put', key: k.epoch(ref.server), value: `cancel:${o.id}#${t}` });
    } else {
      success.push({ type: 'delete', key: ruKv.key });
    }
  } else {
    // It may have ended on its own first, its outcome in its freed RU alone (see markLost).
    if (ref && (await endedInHistory(m, o, t, cur)) === 'ended') return;
    compare.push({ key: k.task(o.id, t), target: 'mod', op: '==', value: taskKeyRev(cur) });
  }
  const res = await fencedTxn(m, o, lease, { compare, success });
  if (res.succeeded) mergeTask(o, t, next, res.revision);
}

/**
 * How task `t` left the RU its record names, from the RU's history (state/ru-history.ts): an
 * outcome found there is recorded as the task's (and the job evaluated again).
 */
async function endedInHistory(m: OwnerContext, o: Owned, t: number, cur: TaskView): Promise<HistoryAnswer['kind']> {
  const ref = cur.rec.ru as RuRef;
  const a = { job: o.id, task: t, ...(typeof cur.rec.commitId === 'string' ? { commitId: cur.rec.commitId } : {}) };
  const answer = await findOutcome(m.o.store, m.o.keys, ref, a, Math.max(cur.rev, o.rec.seen ?? 0));
  m.stats.historyReads++;
  if (answer.kind === 'ended' && answer.carried) m.stats.outcomesCarried++;
  if (answer.kind === 'ended') {
    recordOutcome(o, answer.last, answer.rev, ref);
    m.queue.add(o);
  }
  return answer.kind;
}

/** Moves queued tasks to a final state, in one fenced transaction (at most maxTxnOps − 2 tasks). */
export async function setTaskStates(m: OwnerContext, o: Owned, tasks: number[], state: TaskState, message: string): Promise<void> {
  const lease = m.lease;
  if (!lease || tasks.length === 0) return;
  const k = m.o.keys;
  const now = m.o.clock.now();
  const compare: Compare[] = [];
  const success: Op[] = [];
  const next = new Map<number, LiveTaskRecord>();
  for (const t of tasks) {
    const cur = o.tasks.get(t);
    const rec: LiveTaskRecord = { ...(cur?.rec ?? { job: o.id, index: t, attempt: 0 }), state, endedAt: now, message };
    next.set(t, rec);
    compare.push({ key: k.task(o.id, t), target: 'mod', op: '==', value: taskKeyRev(cur) });
    success.push({ type: 'put', key: k.task(o.id, t), value: JSON.stringify(rec) });
  }
  const res = await fencedTxn(m, o, lease, { compare, success });
  if (res.succeeded) for (const [t, rec] of next) mergeTask(o, t, rec, res.revision);
  // A task changed meanwhile (its watch event marks it for the next evaluation).
  else for (const t of tasks) o.dirty.add(t);
}

/** Preempted tasks come back with a durable queue entry; their owner takes them over from it. */
export async function claimPreempted(m: OwnerContext, o: Owned, tasks: number[]): Promise<void> {
  const preempted = new Set<number>();
  for (const t of tasks) if (o.tasks.get(t)?.rec.state === 'queued') preempted.add(t);
  if (preempted.size === 0) return;
  const res = await m.o.store.range(m.o.keys.jobQueue(o.id));
  for (const kv of res.kvs) {
    const e = parseQueueEntry(kv);
    if (e?.job === o.id && e.reason === 'preempted' && e.tasks.some((t) => preempted.has(t))) {
      await m.o.store.txn({
        compare: [{ key: kv.key, target: 'mod', op: '==', value: kv.modRevision }],
        success: [{ type: 'delete', key: kv.key }],
      });
    }
  }
  m.stats.rescheduled += preempted.size;
}

/**
 * A gang larger than one transaction is reserved chunk by chunk, then confirmed (reserved →
 * busy) chunk by chunk. An owner that stops part-way (it died, lost its lease, or the store
 * failed) leaves RUs `reserved`: no monitor runs a reserved RU, and only the job's owner turns
 * it busy, so left alone the job would wait forever. Here the owner settles them, all or
 * nothing: if confirmation had begun (an RU of the job is busy, or a task ran), the remaining
 * reservations are confirmed, since part of the gang may be running; otherwise every
 * reservation is given back and the whole gang is scheduled again.
 */
export async function repairGang(m: OwnerContext, o: Owned, plan: { confirm: boolean; held: number[] }, rus: readonly GangRead[]): Promise<void> {
  const lease = m.lease;
  if (!lease || !lease.confirmed) return;
  const k = m.o.keys;
  const fence = commitFence(k, lease, o);
  const { confirm, held } = plan;
  if (held.length === 0) return;
  const read = new Map(rus.map((r) => [r.task, r]));
  m.o.log.info(
    { job: o.id, reserved: held.length, confirmed: confirm },
    confirm ? 'completing a gang confirmation left half-done' : 'releasing gang reservations left half-done',
  );
  for (const t of held) {
    const h = read.get(t);
    if (!h?.kv || !h.ru) continue; // not reached: the plan holds only tasks whose RU record was read
    const { kv: ruKv, ru, ref } = h;
    if (confirm) {
      const res = await fencedTxn(m, o, lease, {
        compare: [{ key: ruKv.key, target: 'mod', op: '==', value: ruKv.modRevision }],
        success: [
          { type: 'put', key: ruKv.key, value: JSON.stringify({ ...ru, state: 'busy', since: m.o.clock.now() }) },
          { type: 'put', key: k.epoch(ref.server), value: `${o.agent.id}:gang` },
        ],
      });
      if (!res.succeeded) throw new TarcilError('UNAVAILABLE', `gang ${o.id}: reservation of task ${t} changed while completing it`);
    } else {
      const ok = await freeReservation(m.o.store, k, { ru: ref, ruRevision: ruKv.modRevision, job: o.id, task: t, by: o.agent.id }, fence);
      if (!ok) {
        const member = await m.o.store.get(k.member(lease.id));
        checkOwnership(m, o, member, lease);
        throw new TarcilError('UNAVAILABLE', `gang ${o.id}: reservation of task ${t} changed while releasing it`);
      }
      forgetTask(o, t);
    }
  }
}

/**
 * The job's namespace RU quota (tenancy/quota.ts): after adoption, the job's allotment tokens are
 * recomputed from its live tasks (no placement of it can land between the adoption and this first
 * evaluation: the old owner is fenced out and this one has not scheduled yet); otherwise the
 * tokens of placements seen to end are given back, and once every task is final, all of them.
 * Owner-fenced; a namespace without a usage record is not written.
 */
export async function returnQuota(m: OwnerContext, o: Owned, change: QuotaChange): Promise<void> {
  const lease = m.lease;
  if (!lease) return;
  const done = await updateJobTokens(m.o.store, m.o.keys, o.id, change, async (compare, success) => {
    const res = await fencedTxn(m, o, lease, { compare, success });
    return { succeeded: res.succeeded, owned: !o.dropped };
  });
  if (!done) {
    if (!o.dropped) throw new TarcilError('UNAVAILABLE', `could not update the quota usage of job ${o.id}; retrying`);
    return;
  }
  const q = o.quota;
  if (!q) return;
  if (change.drop) for (const t of change.drop) q.returns.delete(t);
  else {
    q.returns.clear();
    q.reconcile = false;
    if (change.all) q.settled = true;
  }
}
