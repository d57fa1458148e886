/**
 * A task's first placement writes no task record of its own: the placement transaction writes one
 * chunk record for all the tasks it started (`tasks/<job>/<first>p`, one per block of 10,000
 * tasks it touches), which says where each runs. Until something else is written about a task
 * (its outcome, a loss, a cancellation, a preemption, a node adopting it under a new lease), its
 * record is the one its chunk implies: `running` on its RU since the placement, the placement's
 * revision its `placedRevision`. Whoever writes about such a task compares its own key's revision
 * as absent (0) and writes the whole record, which from then on takes the chunk's place.
 *
 * The chunk key shares its task block's prefix (`blockPrefix`), so a read of a job's task records,
 * or of one block of them, also reads the chunks; it does not parse as a task key (`parseTask`).
 */
import type { RuRef } from '../model/types.ts';
import type { ClusterStore, KeyValue } from '../store/types.ts';
import type { Keys } from './keys.ts';
import { LiveKeys, type LiveTaskRecord } from './live-records.ts';
import { parseJson } from './records.ts';
import { byBlock, doneTaskRecords, endedOver, isDoneKey, TASK_BLOCK } from './task-outcomes.ts';

export { TASK_BLOCK };

/** The key prefix of block `b` of a job's tasks (indexes b·TASK_BLOCK to (b+1)·TASK_BLOCK − 1), and of their chunks. */
export function blockPrefix(keys: Keys, job: string, b: number): string {
  const a = keys.task(job, b * TASK_BLOCK);
  const z = keys.task(job, (b + 1) * TASK_BLOCK - 1);
  let i = 0;
  while (i < a.length && a[i] === z[i]) i++;
  return a.slice(0, i);
}

/** One task a placement started. */
export interface ChunkTask {
  t: number;
  ru: RuRef;
  /** The revision the choice was based on (the server's epoch under the `server` scope). */
  b: number;
  /** The node's disconnect grace as the placing agent knew it (PlacedTaskRecord.nodeGraceMs). */
  g?: number;
}

/** Value of `tasks/<job>/<first>p`: the tasks one placement transaction started in one block. */
export interface TaskChunkRecord {
  commitId: string;
  agent: string;
  at: number;
  tasks: ChunkTask[];
}

/** The chunk records a placement writes for the tasks it starts: one per block touched, keyed by its first task there. */
export function chunkPuts(keys: Keys, job: string, rec: Omit<TaskChunkRecord, 'tasks'>, tasks: readonly ChunkTask[]): { key: string; value: string }[] {
  const out: { key: string; value: string }[] = [];
  for (const list of byBlock(tasks).values()) {
    const first = list.reduce((m, t) => Math.min(m, t.t), Number.POSITIVE_INFINITY);
    out.push({ key: keys.taskChunk(job, first), value: JSON.stringify({ ...rec, tasks: list } satisfies TaskChunkRecord) });
  }
  return out;
}

/** The chunk key a placement of `tasks` (started ones) writes for `task`'s block: where its commit is found. */
export function chunkKeyOf(keys: Keys, job: string, task: number, started: readonly number[]): string {
  const b = Math.floor(task / TASK_BLOCK);
  let first = task;
  for (const t of started) if (Math.floor(t / TASK_BLOCK) === b && t < first) first = t;
  return keys.taskChunk(job, first);
}

/** Whether a key under `tasks/` is a chunk record's. */
export function isChunkKey(key: string): boolean {
  return key.endsWith('p');
}

/** The task records a chunk implies (`running` on their RUs, placed at the chunk's revision). */
export function chunkTaskRecords(job: string, kv: KeyValue): LiveTaskRecord[] {
  const rec = parseJson<TaskChunkRecord>(kv);
  if (!rec || !Array.isArray(rec.tasks)) return [];
  const out: LiveTaskRecord[] = [];
  for (const t of rec.tasks) {
    if (!t || typeof t.t !== 'number' || !t.ru || typeof t.ru.server !== 'string') continue;
    out.push(impliedRecord(job, t, rec, kv.modRevision));
  }
  return out;
}

