/**
 * Adoption: a job whose owner key is gone (its owner's lease expired) is taken up by whichever
 * process first creates the key again, bound to its own lease; the winner reads the job's task
 * records and carries on from them. The sweep also takes up jobs owned through our own lease that
 * this process does not hold (a submission whose answer was lost with the connection).
 *
 * A dead front-end of a large cell leaves thousands of jobs at once. Adoptions go through a gate:
 * a few at a time (adoption-gate.ts), the rest queued, and while the store fails them
 * (overloaded, restarting) the gate slows down for all of them (one shared backoff) instead of
 * every job retrying on its own. The orphans are taken up at the pace the store sustains, and
 * the survivors keep their own leases and work meanwhile.
 */
import { isFinalJob, type LiveJobRecord, type LiveTaskRecord, type OwnerRecord } from '../../state/live-records.ts';
import { parseJson } from '../../state/records.ts';
import { errorMessage } from '../../util/errors.ts';
import type { TxnResult } from '../../store/types.ts';
import { mergeTask, newOwned, type AdoptWindow, type OwnerContext } from './context.ts';

export function sweep(m: OwnerContext): void {
  const lease = m.lease;
  if (m.closed || !lease || !lease.confirmed) return;
  for (const [id, final] of m.jobFinal) {
    if (final || m.owned.has(id)) continue;
    const ownerLease = m.ownerKeys.get(id);
    if (ownerLease === undefined) scheduleAdopt(m, id);
    // Ours by the store, unknown to us: a submission whose answer was lost with the connection
    // (the transaction landed, the reply did not). Nobody else may adopt it while our lease
    // lives, so we must take it up ourselves or it waits forever.
    else if (ownerLease === lease.id && !m.submitting.has(id)) scheduleAdopt(m, id, true);
  }
}

export function scheduleAdopt(m: OwnerContext, id: string, ours = false): void {
  if (m.closed || m.adopting.has(id) || m.owned.has(id)) return;
  m.adopting.add(id);
  // Jitter spreads the jobs of a dead process over the survivors instead of one taking all.
  const jitter = m.o.rng.next() * Math.min(1000, m.ttlSeconds * 250);
  const p = m.o.clock
    .sleep(jitter)
    .then(() => m.adoptions.run(() => tryAdopt(m, id, ours), () => m.closed))
    .catch((err: unknown) => m.o.log.warn({ job: id, err: errorMessage(err), queued: m.adoptions.queued }, 'adoption failed; the sweep will retry'))
    .finally(() => m.adopting.delete(id));
  m.track(p);
}

/**
 * Takes up a job: one with no owner key (create it, bound to our lease), or, with `ours`, one
 * whose owner key is already bound to our lease but which this process does not hold.
 */
async function tryAdopt(m: OwnerContext, id: string, ours: boolean): Promise<void> {
  const lease = m.lease;
  if (m.closed || !lease || !lease.confirmed || m.owned.has(id) || m.submitting.has(id)) return;
  const k = m.o.keys;
  const kv = await m.o.store.get(k.job(id));
  const rec = parseJson<LiveJobRecord>(kv);
  if (!kv || !rec || isFinalJob(rec.state)) return;
  const agent = m.pickAgent();
  const owner: OwnerRecord = { agent: agent.id, process: m.o.process, since: m.o.clock.now() };
  // From here until the job is owned, the task changes the RUs show for it are kept
  // (ru-events.ts): one made just after the transaction below can reach this process before its
  // answer does, and would otherwise be lost (a task that ended then stayed running for us, and
  // the job never final). One the view brought before the transaction was sent was made before
  // it, and the transaction's read of the task records has it.
  const window: AdoptWindow = { tasks: [] };
  m.adoptWindow.set(id, window);
  let res: TxnResult;
  try {
    res = await m.o.store.txn({
      compare: [
        ours ? { key: k.owner(id), target: 'lease', op: '==', value: lease.id } : { key: k.owner(id), target: 'version', op: '==', value: 0 },
        { key: kv.key, target: 'mod', op: '==', value: kv.modRevision },
      ],
      success: [
        ...(ours ? [] : [{ type: 'put' as const, key: k.owner(id), value: JSON.stringify(owner), lease: lease.id }]),
        { type: 'get', key: k.tasks(id), prefix: true },
      ],
    });
  } finally {
    if (m.adoptWindow.get(id) === window) m.adoptWindow.delete(id);
  }
  if (!res.succeeded || m.closed || m.owned.has(id) || lease !== m.lease) return;
  m.stats.adopted++;
  const o = newOwned(rec.spec, agent, rec, kv.modRevision, m.ownedOn);
  m.owned.set(id, o);
  o.reconcile = rec.spec.mode === 'gang';
  o.quotaReconcile = o.quota;
  for (const t of res.responses[ours ? 0 : 1] ?? []) {
    const r = m.live.parseTask(t.key);
    if (r) mergeTask(o, r.index, parseJson<LiveTaskRecord>(t), t.modRevision);
  }
  // What arrived while the transaction was out: newer records replace what it read. (A change
  // of the job record made meanwhile, a cancellation, reaches the owner anyway: its next write
  // of the record compares the revision it read, fails, and takes the newer record.)
  for (const t of window.tasks) mergeTask(o, t.index, t.rec, t.rev);
  if (window.refresh) void m.refreshTasks(o, window.refresh);
  m.o.log.info({ job: id, agent: agent.id, tasks: o.tasks.size, caughtUp: window.tasks.length }, 'adopted job');
  m.evaluate(o);
}
