/**
 * WatchJob streams: one store watch per watched job shared by all its streams (JobWatchHub), and
 * per stream a snapshot followed by coalesced deltas, written with backpressure (JobStream).
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
import type { ClusterStore, KeyValue, WatchBatch, WatchHandle } from '../store/types.ts';
import { TarcilError } from '../util/errors.ts';
import { jobToProto, taskToProto } from './convert.ts';
import type { JobEvent } from './gen/tarcil/v1/JobEvent.ts';
import type { Task } from './gen/tarcil/v1/Task.ts';
import type { WatchJobRequest__Output } from './gen/tarcil/v1/WatchJobRequest.ts';
import { endStreamWithError } from './grpc.ts';

export interface JobWatchLimits {
  /** Tasks per message (default 1000: a message stays well under gRPC's 4 MiB default). */
  tasksPerEvent: number;
  /** Distinct changed tasks held for a client that is behind, before falling back to a snapshot. */
  maxPendingTasks: number;
  /** A client that consumes nothing for this long is dropped with RESOURCE_EXHAUSTED. */
  slowConsumerMs: number;
}

export const DEFAULT_JOB_WATCH_LIMITS: JobWatchLimits = { tasksPerEvent: 1000, maxPendingTasks: 20_000, slowConsumerMs: 30_000 };

type Listener = { onBatch(b: WatchBatch): void; onError(err: TarcilError): void };

interface Topic {
  listeners: Set<Listener>;
  ready: Promise<void>;
  watches: WatchHandle[];
}

/** One pair of store watches (the job record, its tasks) per job with at least one stream. */
export class JobWatchHub {
  private readonly topics = new Map<string, Topic>();

  constructor(
    private readonly store: ClusterStore,
    private readonly keys: Keys,
  ) {}

  /** Resolves once the store watch runs: every change after that reaches `l`. */
  async subscribe(jobId: string, l: Listener): Promise<() => void> {
    let t = this.topics.get(jobId);
    if (!t) {
      const topic: Topic = { listeners: new Set(), watches: [], ready: Promise.resolve() };
      topic.ready = this.open(jobId, topic);
      this.topics.set(jobId, topic);
      t = topic;
    }
    t.listeners.add(l);
    const topic = t;
    const off = (): void => {
      topic.listeners.delete(l);
      if (topic.listeners.size === 0 && this.topics.get(jobId) === topic) {
        this.topics.delete(jobId);
        void topic.ready.finally(() => Promise.all(topic.watches.map((w) => w.close().catch(() => undefined))));
      }
    };
    try {
      await topic.ready;
    } catch (err) {
      off();
      throw err;
    }
    return off;
  }

  private async open(jobId: string, topic: Topic): Promise<void> {
    const jobKey = this.keys.job(jobId);
    const from = (await this.store.revision()) + 1;
    const fail = (err: TarcilError): void => {
      if (this.topics.get(jobId) === topic) this.topics.delete(jobId);
      for (const l of [...topic.listeners]) l.onError(err);
      void Promise.all(topic.watches.map((w) => w.close().catch(() => undefined)));
    };
    const deliver = (b: WatchBatch): void => {
      for (const l of [...topic.listeners]) l.onBatch(b);
    };
    topic.watches.push(
      await this.store.watch({
        prefix: jobKey,
        fromRevision: from,
        onEvents: (b) => {
          const events = b.events.filter((e) => e.kv.key === jobKey);
          if (events.length > 0) deliver({ revision: b.revision, events });
        },
        onError: fail,
      }),
    );
    topic.watches.push(await this.store.watch({ prefix: this.keys.tasks(jobId), fromRevision: from, onEvents: deliver, onError: fail }));
  }
}

/** One WatchJob call: NOT_FOUND for an unknown job, else a snapshot, then deltas until final. */
export class JobStream {
  private readonly live: LiveKeys;
  private closed = false;
  private off: (() => void) | undefined;
  /** Events with a revision at or below this are already in what was sent. */
  private sentRev = 0;
  private snapshotDone = false;
  private early: WatchBatch[] = [];
  private job: LiveJobRecord | undefined;
  private jobChanged = false;
  private readonly pending = new Map<number, LiveTaskRecord | null>();
  private pendingRev = 0;
  private resync = false;
  private flushing = false;
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

  /** Reads the job and all its tasks at one revision and sends them, in parts. */
  private async snapshot(): Promise<void> {
    const k = this.d.keys;
    const res = await this.d.store.txn({ compare: [], success: [{ type: 'get', key: k.job(this.jobId) }, { type: 'get', key: k.tasks(this.jobId), prefix: true }] });
    if (this.closed) return;
    const rec = parseJson<LiveJobRecord>(res.responses[0]?.[0]);
    if (!rec) throw this.d.notFound?.() ?? new TarcilError('NOT_FOUND', `job ${this.jobId} does not exist`, { field: 'job_id' });
    this.job = rec;
    const tasks: Task[] = [];
    for (const kv of res.responses[1] ?? []) {
      const t = parseJson<LiveTaskRecord>(kv);
      if (t) tasks.push(taskToProto(t));
    }
    this.pending.clear();
    this.resync = false;
    this.jobChanged = false;
    this.sentRev = res.revision;
    await this.writeParts(rec, tasks, res.revision);
    this.snapshotDone = true;
    const early = this.early;
    this.early = [];
    for (const b of early) this.onBatch(b);
    if (isFinalJob(rec.state)) this.finish();
    else this.flush();
  }

  private onBatch(b: WatchBatch): void {
    if (this.closed) return;
    if (!this.snapshotDone) {
      this.early.push(b);
      return;
    }
    if (b.revision <= this.sentRev) return;
    for (const ev of b.events) this.apply(ev.kv, ev.type === 'delete');
    this.pendingRev = Math.max(this.pendingRev, b.revision);
    this.flush();
  }

  private apply(kv: KeyValue, deleted: boolean): void {
    if (kv.key === this.d.keys.job(this.jobId)) {
      const rec = deleted ? undefined : parseJson<LiveJobRecord>(kv);
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
    this.pending.set(ref.index, deleted ? null : (parseJson<LiveTaskRecord>(kv) ?? null));
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
      const tasks: Task[] = [];
      for (const [index, t] of this.pending) tasks.push(t ? taskToProto(t) : { index, state: 'deleted' });
      this.pending.clear();
      this.jobChanged = false;
      this.sentRev = rev;
      await this.writeParts(job, tasks, rev);
      if (isFinalJob(job.state)) this.finish();
    };
    void run()
      .catch((err: unknown) => this.finish(err))
      .finally(() => {
        this.flushing = false;
        this.flush();
      });
  }

  private async writeParts(rec: LiveJobRecord, tasks: Task[], revision: number): Promise<void> {
    const job = jobToProto(this.jobId, rec, rec.owner ?? '');
    const per = this.d.limits.tasksPerEvent;
    const parts = Math.max(1, Math.ceil(tasks.length / per));
    for (let i = 0; i < parts && !this.closed; i++) {
      const ev: JobEvent = { job, revision, tasks: tasks.slice(i * per, (i + 1) * per), more: i < parts - 1 };
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
