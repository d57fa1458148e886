/**
 * Adoption: a job whose owner's lease is gone is taken up by whichever process first rewrites its
 * owner record (`owners/<job>`, which names the owner's lease and outlives it) to name its own
 * lease, comparing that the record is the one it read and that the old owner's member key is gone
 * (members.ts); the winner reads the job's task records and carries on from them. Nobody follows
 * the owner records: a scan reads them all when a member goes (and now and then, and after a
 * re-list of the members), and takes up the jobs of leases that are not members any more. It
 * also takes up jobs owned through our own lease that this process does not hold (a submission
 * whose answer was lost with the connection).
 *
 * A dead front-end of a large cell leaves thousands of jobs at once. Adoptions go through a gate:
 * a few at a time (adoption-gate.ts), the rest queued, and while the store fails them
 * (overloaded, restarting) the gate slows down for all of them (one shared backoff) instead of
 * every job retrying on its own. The orphans are taken up at the pace the store sustains, and
 * the survivors keep their own leases and work meanwhile.
 */
import { isFinalJob, ownerLeaseOf, type LiveJobRecord, type LiveTaskRecord, type MemberRecord, type OwnerRecord } from '../state/live-records.ts';
import { lastOfFreedRu, parseJson } from '../state/records.ts';
import { tasksAsRead } from '../state/task-chunks.ts';
import { errorMessage } from '../util/errors.ts';
import type { Compare, KeyValue, TxnResult } from '../store/types.ts';
import type { OwnerContext } from './context.ts';
import { mergeTask, newOwned, recordOutcome, type AdoptWindow } from './job.ts';
import { ownerFence } from './fence.ts';
import { keepForAdoption } from './ru-events.ts';

/** How a job is taken up: the owner record as read (its mod revision, 0 for none) and whose lease it named. */
export interface AdoptFrom {
  rev: number;
  /** The lease the record named (undefined: no record, a job of the older layout). */
  lease: string | undefined;
}

/** The pause before a scan after a failed adoption or a submission whose outcome is unknown. */
export const RESCAN_MS = 2000;

/**
 * A member has kept ends for longer than this process when it began this much earlier (clocks of
 * different hosts differ a little; two front-ends started together both adopt).
 */
export const OLDER_MEMBER_MS = 10_000;

/** The longest a young process leaves orphans to older members (then it adopts what is left). */
export const OLDER_MEMBERS_FIRST_MS = 600_000;

/** A scan that failed is tried again after RESCAN_MS, doubling with each failure in a row up to this. */
export const SCAN_RETRY_MAX_MS = 30_000;

const scans = new WeakMap<OwnerContext, { running: boolean; again: boolean; deferred: boolean; failures: number }>();

/**
 * Reads every owner record and the members at one revision, and takes up the jobs whose owner's
 * lease is not a member any more, and ours that this process does not hold. Coalesced: a scan
 * asked for while one runs runs once more after it.
 */
export function scan(m: OwnerContext): void {
  let st = scans.get(m);
  if (!st) scans.set(m, (st = { running: false, again: false, deferred: false, failures: 0 }));
  if (st.running) {
    st.again = true;
    return;
  }
  const lease = m.lease;
  if (m.closed || !lease || !lease.confirmed) return;
  st.running = true;
  const s = st;
  const p = scanOnce(m, lease.id)
    .then(() => {
      s.failures = 0;
    })
    .catch((err: unknown) => {
      // A store too busy to answer the read of every owner record in time (an overload, etcd's
      // restart) must not leave orphans for the next periodic scan: their ends age meanwhile.
      const wait = Math.min(SCAN_RETRY_MAX_MS, RESCAN_MS * 2 ** s.failures++);
      m.o.log.warn({ err: errorMessage(err), againInMs: wait }, 'adoption scan failed; scanning again');
      m.later(wait, () => scan(m));
    })
    .finally(() => {
      s.running = false;
      if (s.again && !m.closed) {
        s.again = false;
        scan(m);
      }
    });
  m.track(p);
}

