/**
 * A generation of a watched job (see job-watch.ts): its events from one snapshot on, read block by
 * block and then coalesced from the store's changes, each encoded once, and the streams that write
 * them at their own pace. It knows the hub and the streams only through GenerationHub and
 * GenerationStream, which JobWatchHub and JobStream are.
 */
import { isFinalJob, LiveKeys, type LiveJobRecord, type LiveTaskRecord } from '../state/live-records.ts';
import { parseJson } from '../state/records.ts';
import { blockEntries, chunkFirst, entryRecord, recordsOfTaskKey, type BlockEntry } from '../state/task-chunks.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, KeyValue, TxnResult, WatchBatch } from '../store/types.ts';
import { TarcilError } from '../util/errors.ts';
import { jobToProto, taskToProto } from './convert.ts';
import type { Job } from '../rpc/gen/tarcil/v1/Job.ts';
import type { Task } from '../rpc/gen/tarcil/v1/Task.ts';
import {
  blockPrefix,
  EARLY_SLICE,
  EncodedJobEvent,
  LATE_REREAD_MS,
  SNAPSHOT_BLOCK,
  TRIM_EVERY_BYTES,
  type Frame,
  type JobWatchLimits,
  type Listener,
} from './job-watch-events.ts';
import { ENCODED } from '../rpc/pre-encoded.ts';
import { laterTurn } from '../util/turns.ts';

/** What a generation uses of its hub (JobWatchHub). */
export interface GenerationHub {
  subscribe(jobId: string, l: Listener): Promise<() => void>;
  reading(g: Generation): void;
  gone(g: Generation): void;
  record<T extends object>(kv: KeyValue): T | undefined;
  schedulePump(s: GenerationStream): void;
}

/** What a generation uses of a stream (JobStream). */
export interface GenerationStream {
  gen: Generation | undefined;
  cursor: number;
  lastSentRev: number;
  atBoundary: boolean;
  fellBehind(): void;
  finish(err?: unknown): void;
}

export interface GenerationDeps {
  store: ClusterStore;
  keys: Keys;
  limits: JobWatchLimits;
  notFound: (() => TarcilError) | undefined;
}

/**
 * The events of one job from one snapshot on, encoded once, and the streams that write them: a
 * snapshot followed by coalesced deltas, as one stream would send them, kept from the earliest
 * event a stream of the generation has not written yet.
 */
export class Generation implements Listener {
  readonly streams = new Set<GenerationStream>();
  /** Streams that have written every event there is: given the next one when it comes. */
  private readonly idle = new Set<GenerationStream>();
  private frames: Frame[] = [];
  /** The index of frames[0] in the generation's sequence. */
  private base = 0;
  /** Bytes of every event made so far. */
  private bytes = 0;
  private trimAt = TRIM_EVERY_BYTES;
  /** The snapshot is read at this revision or later (above what its streams were last sent). */
  private minRevision = 0;
  /** Makes no more events: stopped (no stream left, or failed), or the job's final event is made. */
  stopped = false;
  private failed = false;
  private off: (() => void) | undefined;
  private readonly live: LiveKeys;
  /**
   * The revision the job record of the last snapshot was read at: a change of the job record at or
   * below it is already in what was sent. Job and task changes come through two store watches,
   * each in order but not in order with each other (etcd answers each watcher on its own), so
   * what was sent is tracked per kind of record, never by the newest revision sent: a job change
   * that comes after a later task change is still new.
   */
  private snapRev = 0;
  /**
   * The revision of the last event made whole (more=false). A change at or below it that comes
   * after it (one watch behind the other) cannot go out under its own revision, which would not
   * increase along the stream: the generation sends the job again, read at a later revision.
   */
  private lastRev = 0;
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

  constructor(
    private readonly hub: GenerationHub,
    readonly jobId: string,
    private readonly d: GenerationDeps,
  ) {
    this.live = new LiveKeys(d.keys);
  }

  /** One past the newest event. */
  get head(): number {
    return this.base + this.frames.length;
  }

  frame(i: number): Frame | undefined {
    return this.frames[i - this.base];
  }

  /** Bytes from event `i` to the newest. */
  behind(i: number): number {
    return this.bytes - (this.frame(i)?.offset ?? this.bytes);
  }

  attach(s: GenerationStream): void {
    this.streams.add(s);
    s.gen = this;
    s.cursor = this.head;
    this.idle.add(s);
    this.minRevision = Math.max(this.minRevision, s.lastSentRev + 1);
  }

  detach(s: GenerationStream): void {
    this.streams.delete(s);
    this.idle.delete(s);
    if (this.streams.size === 0) this.stop();
  }

