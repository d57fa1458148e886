/**
 * Namespace records in the store (`namespaces/<ns>`): a namespace's weight (its fair share against
 * the others) and its quota. `default` exists without a record; any other namespace must be
 * created before a job is submitted to it, so a mistyped name is refused instead of quietly
 * starting a namespace of its own.
 */
import type { Keys } from '../state/keys.ts';
import { isFinalJob, type LiveJobRecord } from '../state/live-records.ts';
import { parseJson } from '../state/records.ts';
import type { ClusterStore, Compare, KeyValue, Op } from '../store/types.ts';
import { invalid, TarcilError } from '../util/errors.ts';
import { DEFAULT_NAMESPACE, namespaceProblem } from './namespace.ts';
import { addLiveTokens } from './quota.ts';

/** Namespace records as a front-end last saw them (see NamespaceView): undefined when it cannot say, null when there is none. */
export interface NamespaceCopy {
  get(key: string): KeyValue | null | undefined;
}

export interface NamespaceRecord {
  name: string;
  /** Share of freed capacity against other namespaces with waiting jobs (> 0; default 1). */
  weight: number;
  /** RUs its tasks may hold at once; 0: no limit. */
  maxRus: number;
  /** Jobs it may have that are not final (queued, admitted, placed or running); 0: no limit. */
  maxWaitingJobs: number;
  createdAt: number;
  /** Set while the namespace is being deleted: submissions are refused. */
  deleting?: boolean;
}

export const DEFAULT_WEIGHT = 1;
export const MAX_WEIGHT = 1_000_000;

/** The record `default` has when none is stored. */
export function defaultNamespaceRecord(): NamespaceRecord {
  return { name: DEFAULT_NAMESPACE, weight: DEFAULT_WEIGHT, maxRus: 0, maxWaitingJobs: 0, createdAt: 0 };
}

/** Throws INVALID_ARGUMENT naming `field` unless `name` is a valid namespace name. */
export function requireNamespaceName(name: string, field = 'namespace'): string {
  const problem = namespaceProblem(name);
  if (problem) throw invalid(field, `${problem} (got '${name.slice(0, 70)}')`);
  return name;
}

export async function readNamespace(store: ClusterStore, keys: Keys, ns: string): Promise<NamespaceRecord | undefined> {
  const rec = parseJson<NamespaceRecord>(await store.get(keys.namespace(ns)));
  if (rec) return rec;
  return ns === DEFAULT_NAMESPACE ? defaultNamespaceRecord() : undefined;
}

/** The namespace's record, or NOT_FOUND saying how to create it. */
export async function requireNamespace(store: ClusterStore, keys: Keys, ns: string): Promise<NamespaceRecord> {
  const rec = await readNamespace(store, keys, ns);
  if (!rec) throw new TarcilError('NOT_FOUND', `namespace ${ns} does not exist (create it: tarcil namespace create ${ns})`, { field: 'namespace' });
  return rec;
}

export async function listNamespaceRecords(store: ClusterStore, keys: Keys): Promise<NamespaceRecord[]> {
  const out = new Map<string, NamespaceRecord>([[DEFAULT_NAMESPACE, defaultNamespaceRecord()]]);
  for (const kv of (await store.range(keys.namespaces())).kvs) {
    const rec = parseJson<NamespaceRecord>(kv);
    if (rec) out.set(rec.name, rec);
  }
  return [...out.values()].sort((a, b) => a.name.localeCompare(b.name));
}

export interface NamespaceChange {
  weight?: number;
  maxRus?: number;
  maxWaitingJobs?: number;
}

/** Checks a change's numbers, naming the field of the first that breaks its rule. */
export function validateNamespaceChange(c: NamespaceChange): void {
  if (c.weight !== undefined && !(Number.isFinite(c.weight) && c.weight > 0 && c.weight <= MAX_WEIGHT)) {
    throw invalid('weight', `must be a number in (0, ${MAX_WEIGHT}] (got ${c.weight})`);
  }
  for (const f of ['maxRus', 'maxWaitingJobs'] as const) {
    const v = c[f];
    if (v !== undefined && !(Number.isInteger(v) && v >= 0 && v <= 100_000_000))
      throw invalid(f === 'maxRus' ? 'max_rus' : 'max_waiting_jobs', `must be an integer in [0, 100000000] (0: no limit; got ${v})`);
  }
}

