/**
 * Namespace RU quotas, checked in the placement transaction itself. A namespace whose record has
 * `maxRus > 0` keeps a usage record `usage/<ns>`: one allotment token per placement of its jobs
 * that may still hold an RU (`<task>/<commitId>`, by job) and their number. A placement of such a
 * job reads the namespace and usage records, refuses in advance when its k picks would bring the
 * total above the quota, and otherwise compares both records' revisions and writes the usage with
 * its k tokens added, in the same transaction that writes the RUs: placements racing in several
 * processes cannot overshoot together (one of them conflicts and decides again).
 *
 * Tokens are given back by the job's owner when it sees the placement end (the task's record
 * final, lost, queued again, replaced or removed): the RU is freed at or before that write, so
 * the total never falls below the RUs the namespace holds. Giving back is idempotent (a token is
 * removed if present), so an owner that gives back twice, or a new owner that recomputes the job's
 * tokens from its live tasks on adoption, cannot under-count.
 */
import type { Keys } from '../state/keys.ts';
import type { LiveTaskRecord } from '../state/live-records.ts';
import { parseJson } from '../state/records.ts';
import { latestTasks } from '../state/task-chunks.ts';
import type { ClusterStore, Compare, KeyValue, Op } from '../store/types.ts';
import { dict, own } from '../util/dict.ts';
import { DEFAULT_NAMESPACE, namespaceOfJob } from './namespace.ts';

export interface UsageRecord {
  /** Tokens held, over all jobs: the RUs allotted to the namespace's jobs. */
  total: number;
  /** Allotment tokens by job: `<task>/<commitId>`, one per placement that may hold an RU. */
  jobs: Record<string, string[]>;
}

export function quotaToken(task: number, commitId: string): string {
  return `${task}/${commitId}`;
}

export function parseUsage(kv: KeyValue | undefined): UsageRecord {
  const u = parseJson<UsageRecord>(kv);
  return u && typeof u.total === 'number' && u.jobs ? u : { total: 0, jobs: {} };
}

/** What a placement of a job of a namespace other than default compares, read at one revision. */
export interface QuotaRead {
  ns: string;
  nsKey: string;
  /** Mod revision of the namespace record (0: none). */
  nsRev: number;
  /** The quota (0: none: the placement only compares the namespace record). */
  maxRus: number;
  usageKey: string;
  usageRev: number;
  usage: UsageRecord;
}

/** The message a job over its namespace's quota waits with. */
export function quotaMessage(q: Pick<QuotaRead, 'ns' | 'maxRus' | 'usage'>): string {
  return `namespace ${q.ns} is at its quota: ${q.usage.total} of ${q.maxRus} RUs in use`;
}

/** Whether a job's namespace may have a quota (any but default). */
export function hasQuotaNamespace(jobId: string): boolean {
  return namespaceOfJob(jobId) !== DEFAULT_NAMESPACE;
}

/**
 * The namespace and usage records a placement of `jobId` is checked against (one read at one
 * revision); undefined for a job of default, which has no quota and reads nothing.
 */
export async function readQuota(store: ClusterStore, keys: Keys, jobId: string): Promise<QuotaRead | undefined> {
  const ns = namespaceOfJob(jobId);
  if (ns === DEFAULT_NAMESPACE) return undefined;
  const nsKey = keys.namespace(ns);
  const usageKey = keys.usage(ns);
  const res = await store.txn({
    compare: [],
    success: [
      { type: 'get', key: nsKey },
      { type: 'get', key: usageKey },
    ],
  });
  const nsKv = res.responses[0]?.[0];
  const usageKv = res.responses[1]?.[0];
  const rec = parseJson<{ maxRus?: number }>(nsKv);
  return { ns, nsKey, nsRev: nsKv?.modRevision ?? 0, maxRus: rec?.maxRus ?? 0, usageKey, usageRev: usageKv?.modRevision ?? 0, usage: parseUsage(usageKv) };
}

/** RUs the namespace may still be allotted (Infinity without a quota). */
export function quotaRoom(q: QuotaRead): number {
  return q.maxRus > 0 ? Math.max(0, q.maxRus - q.usage.total) : Number.POSITIVE_INFINITY;
}

/**
 * The compares and writes a placement of `tokens` carries: the namespace record unchanged (a
 * quota set or lowered meanwhile fails it); with a quota, the usage record unchanged and written
 * with the tokens added. Without a quota the usage record is not touched.
 */
