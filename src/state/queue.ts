/**
 * The durable queue (`queue/<job>/<since>-<name>`): one typed entry for a job that waits
 * (admission control, or no eligible RU free) and for tasks displaced by preemption, which any
 * agent may claim and place again. A job's entries share one prefix, so its owner finds or
 * deletes them without reading the whole queue: under a backlog the queue holds an entry for
 * every waiting job, and a read of all of it at every job's end grew with the backlog.
 */
import type { KeyValue, Op } from '../store/types.ts';
import type { Keys } from './keys.ts';
import { parseJson } from './records.ts';

export type QueueEntry =
  /** A job waiting to be placed, held by `agent`; removed once it is placed. */
  | { reason: 'waiting'; job: string; agent: string; needed: number; since: number }
  /** Tasks displaced by a higher-priority job (`by`); whoever claims the entry places them again. */
  | { reason: 'preempted'; job: string; tasks: number[]; by: string };

/** The entry's key and value. */
export function queuePut(keys: Keys, since: number, entry: QueueEntry): Op & { type: 'put' } {
  const name = entry.reason === 'preempted' ? `preempted-${entry.tasks.join(',')}` : 'waiting';
  return { type: 'put', key: keys.queueEntry(entry.job, since, name), value: JSON.stringify(entry) };
}

/** Parses a queue entry; undefined for anything that is not one. */
export function parseQueueEntry(kv: KeyValue | undefined): QueueEntry | undefined {
  const e = parseJson<Partial<QueueEntry>>(kv);
  if (!e || typeof e.job !== 'string') return undefined;
  if (e.reason === 'preempted' && Array.isArray(e.tasks)) return e as QueueEntry;
  if (e.reason === 'waiting') return e as QueueEntry;
  return undefined;
}

/** The delete of every queue entry of a job (its final write takes them all). */
export function queueDeletesOf(keys: Keys, job: string): Op {
  return { type: 'delete', key: keys.jobQueue(job), prefix: true };
}