/**
 * Creates the namespace or changes it; fields not given keep their value (a new namespace's:
 * weight 1, no quota). Optimistic: retried when another writer changed it meanwhile.
 */
export async function putNamespace(store: ClusterStore, keys: Keys, name: string, change: NamespaceChange, now: number): Promise<NamespaceRecord> {
  requireNamespaceName(name, 'name');
  validateNamespaceChange(change);
  if (name === DEFAULT_NAMESPACE) {
    // Placements and submissions of default read no namespace record: it cannot have a quota.
    if ((change.maxRus ?? 0) > 0) throw invalid('max_rus', 'namespace default cannot have an RU quota (0 only): create a namespace for the jobs to limit');
    if ((change.maxWaitingJobs ?? 0) > 0)
      throw invalid('max_waiting_jobs', 'namespace default cannot limit its jobs (0 only): create a namespace for the jobs to limit');
  }
  for (;;) {
    const kv = await store.get(keys.namespace(name));
    const cur = parseJson<NamespaceRecord>(kv) ?? { ...defaultNamespaceRecord(), name, createdAt: now };
    if (cur.deleting) throw new TarcilError('ABORTED', `namespace ${name} is being deleted; try again`, { field: 'name' });
    const next: NamespaceRecord = {
      name,
      weight: change.weight ?? cur.weight,
      maxRus: change.maxRus ?? cur.maxRus,
      maxWaitingJobs: change.maxWaitingJobs ?? cur.maxWaitingJobs,
      createdAt: cur.createdAt,
    };
    const res = await store.txn({
      compare: [{ key: keys.namespace(name), target: 'mod', op: '==', value: kv?.modRevision ?? 0 }],
      success: [{ type: 'put', key: keys.namespace(name), value: JSON.stringify(next) }],
    });
    if (!res.succeeded) continue;
    // A quota set on a namespace that already runs tasks: count them. Placements decided before
    // compared the record's old revision and fail; those that landed before are read here.
    if (next.maxRus > 0 && cur.maxRus === 0) await addLiveTokens(store, keys, name);
    return next;
  }
}

/**
 * A namespace a job may be submitted to, and the compare its submission transaction carries: the
 * record's revision, so a job cannot land in a namespace deleted meanwhile (see deleteNamespace).
 * With a copy of the records (a front-end's NamespaceView), the record comes from it when it can
 * vouch for it, saving a round trip to the store; the compare still guards the revision it read.
 */
export async function namespaceForSubmit(
  store: ClusterStore,
  keys: Keys,
  ns: string,
  copy?: NamespaceCopy,
): Promise<{ rec: NamespaceRecord; compare: Compare[] }> {
  const key = keys.namespace(ns);
  let kv = copy?.get(key);
  let rec = parseJson<NamespaceRecord>(kv ?? undefined);
  // What the copy cannot vouch for comes from the store: a namespace it has not listed yet, does
  // not hold (created a moment ago) or holds as being deleted (the mark may have been taken back).
  if (kv === undefined || (kv === null && ns !== DEFAULT_NAMESPACE) || rec?.deleting) {
    kv = await store.get(key);
    rec = parseJson<NamespaceRecord>(kv);
  }
  rec ??= ns === DEFAULT_NAMESPACE ? defaultNamespaceRecord() : undefined;
  if (!rec || rec.deleting)
    throw new TarcilError('NOT_FOUND', `namespace ${ns} does not exist (create it: tarcil namespace create ${ns})`, { field: 'namespace' });
  return { rec, compare: ns === DEFAULT_NAMESPACE ? [] : [{ key: keys.namespace(ns), target: 'mod', op: '==', value: kv?.modRevision ?? 0 }] };
}

/**
 * Deletes a namespace that holds no job. It is first marked `deleting`, which fails every
 * submission that read it before (they compare its revision) and refuses the later ones; then its
 * jobs are counted; with none it is deleted, else the mark is taken back.
 */
