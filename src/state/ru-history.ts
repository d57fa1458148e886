/**
 * A task's outcome from its RU's history. A task that succeeded or was cancelled is recorded in
 * its freed RU alone until its owner writes the outcome into the job's records
 * (task-outcomes.ts); if the owner went first (a crash, a watch that skipped events) and the RU
 * has since been placed again, the outcome is still in the store's history of that RU key, which
 * compaction keeps for minutes (state/housekeeping.ts) while the owner records an outcome within
 * a second and rewrites each job's `seen` revision far more often than that. The placement that
 * takes the RU next also copies the freed RU's outcome into its own record (`prev`), so the RU as
 * it is now answers for one reuse without the history: an adopter that comes after a compaction
 * (a lost lease's thousands of jobs, adopted over minutes) still finds the outcome there.
 *
 * Replayed from `after` (its placement's revision, or the job record's `seen`, the later): if the
 * RU held the attempt then, the first change after that which does not hold it is how the attempt
 * left: freed with its outcome, or anything else (a loss, a preemption, the node gone). A release
 * is fenced on the RU's revision at placement, so no outcome can land once the RU moved on
 * otherwise; and one that landed by `seen` is in the job's records.
 */
import type { RuRef } from '../model/types.ts';
import type { ClusterStore, KeyValue } from '../store/types.ts';
import { TarcilError } from '../util/errors.ts';
import type { Keys } from './keys.ts';
import type { LiveTaskRecord } from './live-records.ts';
import { isFreeRuValue, lastOfFreedRu, parseJson, type PlacedRuRecord } from './records.ts';

/** The attempt looked for: its job, task and placement. */
export interface AttemptRef {
  job: string;
  task: number;
  commitId?: string;
}

export type HistoryAnswer =
  /** The RU holds the attempt now (`kv` as read). */
  | { kind: 'held'; kv: KeyValue }
  /**
   * Freed with this outcome (`last`: what the freed RU carried) at `rev`; `carried`: found in the
   * RU as it is now, in the record of the placement that took it next (by `rev`, that placement's).
   */
  | { kind: 'ended'; last: LiveTaskRecord; rev: number; carried?: true }
  /** Left the RU at `rev` without an outcome in it (or was never seen there after `after`). */
  | { kind: 'departed'; rev: number }
  /** The history after `after` is compacted: how the attempt left cannot be known from the RU. */
  | { kind: 'compacted' };

/** The message of a task whose outcome was compacted out of the store's history before it was recorded. */
export const OUTCOME_COMPACTED = 'its RU moved on, and how it ended was compacted out of the store history before its owner recorded it; not run again';

/** Longest wait for the history of one key (it is delivered at once; this only bounds a stuck stream). */
const HISTORY_WAIT_MS = 30_000;

function holds(kv: KeyValue, a: AttemptRef): boolean {
  const ru = parseJson<PlacedRuRecord>(kv);
  return (
    !!ru &&
    (ru.state === 'busy' || ru.state === 'reserved') &&
    ru.job === a.job &&
    ru.task === a.task &&
    (a.commitId === undefined || ru.commitId === a.commitId)
  );
}

/**
 * The outcome an RU value carries for this attempt, if it does: a freed RU's `last`, or a
 * placement's `prev` (the next task's placement copies it from the freed RU it compared).
 */
function endedHere(kv: KeyValue, a: AttemptRef): LiveTaskRecord | undefined {
  const last = (lastOfFreedRu(kv.value) ?? parseJson<PlacedRuRecord>(kv)?.prev) as LiveTaskRecord | undefined;
  if (!last || last.job !== a.job || last.index !== a.task) return undefined;
  return a.commitId === undefined || last.commitId === a.commitId ? last : undefined;
}

/** How the attempt left RU `ref` after revision `after` (see the file's comment). */
export async function findOutcome(store: ClusterStore, keys: Keys, ref: RuRef, a: AttemptRef, after: number): Promise<HistoryAnswer> {
  const key = keys.ru(ref);
  const now = await store.get(key);
  if (now && holds(now, a)) return { kind: 'held', kv: now };
  const last = now ? endedHere(now, a) : undefined;
  if (now && last) return { kind: 'ended', last, rev: now.modRevision, ...(isFreeRuValue(now.value) ? {} : { carried: true as const }) };
  // Not held at `after` (the job record's `seen`, after a departure without an outcome, which
  // the owner saw): it left then, and no outcome can follow. Otherwise it left after.
  let then: KeyValue | undefined;
  try {
    then = await store.getAt(key, after);
  } catch (err) {
    if (!(err instanceof TarcilError && err.code === 'COMPACTED')) throw err;
    // `after` is compacted, but the part of the history that matters may not be: if the RU
    // still held the attempt at the oldest revision kept, the first change after it is how the
    // attempt left, just as from `after` (an owner whose `seen` fell behind a compaction, an
    // adopter reading from a record its dead owner wrote long ago). Only an attempt that had
    // already left by then is unknown.
    const floor = await oldestKept(store, key, after);
    const atFloor = floor === undefined ? undefined : await store.getAt(key, floor).catch(() => undefined);
    if (floor === undefined || !atFloor || !holds(atFloor, a)) return { kind: 'compacted' };
    return (await departureByReads(store, key, a, floor, now)) ?? firstDeparture(store, key, a, floor);
  }
  if (!then || !holds(then, a)) return { kind: 'departed', rev: after };
  return (await departureByReads(store, key, a, after, now)) ?? firstDeparture(store, key, a, after);
}

