/**
 * The placement transaction as a pure builder: what an agent writes when it places tasks (RU
 * records, task records, server epochs, the displaced tasks of a preemption and their queue
 * entry), fenced on the revisions the choice was based on and, for an owned job, on the owner's
 * lease. On failure the transaction reads back what it compared, so the agent's cache refreshes
 * exactly that before it samples again.
 */
import type { JobSpec, RuRef } from '../model/types.ts';
import type { Compare, KeyValue, Op, TxnRequest } from '../store/types.ts';
import type { Keys } from './keys.ts';
import { queuePut } from './queue.ts';
import { chunkPuts, type ChunkTask } from './task-chunks.ts';
import { placedRuValue, type AttemptSummary, type JobRecord, type MoveSource, type PlacedRuRecord, type PlacedTaskRecord } from './records.ts';

/** One task to place on one RU. */
export interface PlacementItem {
  ref: RuRef;
  task: number;
  /** The task's attempt (0 for its first placement). */
  attempt: number;
  /** Revision of the RU record the choice was based on (the `ru` conflict scope compares it). */
  ruRev: number;
  /** How the RU's previous task ended, as the freed RU read at `ruRev` carries it (JSON text): written as PlacedRuRecord.prev. */
  prevLast?: string;
  /** Server epoch revision the choice was based on (the `server` scope compares it). */
  basedOn: number;
  /**
   * Mod revision of the task's record the placement was decided against (0: no record). When
   * given, the transaction compares it, so a task is never placed twice: not by two owners, nor
   * by a retry racing a commit of its own whose answer was lost.
   */
  taskRev?: number;
  /** Earlier attempts of the task, written with this one. */
  previous?: AttemptSummary[];
  /** The placement's quality Q, written in the RU record (RuRecord.q; storedQ's precision). */
  q?: number;
  /** The node's disconnect grace, written in the task record (PlacedTaskRecord.nodeGraceMs). */
  nodeGraceMs?: number;
  /**
   * The chunk key a commit of this task whose answer was lost would have written: compared
   * absent, and the task's own record written (not a chunk's), so that the lost commit, should it
   * land late, fails on that record (agent/commit.ts unsureCommits).
   */
  unsureChunk?: string;
  /** A lower-priority task this placement displaces (preemption). */
  victim?: { job: string; task: number; priority: number };
  /**
   * A move of a running task (the run-time loop): its old RU, as read at revision `rev`, is told to
   * stop the old copy, and the new RU is held until it has (see PlacedRuRecord.hold).
   */
  move?: TaskMove;
}

/** The running copy a move replaces. */
export interface TaskMove {
  from: { server: string; index: number };
  rev: number;
  rec: PlacedRuRecord;
  /** Why (logged by the old copy's monitor, kept in the task's history). */
  reason: string;
  /** The task's share of its expected rate where it ran. */
  rate: number;
  /** Moves of the task before this one. */
  moves: number;
}

export interface PlacementTxnInput {
  keys: Keys;
  agent: string;
  commitId: string;
  now: number;
  job: JobSpec;
  items: readonly PlacementItem[];
  /** `ru`: compare each chosen RU's revision; `server`: also each touched server's epoch. */
  scope: 'ru' | 'server';
  /** 'reserved' for the reservation phase of a gang larger than one transaction. */
  ruState: 'busy' | 'reserved';
  /** An owned job's fence (see OwnerFence). */
  fence?: OwnerFence;
  /** Also write the job record as placed (a standalone agent's last chunk of the job). */
  recordJob?: boolean;
  /** More compares and writes (the namespace quota's: tenancy/quota.ts). */
  extra?: { compare: Compare[]; success: Op[] };
}

/**
 * The fence of an owned job's writes: the owner's member key still bound to its lease and, once
 * known, the job's owner record still at the revision the owner wrote or read it (an adoption
 * rewrites it). The member key alone is not enough: a process that lost its lease, got a new one
 * and still held a job in memory (a submission or an adoption in flight when the lease went)
 * would fence that job's placements on its new member key while another process adopted the job.
 */
export interface OwnerFence {
  key: string;
  lease: string;
  owner?: { key: string; rev: number };
}

/** The compares of a fence. */
export function fenceCompares(f: OwnerFence): Compare[] {
  const c: Compare[] = [{ key: f.key, target: 'lease', op: '==', value: f.lease }];
  if (f.owner) c.push({ key: f.owner.key, target: 'mod', op: '==', value: f.owner.rev });
  return c;
}

