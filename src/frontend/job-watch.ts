/**
 * WatchJob streams: one pair of store watches for all the watched jobs of a process (JobWatchHub),
 * and the events of a job made and encoded once for all the streams that watch it.
 *
 * A generation (Generation) is the event sequence of one job from one snapshot on: the job and all
 * its tasks, read block by block, then coalesced deltas (an event carries the job summary and only
 * the tasks whose records changed since the last one). Each event is encoded once; the streams of
 * the generation write the same bytes, each at its own pace (its cursor in the sequence). Streams
 * that open before a generation has read its snapshot join it, so a crowd of watchers opened
 * together costs one read and one encoding of each event; a stream that opens later starts a new
 * generation, whose snapshot is read after it arrived (a client never sees a job older than the
 * one its call found).
 *
 * What a stream may hold, and for how long (JobWatchLimits):
 * - bytes written to the call and not yet taken by the client (`streamQueueBytes` per stream,
 *   `totalQueueBytes` for the process): a stream at its bound writes nothing more until the client
 *   takes some; when the process's bound is reached, the stream that has taken nothing for longest
 *   (a second at least) is dropped;
 * - a stream that takes nothing for `slowConsumerMs` while it has bytes waiting is dropped: its
 *   HTTP/2 stream is reset (ENHANCE_YOUR_CALM, which gRPC clients report as RESOURCE_EXHAUSTED),
 *   which frees what it held at once (trailers could not pass the unread data);
 * - a stream more than `maxBehindBytes` behind its job's newest event leaves its generation and
 *   starts again with a fresh snapshot once it has taken what it was sent;
 * - the number of streams: `maxWatches` for the process, `maxWatchesPerJob`, and
 *   `maxWatchesPerConnection`; one more is refused with RESOURCE_EXHAUSTED naming the limit.
 */
import type * as grpc from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import { isFinalJob, LiveKeys, type LiveJobRecord, type LiveTaskRecord } from '../state/live-records.ts';
import { parseJson } from '../state/records.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, KeyValue, TxnResult, WatchBatch, WatchHandle } from '../store/types.ts';
import { TarcilError } from '../util/errors.ts';
import { callTransport, DEFAULT_SLOW_CONSUMER_MS, dropUnread, type CallTransport } from './connection-limits.ts';
import { jobToProto, taskToProto } from './convert.ts';
import type { Job } from './gen/tarcil/v1/Job.ts';
import type { JobEvent, JobEvent__Output } from './gen/tarcil/v1/JobEvent.ts';
import type { Task } from './gen/tarcil/v1/Task.ts';
import type { WatchJobRequest__Output } from './gen/tarcil/v1/WatchJobRequest.ts';
import { endStreamWithError } from './grpc.ts';
import { ENCODED, type PreEncoded } from './pre-encoded.ts';
import { LOADER_OPTIONS, protoRoot } from './proto-root.ts';
import { laterTurn } from '../util/turns.ts';

export interface JobWatchLimits {
  /** Tasks per message (default 1000: a message stays well under gRPC's 4 MiB default). */
  tasksPerEvent: number;
  /** Bytes one stream may have written and not yet sent to its client before it waits. */
  streamQueueBytes: number;
  /** The same, for all the streams of the process together. */
  totalQueueBytes: number;
  /** A stream whose client takes nothing of what it was sent for this long is dropped. */
  slowConsumerMs: number;
  /** A stream this many bytes behind its job's newest event starts over with a fresh snapshot. */
  maxBehindBytes: number;
  /** WatchJob streams the process serves at once. */
  maxWatches: number;
  /** WatchJob streams of one job the process serves at once. */
  maxWatchesPerJob: number;
  /** WatchJob streams one connection may have open at once. */
  maxWatchesPerConnection: number;
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

/** The pause before a job is sent again after a late change, and between its reads. */
const LATE_REREAD_MS = 50;

/** Changes applied per turn when a snapshot's queued changes are caught up. */
const EARLY_SLICE = 1000;

/** Streams are given their events for this long per turn of the event loop, then the loop turns. */
const PUMP_SLICE_MS = 8;

/** A generation looks for streams it can forget events for (or that fell behind) after this many more bytes. */
const TRIM_EVERY_BYTES = 1 << 20;

export const DEFAULT_JOB_WATCH_LIMITS: JobWatchLimits = {
  tasksPerEvent: 1000,
  streamQueueBytes: 256 * 1024,
  totalQueueBytes: 64 * 2 ** 20,
  slowConsumerMs: DEFAULT_SLOW_CONSUMER_MS,
  maxBehindBytes: 8 * 2 ** 20,
  maxWatches: 20_000,
  maxWatchesPerJob: 10_000,
  maxWatchesPerConnection: 1000,
};

// ---------------------------------------------------------------------------------------------
// Events encoded once.

let eventType: protobuf.Type | undefined;
const { includeDirs: _dirs, ...CONVERT } = LOADER_OPTIONS;

function jobEventType(): protobuf.Type {
  return (eventType ??= protoRoot().lookupType('tarcil.v1.JobEvent'));
}

/** A JobEvent as the bytes every stream of a generation writes; its fields decode them when read. */
export class EncodedJobEvent implements PreEncoded {
  readonly [ENCODED]: Buffer;
  private decoded: JobEvent__Output | undefined;

