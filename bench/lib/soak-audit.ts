/**
 * The soak benchmark's auditor: it follows the cell's jobs, tasks and RUs through one watch from
 * the start of the run, so that it sees every revision even though retention deletes finished
 * jobs and the scheduler compacts etcd's history. It counts placements and submit → running
 * latencies per minute and checks, as the writes happen:
 *
 * - every job reaches a final state exactly once (never final → not final, never two finals);
 * - no job record is deleted before it is final;
 * - no RU passes from one task to another without being freed in between (the soak runs one
 *   priority, so there is no preemption), and no task holds two RUs at once;
 *
 * and at the end, from the store: every acknowledged job was seen final; no RU is held by a task
 * whose job is final or gone (a leak); no task is running on a server that is not registered.
 */
import { traceAt, tracingOn } from '../../src/util/trace.ts';
import { lastOfFreedRu, parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { LiveKeys, type LiveJobRecord, type LiveTaskRecord, type OwnerRecord } from '../../src/state/live-records.ts';
import type { Keys } from '../../src/state/keys.ts';
import { chunkJob, chunkTaskRecords, latestTasks } from '../../src/state/task-chunks.ts';
import type { ClusterStore, WatchBatch, WatchHandle } from '../../src/store/types.ts';
import { isTransient } from '../../src/util/errors.ts';

const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

/** Slots of the frees-per-revision histogram (the last counts that many and more). */
const FREE_SLOTS = 16;
/** Jobs left not final whose records the final audit quotes (describeJob). */
const STUCK_DESCRIBED = 10;

export interface Violation {
  kind: string;
  detail: string;
}

export interface MinuteCounts {
  placements: number;
  /**
   * For each RU placed again during the minute: ms from its freeing to its next placement, as seen
   * here. On a full cell with tasks waiting, how long freed capacity stays unused.
   */
  reuseMs: number[];
  running: number[];
  /** The same, for tasks of jobs small enough to be placed in one commit transaction. */
  runningOneTxn: number[];
  /**
   * The same by the size of the task's job (`sizeClasses`: 1 task, 2–10, 11 to what one commit
   * transaction holds, more): a job's tasks share its way through the cell, so a few large jobs
   * make up the tasks' tail. Each task as [submit → running, → placed, → taken up, → recorded
   * running] (ms; the stages NaN where its record lacks their times).
   */
  runningBySize: [number, number, number, number][][];
  /**
   * The same, for tasks of jobs the scheduler did not hold (their decision record shows no time
   * queued by admission control or waiting for a free RU they may use), counted when that record
   * is seen; `held` counts the tasks of the jobs it held.
   */
  runningUnheld: number[];
  held: number;
  /**
   * The same tasks' time split in three, from their records: submit sent → placement committed
   * (the agent's clock), → taken up by its node (the task record's `startedAt`: the node's clock
   * when it saw the placement and asked to record the task running), → seen running here (the
   * node starts the task once that record is written). A task's first placement records it running
   * itself (its `startedAt` is the placement's time, and its node starts it once the store has
   * confirmed its RU, which no record shows): for those tasks the second stage is 0 and "running"
   * is the placement. One machine, one clock. `accepted` is the
   * first part of `placed`: submit sent → the front-end's handler took the job (the job record's
   * `submittedAt`).
   */
  stages: { placed: number[]; started: number[]; seen: number[]; accepted: number[] };
  /** Each of those tasks whole: [submit → running, submit → placed, → taken up, → recorded running] (ms). */
  split: [number, number, number, number][];
  finals: number;
}

const emptyMinute = (): MinuteCounts => ({
  placements: 0,
  reuseMs: [],
  running: [],
  runningOneTxn: [],
  runningBySize: [[], [], [], []],
  runningUnheld: [],
  held: 0,
  stages: { placed: [], started: [], seen: [], accepted: [] },
  split: [],
  finals: 0,
});

/** The job sizes `runningBySize` is split by, named for a report; `oneTxn` as the auditor's. */
export function sizeClasses(oneTxn: number): string[] {
  return ['1 task', '2–10 tasks', `11–${oneTxn} tasks`, `over ${oneTxn} tasks`];
}

function sizeClass(tasks: number, oneTxn: number): number {
  return tasks <= 1 ? 0 : tasks <= 10 ? 1 : tasks <= oneTxn ? 2 : 3;
}

/** A task seen running before the bench had its job's SubmitJob answer. */
interface EarlyRunning {
  index: number;
  rec: LiveTaskRecord;
  now: number;
}

export class SoakAuditor {
  private readonly live: LiveKeys;
  private handle: WatchHandle | undefined;
  /** Job id → final transitions seen, and whether it is final now. */
  private readonly jobs = new Map<string, { finals: number; final: boolean; deleted: boolean }>();
  /** RU key → task holding it ("job#task"). */
  private readonly ruHolder = new Map<string, string>();
  /** RU key → how its holder got it (revision, agent, commit, attempt), for a violation's detail. */
  private readonly ruPlacedBy = new Map<string, string>();
  /** "job#task" → RU keys it holds. */
  private readonly taskRus = new Map<string, Set<string>>();
  /** Job → task → the last RU change seen for it (placed, freed or deleted, at which revision), for a stuck job's quote; dropped once the job is final. */
  private readonly lastRuSeen = new Map<string, Map<number, string>>();
  /** Job id → when the bench sent its SubmitJob (ms since epoch), for the latency figures. */
  private readonly submittedAt = new Map<string, number>();
  /** Job id → when its front-end's handler took it (the job record's submittedAt), and its tasks. */
  private readonly acceptedAt = new Map<string, { at: number; tasks: number }>();
  /** Running events of jobs whose SubmitJob answer has not come back yet. */
  private readonly early = new Map<string, EarlyRunning[]>();
  private readonly seenRunning = new Set<string>();
  /** RU key → when (ms, seen here) it was last freed, until it is placed again. */
  private readonly freedAt = new Map<string, number>();
  /** Job id → whether its latest finished decision record shows time queued (held by the scheduler). */
  private readonly heldJobs = new Map<string, boolean>();
  /** Job id → submit → running of its tasks, until its decision record says whether it was held. */
  private readonly unclassified = new Map<string, number[]>();
  readonly violations: Violation[] = [];
  private minute: MinuteCounts = emptyMinute();
  revision = 0;
  events = 0;
  watchErrors: string[] = [];
  /**
   * RUs freed (a holder, then none), by how many RUs their revision freed: one etcd revision is one
   * transaction, and a front-end applies the frees of one revision at one instant, so frees that
   * share a revision are one burst in admission's free history. `byRevision[n]`: frees in
   * revisions that freed n RUs (n ≥ 1; the last slot counts n and more).
   */
  readonly frees = { total: 0, revisions: 0, largest: 0, byRevision: new Array<number>(FREE_SLOTS + 1).fill(0) };
  /**
   * When (ms since the epoch, seen here) each task whose node left was placed again, and by
   * which agent: its new attempt's `placed` record names a lost attempt on a server that left.
   */
  readonly placedAgain: { at: number; agent: string }[] = [];
  private readonly placedAgainSeen = new Set<string>();

  /** `oneTxn`: the placements an agent puts in one commit transaction (42 with etcd's default limit). */
  constructor(
    private readonly store: ClusterStore,
    private readonly keys: Keys,
    private readonly oneTxn = 42,
  ) {
    this.live = new LiveKeys(keys);
    this.decisions = keys.decision('');
  }

  private readonly decisions: string;

  /** A task's submit → running, into the held or not-held figures once its job's record says which. */
  private classify(job: string, ms: number): void {
    const held = this.heldJobs.get(job);
    if (held === undefined) {
      const list = this.unclassified.get(job) ?? [];
      list.push(ms);
      this.unclassified.set(job, list);
    } else if (held) this.minute.held++;
    else this.minute.runningUnheld.push(ms);
  }

  /** A job's decision record: once a scheduling call is over, whether it queued (raw text, not parsed). */
  private onDecisions(job: string, value: string): void {
    if (!value.includes('"inProgress":false')) return;
    const held = /"queuedMs":[1-9]/.test(value);
    this.heldJobs.set(job, held);
    const list = this.unclassified.get(job);
    if (!list) return;
    this.unclassified.delete(job);
    for (const ms of list) this.classify(job, ms);
  }

  async start(fromRevision: number): Promise<void> {
    this.handle = await this.store.watch({
      prefix: this.keys.prefix,
      fromRevision,
      onEvents: (b) => this.apply(b),
      onError: (e) => {
        // A watch that ends (compaction overtook it, or etcd restarted) loses revisions: say so.
        this.watchErrors.push(`${new Date().toISOString()} at revision ${this.revision}: ${e.message}`);
        void this.restart();
      },
    });
  }

  private async restart(): Promise<void> {
    await this.handle?.close().catch(() => undefined);
    for (let i = 0; i < 600; i++) {
      try {
        await this.start(this.revision + 1);
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  async close(): Promise<void> {
    await this.handle?.close();
  }

  /** The bench got the job id back from SubmitJob, which it sent at `at`. */
  acked(job: string, at: number): void {
    this.submittedAt.set(job, at);
    traceAt('bench.submitted', job, at);
    for (const e of this.early.get(job) ?? []) this.countRunning(job, e.index, e.rec, e.now, at);
    this.early.delete(job);
  }

  /** A task of a job submitted at `at` seen running at `now` (its first attempt): the minute's latencies and stages. */
  private countRunning(job: string, index: number, rec: LiveTaskRecord | undefined, now: number, at: number): void {
    if (tracingOn()) traceAt('bench.running', `${job}#${index}`, now);
    const ms = Math.max(0, now - at);
    this.minute.running.push(ms);
    const acc = this.acceptedAt.get(job);
    if (acc !== undefined && acc.tasks <= this.oneTxn) this.minute.runningOneTxn.push(ms);
    this.classify(job, ms);
    // The task whole and its three stages, taken once for every figure that uses them.
    const timed = rec?.placedAt !== undefined && rec.startedAt !== undefined;
    const task: [number, number, number, number] = timed
      ? [ms, (rec.placedAt as number) - at, (rec.startedAt as number) - (rec.placedAt as number), now - (rec.startedAt as number)]
      : [ms, NaN, NaN, NaN];
    if (acc !== undefined) this.minute.runningBySize[sizeClass(acc.tasks, this.oneTxn)]?.push(task);
    if (timed) {
      this.minute.stages.placed.push(task[1]);
      this.minute.stages.started.push(task[2]);
      this.minute.stages.seen.push(task[3]);
      this.minute.split.push(task);
      if (acc !== undefined) this.minute.stages.accepted.push(acc.at - at);
    }
  }

  /** This minute's counts, and a fresh minute. */
  takeMinute(): MinuteCounts {
    const m = this.minute;
    this.minute = emptyMinute();
    return m;
  }

  private flag(kind: string, detail: string): void {
    if (this.violations.length < 1000) this.violations.push({ kind, detail });
  }

  private apply(b: WatchBatch): void {
    const now = Date.now();
    const k = this.keys;
    let freed = 0;
    for (const ev of b.events) {
      this.events++;
      const key = ev.kv.key;
      if (key.startsWith(k.rus())) {
        if (this.onRu(key, ev.type === 'delete' ? undefined : ev.kv.value, now, ev.kv.modRevision)) freed++;
      } else if (key.startsWith(k.allTasks())) {
        if (ev.type === 'delete') continue;
        const chunkOf = chunkJob(k, key);
        if (chunkOf !== undefined) {
          // A chunk record (src/state/task-chunks.ts): the tasks a placement started, each running.
          for (const rec of chunkTaskRecords(chunkOf, ev.kv)) {
            this.minute.placements++;
            this.onRunning({ job: chunkOf, index: rec.index }, rec, now);
          }
          continue;
        }
        const v = ev.kv.value;
        // Most task writes are not the ones counted here: parse only those that are.
        const placed = v.includes('"state":"placed"');
        const running = v.includes('"state":"running"');
        if (!placed && !running) continue;
        const ref = this.live.parseTask(key);
        if (!ref) continue;
        // A placement: the record its commit writes, `placed`, or `running` for a task's first
        // placement (placementRecordsStart); a monitor's `running` record names the RU revision.
        if (placed || (running && !v.includes('"placedRevision":'))) this.minute.placements++;
        if (placed && v.includes('left the cluster')) this.onPlacedAgain(key, v, now);
        if (running) this.onRunning(ref, parseJson<LiveTaskRecord>(ev.kv), now);
      } else if (key.startsWith(this.decisions)) {
        if (ev.type !== 'delete') this.onDecisions(key.slice(this.decisions.length), ev.kv.value);
      } else if (key.startsWith(k.jobs())) this.onJob(k.tail(k.jobs(), key), ev.type === 'delete' ? undefined : parseJson<LiveJobRecord>(ev.kv));
    }
    if (freed > 0) {
      this.frees.total += freed;
      this.frees.revisions++;
      this.frees.largest = Math.max(this.frees.largest, freed);
      const slot = Math.min(freed, FREE_SLOTS);
      this.frees.byRevision[slot] = (this.frees.byRevision[slot] ?? 0) + freed;
    }
    if (b.revision > this.revision) this.revision = b.revision;
  }

  /** A task seen running (its record, or its chunk's): its first attempt's start is counted once. */
  private onRunning(ref: { job: string; index: number }, rec: LiveTaskRecord | undefined, now: number): void {
    const id = `${ref.job}#${ref.index}#${rec?.attempt ?? 0}`;
    if (this.seenRunning.has(id)) return;
    this.seenRunning.add(id);
    const at = this.submittedAt.get(ref.job);
    if (rec?.attempt !== 0) return;
    // Running before SubmitJob's answer reached the bench (an answer that a busy front-end or
    // bench handled late): counted once the bench has the job's id and send time.
    if (at === undefined) {
      const list = this.early.get(ref.job) ?? [];
      list.push({ index: ref.index, rec, now });
      this.early.set(ref.job, list);
    } else this.countRunning(ref.job, ref.index, rec, now, at);
  }

  /** A placement whose task's last attempt was lost with its node (counted once per attempt). */
  private onPlacedAgain(key: string, value: string, now: number): void {
    let rec: LiveTaskRecord;
    try {
      rec = JSON.parse(value) as LiveTaskRecord;
    } catch {
      return;
    }
    const last = rec.previous?.[rec.previous.length - 1];
    if (last?.state !== 'lost' || !/^server \S+ left the cluster/.test(last.message ?? '')) return;
    const id = `${key}#${rec.attempt}`;
    if (this.placedAgainSeen.has(id)) return;
    this.placedAgainSeen.add(id);
    this.placedAgain.push({ at: now, agent: rec.agent ?? '?' });
  }

  private onJob(id: string | undefined, rec: LiveJobRecord | undefined): void {
    if (id === undefined) return;
    let j = this.jobs.get(id);
    if (!j) {
      j = { finals: 0, final: false, deleted: false };
      this.jobs.set(id, j);
    }
    if (!rec) {
      if (!j.final) this.flag('deleted-while-live', `job ${id} was deleted before it was final`);
      j.deleted = true;
      // Its ids are not needed any more: keep the auditor's memory bounded by what is live.
      this.submittedAt.delete(id);
      this.acceptedAt.delete(id);
      this.heldJobs.delete(id);
      this.unclassified.delete(id);
      this.lastRuSeen.delete(id);
      return;
    }
    if (!this.acceptedAt.has(id) && !j.final) this.acceptedAt.set(id, { at: rec.submittedAt, tasks: rec.spec.tasks });
    const final = FINAL.has(rec.state);
    if (final && !j.final) {
      j.finals++;
      this.minute.finals++;
      if (j.finals > 1) this.flag('final-twice', `job ${id} became final again (${rec.state})`);
    }
    if (!final && j.final) this.flag('final-undone', `job ${id} went from final back to ${rec.state}`);
    j.final = final;
    if (final) {
      this.acceptedAt.delete(id);
      this.lastRuSeen.delete(id);
    }
  }

  /** Keeps `what` as the last RU change seen for `holder` ("job#task"), unless its job is final already. */
  private noteRu(holder: string, what: string): void {
    const at = holder.lastIndexOf('#');
    const job = holder.slice(0, at);
    if (this.jobs.get(job)?.final) return;
    let tasks = this.lastRuSeen.get(job);
    if (!tasks) this.lastRuSeen.set(job, (tasks = new Map<number, string>()));
    tasks.set(Number(holder.slice(at + 1)), what);
  }

  /** Follows an RU's holder; true when the RU was freed (it had a holder and has none now). */
  private onRu(key: string, value: string | undefined, now: number, rev: number): boolean {
    const before = this.ruHolder.get(key);
    const rec = value === undefined ? undefined : (JSON.parse(value) as Partial<PlacedRuRecord>);
    const holder = rec && (rec.state === 'busy' || rec.state === 'reserved') && rec.job !== undefined ? `${rec.job}#${rec.task}` : undefined;
    if (holder === before) return false;
    if (before !== undefined) {
      if (holder !== undefined) this.flag('ru-double-booked', `${key} passed from ${before} to ${holder} without being freed`);
      const set = this.taskRus.get(before);
      set?.delete(key);
      if (set?.size === 0) this.taskRus.delete(before);
      this.ruHolder.delete(key);
      this.ruPlacedBy.delete(key);
    }
    if (holder !== undefined) {
      const freedAt = this.freedAt.get(key);
      if (freedAt !== undefined && before === undefined) {
        this.minute.reuseMs.push(now - freedAt);
        this.freedAt.delete(key);
      }
      this.ruHolder.set(key, holder);
      this.ruPlacedBy.set(key, `revision ${rev} by ${rec?.agent ?? '?'} (commit ${rec?.commitId ?? '?'}, attempt ${rec?.attempt ?? '?'})`);
      const set = this.taskRus.get(holder) ?? new Set<string>();
      const first = [...set][0];
      if (first !== undefined)
        this.flag(
          'task-held-twice',
          `${holder} holds ${first} (${this.ruPlacedBy.get(first) ?? '?'}) and ${key} (${this.ruPlacedBy.get(key) ?? '?'}) at ${new Date(now).toISOString()}`,
        );
      set.add(key);
      this.taskRus.set(holder, set);
    }
    if (before !== undefined && holder === undefined) {
      if (value === undefined) this.freedAt.delete(key);
      else this.freedAt.set(key, now);
      const last = value === undefined ? undefined : (lastOfFreedRu(value) as Partial<LiveTaskRecord> | undefined);
      const carried = last
        ? `carrying ${last.job === before.split('#')[0] && last.index === Number(before.split('#')[1]) ? 'its' : 'another'} outcome (${last.state})`
        : 'without an outcome';
      this.noteRu(before, `${key} ${value === undefined ? 'deleted' : `freed ${carried}`} at revision ${rev}`);
    }
    if (holder !== undefined) this.noteRu(holder, `${key} ${rec?.state} at revision ${rev} (commit ${rec?.commitId ?? '?'}, attempt ${rec?.attempt ?? '?'})`);
    return before !== undefined && holder === undefined;
  }

  /** Jobs seen so far, and how many are final. */
  counts(): { jobs: number; final: number; deleted: number } {
    let final = 0;
    let deleted = 0;
    for (const j of this.jobs.values()) {
      if (j.final) final++;
      if (j.deleted) deleted++;
    }
    return { jobs: this.jobs.size, final, deleted };
  }

  /** Acknowledged jobs not yet seen final. */
  notFinal(acked: Iterable<string>): string[] {
    const out: string[] = [];
    for (const id of acked) if (this.jobs.get(id)?.final !== true) out.push(id);
    return out;
  }

  /** The end-of-run checks against the store itself (see the file's header). */
  async finalAudit(acked: readonly string[]): Promise<void> {
    const stuck = this.notFinal(acked);
    for (const [i, id] of stuck.entries()) {
      // What the store holds for the first few, for whoever looks into why they stopped.
      const held = i < STUCK_DESCRIBED ? `; in the store: ${await this.describeJob(id)}` : '';
      this.flag('not-final', `acknowledged job ${id} never reached a final state${held}`);
    }
    for (const id of acked) {
      const j = this.jobs.get(id);
      if (j?.final && j.finals !== 1) this.flag('finals', `job ${id} reached a final state ${j.finals} times`);
    }
    const k = this.keys;
    const servers = new Set((await this.patiently(k.servers())).kvs.map((kv) => k.tail(k.servers(), kv.key)));
    const jobState = new Map<string, string>();
    for (const kv of (await this.patiently(k.jobs())).kvs) {
      const id = k.tail(k.jobs(), kv.key);
      const rec = parseJson<LiveJobRecord>(kv);
      if (id !== undefined && rec) jobState.set(id, rec.state);
    }
    for (const kv of (await this.patiently(k.rus())).kvs) {
      const rec = parseJson<PlacedRuRecord>(kv);
      if (!rec || (rec.state !== 'busy' && rec.state !== 'reserved')) continue;
      const st = jobState.get(rec.job);
      if (st === undefined || FINAL.has(st)) this.flag('leaked-ru', `${kv.key} is held by ${rec.job}#${rec.task}, whose job is ${st ?? 'gone'}`);
    }
    // Each task's own record, or its chunk's (src/state/task-chunks.ts) while it has none.
    for (const [id, rec] of latestTasks(k, (await this.patiently(k.allTasks())).kvs)) {
      if (rec.state !== 'running') continue;
      const server = rec.ru?.server ?? rec.server;
      if (server !== undefined && !servers.has(server)) this.flag('running-on-dead-node', `${id} is running on ${server}, which is not registered`);
    }
  }

  /**
   * A job's records as the store holds them now: its state and `seen`, its owner's lease and
   * whether that front-end's member key is alive, and its task records by state (own records and
   * chunk records apart: `p` placements, `d` outcomes).
   */
  private async describeJob(id: string): Promise<string> {
    const k = this.keys;
    const job = parseJson<LiveJobRecord>((await this.patiently(k.job(id))).kvs.find((kv) => kv.key === k.job(id)));
    const owner = parseJson<OwnerRecord>((await this.patiently(k.owner(id))).kvs.find((kv) => kv.key === k.owner(id)));
    const member = owner?.lease ? (await this.patiently(k.member(owner.lease))).kvs.length > 0 : false;
    const states = new Map<string, number>();
    let chunks = 0;
    let outcomes = 0;
    let live: { rec: LiveTaskRecord; rev: number } | undefined;
    for (const kv of (await this.patiently(k.tasks(id))).kvs) {
      const tail = k.tail(k.tasks(id), kv.key) ?? '';
      if (tail.endsWith('p')) chunks++;
      else if (tail.endsWith('d')) outcomes++;
      else {
        const rec = parseJson<LiveTaskRecord>(kv);
        const st = rec?.state ?? '?';
        states.set(st, (states.get(st) ?? 0) + 1);
        if (rec && (st === 'running' || st === 'placed') && (!live || rec.index < live.rec.index)) live = { rec, rev: kv.modRevision };
      }
    }
    const tasks = [...states].map(([st, n]) => `${st} ${n}`).join(', ') || 'none';
    // The first task still placed or running: its record, and what this auditor last saw of it on an RU.
    const first = live
      ? `; task ${live.rec.index}: ${live.rec.state} on ${live.rec.ru ? `${live.rec.ru.server}/${live.rec.ru.index}` : '?'} (commit ${live.rec.commitId ?? '?'}, attempt ${live.rec.attempt}, record at revision ${live.rev}), last seen: ${this.lastRuSeen.get(id)?.get(live.rec.index) ?? 'never on an RU'}`
      : '';
    return `job ${job ? `${job.state}, seen ${job.seen ?? '-'}` : 'absent'}; owner ${owner ? `lease ${owner.lease ?? '?'} (member ${member ? 'alive' : 'gone'})` : 'absent'}; task records: ${tasks}; chunk records ${chunks}, outcome records ${outcomes}${first}`;
  }

  /** A range for the final audit, tried again for up to two minutes while etcd is too loaded to answer. */
  private async patiently(prefix: string): ReturnType<ClusterStore['range']> {
    const end = Date.now() + 120_000;
    for (;;) {
      try {
        return await this.store.range(prefix);
      } catch (err) {
        if (!isTransient(err) || Date.now() > end) throw err;
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }
}
