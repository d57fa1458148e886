/**
 * The task records of a job (or of every job) as tarcil reads them: each task's own record, or
 * the one its chunk implies while it has none (src/state/task-chunks.ts), by job then index.
 */
import type { Keys } from '../../src/state/keys.ts';
import type { LiveTaskRecord } from '../../src/state/live-records.ts';
import { latestTasks } from '../../src/state/task-chunks.ts';
import type { ClusterStore, KeyValue } from '../../src/store/types.ts';

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
