/**
 * WatchJob streams: one pair of store watches for all the watched jobs of a process, each change
 * handed to its job's streams (JobWatchHub), and per stream a snapshot followed by coalesced
 * deltas, written with backpressure (JobStream).
 *
 * Work and memory per stream are bounded by what changed, not by the job's size times its events:
 * an event carries the job summary and only the tasks whose records changed since the last one;
 * changes that arrive while the client is not reading are merged per task; if more distinct tasks
 * pile up than `maxPendingTasks`, they are dropped and replaced by a fresh snapshot once the
 * client reads again; a client that reads nothing for `slowConsumerMs` is ended with
 * RESOURCE_EXHAUSTED.
 */
import type * as grpc from '@grpc/grpc-js';
import { isFinalJob, LiveKeys, type LiveJobRecord, type LiveTaskRecord } from '../state/live-records.ts';
import { parseJson } from '../state/records.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, KeyValue, TxnResult, WatchBatch, WatchHandle } from '../store/types.ts';
import { TarcilError } from '../util/errors.ts';
import { jobToProto, taskToProto } from './convert.ts';
import type { Job } from './gen/tarcil/v1/Job.ts';
import type { JobEvent } from './gen/tarcil/v1/JobEvent.ts';
import type { Task } from './gen/tarcil/v1/Task.ts';
import type { WatchJobRequest__Output } from './gen/tarcil/v1/WatchJobRequest.ts';
import { endStreamWithError } from './grpc.ts';
import { laterTurn } from '../util/turns.ts';

export interface JobWatchLimits {
  /** Tasks per message (default 1000: a message stays well under gRPC's 4 MiB default). */
  tasksPerEvent: number;
  /** Distinct changed tasks held for a client that is behind, before falling back to a snapshot. */
  maxPendingTasks: number;
  /** A client that consumes nothing for this long is dropped with RESOURCE_EXHAUSTED. */
  slowConsumerMs: number;
}

/**
 * Task indexes read per store read of a snapshot. Task keys end in the index padded with zeros,
 * so a block's keys share a prefix (see blockPrefix).
 */
export const SNAPSHOT_BLOCK = 10_000;

/** The key prefix of block `b` of a job's tasks: indexes b·SNAPSHOT_BLOCK to (b+1)·SNAPSHOT_BLOCK − 1. */
export function blockPrefix(keys: Keys, job: string, b: number): string {
  const a = keys.task(job, b * SNAPSHOT_BLOCK);
  const z = keys.task(job, (b + 1) * SNAPSHOT_BLOCK - 1);
  let i = 0;
  while (i < a.length && a[i] === z[i]) i++;
  return a.slice(0, i);
}


/** The pause before a stream sends its job again after a late change, and between its reads. */
const LATE_REREAD_MS = 50;

/** Changes applied per turn when a snapshot's queued changes are caught up. */
const EARLY_SLICE = 1000;

export const DEFAULT_JOB_WATCH_LIMITS: JobWatchLimits = { tasksPerEvent: 1000, maxPendingTasks: 20_000, slowConsumerMs: 30_000 };

type Listener = { onBatch(b: WatchBatch): void; onError(err: TarcilError): void };

/** The store watches the hub shares, open while any job has a stream. */
interface Shared {
  ready: Promise<void>;
  watches: WatchHandle[];
  failed: boolean;
}

/**
 * Two store watches (job records, task records) for every watched job of the process, opened
 * with the first stream and closed with the last; each change is handed to the streams of its
 * job by a map lookup, so the store's work per change does not grow with the number of streams.
 */
export class JobWatchHub {
  private readonly topics = new Map<string, Set<Listener>>();
  private shared: Shared | undefined;
  private dispatching = false;
  /**
   * Records parsed from the changes being handed out, shared by the streams of their job (each
   * would parse them again); emptied after each batch, so that it holds nothing the store's
   * history keeps alive.
   */
  private readonly parsed = new Map<KeyValue, object | null>();

  constructor(
    private readonly store: ClusterStore,
    private readonly keys: Keys,
  ) {}