  /** `s` has written every event there is. */
  waiting(s: GenerationStream): void {
    this.idle.add(s);
  }

  async run(): Promise<void> {
    try {
      this.off = await this.hub.subscribe(this.jobId, this);
      if (this.stopped) {
        this.off();
        return;
      }
      await this.snapshot();
    } catch (err) {
      this.fail(err);
    }
  }

  onError(err: TarcilError): void {
    this.fail(new TarcilError('UNAVAILABLE', `the watch of job ${this.jobId} was interrupted (${err.message}); watch again`));
  }

  /** Makes no more events; forgets them too once no stream is left to write them. */
  private stop(): void {
    if (!this.stopped) {
      this.stopped = true;
      this.off?.();
      this.off = undefined;
      this.pending.clear();
      this.early = [];
      this.hub.gone(this);
    }
    if (this.streams.size === 0) this.frames = [];
  }

  /** Ends every stream of the generation with `err`. */
  private fail(err: unknown): void {
    if (this.failed) return;
    this.failed = true;
    this.stop();
    for (const s of [...this.streams]) s.finish(err);
  }

  /**
   * Reads the job and all its tasks, in parts. The job and its first block of SNAPSHOT_BLOCK task
   * indexes are read at one revision, each further block at its own (later) one, on later turns
   * of the event loop, and each part is parsed and encoded on its own turn: a 100,000-task job is
   * never read, parsed and serialized in one go. Every part carries the first block's revision;
   * changes that come later than the revision a task was read at follow as deltas.
   */
  private async snapshot(): Promise<void> {
    const k = this.d.keys;
    // The first read waits for a turn of its own: the streams that come meanwhile join this
    // generation, and generations of several jobs do not all read and encode in one turn.
    await laterTurn();
    if (this.stopped) return;
    this.hub.reading(this);
    let res = await this.read();
    // Read again after a late change, or for streams already sent later revisions: at a revision
    // past the last one sent, so that revisions increase along every stream (the store moves on;
    // until it does, the generation waits).
    while (!this.stopped && res.revision < this.minRevision) {
      await new Promise((r) => setTimeout(r, LATE_REREAD_MS));
      if (this.stopped) return;
      res = await this.read();
    }
    if (this.stopped) return;
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
    const final = isFinalJob(rec.state);
    let kvs = res.responses[1] ?? [];
    for (let b = 0; b < blocks && !this.stopped; b++) {
      if (b > 0) {
        await laterTurn();
        if (this.stopped) return;
        const next = await this.d.store.range(blockPrefix(k, this.jobId, b));
        revs.push(next.revision);
        kvs = next.kvs;
      }
      // The tasks with a record, their own or their chunk's (state/task-chunks.ts), in index order.
      const entries = blockEntries(k, kvs, (key) => this.live.parseTask(key));
      const order = [...entries.keys()].sort((x, y) => x - y);
      await this.makeParts(job, res.revision, order.length, b === blocks - 1, final, (from, to) => {
        const tasks: Task[] = [];
        for (let i = from; i < to; i++) {
          const t = entryRecord(entries.get(order[i] as number) as BlockEntry);
          if (t) tasks.push(taskToProto(t));
        }
        return tasks;
      });
    }
    if (this.stopped) return;
    // The changes that came while the blocks were read, applied a slice per turn (a second of a
    // busy job's changes is thousands of records to parse); what comes meanwhile joins the queue.
    let applied = 0;
    for (let i = 0; i < this.early.length && !this.stopped; i++) {
      const b = this.early[i] as WatchBatch;
      for (const ev of b.events) this.apply(ev.kv, ev.type === 'delete', b.revision);
      this.pendingRev = Math.max(this.pendingRev, b.revision);
      applied += b.events.length;
      if (applied >= EARLY_SLICE && i + 1 < this.early.length) {
        applied = 0;
        await laterTurn();
      }
    }
    if (this.stopped) return;
    this.early = [];
    this.snapshotDone = true;
    if (!final) this.flush();
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

  onBatch(b: WatchBatch): void {
    if (this.stopped) return;
    if (!this.snapshotDone) {
      this.early.push(b);
      return;
    }
    if (b.revision <= this.lastRev) {
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
      if (this.stopped) return;
      this.pending.clear();
      this.resync = true;
      this.flush();
    }, LATE_REREAD_MS).unref();
  }