/** Per store, the highest revision found compacted so far (compaction only moves forward): where the next search starts. */
const compactedSeen = new WeakMap<ClusterStore, number>();

/**
 * The oldest revision the store still keeps, above `compacted` (a revision found compacted): a
 * binary search of point reads of `key` (a read at a compacted revision fails whatever the key)
 * between it and the current revision, which is always kept.
 * Undefined if the store does not answer.
 */
async function oldestKept(store: ClusterStore, key: string, compacted: number): Promise<number | undefined> {
  try {
    let lo = Math.max(compacted, compactedSeen.get(store) ?? 0);
    // Most lookups come after the same compaction: the revision past the last one found
    // compacted is then the oldest kept, and one read says so.
    if (await readableAt(store, key, lo + 1)) return lo + 1;
    lo++;
    let hi = await store.revision();
    while (hi - lo > 1) {
      const mid = lo + Math.floor((hi - lo) / 2);
      if (await readableAt(store, key, mid)) hi = mid;
      else lo = mid;
    }
    compactedSeen.set(store, Math.max(lo, compactedSeen.get(store) ?? 0));
    return hi;
  } catch {
    return undefined;
  }
}

/** Whether the store still keeps revision `rev` (a read there does not fail as compacted); throws on any other error. */
async function readableAt(store: ClusterStore, key: string, rev: number): Promise<boolean> {
  try {
    await store.getAt(key, rev);
    return true;
  } catch (err) {
    if (err instanceof TarcilError && err.code === 'COMPACTED') return false;
    throw err;
  }
}

/** Versions of one key read back, at most, before the history is asked of a watch instead. */
export const HISTORY_READS = 16;

/**
 * The first change after `after` that does not hold the attempt, found by point reads: from the
 * key as it is now (`now`, which does not hold it), each version before it, back to the one at
 * `after` (which did). A few reads of the key's own versions, where a watch from `after` makes
 * etcd scan every revision of every key since then, under the lock its writes take, for each such
 * watch; adoptions after a lost lease start hundreds of them, minutes back. Undefined when the
 * reads cannot tell: the key was deleted in between (a delete's revision is not read back), more
 * than HISTORY_READS versions, or a compaction meanwhile; the watch replays it then.
 */
async function departureByReads(store: ClusterStore, key: string, a: AttemptRef, after: number, now: KeyValue | undefined): Promise<HistoryAnswer | undefined> {
  if (!now || now.modRevision <= after) return undefined;
  // Newest first: the versions after `after`, down to the first one after it.
  const versions: KeyValue[] = [now];
  try {
    for (let cur = now; cur.modRevision > after;) {
      if (versions.length > HISTORY_READS) return undefined;
      const prev = await store.getAt(key, cur.modRevision - 1);
      if (!prev) return undefined;
      if (prev.modRevision <= after) break;
      versions.push(prev);
      cur = prev;
    }
  } catch (err) {
    if (err instanceof TarcilError && err.code === 'COMPACTED') return undefined;
    throw err;
  }
  for (let i = versions.length - 1; i >= 0; i--) {
    const kv = versions[i] as KeyValue;
    if (holds(kv, a)) continue;
    const last = endedHere(kv, a);
    return last ? { kind: 'ended', last, rev: kv.modRevision } : { kind: 'departed', rev: kv.modRevision };
  }
  return undefined;
}

/** Replays the key's history from `after` + 1 to the first change that does not hold the attempt. */
function firstDeparture(store: ClusterStore, key: string, a: AttemptRef, after: number): Promise<HistoryAnswer> {
  return new Promise<HistoryAnswer>((resolve, reject) => {
    let settled = false;
    let handle: { close(): Promise<void> } | undefined;
    const finish = (answer: HistoryAnswer | Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (handle) void handle.close().catch(() => undefined);
      if (answer instanceof Error) reject(answer);
      else resolve(answer);
    };
    const timer = setTimeout(
      () => finish(new TarcilError('UNAVAILABLE', `the history of ${key} did not arrive within ${HISTORY_WAIT_MS} ms`)),
      HISTORY_WAIT_MS,
    );
    store
      .watch({
        // The key is the prefix: keys that extend it (another RU's, index 1 → 10) are skipped.
        prefix: key,
        fromRevision: after + 1,
        onEvents: (batch) => {
          for (const ev of batch.events) {
            if (settled || ev.kv.key !== key) continue;
            if (ev.type === 'put' && holds(ev.kv, a)) continue;
            const last = ev.type === 'put' ? endedHere(ev.kv, a) : undefined;
            finish(last ? { kind: 'ended', last, rev: ev.kv.modRevision } : { kind: 'departed', rev: ev.kv.modRevision });
          }
        },
        onError: (err) => finish(err.code === 'COMPACTED' ? { kind: 'compacted' } : err),
      })
      .then((h) => {
        handle = h;
        if (settled) void h.close().catch(() => undefined);
      })
      .catch((err: unknown) => {
        if (err instanceof TarcilError && err.code === 'COMPACTED') finish({ kind: 'compacted' });
        else finish(err instanceof Error ? err : new Error(String(err)));
      });
  });
}