export function quotaTxnOps(q: QuotaRead, jobId: string, tokens: readonly string[]): { compare: Compare[]; success: Op[] } {
  const compare: Compare[] = [{ key: q.nsKey, target: 'mod', op: '==', value: q.nsRev }];
  if (q.maxRus <= 0) return { compare, success: [] };
  compare.push({ key: q.usageKey, target: 'mod', op: '==', value: q.usageRev });
  const jobs = dict(q.usage.jobs);
  jobs[jobId] = [...(own(q.usage.jobs, jobId) ?? []), ...tokens];
  const next: UsageRecord = { total: q.usage.total + tokens.length, jobs };
  return { compare, success: [{ type: 'put', key: q.usageKey, value: JSON.stringify(next) }] };
}

/** A task record that may hold an RU. */
export function isLiveTask(rec: LiveTaskRecord | undefined): boolean {
  return !!rec && (rec.state === 'placed' || rec.state === 'running') && rec.commitId !== undefined;
}

/**
 * The token a task's record change gives back: the old record's placement, when it held an RU and
 * the new record is another placement, or not live any more.
 */
export function endedToken(task: number, old: LiveTaskRecord | undefined, next: LiveTaskRecord | undefined): string | undefined {
  if (!old || !isLiveTask(old)) return undefined;
  if (next && isLiveTask(next) && next.commitId === old.commitId) return undefined;
  return quotaToken(task, old.commitId as string);
}

/**
 * A new usage record for one job: `drop` tokens removed, or (with `keep`) every token not in
 * `keep` removed and `add` tokens added; undefined when nothing changes.
 */
export function changeJobTokens(
  u: UsageRecord,
  jobId: string,
  change: { drop?: ReadonlySet<string>; keep?: ReadonlySet<string>; add?: readonly string[]; all?: boolean },
): UsageRecord | undefined {
  const cur = own(u.jobs, jobId) ?? [];
  let next = change.all ? [] : cur.filter((t) => !(change.drop?.has(t) ?? false) && (change.keep ? change.keep.has(t) : true));
  if (change.add) {
    const have = new Set(next);
    next = next.concat(change.add.filter((t) => !have.has(t)));
  }
  if (next.length === cur.length && next.every((t, i) => t === cur[i])) return undefined;
  const jobs = dict(u.jobs);
  if (next.length === 0) delete jobs[jobId];
  else jobs[jobId] = next;
  return { total: Math.max(0, u.total - cur.length + next.length), jobs };
}

/**
 * Changes one job's tokens with compare-and-swap on the usage record, through `txn` (the owner's
 * fenced write); retried while only the usage record changed. Returns false when `txn` said the
 * write must not happen (ownership lost), true when done or nothing was to change.
 */
export async function updateJobTokens(
  store: ClusterStore,
  keys: Keys,
  jobId: string,
  change: Parameters<typeof changeJobTokens>[2],
  txn: (compare: Compare[], success: Op[]) => Promise<{ succeeded: boolean; owned: boolean }>,
): Promise<boolean> {
  const key = keys.usage(namespaceOfJob(jobId));
  for (let i = 0; i < 50; i++) {
    const kv = await store.get(key);
    if (!kv) return true;
    const next = changeJobTokens(parseUsage(kv), jobId, change);
    if (!next) return true;
    const res = await txn([{ key, target: 'mod', op: '==', value: kv.modRevision }], [{ type: 'put', key, value: JSON.stringify(next) }]);
    if (res.succeeded) return true;
    if (!res.owned) return false;
  }
  return false;
}

/**
 * Seeds or completes a namespace's usage with the live tasks of its jobs (a quota set on a
 * namespace that already runs tasks): adds every live task's token not held yet.
 */
export async function addLiveTokens(store: ClusterStore, keys: Keys, ns: string): Promise<void> {
  const key = keys.usage(ns);
  for (let i = 0; i < 50; i++) {
    const snap = await store.txn({
      compare: [],
      success: [
        { type: 'get', key },
        { type: 'get', key: `${keys.allTasks()}${ns}/`, prefix: true },
      ],
    });
    const kv = snap.responses[0]?.[0];
    let u = parseUsage(kv);
    const byJob = new Map<string, string[]>();
    // Each task's own record, or the one its chunk implies (state/task-chunks.ts), whichever is newer.
    for (const rec of latestTasks(keys, snap.responses[1] ?? []).values()) {
      if (!isLiveTask(rec)) continue;
      let list = byJob.get(rec.job);
      if (!list) byJob.set(rec.job, (list = []));
      list.push(quotaToken(rec.index, rec.commitId as string));
    }
    let changed = kv === undefined;
    for (const [job, add] of byJob) {
      const next = changeJobTokens(u, job, { add });
      if (next) {
        u = next;
        changed = true;
      }
    }
    if (!changed) return;
    const res = await store.txn({
      compare: [{ key, target: 'mod', op: '==', value: kv?.modRevision ?? 0 }],
      success: [{ type: 'put', key, value: JSON.stringify(u) }],
    });
    if (res.succeeded) return;
  }
}