async function scanOnce(m: OwnerContext, self: string): Promise<void> {
  const k = m.o.keys;
  const { byPrefix } = await m.o.store.snapshot([k.owners(), k.members()]);
  const [owners = [], members = []] = byPrefix;
  const live = new Set(members.map((kv) => k.tail(k.members(), kv.key)));
  const defer = olderMembersFirst(m, self, members);
  let deferred = 0;
  for (const kv of owners) {
    const id = k.tail(k.owners(), kv.key);
    if (id === undefined || m.owned.has(id)) continue;
    const lease = ownerLeaseOf(kv);
    // Ours by the store, unknown to us: a submission whose answer was lost with the connection
    // (the transaction landed, the reply did not). Nobody else may adopt it while our lease
    // lives, so we must take it up ourselves or it waits forever.
    if (lease === self) {
      if (!m.submitting.has(id)) void scheduleAdopt(m, id, { rev: kv.modRevision, lease }, true);
    } else if (lease === undefined || !live.has(lease)) {
      if (defer > 0 && lacksEndsOf(m, lease)) deferred++;
      else void scheduleAdopt(m, id, { rev: kv.modRevision, lease });
    }
  }
  if (deferred > 0) rescanWhenOld(m, defer, deferred);
}

/**
 * How long this process still leaves orphaned jobs to older members (0: it adopts them now). It
 * keeps task ends only since it started (recent-ends.ts): of a job whose owner's lease went before
 * it kept a whole window, it may lack the ends that came before, which a member that has kept ends
 * for longer found in its own memory when its scan queued the job (a front-end restarted after a
 * crash would otherwise race the survivors for its own former jobs, and read their ends from a
 * compacted history). With no older member, or after OLDER_MEMBERS_FIRST_MS, it adopts them.
 */
function olderMembersFirst(m: OwnerContext, self: string, members: readonly KeyValue[]): number {
  const left = m.recentEnds.since + OLDER_MEMBERS_FIRST_MS - m.o.clock.now();
  if (left <= 0) return 0;
  const k = m.o.keys;
  for (const kv of members) {
    if (k.tail(k.members(), kv.key) === self) continue;
    const since = parseJson<MemberRecord>(kv)?.endsSince;
    if (typeof since === 'number' && since <= m.recentEnds.since - OLDER_MEMBER_MS) return left;
  }
  return 0;
}

/** Whether this process may lack ends of the jobs of `lease`: it did not see the lease go a whole window after it began keeping them. */
function lacksEndsOf(m: OwnerContext, lease: string | undefined): boolean {
  const gone = lease === undefined ? undefined : m.memberGoneAt(lease);
  return gone === undefined || gone < m.recentEnds.since + m.recentEnds.keepMs;
}

/** One scan again once this process no longer leaves orphans to older members (however many scans deferred). */
function rescanWhenOld(m: OwnerContext, afterMs: number, deferred: number): void {
  const st = scans.get(m);
  m.o.log.info({ jobs: deferred, forMs: Math.round(afterMs) }, 'orphaned jobs left to older front-ends while this one is young');
  if (!st || st.deferred) return;
  st.deferred = true;
  m.later(afterMs, () => {
    st.deferred = false;
    scan(m);
  });
}

/** Takes up job `id` in the background (see tryAdopt); resolves when that is done or failed. */
export function scheduleAdopt(m: OwnerContext, id: string, from: AdoptFrom, ours = false): Promise<void> {
  if (m.closed || m.adopting.has(id) || m.owned.has(id)) return Promise.resolve();
  m.adopting.add(id);
  // The job's task changes are kept from now, while it waits its turn (see OwnerContext.adoptWindow).
  const window: AdoptWindow = m.adoptWindow.get(id) ?? { tasks: [] };
  m.adoptWindow.set(id, window);
  // And the ends its view saw before (its owner's lease was lost after them, or they came
  // between that and this scan): they may be compacted out of the history by its turn.
  for (const e of m.recentEnds.of(id)) {
    const last = lastOfFreedRu(e.value) as LiveTaskRecord | undefined;
    if (last?.job !== id || typeof last.index !== 'number') continue;
    keepForAdoption(window, last, e.rev, e.ref);
    m.stats.outcomesFromRecentEnds++;
  }
  // Jitter spreads the jobs of a dead process over the survivors instead of one taking all.
  const jitter = m.o.rng.next() * Math.min(1000, m.ttlSeconds * 250);
  const p = m.o.clock
    .sleep(jitter)
    .then(() =>
      m.adoptions.run(
        () => tryAdopt(m, id, from, ours, window),
        () => m.closed,
      ),
    )
    .catch((err: unknown) => {
      m.o.log.warn({ job: id, err: errorMessage(err), queued: m.adoptions.queued }, 'adoption failed; a scan retries');
      m.later(RESCAN_MS, () => scan(m));
    })
    .finally(() => {
      m.adopting.delete(id);
      if (m.adoptWindow.get(id) === window) m.adoptWindow.delete(id);
    });
  m.track(p);
  return p;
}

