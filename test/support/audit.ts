import { placedRevisionOf, type LiveJobRecord, type LiveTaskRecord } from '../../src/state/live-records.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import type { Keys } from '../../src/state/keys.ts';
import type { ClusterStore, KeyValue, WatchEvent } from '../../src/store/types.ts';
import { recordsOfTaskKey } from '../../src/state/task-chunks.ts';
import { recordsOf } from './task-records.ts';

const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

/**
 * Every write under a prefix since `from`, from the store's history. The newest revision may
 * belong to another prefix, so the replay ends at that revision or after a quiet second.
 */
export async function history(store: ClusterStore, prefix: string, from: number): Promise<WatchEvent[]> {
  const until = await store.revision();
  const events: WatchEvent[] = [];
  let handle: { close(): Promise<void> } | undefined;
  await new Promise<void>((resolve, reject) => {
    let idle = setTimeout(resolve, 1000);
    store
      .watch({
        prefix,
        fromRevision: from,
        onEvents: (b) => {
          events.push(...b.events);
          clearTimeout(idle);
          if (b.revision >= until) resolve();
          else idle = setTimeout(resolve, 1000);
        },
        onError: (e) => reject(e),
      })
      .then((h) => {
        handle = h;
      }, reject);
  });
  await handle?.close();
  return events;
}

/** Job ids not yet in a final state (acknowledged ones and any other stored job). */
export async function pendingJobs(store: ClusterStore, keys: Keys, acked: readonly string[]): Promise<string[]> {
  const jobs = await store.range(keys.jobs());
  const byId = new Map(jobs.kvs.map((kv) => [keys.tail(keys.jobs(), kv.key) ?? '', parseJson<LiveJobRecord>(kv)]));
  const ids = new Set([...acked, ...byId.keys()]);
  return [...ids].filter((id) => !FINAL.has(byId.get(id)?.state ?? ''));
}

export async function waitAllFinal(store: ClusterStore, keys: Keys, acked: readonly string[], timeoutMs: number): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let pending = await pendingJobs(store, keys, acked);
  while (pending.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    pending = await pendingJobs(store, keys, acked);
  }
  return pending;
}

export interface AuditFindings {
  /** Final job states reached more than once, or never, by job id (want: every count 1). */
  finals: Map<string, number>;
  states: Map<string, LiveJobRecord>;
  tasks: LiveTaskRecord[];
  /** An RU taken by a task while it still held another one. */
  doubleBooked: number;
  /** A task holding two RUs at one revision. */
  heldTwice: number;
  /** A task recorded running for a new attempt before its previous attempt ended. */
  overlappingRuns: number;
  orphanOwners: string[];
  orphanQueue: string[];
  /** RUs neither free nor held by a task that is still placed or running. */
  orphanRus: string[];
  /** RUs of servers that are no longer registered. */
  strayRus: string[];
}

/** Replays the store's history since startRev and reads its final state (see AuditFindings). */
export async function audit(store: ClusterStore, keys: Keys, startRev: number): Promise<AuditFindings> {
  const jobEvents = await history(store, keys.jobs(), startRev + 1);
  const finals = new Map<string, number>();
  for (const ev of jobEvents) {
    const rec = parseJson<LiveJobRecord>(ev.kv);
    const id = keys.tail(keys.jobs(), ev.kv.key) ?? '';
    if (rec && FINAL.has(rec.state)) finals.set(id, (finals.get(id) ?? 0) + 1);
  }
  const jobs = await store.range(keys.jobs());
  const states = new Map(jobs.kvs.map((kv) => [keys.tail(keys.jobs(), kv.key) ?? '', parseJson<LiveJobRecord>(kv) as LiveJobRecord]));

  const ruEvents = await history(store, keys.rus(), startRev + 1);
  const holder = new Map<string, string>();
  const heldBy = new Map<string, Set<string>>();
  let doubleBooked = 0;
  let heldTwice = 0;
  for (const ev of ruEvents) {
    const rec = ev.type === 'put' ? parseJson<PlacedRuRecord>(ev.kv) : undefined;
    const prev = holder.get(ev.kv.key);
    if (prev !== undefined) {
      heldBy.get(prev)?.delete(ev.kv.key);
      holder.delete(ev.kv.key);
    }
    if (rec && (rec.state === 'busy' || rec.state === 'reserved')) {
      const id = `${rec.job}#${rec.task}`;
      if (prev !== undefined && prev !== id) doubleBooked++;
      holder.set(ev.kv.key, id);
      let set = heldBy.get(id);
      if (!set) heldBy.set(id, (set = new Set()));
      set.add(ev.kv.key);
      if (set.size > 1) heldTwice++;
    }
  }

  const taskEvents = await history(store, keys.allTasks(), startRev + 1);
  const runningAttempt = new Map<string, number>();
  let overlappingRuns = 0;
  // A chunk record (src/state/task-chunks.ts) is the `running` record of every task it started;
  // an outcome record (task-outcomes.ts) the final record of every task it holds.
  const asRecords = (kv: KeyValue): LiveTaskRecord[] => recordsOfTaskKey(keys, kv);
  for (const ev of taskEvents)
    for (const t of ev.type === 'delete' ? [] : asRecords(ev.kv)) {
      const id = `${t.job}#${t.index}`;
      if (t.state === 'running') {
        const cur = runningAttempt.get(id);
        const placedRev = placedRevisionOf(t, ev.kv.modRevision);
        if (cur !== undefined && cur !== placedRev) overlappingRuns++;
        runningAttempt.set(id, placedRev ?? -1);
      } else if (t.state !== 'placed') {
        runningAttempt.delete(id);
      }
    }

  const [tasks, owners, queue, rus, servers] = await Promise.all([
    store.range(keys.allTasks()),
    store.range(keys.owners()),
    store.range(keys.queue()),
    store.range(keys.rus()),
    store.range(keys.servers()),
  ]);
  const taskRecs = recordsOf(keys, tasks.kvs);
  const live = new Set(servers.kvs.map((kv) => keys.tail(keys.servers(), kv.key)));
  const activeTask = new Set(taskRecs.filter((t) => t.state === 'placed' || t.state === 'running').map((t) => `${t.job}#${t.index}`));
  const orphanRus = rus.kvs
    .filter((kv) => {
      const r = parseJson<{ state: string; job?: string; task?: number }>(kv);
      return r !== undefined && r.state !== 'free' && !activeTask.has(`${r.job}#${r.task}`);
    })
    .map((kv) => `${kv.key} ${kv.value.slice(0, 80)}`);
  return {
    finals,
    states,
    tasks: taskRecs,
    doubleBooked,
    heldTwice,
    overlappingRuns,
    orphanOwners: owners.kvs.filter((kv) => FINAL.has(states.get(keys.tail(keys.owners(), kv.key) ?? '')?.state ?? '')).map((kv) => kv.key),
    orphanQueue: queue.kvs.filter((kv) => FINAL.has(states.get(parseJson<{ job?: string }>(kv)?.job ?? '')?.state ?? '')).map((kv) => kv.key),
    orphanRus,
    strayRus: rus.kvs.filter((kv) => !live.has(keys.parseRu(kv.key)?.server)).map((kv) => kv.key),
  };
}
