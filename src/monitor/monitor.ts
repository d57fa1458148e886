/**
 * The local monitor of one node (paper §5.2): registers the node and its RUs under a lease of its
 * own, follows its RUs, runs the tasks placed on them (node.ts), reports their rates and outcomes
 * (journalled first), and rides out a lost connection to the store for its disconnect grace.
 */
import { Follower } from '../state/follow.ts';
import { DEFAULT_LEASE_TTL_S } from '../state/lease.ts';
import { DEADLINE_WRITE_MS } from '../state/node-fence.ts';
import { parseJson } from '../state/records.ts';
import type { CordonRecord, LiveJobRecord } from '../state/live-records.ts';
import type { JobSpec, ServerSpec } from '../model/types.ts';
import { errorMessage } from '../util/errors.ts';
import { NodeConnection } from './connection.ts';
import { FileJournal, MemoryJournal } from './journal.ts';
import { stopLeftRunning } from './left-successes.ts';
import { MonitoredNode } from './node.ts';
import type { NodeHost } from './node-host.ts';
import type { LogChunk } from './task-logs.ts';
import { SharedBackoff } from '../util/backoff.ts';
import {
  DEFAULT_DISCONNECT_GRACE_MS,
  DEFAULT_LOAD_INTERVAL_MS,
  DEFAULT_LOAD_THRESHOLD,
  journalDirFor,
  LAUNCH_BACKOFF_MAX_MS,
  LAUNCH_BACKOFF_MIN_MS,
  type MonitorOptions,
  type MonitorSnapshot,
  type MonitorStats,
} from './options.ts';

export type { SlowdownModel } from './load.ts';
export { DEFAULT_DISCONNECT_GRACE_MS, MONITOR_EVENTS, type MonitorOptions, type MonitorSnapshot, type MonitorStats } from './options.ts';

/**
 * The local monitor of one node (paper §5.1): registers the server and its RUs under a lease,
 * runs what the store says its RUs hold, records each task's outcome when it ends, and watches
 * the tasks' rates. What it does per task is the node's (node.ts); this class holds the node's
 * lease and watch.
 *
 * Without the store (its lease unconfirmed for TTL − 1 s) the monitor starts nothing new but
 * keeps its tasks running, for `disconnectGraceMs` past the moment the lease could first have
 * expired; then it kills them (recorded lost once the store answers). If the lease turns out to be
 * alive it carries on; if the store says it is gone it registers under a new lease and reconciles
 * (register.ts): tasks still running here are adopted, journalled outcomes written, unknown ones
 * recorded lost, and only then the rest of its RUs are freed.
 */
export class LocalMonitor {
  readonly server: ServerSpec;
  readonly disconnectGraceMs: number;
  private readonly o: MonitorOptions;
  private readonly node: MonitoredNode;
  private readonly conn: NodeConnection;
  private follower: Follower | undefined;
  private readonly specs = new Map<string, JobSpec | null>();
  private readonly background = new Set<Promise<unknown>>();
  private closed = false;

  constructor(opts: MonitorOptions) {
    this.o = opts;
    this.server = opts.server;
    this.disconnectGraceMs = opts.disconnectGraceMs ?? DEFAULT_DISCONNECT_GRACE_MS;
    const dir = opts.journalDir ?? (opts.executor.logDir !== undefined ? journalDirFor(opts.executor.logDir) : undefined);
    const journal = dir !== undefined ? new FileJournal(dir, opts.server.id, opts.keys.prefix) : new MemoryJournal();
    const host: NodeHost<MonitoredNode> = {
      store: opts.store,
      keys: opts.keys,
      clock: opts.clock,
      log: opts.log,
      executor: opts.executor,
      loadThreshold: opts.loadThreshold ?? DEFAULT_LOAD_THRESHOLD,
      ...(opts.block !== undefined ? { block: opts.block } : {}),
      slowdown: opts.slowdown,
      disconnectGraceMs: this.disconnectGraceMs,
      lease: () => this.conn.lease,
      usableLeaseId: () => this.conn.usableLeaseId(),
      connected: () => !this.closed && this.conn.connected,
      registered: () => this.conn.registered,
      jobSpec: (job) => this.jobSpec(job),
      serverChanged: () => this.conn.syncServer(),
      track: (p) => this.track(p),
      launchBackoff: new SharedBackoff(LAUNCH_BACKOFF_MIN_MS, LAUNCH_BACKOFF_MAX_MS),
    };
    this.node = new MonitoredNode(host, opts.server, journal, opts.endpoint);
    const serverKey = opts.keys.server(opts.server.id);
    this.conn = new NodeConnection({
      store: opts.store,
      clock: opts.clock,
      log: opts.log,
      server: opts.server.id,
      ttlSeconds: opts.leaseTtlSeconds ?? DEFAULT_LEASE_TTL_S,
      graceMs: this.disconnectGraceMs,
      writeServer: async (lease) => {
        await opts.store.put(serverKey, this.node.serverJson(), { lease });
      },
      register: (lease) => this.node.register(lease),
      resume: () => {
        this.conn.syncServer();
        this.track(this.relist().catch((err: unknown) => this.o.log.warn({ err: errorMessage(err) }, 'relist failed; the watch will catch up')));
        this.node.resumed();
      },
      onDisconnected: (why) => this.node.disconnected(why),
      onGraceOut: (why) => this.node.graceOut(why),
    });
  }

  get stats(): MonitorStats {
    return this.node.stats;
  }

  get leaseId(): string | undefined {
    return this.conn.lease?.id;
  }

  /** Where outcomes are journalled: a file path, or 'memory'. */
  get journalLocation(): string {
    return this.node.journal.location;
  }

