/**
 * The durable queue (`queue/<inverted priority>/<since>/<job>`): one typed entry for a job that
 * waits (admission control, or no eligible RU free) and for tasks displaced by preemption, which
 * any agent may claim and place again. Entries are ordered by priority, then arrival.
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
export function queuePut(keys: Keys, priority: number, since: number, entry: QueueEntry): Op & { type: 'put' } {
  const name = entry.reason === 'preempted' ? `${entry.job}#${entry.tasks.join(',')}` : entry.job;
  return { type: 'put', key: keys.queueEntry(priority, since, name), value: JSON.stringify(entry) };
}

/** Parses a queue entry; undefined for anything that is not one. */
export function parseQueueEntry(kv: KeyValue | undefined): QueueEntry | undefined {
  const e = parseJson<Partial<QueueEntry>>(kv);
  if (!e || typeof e.job !== 'string') return undefined;
  if (e.reason === 'preempted' && Array.isArray(e.tasks)) return e as QueueEntry;
  if (e.reason === 'waiting') return e as QueueEntry;
  return undefined;
}

/** Deletes of every queue entry of a job (its final write takes them all). */
export function queueDeletesOf(kvs: readonly KeyValue[], job: string): Op[] {
  const ops: Op[] = [];
  for (const kv of kvs) if (parseQueueEntry(kv)?.job === job) ops.push({ type: 'delete', key: kv.key });
  return ops;
}
