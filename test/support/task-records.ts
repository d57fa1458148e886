/**
 * The task records of a job (or of every job) as tarcil reads them: each task's own record, or
 * the one its chunk implies while it has none (src/state/task-chunks.ts), or the outcome its
 * owner recorded (src/state/task-outcomes.ts), by job then index; and what the nodes reported.
 */
import type { Keys } from '../../src/state/keys.ts';
import type { LiveTaskRecord } from '../../src/state/live-records.ts';
import { latestTasks } from '../../src/state/task-chunks.ts';
import type { ClusterStore, KeyValue } from '../../src/store/types.ts';
import { lastOfFreedRu } from '../../src/state/records.ts';
import { history } from './audit.ts';

/** The records in a read of `tasks/` keys, newest per task, by job then index. */
export function recordsOf<T = LiveTaskRecord>(keys: Keys, kvs: readonly KeyValue[]): T[] {
  return [...latestTasks(keys, kvs).values()].sort((a, b) => (a.job < b.job ? -1 : a.job > b.job ? 1 : a.index - b.index)) as T[];
}

/** The task records of `job` (every job's when undefined). */
export async function taskRecords<T = LiveTaskRecord>(store: Pick<ClusterStore, 'range'>, keys: Keys, job?: string): Promise<T[]> {
  return recordsOf<T>(keys, (await store.range(job === undefined ? keys.allTasks() : keys.tasks(job))).kvs);
}

/** One task's record (its own, or its chunk's). */
export async function taskRecord<T = LiveTaskRecord>(store: Pick<ClusterStore, 'range'>, keys: Keys, job: string, index: number): Promise<T | undefined> {
  return (await taskRecords<LiveTaskRecord>(store, keys, job)).find((t) => t.index === index) as T | undefined;
}

/**
 * What the nodes reported of `job`'s tasks, in the order the store recorded it: each outcome a
 * freed RU carried (a success or a cancellation is recorded there alone until the job's owner
 * writes it, src/state/release.ts), from the RUs' history since revision `from`.
 */
export async function freedOutcomes(store: ClusterStore, keys: Keys, job: string, from: number): Promise<LiveTaskRecord[]> {
  const out: LiveTaskRecord[] = [];
  for (const ev of await history(store, keys.rus(), from)) {
    const last = ev.type === 'put' ? (lastOfFreedRu(ev.kv.value) as LiveTaskRecord | undefined) : undefined;
    if (last?.job === job) out.push(last);
  }
  return out;
}

/**
 * One task's record, or, while that is not final, the outcome of its placement a freed RU
 * carried since revision `from` (see freedOutcomes): what the node reported.
 */
export async function reportedTask(store: ClusterStore, keys: Keys, job: string, index: number, from: number): Promise<LiveTaskRecord | undefined> {
  const rec = await taskRecord(store, keys, job, index);
  if (!rec || (rec.state !== 'placed' && rec.state !== 'running')) return rec;
  const ended = (await freedOutcomes(store, keys, job, from)).filter((t) => t.index === index && t.commitId === rec.commitId).pop();
  return ended ? { ...rec, ...ended } : rec;
}