  constructor(bytes: Buffer) {
    this[ENCODED] = bytes;
  }

  static encode(ev: JobEvent): EncodedJobEvent {
    const t = jobEventType();
    const b = t.encode(t.fromObject(ev)).finish();
    return new EncodedJobEvent(Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  }

  private get event(): JobEvent__Output {
    const t = jobEventType();
    return (this.decoded ??= t.toObject(t.decode(this[ENCODED]), CONVERT) as JobEvent__Output);
  }

  get job(): JobEvent__Output['job'] {
    return this.event.job;
  }
  get revision(): number {
    return this.event.revision;
  }
  get tasks(): JobEvent__Output['tasks'] {
    return this.event.tasks;
  }
  get more(): boolean {
    return this.event.more;
  }
}

interface Frame {
  ev: EncodedJobEvent;
  size: number;
  revision: number;
  more: boolean;
  /** The job is final in this event: a stream ends after its last part. */
  final: boolean;
  /** Bytes of the generation's events before this one. */
  offset: number;
}

type Listener = { onBatch(b: WatchBatch): void; onError(err: TarcilError): void };

/** The store watches the hub shares, open while any job has a stream. */
interface Shared {
  ready: Promise<void>;
  watches: WatchHandle[];
  failed: boolean;
}

/**
 * Two store watches (job records, task records) for every watched job of the process, opened
 * with the first stream and closed with the last; each change is handed to the generations of
 * its job by a map lookup, so the store's work per change does not grow with the number of
 * streams. The hub also keeps the process's counts: streams per job and per connection, bytes
 * queued, and which streams take nothing.
 */
export class JobWatchHub {
  /** The limits of streams that bring none (each JobStream brings its own, the service's). */
  readonly limits: JobWatchLimits;
  private readonly topics = new Map<string, Set<Listener>>();
  private shared: Shared | undefined;
  private dispatching = false;
  /**
   * Records parsed from the changes being handed out, shared by the generations of their job;
   * emptied after each batch, so that it holds nothing the store's history keeps alive.
   */
  private readonly parsed = new Map<KeyValue, object | null>();
  /** The generation of each job that has not read its snapshot yet: a new stream joins it. */
  private readonly joinable = new Map<string, Generation>();
  private readonly live = new Set<Generation>();
  private total = 0;
  private readonly perJob = new Map<string, number>();
  private readonly perConnection = new WeakMap<object, number>();
  /** Bytes written to streams and not yet taken by their clients. */
  queuedBytes = 0;
  /** Streams with bytes not yet taken. */
  private readonly owing = new Set<JobStream>();
  /** Streams waiting for the process's queue to have room. */
  private readonly budgetWaiters = new Set<JobStream>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private readonly pumpQueue: JobStream[] = [];
  private pumpHead = 0;
  private pumping = false;

  constructor(
    private readonly store: ClusterStore,
    private readonly keys: Keys,
    limits: Partial<JobWatchLimits> = {},
  ) {
    this.limits = { ...DEFAULT_JOB_WATCH_LIMITS, ...limits };
  }

  /** Store watches open now (0 or 2, whatever the number of streams). */
  get storeWatches(): number {
    return this.shared?.watches.length ?? 0;
  }

  /** WatchJob streams admitted and not finished. */
  get watches(): number {
    return this.total;
  }

  /** Generations making events now (one per snapshot read, shared by the streams that joined it). */
  get generations(): number {
    return this.live.size;
  }

  /** The JSON record a change carries, parsed once for all the generations it reaches. */
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