/** The reads a failed fenced transaction makes to tell whether its fence fell: the member key, then the owner record. */
export function fenceReads(f: OwnerFence): Op[] {
  return [{ type: 'get', key: f.key }, ...(f.owner ? [{ type: 'get' as const, key: f.owner.key }] : [])];
}

/** Whether the fence still stands, from the reads of fenceReads (in their order). */
export function fenceHolds(f: OwnerFence, reads: readonly (KeyValue[] | null | undefined)[]): boolean {
  const member = reads[0]?.[0];
  if (!member || member.lease !== f.lease) return false;
  return !f.owner || reads[1]?.[0]?.modRevision === f.owner.rev;
}

export interface PlacementTxn {
  req: TxnRequest;
  /** The RU records the transaction writes, for the agent to apply to its cache at once. */
  ruRecords: { key: string; rec: PlacedRuRecord }[];
  /** The epoch keys it writes (value: the commit id). */
  epochKeys: string[];
  /** Index in a failed result's responses of the fence's reads (fenceReads; when fenced). */
  fenceResponse: number | undefined;
  /** Index in a failed result's responses of the first task-record read (one per guarded task). */
  taskResponses: number;
  /** Index in a failed result's responses of the first read of an unsure commit's chunk key (PlacementItem.unsureChunk). */
  unsureResponses: number;
  /** Per item, in order: whether the placement wrote its task record `running` (placementRecordsStart). */
  startRecorded: boolean[];
}

/**
 * Whether a placement writes the task's record `running` at once, so that its monitor starts it
 * without a write of its own (a compare of the RU record's revision, which etcd answers without a
 * write, is the monitor's fence): a task's first placement on a busy RU, which is nearly every
 * task. The monitor starts such a task as its watch brings the placement, or reports it failed.
 * A gang's reservation, a move's held copy and a task placed again (whose earlier copy may still
 * report a success, monitor/outcomes.ts) are recorded `placed`, and written `running` by their
 * monitor when it starts them, as every placement was before.
 */
export function placementRecordsStart(
  ruState: PlacementTxnInput['ruState'],
  it: Pick<PlacementItem, 'attempt' | 'previous' | 'move' | 'unsureChunk'>,
): boolean {
  return ruState === 'busy' && it.attempt === 0 && !it.move && !(it.previous && it.previous.length > 0) && it.unsureChunk === undefined;
}

