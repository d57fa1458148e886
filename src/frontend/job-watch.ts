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
 *
 * Here: the hub and the per-call JobStream. The generation is in job-watch-generation.ts; the
 * limits, pacing constants and encoded events are in job-watch-events.ts.
 */
import type * as grpc from '@grpc/grpc-js';
import { parseJson } from '../state/records.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, KeyValue, WatchBatch, WatchHandle } from '../store/types.ts';
import { TarcilError } from '../util/errors.ts';
import { callTransport, dropUnread, type CallTransport } from '../rpc/connection-limits.ts';
import type { JobEvent } from '../rpc/gen/tarcil/v1/JobEvent.ts';
import type { WatchJobRequest__Output } from '../rpc/gen/tarcil/v1/WatchJobRequest.ts';
import { endStreamWithError } from '../rpc/grpc.ts';
import { Generation } from './job-watch-generation.ts';
import { DEFAULT_JOB_WATCH_LIMITS, EncodedJobEvent, PUMP_SLICE_MS, type Frame, type JobWatchLimits, type Listener } from './job-watch-events.ts';

export { blockPrefix, DEFAULT_JOB_WATCH_LIMITS, EncodedJobEvent, SNAPSHOT_BLOCK, type JobWatchLimits } from './job-watch-events.ts';

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
    EncodedJobEvent.warm();
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
      throw new TarcilError(
        'RESOURCE_EXHAUSTED',
        `this front-end serves ${this.total} WatchJob streams, its limit (maxWatches ${l.maxWatches}): watch through another front-end, or later`,
      );
    }
    if (job >= l.maxWatchesPerJob) {
      throw new TarcilError(
        'RESOURCE_EXHAUSTED',
        `job ${jobId} has ${job} WatchJob streams on this front-end, the most it serves for one job (maxWatchesPerJob ${l.maxWatchesPerJob})`,
      );
    }
    if (conn >= l.maxWatchesPerConnection) {
      throw new TarcilError(
        'RESOURCE_EXHAUSTED',
        `this connection has ${conn} WatchJob streams open, the most one connection may have (maxWatchesPerConnection ${l.maxWatchesPerConnection}): open another connection`,
      );
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
      worst.drop(
        `the client took nothing of this stream for ${Math.round(now - worst.lastProgressAt)} ms while this front-end's queue for WatchJob streams was full (totalQueueBytes ${l.totalQueueBytes}); it was dropped: watch again`,
      );
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
      if (now - s.lastProgressAt >= l.slowConsumerMs)
        s.drop(`the client took nothing of this stream for ${l.slowConsumerMs} ms (slowConsumerMs); it was dropped: watch again`);
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