  /**
   * Counts a new stream of `jobId` on `connection`, or refuses it with RESOURCE_EXHAUSTED naming
   * the limit it would pass. Returns what gives the place back.
   */
  admit(jobId: string, connection: object | undefined, l: JobWatchLimits = this.limits): () => void {
    const job = this.perJob.get(jobId) ?? 0;
    const conn = connection ? (this.perConnection.get(connection) ?? 0) : 0;
    if (this.total >= l.maxWatches) {
      throw new TarcilError('RESOURCE_EXHAUSTED', `this front-end serves ${this.total} WatchJob streams, its limit (maxWatches ${l.maxWatches}): watch through another front-end, or later`);
    }
    if (job >= l.maxWatchesPerJob) {
      throw new TarcilError('RESOURCE_EXHAUSTED', `job ${jobId} has ${job} WatchJob streams on this front-end, the most it serves for one job (maxWatchesPerJob ${l.maxWatchesPerJob})`);
    }
    if (conn >= l.maxWatchesPerConnection) {
      throw new TarcilError('RESOURCE_EXHAUSTED', `this connection has ${conn} WatchJob streams open, the most one connection may have (maxWatchesPerConnection ${l.maxWatchesPerConnection}): open another connection`);
    }
    this.total++;
    this.perJob.set(jobId, job + 1);
    if (connection) this.perConnection.set(connection, conn + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.total--;
      const n = (this.perJob.get(jobId) ?? 1) - 1;
      if (n === 0) this.perJob.delete(jobId);
      else this.perJob.set(jobId, n);
      if (connection) this.perConnection.set(connection, (this.perConnection.get(connection) ?? 1) - 1);
    };
  }

  /** Puts `s` in the generation of its job that has not read yet, or in a new one. */
  join(s: JobStream): void {
    let g = this.joinable.get(s.jobId);
    if (!g || g.stopped) {
      g = new Generation(this, s.jobId, { store: this.store, keys: this.keys, limits: s.limits, notFound: s.notFound });
      this.joinable.set(s.jobId, g);
      this.live.add(g);
      void g.run();
    }
    g.attach(s);
  }

  /** `g` has started reading: streams that come from now on start another one. */
  reading(g: Generation): void {
    if (this.joinable.get(g.jobId) === g) this.joinable.delete(g.jobId);
  }

  gone(g: Generation): void {
    this.reading(g);
    this.live.delete(g);
  }

  /**
   * Gives `s` its events once the code running now is done (a microtask), for PUMP_SLICE_MS at
   * most with every other stream waiting, the rest on later turns of the event loop.
   */
  schedulePump(s: JobStream): void {
    if (s.inPumpQueue || s.closed) return;
    s.inPumpQueue = true;
    this.pumpQueue.push(s);
    if (!this.pumping) {
      this.pumping = true;
      queueMicrotask(() => this.runPumps());
    }
  }

  private runPumps(): void {
    const until = performance.now() + PUMP_SLICE_MS;
    while (this.pumpHead < this.pumpQueue.length) {
      const s = this.pumpQueue[this.pumpHead++] as JobStream;
      s.inPumpQueue = false;
      s.pump();
      if (this.pumpHead < this.pumpQueue.length && performance.now() >= until) {
        this.pumpQueue.splice(0, this.pumpHead);
        this.pumpHead = 0;
        setImmediate(() => this.runPumps());
        return;
      }
    }
    this.pumpQueue.length = 0;
    this.pumpHead = 0;
    this.pumping = false;
  }

  /** `s` queued `n` more bytes. */
  queued(s: JobStream, n: number): void {
    this.queuedBytes += n;
    this.owing.add(s);
    this.armSweep(s.limits);
  }

  /** `n` bytes of `s` were taken (or dropped with it). */
  taken(s: JobStream, n: number): void {
    this.queuedBytes -= n;
    if (s.queued === 0) this.owing.delete(s);
    if (this.budgetWaiters.size > 0 && this.queuedBytes < s.limits.totalQueueBytes) {
      const waiting = [...this.budgetWaiters];
      this.budgetWaiters.clear();
      for (const w of waiting) this.schedulePump(w);
    }
  }

  forget(s: JobStream): void {
    this.owing.delete(s);
    this.budgetWaiters.delete(s);
  }

