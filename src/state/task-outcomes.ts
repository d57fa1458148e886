/**
 * A task that succeeded or was cancelled writes no record of its own: its node frees the RU with
 * the outcome in the RU's value (release.ts), its owner learns it from there, and the owner writes
 * the outcomes it learned in one record per job block (`tasks/<job>/<first>d`) with its next write
 * of the job record (owner/summary.ts). Until that write lands, the outcome is in the RU's history
 * (state/ru-history.ts). A task listed here is final: no record of it is written after.
 *
 * Like a chunk record (task-chunks.ts), the key shares its task block's prefix, so a read of a
 * job's task records also reads these, and it does not parse as a task key.
 */
import type { RuRef } from '../model/types.ts';
import type { KeyValue } from '../store/types.ts';
import type { Keys } from './keys.ts';
import type { LiveTaskRecord } from './live-records.ts';
import { parseJson } from './records.ts';

/** One ended task as its owner records it. */
export interface DoneEntry {
  t: number;
  s: 'succeeded' | 'cancelled';
  /** The attempt and the placement (commit) that ended. */
  a: number;
  c?: string;
  r?: RuRef;
  /** Started and ended (ms since the epoch), and where its output is, as its node said. */
  st?: number;
  e?: number;
  l?: string;
  /** Exit code (a process executor's). */
  x?: number;
}

/** Value of `tasks/<job>/<first>d`. */
export interface DoneRecord {
  tasks: DoneEntry[];
}

/** Task indexes per block: a job's task keys of one block share a key prefix (GetJob and WatchJob read a block at a time). */
export const TASK_BLOCK = 10_000;

/** Entries (each naming its task `t`) grouped by the task block they fall in. */
export function byBlock<T extends { t: number }>(entries: Iterable<T>): Map<number, T[]> {
  const out = new Map<number, T[]>();
  for (const e of entries) {
    const b = Math.floor(e.t / TASK_BLOCK);
    let list = out.get(b);
    if (!list) out.set(b, (list = []));
    list.push(e);
  }
  return out;
}

/** Whether a key under `tasks/` is an outcome record's. */
export function isDoneKey(key: string): boolean {
  return key.endsWith('d');
}

/** The entry of a task that ended, from what its freed RU carried (release.ts outcomeSummary) and where it ran. */
export function doneEntry(last: LiveTaskRecord, ru: RuRef | undefined): DoneEntry | undefined {
  if (last.state !== 'succeeded' && last.state !== 'cancelled') return undefined;
  const e: DoneEntry = { t: last.index, s: last.state, a: last.attempt };
  if (typeof last.commitId === 'string') e.c = last.commitId;
  if (ru) e.r = { server: ru.server, index: ru.index };
  if (typeof last.startedAt === 'number') e.st = last.startedAt;
  if (typeof last.endedAt === 'number') e.e = last.endedAt;
  if (typeof last.logPath === 'string') e.l = last.logPath;
  if (typeof last.exitCode === 'number') e.x = last.exitCode;
  return e;
}

/** The outcome records for these entries: one per block, keyed by its first task there. */
export function donePuts(keys: Keys, job: string, entries: Iterable<DoneEntry>): { key: string; value: string }[] {
  const out: { key: string; value: string }[] = [];
  for (const list of byBlock(entries).values()) {
    list.sort((x, y) => x.t - y.t);
    out.push({ key: keys.taskDone(job, (list[0] as DoneEntry).t), value: JSON.stringify({ tasks: list } satisfies DoneRecord) });
  }
  return out;
}

/** The task records an outcome record holds. */
export function doneTaskRecords(job: string, kv: KeyValue): LiveTaskRecord[] {
  const rec = parseJson<DoneRecord>(kv);
  if (!rec || !Array.isArray(rec.tasks)) return [];
  const out: LiveTaskRecord[] = [];
  for (const e of rec.tasks) {
    if (!e || typeof e.t !== 'number' || (e.s !== 'succeeded' && e.s !== 'cancelled')) continue;
    const r: LiveTaskRecord = { job, index: e.t, state: e.s, attempt: typeof e.a === 'number' ? e.a : 0 };
    if (e.c !== undefined) r.commitId = e.c;
    if (e.r && typeof e.r.server === 'string') {
      r.ru = { server: e.r.server, index: e.r.index };
      r.server = e.r.server;
    }
    if (e.st !== undefined) r.startedAt = e.st;
    if (e.e !== undefined) r.endedAt = e.e;
    if (e.l !== undefined) r.logPath = e.l;
    if (e.x !== undefined) r.exitCode = e.x;
    out.push(r);
  }
  return out;
}

/**
 * A task's record from its outcome entry over the record it had before (its chunk's or its own,
 * if of the same placement): where and when it was placed stays, the outcome is the entry's.
 */
export function endedOver(before: LiveTaskRecord | undefined, done: LiveTaskRecord): LiveTaskRecord {
  if (!before || before.commitId !== done.commitId || before.attempt !== done.attempt) return done;
  const { message: _m, ...kept } = before;
  return { ...kept, ...done };
}