/**
 * Takes up a job: one whose owner record (as read: `from`) names a lease that is not a member any
 * more, or none (rewrite it to name ours), or, with `ours`, one whose owner record names our lease
 * already but which this process does not hold.
 */
async function tryAdopt(m: OwnerContext, id: string, from: AdoptFrom, ours: boolean, window: AdoptWindow): Promise<void> {
  const lease = m.lease;
  if (m.closed || !lease || !lease.confirmed || m.owned.has(id) || m.submitting.has(id)) return;
  const k = m.o.keys;
  const kv = await m.o.store.get(k.job(id));
  const rec = parseJson<LiveJobRecord>(kv);
  if (!kv || !rec || isFinalJob(rec.state)) return;
  const agent = m.pickAgent();
  const owner: OwnerRecord = { agent: agent.id, process: m.o.process, since: m.o.clock.now(), lease: lease.id };
  // Until the job is owned, the task changes the RUs show for it are kept in `window` (opened when
  // the job was queued, scheduleAdopt): one made just after the transaction below can reach this process
  // before its answer does, and would otherwise be lost (a task that ended then stayed running
  // for us, and the job never final); one made while the job waited its turn is applied without a
  // read of the RU's history, which compaction may have taken meanwhile. Older than the task
  // records the transaction reads, they change nothing (mergeTask).
  let res: TxnResult;
  try {
    const compare: Compare[] = [
      ownerFence(k, lease),
      { key: k.owner(id), target: 'mod', op: '==', value: from.rev },
      { key: kv.key, target: 'mod', op: '==', value: kv.modRevision },
    ];
    // The old owner's lease is gone, and with it every write it could still send (the fence).
    if (!ours && from.lease !== undefined) compare.push({ key: k.member(from.lease), target: 'version', op: '==', value: 0 });
    res = await m.o.store.txn({
      compare,
      success: [...(ours ? [] : [{ type: 'put' as const, key: k.owner(id), value: JSON.stringify(owner) }]), { type: 'get', key: k.tasks(id), prefix: true }],
    });
  } finally {
    if (m.adoptWindow.get(id) === window) m.adoptWindow.delete(id);
  }
  if (!res.succeeded || m.closed || m.owned.has(id) || lease !== m.lease) return;
  m.stats.adopted++;
  const o = newOwned(rec.spec, agent, rec, kv.modRevision, m.ownedOn);
  // Rewritten by the adoption's transaction, or (ours) the record as read, which it compared.
  o.ownerRev = ours ? from.rev : res.revision;
  m.owned.set(id, o);
  o.reconcile = rec.spec.mode === 'gang';
  if (o.quota) o.quota.reconcile = true;
  // The tasks' own records, and the chunk records of those whose first placement started them.
  for (const [index, t] of tasksAsRead(k, res.responses[ours ? 0 : 1] ?? [], (key) => m.live.parseTask(key))) mergeTask(o, index, t.rec, t.rev, t.implied);
  // What arrived while the transaction was out: newer records replace what it read. (A change
  // of the job record made meanwhile, a cancellation, reaches the owner anyway: its next write
  // of the record compares the revision it read, fails, and takes the newer record.)
  for (const t of window.tasks) if (t.rec) recordOutcome(o, t.rec, t.rev, t.ru);
  // Tasks whose RU no longer holds them, as the view shows it, left it after the last write of
  // the job's records: their outcome is read from the RU's history (ru-events.ts).
  const unheld = m.refresher.unheld(o);
  if (window.refresh || unheld.length > 0) void m.refresher.refresh(o, [...(window.refresh ?? []), ...unheld]);
  m.o.log.info({ job: id, agent: agent.id, tasks: o.tasks.size, caughtUp: window.tasks.length }, 'adopted job');
  m.queue.add(o);
}