  /**
   * Whether `s` may queue more now. When the process's queue is full, the stream that has taken
   * nothing for longest (a second at least) is dropped to make room; if none has, `s` waits.
   */
  mayQueue(s: JobStream): boolean {
    const l = s.limits;
    while (this.queuedBytes >= l.totalQueueBytes) {
      const now = performance.now();
      let worst: JobStream | undefined;
      for (const o of this.owing) if (o !== s && (!worst || o.lastProgressAt < worst.lastProgressAt)) worst = o;
      if (!worst || now - worst.lastProgressAt < Math.min(1000, l.slowConsumerMs)) {
        this.budgetWaiters.add(s);
        this.armSweep(l);
        return false;
      }
      worst.drop(`the client took nothing of this stream for ${Math.round(now - worst.lastProgressAt)} ms while this front-end's queue for WatchJob streams was full (totalQueueBytes ${l.totalQueueBytes}); it was dropped: watch again`);
    }
    return true;
  }

  /** Checks the streams that owe, and those waiting for room, while there are any. */
  private armSweep(l: JobWatchLimits): void {
    if (this.sweepTimer) return;
    const every = Math.max(10, Math.min(1000, l.slowConsumerMs / 2));
    this.sweepTimer = setInterval(() => this.sweep(), every);
    this.sweepTimer.unref();
  }

