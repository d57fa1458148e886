/**
 * The local monitor of one node (paper §5.2): registers the node and its RUs under a lease, starts
 * the tasks placed on its RUs, reports their rates and outcomes (journalled first), and rides out
 * a lost connection to the store for its disconnect grace. Its parts are in this folder.
 */
import { join } from 'node:path';
import { Follower } from '../state/follow.ts';
import { LiveKeys, type LiveJobRecord, type LiveServerRecord, type LiveTaskRecord, type LoadReportRecord } from '../state/live-records.ts';
import { DEFAULT_LEASE_TTL_S, type HeldLease } from '../state/lease.ts';
import { parseJson, type PlacedRuRecord } from '../state/records.ts';
import type { TaskOutcome } from '../state/release.ts';
import type { JobSpec, ServerSpec } from '../model/types.ts';
import type { KeyValue } from '../store/types.ts';
import { errorMessage } from '../util/errors.ts';
import type { TaskExit, TaskHandle, TaskLaunch } from './executor.ts';
import { NodeConnection } from './connection.ts';
import { entryKey, FileJournal, MemoryJournal, outcomeEntry, type OutcomeEntry, type OutcomeJournal } from './journal.ts';
import { assessLoad } from './load.ts';
import { DEFAULT_DISCONNECT_GRACE_MS, type MonitorOptions, type MonitorSnapshot, type MonitorStats } from './options.ts';
import { reportOutcome, taskHere, type HeldAttempt, type NodeStore } from './outcomes.ts';
import { registerNode } from './register.ts';
import { OutcomeReporter } from './reporter.ts';

export type { SlowdownModel } from './load.ts';
export { DEFAULT_DISCONNECT_GRACE_MS, MONITOR_EVENTS, type MonitorOptions, type MonitorSnapshot, type MonitorStats } from './options.ts';

/** A task whose process this monitor started and that has not ended. */
interface Run extends HeldAttempt {
  /** The RU record's current revision: fences the writes about the attempt. */
  rev: number;
  startedAt: number;
  handle: TaskHandle | undefined;
  stopped: boolean;
  reported: boolean;
}