  /** Sets the advertised endpoint (known once the gRPC server has bound its port). */
  async setEndpoint(endpoint: string): Promise<void> {
    this.node.endpoint = endpoint;
    if (this.conn.registered) await this.conn.putServer();
  }

  async start(): Promise<void> {
    const left = await this.node.journal.load();
    if (left.length > 0)
      this.o.log.info({ outcomes: left.length, journal: this.node.journal.location }, 'outcomes journalled before a restart; reporting them');
    // Nothing of this life runs yet: what runs of the node's tasks is a previous life's (left-successes.ts).
    await stopLeftRunning({ executor: this.o.executor, journal: this.node.journal, server: this.server.id, log: this.o.log });
    await this.conn.registerOnce();
    this.deadlineTick();
    // Its RUs, and its cordon record (`tarcil node drain` stops its tasks at the deadline). The
    // cordon prefix also matches longer ids (s1 → s10): only the exact key is ours.
    const cordonKey = this.o.keys.cordon(this.server.id);
    this.follower = new Follower({
      store: this.o.store,
      clock: this.o.clock,
      log: this.o.log,
      prefix: [this.o.keys.serverRus(this.server.id), cordonKey],
      onSnapshot: (_kvs, _rev, [rus = [], cordons = []]) => {
        this.node.onSnapshot(rus);
        this.node.setCordon(parseJson<CordonRecord>(cordons.find((kv) => kv.key === cordonKey)));
      },
      // Either watch that ended (its start compacted away: both are quiet) lists its own prefix again.
      onRelistPrefix: (index, kvs) => {
        if (index === 0) this.node.onSnapshot(kvs);
        else this.node.setCordon(parseJson<CordonRecord>(kvs.find((kv) => kv.key === cordonKey)));
      },
      onEvent: (kv, deleted) => {
        if (kv.key === cordonKey) return this.node.setCordon(deleted ? undefined : parseJson<CordonRecord>(kv));
        if (!kv.key.startsWith(cordonKey)) {
          this.node.onRu(kv, deleted);
          this.node.recomputeLoad();
        }
      },
    });
    await this.follower.start();
    this.node.reportLeftSuccesses();
    this.loadTick();
  }

  /**
   * Writes the node's deadline for the tasks' supervisors (process executor) twice a second: it
   * moves on with each confirmed keepalive. A monitor that is frozen or dead writes nothing, and
   * the supervisors stop its tasks once the last deadline written has passed.
   */
  private deadlineTick(): void {
    const ex = this.o.executor;
    if (!ex.setDeadline) return;
    const deadline = this.conn.deadline();
    // With it, the lease the node's free RUs are bound to (a supervisor's write frees one under it).
    const lease = this.conn.registered ? this.conn.usableLeaseId() : undefined;
    if (deadline !== undefined) ex.setDeadline(this.server.id, deadline - this.o.clock.now(), lease);
    this.o.clock.setTimer(DEADLINE_WRITE_MS, () => {
      if (!this.closed) this.deadlineTick();
    });
  }

  private loadTick(): void {
    this.o.clock.setTimer(this.o.loadIntervalMs ?? DEFAULT_LOAD_INTERVAL_MS, () => {
      if (this.closed) return;
      if (this.node.runningCount > 0) this.node.recomputeLoad(true);
      this.loadTick();
    });
  }

  /**
   * Graceful stop: kills every task and records it lost (its owner places it again elsewhere),
   * reports what the journal holds, then revokes the lease so the node leaves the pool at once.
   * Outcomes the store could not take stay in the journal for the next start.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.conn.close();
    this.node.stopReporting();
    // Leave the pool first, so nothing new lands here while the tasks are stopped.
    this.node.draining = true;
    await this.conn.putServer().catch(() => undefined);
    await this.follower?.close();
    await this.node.stopAll(`monitor of ${this.server.id} shut down`);
    await Promise.allSettled([...this.background, this.conn.pending]);
    await this.node.flushJournal();
    await this.node.journal.close();
    await this.conn.revoke();
  }

  snapshot(): MonitorSnapshot {
    return this.node.snapshot();
  }

  /** A task's stdout and stderr on this node (see MonitoredNode.readLog). */
  readLog(job: string, task: number, follow: boolean, signal: AbortSignal, send: (c: LogChunk) => Promise<void>): Promise<void> {
    return this.node.readLog(job, task, follow, signal, send);
  }

  /** Fast path from the agent: look at the RU now instead of waiting for the watch. */
  launch(ruIndex: number): Promise<'started' | 'already-running' | 'not-assigned'> {
    return this.node.launch(ruIndex);
  }

  /**
   * Stops a task and records the outcome (cancelled). True when the task is stopped and recorded
   * (here, or already by someone else); false when this node knows nothing of it.
   */
  kill(job: string, task: number, reason: string): Promise<boolean> {
    return this.node.kill(job, task, reason);
  }

  private async relist(): Promise<void> {
    const rus = await this.o.store.range(this.o.keys.serverRus(this.server.id));
    for (const kv of rus.kvs) this.node.onRu(kv, false);
    this.node.recomputeLoad();
  }

  private async jobSpec(job: string): Promise<JobSpec | undefined> {
    if (this.specs.has(job)) return this.specs.get(job) ?? undefined;
    const rec = parseJson<LiveJobRecord>(await this.o.store.get(this.o.keys.job(job)));
    const spec = rec?.spec ?? null;
    this.specs.set(job, spec);
    if (this.specs.size > 1000) this.specs.delete(this.specs.keys().next().value as string);
    return spec ?? undefined;
  }

  private track(p: Promise<unknown>): void {
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }
}