  private sweep(): void {
    const now = performance.now();
    for (const s of [...this.owing]) {
      const l = s.limits;
      if (now - s.lastProgressAt >= l.slowConsumerMs) s.drop(`the client took nothing of this stream for ${l.slowConsumerMs} ms (slowConsumerMs); it was dropped: watch again`);
    }
    for (const s of [...this.budgetWaiters]) {
      this.budgetWaiters.delete(s);
      this.schedulePump(s);
    }
    if (this.owing.size === 0 && this.budgetWaiters.size === 0) {
      clearInterval(this.sweepTimer);
      this.sweepTimer = undefined;
    }
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
    /** Splits a batch by job and hands each part to that job's listeners. */
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

// ---------------------------------------------------------------------------------------------

interface GenerationDeps {
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
class Generation implements Listener {
  readonly streams = new Set<JobStream>();
  /** Streams that have written every event there is: given the next one when it comes. */
  private readonly idle = new Set<JobStream>();
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
    private readonly hub: JobWatchHub,
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

  attach(s: JobStream): void {
    this.streams.add(s);
    s.gen = this;
    s.cursor = this.head;
    this.idle.add(s);
    this.minRevision = Math.max(this.minRevision, s.lastSentRev + 1);
  }

  detach(s: JobStream): void {
    this.streams.delete(s);
    this.idle.delete(s);
    if (this.streams.size === 0) this.stop();
  }

  /** `s` has written every event there is. */
  waiting(s: JobStream): void {
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
      const part = kvs;
      await this.makeParts(job, res.revision, part.length, b === blocks - 1, final, (from, to) => {
        const tasks: Task[] = [];
        for (let i = from; i < to; i++) {
          const t = parseJson<LiveTaskRecord>(part[i]);
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
    const ref = this.live.parseTask(kv.key);
    return !ref || revision <= (this.blockRevs[Math.floor(ref.index / SNAPSHOT_BLOCK)] ?? 0);
  }

  private apply(kv: KeyValue, deleted: boolean, revision: number): void {
    if (kv.key === this.d.keys.job(this.jobId)) {
      // Already in the snapshot: the job record was read at or after this change.
      if (revision <= this.snapRev) return;
      const rec = deleted ? undefined : this.hub.record<LiveJobRecord>(kv);
      if (deleted) {
        // A job is deleted only once final, and a stream ends at the final state: this one fell
        // behind by more than the retention period (or the record was removed by hand).
        this.fail(new TarcilError('NOT_FOUND', `job ${this.jobId} was deleted (finished jobs are deleted once their retention period is over)`, { field: 'job_id' }));
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
    this.pending.set(ref.index, deleted ? null : (this.hub.record<LiveTaskRecord>(kv) ?? null));
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
    const behind: JobStream[] = [];
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

// ---------------------------------------------------------------------------------------------

/** One WatchJob call: NOT_FOUND for an unknown job, else a snapshot, then deltas until final. */
export class JobStream {
  /** The generation whose events this stream writes, and the index of the next one it writes. */
  gen: Generation | undefined;
  cursor = 0;
  /** Bytes written to the call and not yet taken by the client. */
  queued = 0;
  /** When the client last took something (or, if it owed nothing then, when it was next sent some). */
  lastProgressAt = 0;
  /** The revision of the last event written whole. */
  lastSentRev = 0;
  /** The last event written was whole (or nothing was written). */
  atBoundary = true;
  closed = false;
  inPumpQueue = false;
  readonly notFound: (() => TarcilError) | undefined;
  readonly limits: JobWatchLimits;
  private readonly transport: CallTransport | undefined;
  private resyncWhenTaken = false;
  private release: (() => void) | undefined;
  private readonly started: Promise<void>;
  private markStarted: () => void = () => undefined;

  constructor(
    private readonly call: grpc.ServerWritableStream<WatchJobRequest__Output, JobEvent>,
    readonly jobId: string,
    private readonly d: { store: ClusterStore; keys: Keys; hub: JobWatchHub; limits: JobWatchLimits; notFound?: () => TarcilError },
  ) {
    this.notFound = d.notFound;
    this.limits = d.limits;
    this.transport = callTransport(call);
    this.started = new Promise<void>((resolve) => (this.markStarted = resolve));
    call.on('cancelled', () => this.finish());
    call.on('close', () => this.finish());
  }

  /**
   * Admits the stream (RESOURCE_EXHAUSTED past a limit) and resolves once its first snapshot is
   * written, or the stream has ended (NOT_FOUND for an unknown job ends it).
   */
  async start(): Promise<void> {
    if (this.closed) return;
    this.release = this.d.hub.admit(this.jobId, this.transport?.connection, this.limits);
    this.d.hub.join(this);
    await this.started;
  }

  /** Writes the events of its generation while the client takes them and the queues have room. */
  pump(): void {
    const l = this.limits;
    for (;;) {
      const g = this.gen;
      if (this.closed || !g) return;
      if (this.cursor >= g.head) {
        g.waiting(this);
        return;
      }
      // A write callback pumps again when the client takes some.
      if (this.queued >= l.streamQueueBytes) return;
      if (!this.d.hub.mayQueue(this)) return;
      const f = g.frame(this.cursor);
      if (!f) {
        // Forgotten: only events every stream had written are; this one was not written.
        this.fellBehind();
        return;
      }
      this.cursor++;
      this.write(f);
      this.atBoundary = !f.more;
      if (!f.more) {
        this.lastSentRev = Math.max(this.lastSentRev, f.revision);
        this.markStarted();
      }
      if (f.final) {
        this.finish();
        return;
      }
    }
  }

  private write(f: Frame): void {
    const n = f.size;
    if (this.queued === 0) this.lastProgressAt = performance.now();
    this.queued += n;
    this.d.hub.queued(this, n);
    this.call.write(f.ev, () => this.taken(n));
  }

  /** The client took `n` bytes. */
  private taken(n: number): void {
    if (this.closed) return;
    this.queued -= n;
    this.lastProgressAt = performance.now();
    this.d.hub.taken(this, n);
    if (this.resyncWhenTaken) {
      if (this.queued === 0) this.rejoin();
      return;
    }
    this.d.hub.schedulePump(this);
  }

  /** Too far behind its generation: starts again with a fresh snapshot once the client has taken what it was sent. */
  fellBehind(): void {
    this.gen?.detach(this);
    this.gen = undefined;
    this.resyncWhenTaken = true;
    if (this.queued === 0) this.rejoin();
  }

  private rejoin(): void {
    this.resyncWhenTaken = false;
    if (this.closed) return;
    this.d.hub.join(this);
  }

  /**
   * Drops a stream whose client does not take what it is sent: its HTTP/2 stream is reset
   * (ENHANCE_YOUR_CALM: RESOURCE_EXHAUSTED to a gRPC client), which frees what it holds; trailers
   * would wait behind the data the client does not read. Without a transport to reset, the status
   * is sent the ordinary way.
   */
  drop(message: string): void {
    if (this.closed) return;
    const unsent = this.queued > 0;
    this.close();
    dropUnread(this.call, message, unsent);
  }

  /** Leaves the generation and gives back the stream's place and queued bytes. */
  private close(): void {
    this.closed = true;
    this.release?.();
    const q = this.queued;
    this.queued = 0;
    this.d.hub.taken(this, q);
    this.d.hub.forget(this);
    this.gen?.detach(this);
    this.gen = undefined;
    this.markStarted();
  }

  finish(err?: unknown): void {
    if (this.closed) return;
    const unsent = this.queued > 0;
    this.close();
    if (err === undefined) this.call.end();
    else endStreamWithError(this.call, err);
    // The status goes out after what the client has not taken yet: a client that takes none of it
    // for slowConsumerMs more loses the stream (and what it holds) all the same.
    if (unsent && this.transport) {
      const transport = this.transport;
      const t = setTimeout(() => transport.reset(), this.limits.slowConsumerMs);
      t.unref();
      this.call.once('close', () => clearTimeout(t));
    }
  }
}