  /** Store watches open now (0 or 2, whatever the number of streams). */
  get storeWatches(): number {
    return this.shared?.watches.length ?? 0;
  }

  /** The JSON record a change carries, parsed once for all the streams it reaches. */
  record<T extends object>(kv: KeyValue): T | undefined {
    let v = this.parsed.get(kv);
    if (v === undefined) {
      v = parseJson<T>(kv) ?? null;
      if (this.dispatching) this.parsed.set(kv, v);
    }
    return (v ?? undefined) as T | undefined;
  }

  /** Resolves once the store watches run: every change after that reaches `l`. */
  async subscribe(jobId: string, l: Listener): Promise<() => void> {
    let set = this.topics.get(jobId);
    if (!set) this.topics.set(jobId, (set = new Set()));
    set.add(l);
    const topic = set;
    const off = (): void => {
      topic.delete(l);
      if (topic.size === 0 && this.topics.get(jobId) === topic) this.topics.delete(jobId);
      if (this.topics.size === 0) this.closeShared();
    };
    const shared = (this.shared ??= this.open());
    try {
      await shared.ready;
    } catch (err) {
      off();
      throw err;
    }
    return off;
  }

  private closeShared(): void {
    const sh = this.shared;
    if (!sh) return;
    this.shared = undefined;
    void sh.ready.finally(() => Promise.all(sh.watches.map((w) => w.close().catch(() => undefined)))).catch(() => undefined);
  }

  private open(): Shared {
    const sh: Shared = { ready: Promise.resolve(), watches: [], failed: false };
    const jobs = this.keys.jobs();
    const tasks = this.keys.allTasks();
    const fail = (err: TarcilError): void => {
      if (sh.failed) return;
      sh.failed = true;
      if (this.shared === sh) this.shared = undefined;
      const all = [...this.topics.values()].flatMap((t) => [...t]);
      this.topics.clear();
      for (const l of all) l.onError(err);
      void Promise.all(sh.watches.map((w) => w.close().catch(() => undefined)));
    };
    /** Splits a batch by job and hands each part to that job's streams. */
    const dispatch = (b: WatchBatch, jobOf: (key: string) => string | undefined): void => {
      if (sh.failed) return;
      let parts: Map<string, WatchBatch['events']> | undefined;
      for (const e of b.events) {
        const job = jobOf(e.kv.key);
        if (job === undefined || !this.topics.has(job)) continue;
        parts ??= new Map();
        let list = parts.get(job);
        if (!list) parts.set(job, (list = []));
        list.push(e);
      }
      if (!parts) return;
      this.dispatching = true;
      try {
        for (const [job, events] of parts) {
          const batch = { revision: b.revision, events };
          for (const l of [...(this.topics.get(job) ?? [])]) l.onBatch(batch);
        }
      } finally {
        this.dispatching = false;
        this.parsed.clear();
      }
    };
    const jobOfTask = (key: string): string | undefined => {
      const end = key.indexOf('/', tasks.length);
      return end < 0 ? undefined : key.slice(tasks.length, end);
    };
    const jobOfJob = (key: string): string | undefined => key.slice(jobs.length);
    sh.ready = (async () => {
      const from = (await this.store.revision()) + 1;
      sh.watches.push(await this.store.watch({ prefix: jobs, fromRevision: from, onEvents: (b) => dispatch(b, jobOfJob), onError: fail }));
      sh.watches.push(await this.store.watch({ prefix: tasks, fromRevision: from, onEvents: (b) => dispatch(b, jobOfTask), onError: fail }));
    })();
    sh.ready.catch((err: unknown) => {
      if (this.shared === sh) this.shared = undefined;
      void Promise.all(sh.watches.map((w) => w.close().catch(() => undefined)));
      return err;
    });
    return sh;
  }
}