export function placementTxn(p: PlacementTxnInput): PlacementTxn {
  const k = p.keys;
  const compare: Compare[] = [];
  const success: Op[] = [];
  const failure: Op[] = [];
  const servers = new Map<string, number>();
  for (const it of p.items) if (!servers.has(it.ref.server)) servers.set(it.ref.server, it.basedOn);
  if (p.scope === 'server') {
    for (const [sid, rev] of servers) {
      compare.push({ key: k.epoch(sid), target: 'mod', op: '==', value: rev });
      failure.push({ type: 'get', key: k.epoch(sid) });
      failure.push({ type: 'get', key: k.serverRus(sid), prefix: true });
    }
    // The picks themselves too: only placements under this scope bump an epoch, so a pick taken
    // by an agent under the `ru` scope is caught here, not by its server's epoch.
    for (const it of p.items) compare.push({ key: k.ru(it.ref), target: 'mod', op: '==', value: it.ruRev });
  } else {
    // On a conflict, read only the picks. Reading their servers' other RUs too (a rival that
    // took one pick has often taken its neighbours) avoids a few conflicts but costs more CPU
    // to parse than the retries it saves (bench/commit-etcd.ts, 3 agents, 8-task jobs).
    for (const it of p.items) {
      const key = k.ru(it.ref);
      compare.push({ key, target: 'mod', op: '==', value: it.ruRev });
      failure.push({ type: 'get', key });
    }
  }
  let fenceResponse: number | undefined;
  if (p.fence) {
    compare.push(...fenceCompares(p.fence));
    fenceResponse = failure.length;
    failure.push(...fenceReads(p.fence));
  }
  for (const it of p.items) {
    if (!it.move) continue;
    const key = k.ru(it.move.from);
    compare.push({ key, target: 'mod', op: '==', value: it.move.rev });
    failure.push({ type: 'get', key });
  }
  const taskResponses = failure.length;
  for (const it of p.items) {
    if (it.taskRev === undefined) continue;
    const key = k.task(p.job.id, it.task);
    compare.push({ key, target: 'mod', op: '==', value: it.taskRev });
    failure.push({ type: 'get', key });
  }
  const unsureResponses = failure.length;
  for (const key of new Set(p.items.flatMap((it) => (it.unsureChunk === undefined ? [] : [it.unsureChunk])))) {
    compare.push({ key, target: 'version', op: '==', value: 0 });
    failure.push({ type: 'get', key });
  }
  const job = p.job;
  const ruRecords: { key: string; rec: PlacedRuRecord }[] = [];
  const startRecorded: boolean[] = [];
  const started: ChunkTask[] = [];
  for (const it of p.items) {
    const basedOn = servers.get(it.ref.server) ?? it.basedOn;
    const ruRec: PlacedRuRecord = {
      state: p.ruState,
      job: job.id,
      task: it.task,
      caused: job.profile.caused,
      priority: job.priority,
      agent: p.agent,
      since: p.now,
      attempt: it.attempt,
      basedOn,
      commitId: p.commitId,
      ...(it.q !== undefined ? { q: it.q } : {}),
      ...(job.durationMs !== undefined ? { durationMs: job.durationMs } : {}),
      ...(it.previous && it.previous.length > 0 ? { previous: it.previous } : {}),
    };
    const starts = placementRecordsStart(p.ruState, it);
    startRecorded.push(starts);
    if (starts) ruRec.startRecorded = true;
    const hold: MoveSource | undefined = it.move ? { ...it.move.from, commitId: it.move.rec.commitId } : undefined;
    if (hold && it.move) {
      ruRec.hold = hold;
      ruRec.moves = it.move.moves + 1;
    }
    ruRecords.push({ key: k.ru(it.ref), rec: ruRec });
    success.push({ type: 'put', key: k.ru(it.ref), value: placedRuValue(ruRec, it.prevLast) });
    if (starts) {
      // Its record is the chunk's (task-chunks.ts): one key for all the tasks the commit starts.
      started.push({ t: it.task, ru: it.ref, b: basedOn, ...(it.nodeGraceMs !== undefined ? { g: it.nodeGraceMs } : {}) });
    } else {
      const taskRec: PlacedTaskRecord = {
        job: job.id,
        index: it.task,
        state: 'placed',
        ru: it.ref,
        attempt: it.attempt,
        placedAt: p.now,
        basedOn,
        commitId: p.commitId,
        agent: p.agent,
        ...(it.nodeGraceMs !== undefined ? { nodeGraceMs: it.nodeGraceMs } : {}),
        ...(it.previous && it.previous.length > 0 ? { previous: it.previous } : {}),
        ...(it.move ? { moves: it.move.moves + 1, movedFrom: hold } : {}),
      };
      success.push({ type: 'put', key: k.task(job.id, it.task), value: JSON.stringify(taskRec) });
    }
    if (it.move) {
      // The old copy keeps its RU (and its load, for the neighbours' scores) until its monitor
      // has stopped it and freed the RU.
      const old: PlacedRuRecord = { ...it.move.rec, stop: it.move.reason };
      const oldKey = k.ru(it.move.from);
      ruRecords.push({ key: oldKey, rec: old });
      success.push({ type: 'put', key: oldKey, value: JSON.stringify(old) });
    }
    if (it.victim) {
      // The displaced task goes back to the durable queue: nothing is lost.
      const v = it.victim;
      success.push({
        type: 'put',
        key: k.task(v.job, v.task),
        value: JSON.stringify({ job: v.job, index: v.task, state: 'queued', attempt: 1, message: `preempted by ${job.id}` }),
      });
      success.push(queuePut(k, p.now, { reason: 'preempted', job: v.job, tasks: [v.task], by: job.id }));
    }
  }
  for (const c of chunkPuts(k, job.id, { commitId: p.commitId, agent: p.agent, at: p.now }, started)) success.push({ type: 'put', ...c });
  // Only the `server` scope reads epochs: under the `ru` scope (the default) a placement writes
  // none, which is two writes fewer per task with the release's.
  const epochKeys = p.scope === 'server' ? [...servers.keys()].map((sid) => k.epoch(sid)) : [];
  for (const key of epochKeys) success.push({ type: 'put', key, value: p.commitId });
  if (p.recordJob) {
    const jobRec: JobRecord = { spec: job, state: 'placed', placed: job.tasks, updatedAt: p.now };
    success.push({ type: 'put', key: k.job(job.id), value: JSON.stringify(jobRec) });
  }
  if (p.extra) {
    compare.push(...p.extra.compare);
    success.push(...p.extra.success);
  }
  return { req: { compare, success, failure, urgent: true }, ruRecords, epochKeys, fenceResponse, taskResponses, unsureResponses, startRecorded };
}