function impliedRecord(job: string, t: ChunkTask, rec: TaskChunkRecord, rev: number): LiveTaskRecord {
  const r: LiveTaskRecord & { basedOn: number } = {
    job,
    index: t.t,
    state: 'running',
    ru: { server: t.ru.server, index: t.ru.index },
    attempt: 0,
    placedAt: rec.at,
    startedAt: rec.at,
    basedOn: t.b,
    commitId: rec.commitId,
    agent: rec.agent,
    placedRevision: rev,
  };
  if (t.g !== undefined) r.nodeGraceMs = t.g;
  return r;
}

/** A task key's job and index (LiveKeys.parseTask); undefined for any other key. */
export type TaskKeyParser = (key: string) => { job: string; index: number } | undefined;

/** One task's record as read: its own, or (`implied`) the one its chunk implies; `rev` the revision it was written at. */
export interface TaskAsRead {
  rec: LiveTaskRecord;
  rev: number;
  implied: boolean;
}

/**
 * The records of a job's tasks from a read of its `tasks/<job>/` keys (or of one block): each
 * task's own record, or where the newer one is its chunk's (a task's own record, once written,
 * is always newer), the implied one. Keys that are neither are left out.
 */
export function tasksAsRead(keys: Keys, kvs: readonly KeyValue[], parseTask: TaskKeyParser): Map<number, TaskAsRead> {
  const out = new Map<number, TaskAsRead>();
  for (const [i, e] of blockEntries(keys, kvs, parseTask)) {
    const read = entryAsRead(e);
    if (read) out.set(i, read);
  }
  return out;
}

/** The job of a chunk key (`tasks/<job>/<first>p`). */
export function chunkJob(keys: Keys, key: string): string | undefined {
  return isChunkKey(key) ? jobOfBatch(keys, key) : undefined;
}

/** The job of a key under `tasks/` that holds several tasks' records: a chunk's or an outcome record's (task-outcomes.ts). */
export function jobOfBatch(keys: Keys, key: string): string | undefined {
  const base = keys.allTasks();
  if (!key.startsWith(base) || !(isChunkKey(key) || isDoneKey(key))) return undefined;
  const rest = key.slice(base.length);
  const slash = rest.lastIndexOf('/');
  return slash > 0 ? rest.slice(0, slash) : undefined;
}

/** The task records a key under `tasks/` holds: a chunk's, an outcome record's, or a task's own (parsed). */
export function recordsOfTaskKey(keys: Keys, kv: KeyValue): LiveTaskRecord[] {
  const job = jobOfBatch(keys, kv.key);
  if (job === undefined) {
    const own = parseJson<LiveTaskRecord>(kv);
    return own && typeof own.job === 'string' && typeof own.index === 'number' ? [own] : [];
  }
  return isDoneKey(kv.key) ? doneTaskRecords(job, kv) : chunkTaskRecords(job, kv);
}

/**
 * The record of a task running on `ru` whose first placement started it (PlacedRuRecord
 * `startRecorded`) and of which nothing else was written: what its chunk implies, read off the RU
 * record (which holds the same) by a node that has no need to read the chunk.
 */
export function impliedFromRu(
  ref: RuRef,
  ru: { job: string; task: number; commitId: string; agent: string; since: number; basedOn: number },
  placedRevision: number,
): LiveTaskRecord {
  return impliedRecord(ru.job, { t: ru.task, ru: ref, b: ru.basedOn }, { commitId: ru.commitId, agent: ru.agent, at: ru.since, tasks: [] }, placedRevision);
}

/**
 * One task of a block as read: its own record's key-value (not parsed yet), the record its chunk
 * implies, and its outcome as its owner recorded it (task-outcomes.ts).
 */
export interface BlockEntry {
  own?: KeyValue;
  implied?: { rec: LiveTaskRecord; rev: number };
  done?: { rec: LiveTaskRecord; rev: number };
}

/**
 * The tasks that have a record in a read of a block of a job's keys, by index, without parsing
 * the tasks' own records (only the chunks'): how many there are, and which, before any is parsed.
 */