  /**
   * Makes what is pending into an event on the next turn of the event loop: the changes of one
   * burst (tasks ending together, a commit of many placements) leave as one event, and its
   * making does not lengthen the turn that made the changes.
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
    const index = this.live.parseTask(kv.key)?.index ?? chunkFirst(kv.key);
    return index === undefined || revision <= (this.blockRevs[Math.floor(index / SNAPSHOT_BLOCK)] ?? 0);
  }

  private apply(kv: KeyValue, deleted: boolean, revision: number): void {
    if (kv.key === this.d.keys.job(this.jobId)) {
      // Already in the snapshot: the job record was read at or after this change.
      if (revision <= this.snapRev) return;
      const rec = deleted ? undefined : this.hub.record<LiveJobRecord>(kv);
      if (deleted) {
        // A job is deleted only once final, and a stream ends at the final state: this one fell
        // behind by more than the retention period (or the record was removed by hand).
        this.fail(
          new TarcilError('NOT_FOUND', `job ${this.jobId} was deleted (finished jobs are deleted once their retention period is over)`, { field: 'job_id' }),
        );
        return;
      }
      if (rec) {
        this.job = rec;
        this.jobChanged = true;
      }
      return;
    }
    if (this.resync) return;
    const ref = this.live.parseTask(kv.key);
    const first = ref ? undefined : chunkFirst(kv.key);
    const index = ref?.index ?? first;
    // Already in the snapshot: its block was read at or after this change.
    if (index === undefined || revision <= (this.blockRevs[Math.floor(index / SNAPSHOT_BLOCK)] ?? 0)) return;
    if (ref) {
      this.pending.set(ref.index, deleted ? null : (this.hub.record<LiveTaskRecord>(kv) ?? null));
      return;
    }
    // A chunk record: the tasks its placement started run; an outcome record: its tasks ended
    // (either is only ever deleted with its job).
    if (!deleted) for (const t of recordsOfTaskKey(this.live.keys, kv)) this.pending.set(t.index, t);
  }

  private flush(): void {
    if (this.stopped || this.flushing) return;
    if (!this.resync && !this.jobChanged && this.pending.size === 0) return;
    this.flushing = true;
    const run = async (): Promise<void> => {
      if (this.resync) {
        this.snapshotDone = false;
        this.minRevision = Math.max(this.minRevision, this.lastRev + 1);
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
      await this.makeParts(this.jobProto.proto, rev, changed.length, true, isFinalJob(job.state), (from, to) =>
        changed.slice(from, to).map(([index, t]) => (t ? taskToProto(t) : { index, state: 'deleted' })),
      );
    };
    void run()
      .catch((err: unknown) => this.fail(err))
      .finally(() => {
        this.flushing = false;
        this.flush();
      });
  }

  /**
   * Makes `count` tasks into events of tasksPerEvent, each made by `part` and encoded on its own
   * turn of the event loop; `more` is set on every part but the last of the last batch (a last
   * batch of no tasks still carries the job). The job is final after the last part if `final`.
   */
  private async makeParts(job: Job, revision: number, count: number, last: boolean, final: boolean, part: (from: number, to: number) => Task[]): Promise<void> {
    const per = this.d.limits.tasksPerEvent;
    const parts = Math.ceil(count / per) || (last ? 1 : 0);
    for (let i = 0; i < parts && !this.stopped; i++) {
      if (i > 0) await laterTurn();
      if (this.stopped) return;
      const more = !last || i < parts - 1;
      const ev = EncodedJobEvent.encode({ job, revision, tasks: part(i * per, Math.min(count, (i + 1) * per)), more });
      this.append({ ev, size: ev[ENCODED].length, revision, more, final: final && !more, offset: this.bytes });
    }
  }

  private append(f: Frame): void {
    this.frames.push(f);
    this.bytes += f.size;
    if (!f.more) this.lastRev = Math.max(this.lastRev, f.revision);
    // The job's last event: the streams end once they have written it.
    if (f.final) this.stop();
    const idle = [...this.idle];
    this.idle.clear();
    for (const s of idle) this.hub.schedulePump(s);
    if (this.bytes >= this.trimAt) this.trim();
  }

  /**
   * Forgets the events every stream has written, and sends the streams too far behind to a fresh
   * snapshot (at an event's end: a client never gets part of an event and then another one).
   */
  private trim(): void {
    this.trimAt = this.bytes + TRIM_EVERY_BYTES;
    let min = this.head;
    const behind: GenerationStream[] = [];
    for (const s of this.streams) {
      if (s.atBoundary && this.behind(s.cursor) > this.d.limits.maxBehindBytes) behind.push(s);
      else min = Math.min(min, s.cursor);
    }
    for (const s of behind) s.fellBehind();
    if (min > this.base) {
      this.frames.splice(0, min - this.base);
      this.base = min;
    }
  }
}
