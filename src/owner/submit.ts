/**
 * Submission and cancellation: a job is persisted together with its owner key (and the client's
 * request id) in one transaction, so an acknowledged job always has an owner; a request id sent
 * again returns the job the first request created.
 */
import { trace } from '../util/trace.ts';
import { DEFAULT_NAMESPACE, qualifiedJobId } from '../tenancy/namespace.ts';
import { createHash } from 'node:crypto';
import type { JobSpec } from '../model/types.ts';
import { isFinalJob, ownerLeaseOf, type LiveJobRecord, type OwnerRecord, type RequestRecord } from '../state/live-records.ts';
import { parseJson } from '../state/records.ts';
import type { Compare, KeyValue, Op, TxnResult } from '../store/types.ts';
import { invalid, TarcilError } from '../util/errors.ts';
import type { OwnerContext } from './context.ts';
import { newOwned } from './job.ts';
import { ownerFence } from './fence.ts';
import type { Feasibility } from '../agent/cell.ts';
import type { HeldLease } from '../state/lease.ts';
import { blockedNote } from './plan.ts';
import { RESCAN_MS, scan } from './adoption.ts';

export interface SubmitResult {
  jobId: string;
  record: LiveJobRecord;
  revision: number;
  /** True when the request id had already created this job (nothing new was written). */
  duplicate: boolean;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function checkRequestId(id: string): string {
  if (!REQUEST_ID.test(id)) throw invalid('request_id', 'must be 1-128 characters of A-Z a-z 0-9 . _ : -');
  return id;
}

/** New jobs are refused while more than max(this, STORE_QUEUE_REFUSE_PER_SLOT × the limit) of the process's requests wait for the store. */
export const STORE_QUEUE_REFUSE_MIN = 256;
export const STORE_QUEUE_REFUSE_PER_SLOT = 8;
/** What makes two submissions the same job: the spec without the id and time the front-end gave it. */
function specDigest(spec: JobSpec): string {
  return createHash('sha256')
    .update(JSON.stringify({ ...spec, id: '', submittedAt: 0 }))
    .digest('hex');
}

export interface SubmitOptions {
  requestId?: string;
  /**
   * More compares for the submission transaction (the namespace's revision, so a job cannot land
   * in a namespace deleted meanwhile). When one fails nothing is written and the submission is
   * refused with ABORTED.
   */
  compare?: Compare[];
  /**
   * A check of the namespace's limits (a refusal is answered with the job instead when the request
   * id shows a retry of an accepted one): it throws to refuse the job, or gives more compares and writes for the
   * submission transaction (a counter every submission of the namespace bumps, so that racing
   * submissions cannot pass the limit together: all but one fail with ABORTED).
   */
  admit?: () => Promise<{ compare: Compare[]; success: Op[] }>;
  /** Writes that ride in the submission transaction and land only with the job (the call's audit record). */
  also?: Op[];
}

/**
 * Persists a validated job with its owner key in one transaction, then schedules it. Resolves
 * once the job is durable: that is the acknowledgement.
 *
 * With a request id, `requests/<id>` is created in that same transaction, so a client retrying
 * after a lost answer (or racing its own first attempt) gets the job the first attempt created:
 * `duplicate` is then true and nothing new is written. A request id reused for a different
 * spec is refused (ALREADY_EXISTS), since answering with the other job would hide the mistake.
 */
export async function submitJob(m: OwnerContext, spec: JobSpec, opts: SubmitOptions): Promise<SubmitResult> {
  trace('submit.received', spec.id);
  if (!m.serving || m.closed) throw new TarcilError('UNAVAILABLE', 'the scheduler is not running');
  const lease = m.lease;
  if (!lease || !lease.confirmed)
    throw new TarcilError('UNAVAILABLE', 'this scheduler cannot confirm its owner lease with the store (etcd slow, restarting or unreachable); retry shortly');
  const req = requestOf(m, spec, opts);
  const checked = await preflight(m, spec, opts, req);
  if ('existing' in checked) return checked.existing;
  // The job is scheduled, and stored, with its class's learned vector when there is one (the
  // request's digest above is of the spec as submitted).
  spec = m.profiles.schedulingSpec(spec);
  const now = m.o.clock.now();
  const agent = m.pickAgent();
  const note = checked.f.kind === 'not-now' ? blockedNote(m.unplaceableTimeoutMs, checked.f.reason, now) : undefined;
  const record: LiveJobRecord = {
    spec,
    ...(note ? { message: note } : {}),
    state: 'queued',
    placed: 0,
    updatedAt: now,
    submittedAt: spec.submittedAt,
    owner: agent.id,
    rescheduled: 0,
    taskStates: { queued: spec.tasks },
    ...(req.id !== undefined ? { request: req.id } : {}),
  };
  const owner: OwnerRecord = { agent: agent.id, process: m.o.process, since: now, lease: lease.id };
  const txn = submissionTxn(m, lease, { record, owner, req, extra: [opts.compare ?? [], checked.gate], also: opts.also ?? [] });
  const sent = await sendSubmission(m, lease, spec.id, txn);
  if (!sent.res.succeeded) return refused(m, lease, sent.res, { req, spec, guarded: Boolean(opts.compare?.length || checked.gate?.compare.length) });
  m.stats.submitted++;
  if (m.lease !== lease || m.closed) {
    // The lease went while the submission was out: the job is stored (acknowledged), but its
    // owner record names a lease that is not a member any more. It is not held here: the next
    // adoption scan (this process's, under its new lease, or another's) takes it up, once.
    scan(m);
    return { jobId: spec.id, record, revision: sent.res.revision, duplicate: false };
  }
  const o = newOwned(spec, agent, record, sent.res.revision, m.ownedOn);
  // Written in the same transaction as the job record.
  o.ownerRev = sent.ownerRev ?? sent.res.revision;
  // The submission wrote the record: its next steps (admitted, placed) wait out the interval.
  o.summaryAt = now;
  m.owned.set(spec.id, o);
  if (note) {
    o.note = note;
    o.blockedSince = now;
  }
  m.queue.add(o, true);
  m.o.log.debug({ job: spec.id, jobName: spec.name, tasks: spec.tasks, revision: sent.res.revision }, 'job accepted');
  return { jobId: spec.id, record, revision: sent.res.revision, duplicate: false };
}

/** The submission's request id as stored (qualified by its namespace), its key and the spec's digest. */
interface RequestOf {
  id?: string;
  key?: string;
  digest: string;
}

function requestOf(m: OwnerContext, spec: JobSpec, opts: SubmitOptions): RequestOf {
  // Request ids are the client's: each namespace has its own, so one namespace's id never answers
  // with another's job.
  const id = opts.requestId !== undefined ? qualifiedJobId(spec.namespace ?? DEFAULT_NAMESPACE, checkRequestId(opts.requestId)) : undefined;
  const key = id !== undefined ? m.live.request(id) : undefined;
  // Only a request id's record needs the digest (a SHA-256 of the whole spec, serialized again):
  // a submission without one, the common case, does not pay for it.
  return { id, key, digest: key ? specDigest(spec) : '' };
}

type Gate = { compare: Compare[]; success: Op[] } | undefined;

/**
 * The checks before anything is written: the store's back-pressure, whether the cell can ever run
 * the job, this front-end's pending tasks, the namespace's limits (`opts.admit`). A submission
 * about to be refused whose request id shows a retry of an accepted job gets that job instead.
 */
async function preflight(
  m: OwnerContext,
  spec: JobSpec,
  opts: SubmitOptions,
  req: RequestOf,
): Promise<{ f: Feasibility; gate: Gate } | { existing: SubmitResult }> {
  // Back-pressure from the store: when this process already has many requests waiting for etcd
  // (its in-flight limit shrank because etcd answers slowly), a new job would only wait behind
  // them, and the client's deadline would expire first. Refused at once, writing nothing.
  const store = m.o.store.inFlightLimit?.stats();
  if (store && store.queued > Math.max(STORE_QUEUE_REFUSE_MIN, STORE_QUEUE_REFUSE_PER_SLOT * store.limit)) {
    throw new TarcilError(
      'RESOURCE_EXHAUSTED',
      `the store is answering slowly: ${store.queued} requests of this scheduler are waiting for it (${store.limit} in flight): retry later or on another front-end`,
    );
  }
  // A retry of an accepted job is found by the submission transaction itself (it creates the
  // request record only if there is none, and reads it otherwise), so a first submission pays no
  // read before it. Only a submission about to be refused looks first, so that a retry of an
  // accepted job gets its answer rather than the refusal.
  const refuse = async (err: TarcilError): Promise<{ existing: SubmitResult }> => {
    const seen = req.key ? await m.o.store.get(req.key) : undefined;
    if (seen) return { existing: await existing(m, seen, req.digest) };
    throw err;
  };
  const f = m.feasibility(spec);
  if (f.kind === 'never')
    return refuse(new TarcilError('FAILED_PRECONDITION', `${f.field}: this job can never run in this cell: ${f.reason}`, { field: f.field }));
  // Back-pressure: a front-end that cannot keep up refuses new work rather than taking on a
  // backlog that grows without bound. A job alone is always taken, however large.
  const limit = m.maxPendingTasks;
  const pending = limit > 0 ? m.pendingTasks() : 0;
  if (limit > 0 && pending > 0 && pending + spec.tasks > limit) {
    return refuse(
      new TarcilError(
        'RESOURCE_EXHAUSTED',
        `this scheduler holds ${pending} tasks not yet placed (limit ${limit}, --max-pending-tasks): retry later or on another front-end`,
      ),
    );
  }
  try {
    return { f, gate: opts.admit ? await opts.admit() : undefined };
  } catch (err) {
    if (!req.key || !(err instanceof TarcilError)) throw err;
    return refuse(err);
  }
}

/** The submission transaction: the job and owner records (and the request's), only if the job is new and our lease lives. */
function submissionTxn(
  m: OwnerContext,
  lease: HeldLease,
  w: { record: LiveJobRecord; owner: OwnerRecord; req: RequestOf; extra: [Compare[], Gate]; also: Op[] },
): { compare: Compare[]; success: Op[]; failure: Op[] } {
  const k = m.o.keys;
  const id = w.record.spec.id;
  const [compares, gate] = w.extra;
  const compare: Compare[] = [
    { key: k.job(id), target: 'version', op: '==', value: 0 },
    // Taken only while our lease lives: a job owned by a lease already gone would wait for a scan.
    ownerFence(k, lease),
    ...compares,
    ...(gate?.compare ?? []),
  ];
  const success: Op[] = [
    { type: 'put', key: k.job(id), value: JSON.stringify(w.record) },
    { type: 'put', key: k.owner(id), value: JSON.stringify(w.owner) },
    ...(gate?.success ?? []),
    ...w.also,
  ];
  const failure: Op[] = [{ type: 'get', key: k.member(lease.id) }];
  if (w.req.key) {
    const rec: RequestRecord = { job: id, digest: w.req.digest, at: w.owner.since };
    compare.push({ key: w.req.key, target: 'version', op: '==', value: 0 });
    success.push({ type: 'put', key: w.req.key, value: JSON.stringify(rec) });
    failure.push({ type: 'get', key: w.req.key });
  }
  return { compare, success, failure };
}

/**
 * Sends the submission. When its answer is lost, the job may be stored, owned through our lease:
 * the store is asked; if it cannot answer now, a scan finds the job later (it is ours) and
 * schedules it.
 */
async function sendSubmission(
  m: OwnerContext,
  lease: HeldLease,
  id: string,
  txn: { compare: Compare[]; success: Op[]; failure: Op[] },
): Promise<{ res: TxnResult; ownerRev?: number }> {
  const k = m.o.keys;
  m.submitting.add(id);
  try {
    trace('submit.sent', id);
    const res = await m.o.store.txn(txn);
    trace('submit.answered', id);
    return { res };
  } catch (err) {
    const landed = await m.o.store.get(k.owner(id)).catch(() => 'unknown' as const);
    if (landed === 'unknown') m.later(RESCAN_MS, () => scan(m));
    if (landed === 'unknown' || ownerLeaseOf(landed) !== lease.id) throw err;
    const jkv = await m.o.store.get(k.job(id)).catch(() => undefined);
    if (!jkv) {
      m.later(RESCAN_MS, () => scan(m));
      throw err;
    }
    return { res: { succeeded: true, revision: jkv.modRevision, responses: [] }, ownerRev: landed?.modRevision };
  } finally {
    m.submitting.delete(id);
  }
}

/** The submission wrote nothing: our lease went, the request id's job is answered, or the namespace changed, or the job exists. */
async function refused(m: OwnerContext, lease: HeldLease, res: TxnResult, sub: { req: RequestOf; spec: JobSpec; guarded: boolean }): Promise<SubmitResult> {
  const { req, spec, guarded } = sub;
  if (res.responses[0]?.[0]?.lease !== lease.id)
    throw new TarcilError('UNAVAILABLE', 'this front-end lost its owner lease while the job was submitted; submit again');
  const seen = res.responses[1]?.[0];
  if (req.key && seen) return existing(m, seen, req.digest);
  if (guarded)
    throw new TarcilError('ABORTED', `namespace ${spec.namespace ?? DEFAULT_NAMESPACE} changed while the job was submitted; try again`, {
      field: 'namespace',
    });
  throw new TarcilError('ALREADY_EXISTS', `job ${spec.id} exists already`, { field: 'id' });
}

/** The job an earlier request with the same id created (see submitJob). */
async function existing(m: OwnerContext, requestKv: KeyValue, digest: string): Promise<SubmitResult> {
  const req = parseJson<RequestRecord>(requestKv);
  if (!req) throw new TarcilError('INTERNAL', `unreadable request record ${requestKv.key}`);
  if (req.digest !== digest) {
    throw new TarcilError('ALREADY_EXISTS', `request_id was already used for another job spec (job ${req.job})`, { field: 'request_id' });
  }
  const kv = await m.o.store.get(m.o.keys.job(req.job));
  const record = parseJson<LiveJobRecord>(kv);
  if (!kv || !record) {
    // Stored and deleted together, the job first: the job finished and retention let it go.
    throw new TarcilError(
      'ALREADY_EXISTS',
      `request_id was already used for job ${req.job}, which has finished and been deleted since (finished jobs are kept for the retention period only)`,
      {
        field: 'request_id',
      },
    );
  }
  m.stats.duplicates++;
  return { jobId: req.job, record, revision: kv.modRevision, duplicate: true };
}

/**
 * Requests cancellation (from any process); the job's owner stops its tasks. The owner follows no
 * job record: the same transaction leaves a mark in `cancels/`, which every front-end follows
 * (members.ts), and the owner reads the record when the mark reaches it.
 */
export async function cancelJob(m: OwnerContext, jobId: string): Promise<LiveJobRecord> {
  const k = m.o.keys;
  for (let attempt = 0; attempt < 10; attempt++) {
    const kv = await m.o.store.get(k.job(jobId));
    const rec = parseJson<LiveJobRecord>(kv);
    if (!kv || !rec) throw new TarcilError('NOT_FOUND', `job ${jobId} does not exist`, { field: 'job_id' });
    if (isFinalJob(rec.state) || rec.cancelRequested) return rec;
    const next: LiveJobRecord = { ...rec, cancelRequested: true, updatedAt: m.o.clock.now() };
    const res = await m.o.store.txn({
      compare: [{ key: kv.key, target: 'mod', op: '==', value: kv.modRevision }],
      success: [
        { type: 'put', key: kv.key, value: JSON.stringify(next) },
        { type: 'put', key: k.cancel(jobId), value: String(kv.modRevision) },
      ],
    });
    if (res.succeeded) return next;
  }
  throw new TarcilError('UNAVAILABLE', `job ${jobId} kept changing; cancel again`);
}