/**
 * The local monitor of one node (paper §5.1): registers the server and its RUs under a lease,
 * runs what the store says its RUs hold, records each task's outcome when it ends, and watches
 * the tasks' rates.
 *
 * The store is the truth: a task starts here only while its RU record names it, and a task keeps
 * running only while its task record names it here. When a process ends, its outcome goes to the
 * journal (journal.ts) before anything else, then to the store (outcomes.ts) as soon as the store
 * answers; an outcome in the journal is never turned into `lost`.
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
  private readonly live: LiveKeys;
  private readonly journal: OutcomeJournal;
  private readonly n: NodeStore;
  private readonly conn: NodeConnection;
  private readonly reporter: OutcomeReporter;
  private follower: Follower | undefined;
  private readonly running = new Map<number, Run>();
  private readonly rus = new Map<number, { rec: PlacedRuRecord | undefined; rev: number }>();
  private readonly specs = new Map<string, JobSpec | null>();
  private readonly background = new Set<Promise<unknown>>();
  private closed = false;
  private blocked = false;
  private draining = false;
  private endpoint: string | undefined;
  readonly stats: MonitorStats = { started: 0, completed: 0, failed: 0, killed: 0, lost: 0, adopted: 0, fenced: 0, registrations: 0 };

  constructor(opts: MonitorOptions) {
    this.o = opts;
    this.server = opts.server;
    this.live = new LiveKeys(opts.keys);
    this.endpoint = opts.endpoint;
    this.disconnectGraceMs = opts.disconnectGraceMs ?? DEFAULT_DISCONNECT_GRACE_MS;
    const dir = opts.journalDir ?? (opts.executor.logDir !== undefined ? join(opts.executor.logDir, 'journal') : undefined);
    this.journal = dir !== undefined ? new FileJournal(dir, opts.server.id, opts.keys.prefix) : new MemoryJournal();
    this.n = { store: opts.store, keys: opts.keys, server: opts.server.id, leaseId: () => this.conn.usableLeaseId() };
    this.conn = new NodeConnection({
      store: opts.store,
      clock: opts.clock,
      log: opts.log,
      server: opts.server.id,
      ttlSeconds: opts.leaseTtlSeconds ?? DEFAULT_LEASE_TTL_S,
      graceMs: this.disconnectGraceMs,
      serverKey: opts.keys.server(opts.server.id),
      serverRecord: () => this.serverJson(),
      register: (lease) => this.register(lease),
      resume: () => {
        this.conn.syncServer();
        this.track(this.relist().catch((err: unknown) => this.o.log.warn({ err: errorMessage(err) }, 'relist failed; the watch will catch up')));
        this.reporter.kick();
      },
      onDisconnected: (why) => {
        this.stats.fenced++;
        this.o.log.warn({ server: this.server.id, why, running: this.running.size, graceMs: this.disconnectGraceMs }, 'no contact with the store: starting nothing new; running tasks keep going through the grace');
      },
      onGraceOut: (why) => {
        if (this.running.size === 0) return;
        this.o.log.warn({ server: this.server.id, tasks: this.running.size }, `${why}: killing every task`);
        const kills = [...this.running.values()].map((r) => this.killRun(r, why));
        this.track(Promise.all(kills).then(() => this.reporter.kick()));
      },
    });
    this.reporter = new OutcomeReporter({
      n: this.n,
      journal: this.journal,
      clock: opts.clock,
      log: opts.log,
      mayReport: () => this.conn.registered,
      onWritten: (e) => this.outcomeWritten(e),
      track: (p) => this.track(p),
    });
  }

  get leaseId(): string | undefined {
    return this.conn.lease?.id;
  }

  /** Where outcomes are journalled: a file path, or 'memory'. */
  get journalLocation(): string {
    return this.journal.location;
  }

  /** Sets the advertised endpoint (known once the gRPC server has bound its port). */
  async setEndpoint(endpoint: string): Promise<void> {
    this.endpoint = endpoint;
    if (this.conn.registered) await this.conn.putServer();
  }

  async start(): Promise<void> {
    const left = await this.journal.load();
    if (left.length > 0) this.o.log.info({ server: this.server.id, outcomes: left.length, journal: this.journal.location }, 'outcomes journalled before a restart; reporting them');
    await this.conn.registerOnce();
    this.follower = new Follower({
      store: this.o.store,
      clock: this.o.clock,
      log: this.o.log,
      prefix: this.o.keys.serverRus(this.server.id),
      onSnapshot: (kvs) => {
        const seen = new Set<number>();
        for (const kv of kvs) {
          const ref = this.o.keys.parseRu(kv.key);
          if (ref) seen.add(ref.index);
          this.onRu(kv, false);
        }
        for (const i of [...this.rus.keys()]) if (!seen.has(i)) this.applyRu(i, undefined, 0);
        this.recomputeLoad();
      },
      onEvent: (kv, deleted) => {
        this.onRu(kv, deleted);
        this.recomputeLoad();
      },
    });
    await this.follower.start();
    this.loadTick();
  }

  private loadTick(): void {
    this.o.clock.setTimer(this.o.loadIntervalMs ?? 1000, () => {
      if (this.closed) return;
      if (this.running.size > 0) this.recomputeLoad();
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
    this.reporter.close();
    // Leave the pool first, so nothing new lands here while the tasks are stopped.
    this.draining = true;
    await this.conn.putServer().catch(() => undefined);
    await this.follower?.close();
    await Promise.all([...this.running.values()].map((r) => this.killRun(r, `monitor of ${this.server.id} shut down`)));
    await Promise.allSettled([...this.background, this.conn.pending]);
    for (const e of this.journal.entries()) await this.reporter.reportNow(e).catch(() => undefined);
    await this.journal.close();
    await this.conn.revoke();
  }

  snapshot(): MonitorSnapshot {
    let busy = 0;
    for (const r of this.rus.values()) if (r.rec?.state === 'busy' || r.rec?.state === 'reserved') busy++;
    return {
      server: this.server.id,
      platform: this.server.platform,
      executor: this.o.executor.kind,
      rus: this.server.rus,
      busy,
      blocked: this.blocked,
      connected: this.canLaunch(),
      journalled: this.journal.entries().length,
      running: [...this.running.values()].map((r) => ({
        job: r.job,
        task: r.task,
        ruIndex: r.ruIndex,
        startedAt: r.startedAt,
        rate: r.handle?.rate() ?? 1,
        ...(r.handle?.pid !== undefined ? { pid: r.handle.pid } : {}),
      })),
      stats: { ...this.stats },
    };
  }

  /** Fast path from the agent: look at the RU now instead of waiting for the watch. */
  async launch(ruIndex: number): Promise<'started' | 'already-running' | 'not-assigned'> {
    if (this.running.has(ruIndex)) return 'already-running';
    if (!this.canLaunch()) return 'not-assigned';
    const kv = await this.o.store.get(this.o.keys.ru({ server: this.server.id, index: ruIndex }));
    if (!kv) return 'not-assigned';
    this.onRu(kv, false);
    this.recomputeLoad();
    return this.running.has(ruIndex) ? 'started' : 'not-assigned';
  }

  /**
   * Stops a task and records the outcome (cancelled). True when the task is stopped and recorded
   * (here, or already by someone else); false when this node knows nothing of it.
   */
  async kill(job: string, task: number, reason: string): Promise<boolean> {
    const run = [...this.running.values()].find((r) => r.job === job && r.task === task);
    if (run) {
      const e = await this.killRun(run, reason, 'cancelled');
      this.recomputeLoad();
      await this.reporter.reportNow(e).catch((err: unknown) => {
        this.reporter.kick();
        throw err;
      });
      return true;
    }
    // Ended here, its outcome not yet in the store: that outcome stands.
    const ended = this.journal.entries().find((e) => e.job === job && e.task === task);
    if (ended) {
      await this.reporter.reportNow(ended);
      return true;
    }
    for (const [i, r] of this.rus) {
      if (r.rec && (r.rec.state === 'busy' || r.rec.state === 'reserved') && r.rec.job === job && r.rec.task === task) {
        const e = outcomeEntry({ ...attemptOf(i, r.rec, r.rev), startedAt: 0 }, { state: 'cancelled', endedAt: this.o.clock.now(), message: reason });
        return (await reportOutcome(this.n, e)) === 'written';
      }
    }
    return false;
  }

  // ---------------------------------------------------------------------------------------------
  // Registration and the connection to the store

  private canLaunch(): boolean {
    return !this.closed && !this.draining && this.conn.connected;
  }

  /** Registers under `lease`, reconciling what runs here with what the store says (register.ts). */
  private async register(lease: HeldLease): Promise<void> {
    const res = await registerNode({
      n: this.n,
      lease,
      server: this.server,
      serverJson: () => this.serverJson(),
      journal: this.journal,
      runs: () => [...this.running.values()].filter((r) => r.handle && !r.stopped),
      onMovedOn: (a, why) => {
        const run = this.running.get(a.ruIndex);
        if (run && run.commitId === a.commitId) this.stop(run, `someone else owns the task now (${why})`);
      },
      onWritten: (e) => this.outcomeWritten(e),
      clock: this.o.clock,
      log: this.o.log,
    });
    for (const [i, a] of res.adopted) {
      const run = this.running.get(i);
      if (!run || run.commitId !== a.commitId) continue;
      run.rev = Math.max(run.rev, a.rev);
      this.stats.adopted++;
      this.o.log.info({ job: run.job, task: run.task, ru: i, lease: lease.id }, 'task kept running under the new lease');
    }
    this.stats.lost += res.lost;
    this.stats.registrations++;
    this.o.log.info({ server: this.server.id, rus: this.server.rus, lease: lease.id, endpoint: this.endpoint, adopted: res.adopted.size, lost: res.lost }, 'registered');
  }

  private async relist(): Promise<void> {
    const rus = await this.o.store.range(this.o.keys.serverRus(this.server.id));
    for (const kv of rus.kvs) this.onRu(kv, false);
    this.recomputeLoad();
  }

  private serverJson(): string {
    const rec: LiveServerRecord = {
      ...this.server,
      state: this.draining ? 'down' : 'up',
      ...(this.endpoint ? { endpoint: this.endpoint } : {}),
      blocked: this.blocked,
      executor: this.o.executor.kind,
      disconnectGraceMs: this.disconnectGraceMs,
    };
    return JSON.stringify(rec);
  }

  // ---------------------------------------------------------------------------------------------
  // Outcomes

  /** Kills a run and journals it: lost (the store will place it again) or cancelled. */
  private async killRun(run: Run, why: string, state: 'lost' | 'cancelled' = 'lost'): Promise<OutcomeEntry> {
    this.forget(run);
    run.stopped = true;
    this.stats.killed++;
    await run.handle?.kill();
    const e = outcomeEntry(run, { state, endedAt: this.o.clock.now(), message: why });
    await this.reporter.record(e);
    return e;
  }

  private outcomeWritten(e: OutcomeEntry): void {
    if (e.state === 'lost') this.stats.lost++;
    if (e.reported) this.track(this.o.store.delete(this.live.report(e.job, e.task)).catch(() => 0));
  }

  // ---------------------------------------------------------------------------------------------
  // Following the RUs

  private onRu(kv: KeyValue, deleted: boolean): void {
    const ref = this.o.keys.parseRu(kv.key);
    if (!ref || ref.server !== this.server.id) return;
    const cur = this.rus.get(ref.index);
    if (cur && cur.rev > kv.modRevision && !deleted) return;
    this.applyRu(ref.index, deleted ? undefined : parseJson<PlacedRuRecord>(kv), kv.modRevision);
  }

  private applyRu(index: number, rec: PlacedRuRecord | undefined, rev: number): void {
    this.rus.set(index, { rec, rev });
    const run = this.running.get(index);
    if (rec && rec.state === 'busy' && rec.job !== undefined) {
      if (run && run.job === rec.job && run.task === rec.task && run.commitId === rec.commitId) {
        run.rev = Math.max(run.rev, rev);
        run.rec = rec;
        return;
      }
      if (run) this.stop(run, `RU given to ${rec.job}#${rec.task}`);
      // Ended here: its outcome is on its way, the task must not start again.
      if (this.journal.has(entryKey(rec))) return this.reporter.kick();
      if (this.canLaunch()) this.startRun(index, rec, rev);
      return;
    }
    if (!run) return;
    // Gone: the lease expired (a busy RU record has none, so that is not it) or an owner recorded
    // the task lost. Only the task record tells; without an answer, the next registration will.
    if (!rec) return this.track(this.checkStillHere(run));
    // Free, reserved or down: whoever changed the record recorded the task's fate.
    this.stop(run, 'RU no longer holds the task');
  }

  private async checkStillHere(run: Run): Promise<void> {
    try {
      const tk = parseJson<LiveTaskRecord>(await this.o.store.get(this.o.keys.task(run.job, run.task)));
      if (!taskHere(tk, this.server.id, run)) this.stop(run, `task record is ${tk?.state ?? 'gone'}`);
    } catch {
      // The store does not answer: the next registration decides.
    }
  }

  private stop(run: Run, why: string): void {
    if (this.running.get(run.ruIndex) === run) this.running.delete(run.ruIndex);
    if (run.stopped) return;
    run.stopped = true;
    this.stats.killed++;
    this.o.log.info({ job: run.job, task: run.task, ru: run.ruIndex, why }, 'stopping task');
    this.track(run.handle?.kill() ?? Promise.resolve());
  }

  private startRun(index: number, rec: PlacedRuRecord, rev: number, attempt = 0): void {
    const run: Run = { ...attemptOf(index, rec, rev), rev, startedAt: this.o.clock.now(), handle: undefined, stopped: false, reported: false };
    this.running.set(index, run);
    this.track(
      this.launchRun(run).catch(async (err: unknown) => {
        this.o.log.warn({ job: run.job, task: run.task, err: errorMessage(err) }, 'launch failed; trying again');
        if (this.running.get(index) === run) this.running.delete(index);
        // The store did not answer (etcd restarting): the RU still names the task, and no watch
        // event will come to say so again, so look again ourselves until it starts or moves on.
        await this.o.clock.sleep(Math.min(200 * 2 ** attempt, 2000));
        const cur = this.rus.get(index);
        if (!this.canLaunch() || this.running.has(index) || run.stopped) return;
        if (cur?.rec?.state === 'busy' && cur.rec.commitId === rec.commitId && cur.rev === rev) this.startRun(index, rec, rev, attempt + 1);
      }),
    );
  }

  private async launchRun(run: Run): Promise<void> {
    const k = this.o.keys;
    const lease = this.conn.lease;
    if (!lease || !this.canLaunch()) return this.forget(run);
    const spec = this.o.executor.kind === 'process' || run.rec.durationMs === undefined ? await this.jobSpec(run.job) : undefined;
    // Record "running" only if the RU still holds this attempt: the revision is the fence.
    const running: LiveTaskRecord = {
      job: run.job,
      index: run.task,
      state: 'running',
      ru: { server: this.server.id, index: run.ruIndex },
      attempt: run.rec.attempt,
      placedAt: run.rec.since,
      commitId: run.commitId,
      agent: run.rec.agent,
      placedRevision: run.placedRevision,
      startedAt: run.startedAt,
      server: this.server.id,
      ...(run.rec.previous ? { previous: run.rec.previous } : {}),
    };
    const res = await this.o.store.txn({
      compare: [{ key: k.ru({ server: this.server.id, index: run.ruIndex }), target: 'mod', op: '==', value: run.rev }],
      success: [{ type: 'put', key: k.task(run.job, run.task), value: JSON.stringify(running) }],
    });
    // Not while the store is away, nor under a lease that is not the one the node holds now.
    if (!res.succeeded || run.stopped || this.conn.lease !== lease || !this.canLaunch()) return this.forget(run);
    const launch: TaskLaunch = { job: run.job, task: run.task, ruIndex: run.ruIndex, revision: run.rev, server: this.server.id, attempt: run.rec.attempt };
    const duration = run.rec.durationMs ?? spec?.durationMs;
    if (duration !== undefined) launch.durationMs = duration;
    if (spec?.command) launch.command = spec.command;
    if (this.o.executor.kind === 'process' && !launch.command) {
      this.forget(run);
      const e = outcomeEntry(run, { state: 'failed', endedAt: this.o.clock.now(), message: 'the process executor needs a command; the job has none' });
      await this.reporter.record(e);
      this.reporter.kick();
      return;
    }
    run.handle = this.o.executor.start(launch, (exit) => this.track(this.finished(run, exit)));
    this.stats.started++;
    this.recomputeLoad();
  }

  private forget(run: Run): void {
    if (this.running.get(run.ruIndex) === run) this.running.delete(run.ruIndex);
  }

  private async jobSpec(job: string): Promise<JobSpec | undefined> {
    if (this.specs.has(job)) return this.specs.get(job) ?? undefined;
    const rec = parseJson<LiveJobRecord>(await this.o.store.get(this.o.keys.job(job)));
    const spec = rec?.spec ?? null;
    this.specs.set(job, spec);
    if (this.specs.size > 1000) this.specs.delete(this.specs.keys().next().value as string);
    return spec ?? undefined;
  }

  /** The process exited: journal its outcome first, then the task leaves `running`, then the store. */
  private async finished(run: Run, exit: TaskExit): Promise<void> {
    if (run.stopped) return;
    run.stopped = true;
    const outcome: TaskOutcome = { state: exit.state, endedAt: this.o.clock.now() };
    if (exit.exitCode !== undefined) outcome.exitCode = exit.exitCode;
    if (exit.message !== undefined) outcome.message = exit.message;
    const e = outcomeEntry(run, outcome);
    // append() makes the entry visible at once, so the RU's events cannot start the task again.
    const durable = this.reporter.record(e);
    this.forget(run);
    if (exit.state === 'succeeded') this.stats.completed++;
    else this.stats.failed++;
    this.recomputeLoad();
    await durable;
    this.reporter.kick();
  }

  // ---------------------------------------------------------------------------------------------
  // Load monitor (paper §5.2)

  private recomputeLoad(): void {
    const slow = assessLoad(this.rus.values(), this.running.values(), this.server.rus, this.o.loadThreshold ?? 0.5, this.o.slowdown);
    for (const { run, rate } of slow) {
      if (run.reported) continue;
      run.reported = true;
      const rep: LoadReportRecord = { job: run.job, task: run.task, server: this.server.id, rate, at: this.o.clock.now() };
      const lease = this.conn.usableLeaseId();
      if (lease) this.track(this.o.store.put(this.live.report(run.job, run.task), JSON.stringify(rep), { lease }).catch(() => 0));
      this.o.log.warn({ job: run.job, task: run.task, rate: Number(rate.toFixed(2)) }, 'task well below its expected rate');
    }
    const anySlow = slow.length > 0;
    if (anySlow !== this.blocked) {
      this.blocked = anySlow;
      this.o.log.info({ server: this.server.id, blocked: anySlow }, anySlow ? 'no new placements here until the slow task recovers' : 'accepting placements again');
      this.conn.syncServer();
    }
  }

  private track(p: Promise<unknown>): void {
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }
}

function attemptOf(index: number, rec: PlacedRuRecord, rev: number): HeldAttempt {
  return { job: rec.job, task: rec.task, commitId: rec.commitId, ruIndex: index, rec, placedRevision: rev };
}