export function blockEntries(keys: Keys, kvs: readonly KeyValue[], parseTask: TaskKeyParser): Map<number, BlockEntry> {
  const out = new Map<number, BlockEntry>();
  const entry = (i: number): BlockEntry => {
    let e = out.get(i);
    if (!e) out.set(i, (e = {}));
    return e;
  };
  for (const kv of kvs) {
    if (isChunkKey(kv.key) || isDoneKey(kv.key)) {
      const job = jobOfBatch(keys, kv.key);
      if (job === undefined) continue;
      const done = isDoneKey(kv.key);
      for (const rec of done ? doneTaskRecords(job, kv) : chunkTaskRecords(job, kv)) {
        const e = entry(rec.index);
        const slot = done ? e.done : e.implied;
        if (slot && slot.rev >= kv.modRevision) continue;
        if (done) e.done = { rec, rev: kv.modRevision };
        else e.implied = { rec, rev: kv.modRevision };
      }
    } else {
      const ref = parseTask(kv.key);
      if (ref) entry(ref.index).own = kv;
    }
  }
  return out;
}

/**
 * The task's record from its block entry: its own, unless the chunk's is newer (or it has none);
 * its recorded outcome over either when newer (an outcome is recorded last: the task is final).
 * `implied`: not its own record (a writer about it compares its own key as absent).
 */
export function entryAsRead(e: BlockEntry): TaskAsRead | undefined {
  const own = e.own ? parseJson<LiveTaskRecord>(e.own) : undefined;
  let read: TaskAsRead | undefined;
  if (own && e.own && (!e.implied || e.own.modRevision > e.implied.rev)) read = { rec: own, rev: e.own.modRevision, implied: false };
  else if (e.implied) read = { rec: e.implied.rec, rev: e.implied.rev, implied: true };
  if (e.done && (!read || e.done.rev > read.rev)) return { rec: endedOver(read?.rec, e.done.rec), rev: e.done.rev, implied: !read || read.implied };
  return read;
}

/** The task's record from its block entry (entryAsRead). */
export function entryRecord(e: BlockEntry): LiveTaskRecord | undefined {
  return entryAsRead(e)?.rec;
}

/** The first task of a chunk key (`tasks/<job>/<first>p`) or an outcome record's (`…d`): its block is the record's. */
export function chunkFirst(key: string): number | undefined {
  if (!isChunkKey(key) && !isDoneKey(key)) return undefined;
  const slash = key.lastIndexOf('/');
  const n = Number(key.slice(slash + 1, -1));
  return Number.isInteger(n) ? n : undefined;
}

/**
 * Each task's record in a read of `tasks/` keys of several jobs, keyed `<job>#<index>`: its own,
 * or its chunk's while that is newer (a task's own record, once written, always is).
 */
export function latestTasks(keys: Keys, kvs: readonly KeyValue[]): Map<string, LiveTaskRecord> {
  const latest = new Map<string, { rec: LiveTaskRecord; rev: number }>();
  // Outcome records last: each is written over the record its task had (endedOver).
  const ordered = [...kvs.filter((kv) => !isDoneKey(kv.key)), ...kvs.filter((kv) => isDoneKey(kv.key))];
  for (const kv of ordered) {
    for (const rec of recordsOfTaskKey(keys, kv)) {
      const id = `${rec.job}#${rec.index}`;
      const cur = latest.get(id);
      if ((cur?.rev ?? -1) < kv.modRevision) latest.set(id, { rec: isDoneKey(kv.key) ? endedOver(cur?.rec, rec) : rec, rev: kv.modRevision });
    }
  }
  return new Map([...latest].map(([id, v]) => [id, v.rec]));
}

/** One task's record read from its block (its own, or its chunk's): for a reader that found no record of its own under the task's key. */
export async function readFromBlock(store: Pick<ClusterStore, 'range'>, keys: Keys, job: string, task: number): Promise<LiveTaskRecord | undefined> {
  const block = await store.range(blockPrefix(keys, job, Math.floor(task / TASK_BLOCK)));
  const live = new LiveKeys(keys);
  const e = blockEntries(keys, block.kvs, (key) => live.parseTask(key)).get(task);
  return e ? entryRecord(e) : undefined;
}