/** One WatchJob call: NOT_FOUND for an unknown job, else a snapshot, then deltas until final. */
export class JobStream {
  private readonly live: LiveKeys;
  private closed = false;
  private off: (() => void) | undefined;
  /**
   * The revision the job record of the last snapshot was read at: a change of the job record at or
   * below it is already in what was sent. Job and task changes come through two store watches,
   * each in order but not in order with each other (etcd answers each watcher on its own), so
   * what was sent is tracked per kind of record, never by the newest revision sent: a job change
   * that comes after a later task change is still new.
   */
  private snapRev = 0;
  /**
   * The revision of the last event sent whole (more=false). A change at or below it that comes
   * after it (one watch behind the other) cannot go out under its own revision, which would not
   * increase along the stream: the stream sends the job again, read at a later revision (resync).
   */
  private lastSentRev = 0;
  private lateResync = false;
  private snapshotDone = false;
  private early: WatchBatch[] = [];
  private job: LiveJobRecord | undefined;
  private jobChanged = false;
  private readonly pending = new Map<number, LiveTaskRecord | null>();
  private pendingRev = 0;
  private resync = false;
  private flushing = false;
  private flushQueued = false;
  private jobProto: { rec: LiveJobRecord; proto: Job } | undefined;
  /**
   * The revision each block of tasks of the last snapshot was read at: a task change at or below
   * its block's is already in what was sent (blocks not read yet: none is).
   */
  private blockRevs: number[] = [];
  private waitingDrain = false;
  private slowTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly call: grpc.ServerWritableStream<WatchJobRequest__Output, JobEvent>,
    private readonly jobId: string,
    private readonly d: { store: ClusterStore; keys: Keys; hub: JobWatchHub; limits: JobWatchLimits; notFound?: () => TarcilError },
  ) {
    this.live = new LiveKeys(d.keys);
    call.on('cancelled', () => this.finish());
    call.on('close', () => this.finish());
  }

  async start(): Promise<void> {
    this.off = await this.d.hub.subscribe(this.jobId, {
      onBatch: (b) => this.onBatch(b),
      onError: (err) => this.finish(new TarcilError('UNAVAILABLE', `the watch of job ${this.jobId} was interrupted (${err.message}); watch again`)),
    });
    if (this.closed) {
      this.off();
      return;
    }
    await this.snapshot();
  }

  /**
   * Sends the job and all its tasks, in parts. The job and its first block of SNAPSHOT_BLOCK task
   * indexes are read at one revision, each further block at its own (later) one, on later turns
   * of the event loop, and each part is parsed and sent on its own turn: a 100,000-task job is
   * never read, parsed and serialized in one go. Every part carries the first block's revision;
   * changes that come later than the revision a task was read at follow as deltas.
   */
  private async snapshot(): Promise<void> {
    const k = this.d.keys;
    // The first read (the job and a block of records) waits for a turn of its own: streams opened
    // together would otherwise each read and copy a block in the same turn (ten of them held the
    // event loop for 150 ms on the embedded store).
    await laterTurn();
    if (this.closed) return;
    let res = await this.read();
    // Sent again after a late change: read at a revision past the last one sent, so that revisions
    // increase along the stream (the store moves on; until it does, the stream waits).
    while (!this.closed && res.revision <= this.lastSentRev) {
      await new Promise((r) => setTimeout(r, LATE_REREAD_MS));
      if (this.closed) return;
      res = await this.read();
    }
    if (this.closed) return;
    const rec = parseJson<LiveJobRecord>(res.responses[0]?.[0]);
    if (!rec) throw this.d.notFound?.() ?? new TarcilError('NOT_FOUND', `job ${this.jobId} does not exist`, { field: 'job_id' });
    this.job = rec;
    this.pending.clear();
    this.resync = false;
    this.jobChanged = false;
    this.snapRev = res.revision;
    this.pendingRev = Math.max(this.pendingRev, res.revision);
    const blocks = Math.max(1, Math.ceil(rec.spec.tasks / SNAPSHOT_BLOCK));
    const revs = (this.blockRevs = [res.revision]);
    const job = jobToProto(this.jobId, rec, rec.owner ?? '');
    let kvs = res.responses[1] ?? [];
    for (let b = 0; b < blocks && !this.closed; b++) {
      if (b > 0) {
        await laterTurn();
        if (this.closed) return;
        const next = await this.d.store.range(blockPrefix(k, this.jobId, b));
        revs.push(next.revision);
        kvs = next.kvs;
      }
      const part = kvs;
      await this.sendParts(job, res.revision, part.length, b === blocks - 1, (from, to) => {
        const tasks: Task[] = [];
        for (let i = from; i < to; i++) {
          const t = parseJson<LiveTaskRecord>(part[i]);
          if (t) tasks.push(taskToProto(t));
        }
        return tasks;
      });
    }
    if (this.closed) return;
    // The changes that came while the blocks were read, applied a slice per turn (a second of a
    // busy job's changes is thousands of records to parse); what comes meanwhile joins the queue.
    let applied = 0;
    for (let i = 0; i < this.early.length && !this.closed; i++) {
      const b = this.early[i] as WatchBatch;
      for (const ev of b.events) this.apply(ev.kv, ev.type === 'delete', b.revision);
      this.pendingRev = Math.max(this.pendingRev, b.revision);
      applied += b.events.length;
      if (applied >= EARLY_SLICE && i + 1 < this.early.length) {
        applied = 0;
        await laterTurn();
      }
    }
    if (this.closed) return;
    this.early = [];
    this.snapshotDone = true;
    if (isFinalJob(rec.state)) this.finish();
    else this.flush();
  }

  /** The job record and the first block of its tasks, at one revision. */
  private read(): Promise<TxnResult> {
    const k = this.d.keys;
    return this.d.store.txn({
      compare: [],
      success: [
        { type: 'get', key: k.job(this.jobId) },
        { type: 'get', key: blockPrefix(k, this.jobId, 0), prefix: true },
      ],
    });
  }

  private onBatch(b: WatchBatch): void {
    if (this.closed) return;
    if (!this.snapshotDone) {
      this.early.push(b);
      return;
    }
    if (b.revision <= this.lastSentRev) {
      // Behind what was sent: the other watch's changes of this revision or later went out first.
      // (Changes the last snapshot already holds, from a watch that lags its read, are no news.)
      if (b.events.some((ev) => !this.inSnapshot(ev.kv, b.revision))) this.sendAgainLater();
      return;
    }
    for (const ev of b.events) this.apply(ev.kv, ev.type === 'delete', b.revision);
    this.pendingRev = Math.max(this.pendingRev, b.revision);
    this.flushSoon();
  }

  /** Sends the job again, whole, once a moment has passed (the changes behind are in that read). */
  private sendAgainLater(): void {
    if (this.lateResync || this.resync) return;
    this.lateResync = true;
    setTimeout(() => {
      this.lateResync = false;
      if (this.closed) return;
      this.pending.clear();
      this.resync = true;
      this.flush();
    }, LATE_REREAD_MS).unref();
  }

  /**
   * Sends what is pending on the next turn of the event loop: the changes of one burst (tasks
   * ending together, a commit of many placements) leave as one event, and their sending does not
   * lengthen the turn that made them.
   */
  private flushSoon(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    void laterTurn().then(() => {
      this.flushQueued = false;
      this.flush();
    });
  }

  /** Whether the last snapshot read this change's record at or after it (the job's, or its task's block). */
  private inSnapshot(kv: KeyValue, revision: number): boolean {
    if (kv.key === this.d.keys.job(this.jobId)) return revision <= this.snapRev;
    const ref = this.live.parseTask(kv.key);
    return !ref || revision <= (this.blockRevs[Math.floor(ref.index / SNAPSHOT_BLOCK)] ?? 0);
  }

  private apply(kv: KeyValue, deleted: boolean, revision: number): void {
    if (kv.key === this.d.keys.job(this.jobId)) {
      // Already in the snapshot: the job record was read at or after this change.
      if (revision <= this.snapRev) return;
      const rec = deleted ? undefined : this.d.hub.record<LiveJobRecord>(kv);
      if (deleted) {
        // A job is deleted only once final, and a stream ends at the final state: this one fell
        // behind by more than the retention period (or the record was removed by hand).
        this.finish(new TarcilError('NOT_FOUND', `job ${this.jobId} was deleted (finished jobs are deleted once their retention period is over)`, { field: 'job_id' }));
        return;
      }
      if (rec) {
        this.job = rec;
        this.jobChanged = true;
      }
      return;
    }
    const ref = this.live.parseTask(kv.key);
    if (!ref || this.resync) return;
    // Already in the snapshot: its block was read at or after this change.
    if (revision <= (this.blockRevs[Math.floor(ref.index / SNAPSHOT_BLOCK)] ?? 0)) return;
    this.pending.set(ref.index, deleted ? null : (this.d.hub.record<LiveTaskRecord>(kv) ?? null));
    if (this.pending.size > this.d.limits.maxPendingTasks) {
      // Too far behind to keep every change: drop them, send the whole job again when it reads.
      this.pending.clear();
      this.resync = true;
    }
  }

  private flush(): void {
    if (this.closed || this.flushing || this.waitingDrain) return;
    if (!this.resync && !this.jobChanged && this.pending.size === 0) return;
    this.flushing = true;
    const run = async (): Promise<void> => {
      if (this.resync) {
        this.snapshotDone = false;
        await this.snapshot();
        return;
      }
      const job = this.job as LiveJobRecord;
      const rev = this.pendingRev;
      const changed = [...this.pending];
      this.pending.clear();
      this.jobChanged = false;
      // The job as sent, made again only when its record changed (most events change tasks only).
      if (this.jobProto?.rec !== job) this.jobProto = { rec: job, proto: jobToProto(this.jobId, job, job.owner ?? '') };
      await this.sendParts(this.jobProto.proto, rev, changed.length, true, (from, to) =>
        changed.slice(from, to).map(([index, t]) => (t ? taskToProto(t) : { index, state: 'deleted' })),
      );
      if (isFinalJob(job.state)) this.finish();
    };
    void run()
      .catch((err: unknown) => this.finish(err))
      .finally(() => {
        this.flushing = false;
        this.flush();
      });
  }

  /**
   * Sends `count` tasks in parts of tasksPerEvent, each made by `part` when it is sent and on its
   * own turn of the event loop; `more` is set on every part but the last of the last batch (a last
   * batch of no tasks still sends the job).
   */
  private async sendParts(job: Job, revision: number, count: number, last: boolean, part: (from: number, to: number) => Task[]): Promise<void> {
    const per = this.d.limits.tasksPerEvent;
    const parts = Math.ceil(count / per) || (last ? 1 : 0);
    for (let i = 0; i < parts && !this.closed; i++) {
      if (i > 0) await laterTurn();
      if (this.closed) return;
      const ev: JobEvent = { job, revision, tasks: part(i * per, Math.min(count, (i + 1) * per)), more: !last || i < parts - 1 };
      if (!ev.more) this.lastSentRev = Math.max(this.lastSentRev, revision);
      if (!this.call.write(ev)) await this.drain();
    }
  }

  /** Waits until the client has read what was written, or drops it after slowConsumerMs. */
  private drain(): Promise<void> {
    this.waitingDrain = true;
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(this.slowTimer);
        this.call.off('drain', done);
        this.waitingDrain = false;
        resolve();
      };
      this.call.on('drain', done);
      this.slowTimer = setTimeout(() => {
        done();
        this.finish(new TarcilError('RESOURCE_EXHAUSTED', `the client read nothing for ${this.d.limits.slowConsumerMs} ms; the stream was dropped (watch again)`));
      }, this.d.limits.slowConsumerMs);
      this.slowTimer.unref();
    });
  }

  finish(err?: unknown): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.slowTimer);
    this.off?.();
    this.pending.clear();
    this.early = [];
    if (err === undefined) {
      this.call.end();
      return;
    }
    endStreamWithError(this.call, err);
  }
}