export async function deleteNamespace(store: ClusterStore, keys: Keys, name: string): Promise<NamespaceRecord> {
  requireNamespaceName(name, 'name');
  if (name === DEFAULT_NAMESPACE) throw new TarcilError('FAILED_PRECONDITION', 'namespace default cannot be deleted', { field: 'name' });
  const kv = await store.get(keys.namespace(name));
  const rec = parseJson<NamespaceRecord>(kv);
  if (!kv || !rec) throw new TarcilError('NOT_FOUND', `namespace ${name} does not exist`, { field: 'name' });
  // A namespace that holds jobs is refused before anything is written (its record is not touched,
  // so submissions to it go on); the count after the mark below catches a job stored meanwhile.
  const holding = (await store.count(keys.namespaceJobs(name))).count;
  if (holding > 0) throw heldJobs(name, holding);
  const marked = await store.txn({
    compare: [{ key: kv.key, target: 'mod', op: '==', value: kv.modRevision }],
    success: [{ type: 'put', key: kv.key, value: JSON.stringify({ ...rec, deleting: true }) }],
  });
  if (!marked.succeeded) throw new TarcilError('ABORTED', `namespace ${name} changed meanwhile; try again`, { field: 'name' });
  const held = (await store.count(keys.namespaceJobs(name))).count;
  if (held > 0) {
    await store.txn({
      compare: [{ key: kv.key, target: 'mod', op: '==', value: marked.revision }],
      success: [{ type: 'put', key: kv.key, value: JSON.stringify(rec) }],
    });
    throw heldJobs(name, held);
  }
  await store.txn({
    compare: [{ key: kv.key, target: 'mod', op: '==', value: marked.revision }],
    success: [
      { type: 'delete', key: kv.key },
      { type: 'delete', key: keys.usage(name) },
      { type: 'delete', key: keys.submits(name) },
    ],
  });
  return rec;
}

function heldJobs(name: string, held: number): TarcilError {
  return new TarcilError('FAILED_PRECONDITION', `namespace ${name} holds ${held} job(s): they must be final and aged out (--retain) first`, { field: 'name' });
}

/**
 * The limits a submission to namespace `rec` is checked against: a gang larger than its RU quota
 * can never run (FAILED_PRECONDITION, field tasks; an incremental job runs maxRus tasks at a
 * time); with maxWaitingJobs, the jobs not yet final are counted (RESOURCE_EXHAUSTED at the limit)
 * and the submission carries a compare-and-bump of `submits/<ns>` read at the same revision.
 */
export function checkQuotaFit(rec: NamespaceRecord, job: { mode: string; tasks: number }): void {
  if (rec.maxRus > 0 && job.mode === 'gang' && job.tasks > rec.maxRus) {
    throw new TarcilError(
      'FAILED_PRECONDITION',
      `tasks: a gang of ${job.tasks} tasks can never run in namespace ${rec.name}, whose quota is ${rec.maxRus} RUs (max_rus)`,
      { field: 'tasks' },
    );
  }
}

export async function waitingJobsGate(store: ClusterStore, keys: Keys, rec: NamespaceRecord): Promise<{ compare: Compare[]; success: Op[] }> {
  const key = keys.submits(rec.name);
  const res = await store.txn({
    compare: [],
    success: [
      { type: 'get', key },
      { type: 'get', key: keys.namespaceJobs(rec.name), prefix: true },
    ],
  });
  const kv = res.responses[0]?.[0];
  let open = 0;
  for (const j of res.responses[1] ?? []) {
    const state = parseJson<LiveJobRecord>(j)?.state;
    if (state !== undefined && !isFinalJob(state)) open++;
  }
  if (open >= rec.maxWaitingJobs) {
    throw new TarcilError(
      'RESOURCE_EXHAUSTED',
      `namespace ${rec.name} has ${open} jobs not yet final, its limit (max_waiting_jobs ${rec.maxWaitingJobs}): retry once some have finished`,
      { field: 'namespace' },
    );
  }
  return {
    compare: [{ key, target: 'mod', op: '==', value: kv?.modRevision ?? 0 }],
    success: [{ type: 'put', key, value: String(Number(kv?.value ?? 0) + 1) }],
  };
}
