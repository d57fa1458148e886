/**
 * One node as a monitor runs it, apart from how it holds the store: its RUs as the store says
 * they are, the tasks it runs on them (started, fenced, journalled, reported, stopped; one
 * attempt's own records are built in run.ts), its load check and its registration. A real monitor
 * (monitor.ts) runs one of these under its own lease and watch; a hollow process (hollow.ts) runs
 * thousands under one lease and one watch.
 */
import { trace, traceRequest, tracingOn } from '../util/trace.ts';
import { LiveKeys, type CordonRecord, type LiveServerRecord, type LiveTaskRecord } from '../state/live-records.ts';
import type { HeldLease } from '../state/lease.ts';
import { FREE_RU_VALUE, isFreeRuValue, parseJson, type PlacedRuRecord } from '../state/records.ts';
import type { TaskOutcome } from '../state/release.ts';
import type { ServerSpec } from '../model/types.ts';
import type { KeyValue } from '../store/types.ts';
import { errorMessage } from '../util/errors.ts';
import { withBindings, type Logger } from '../util/log.ts';
import type { TaskExit } from './executor.ts';
import { entryKey, outcomeEntry, type OutcomeEntry, type OutcomeJournal } from './journal.ts';
import { reportLeftSuccesses } from './left-successes.ts';
import { NodeDrain } from './node-drain.ts';
import { NodeLoad } from './node-load.ts';
import { freeStopped, watchHold, type MoveCopyNode } from './move-copies.ts';
import type { MonitorSnapshot, MonitorStats } from './options.ts';
import { reportOutcome, taskHere, type NodeStore } from './outcomes.ts';
import { registerNode } from './register.ts';
import { attemptOf, launchOf, newRun, previousRunOutcome, startTxn, successReport, type Run } from './run.ts';
import { OutcomeReporter } from './reporter.ts';
import { readNodeTaskLog, type LogChunk } from './task-logs.ts';
import type { NodeHost } from './node-host.ts';

interface RuView {
  rec: PlacedRuRecord | undefined;
  rev: number;
}

/** One parsed free RU record shared by every free RU (a hollow process holds 160,000 of them). */
const FREE_REC = Object.freeze(JSON.parse(FREE_RU_VALUE)) as PlacedRuRecord;

/**
 * The store is the truth: a task starts here only while its RU record names it, and keeps
 * running only while its task record names it here. When a task ends, its outcome goes to the
 * journal before anything else, then to the store as soon as the store answers; an outcome in
 * the journal is never turned into `lost`.
 */
export class MonitoredNode {
  readonly server: ServerSpec;
  readonly journal: OutcomeJournal;
  readonly stats: MonitorStats = { started: 0, completed: 0, failed: 0, killed: 0, lost: 0, adopted: 0, fenced: 0, registrations: 0, movedOut: 0 };
  /** Leaving: the server record says down and nothing new starts. */
  draining = false;
  endpoint: string | undefined;
  private readonly h: NodeHost<MonitoredNode>;
  private readonly n: NodeStore;
  private readonly live: LiveKeys;
  private readonly reporter: OutcomeReporter;
  private readonly running = new Map<number, Run>();
  private readonly rus = new Map<number, RuView>();
  /** The load check: slow tasks reported, the server blocked (node-load.ts). */
  private readonly load: NodeLoad;
  /** What the node side of a move (move-copies.ts) uses of this node. */
  private readonly moveCopy: MoveCopyNode;
  /** Dead (a hollow node dropped): follows nothing, starts nothing, writes nothing. */
  private dead = false;
  /** The operator's cordon or drain of this node, and its deadline (node-drain.ts). */
  private readonly drain: NodeDrain;

  constructor(host: NodeHost<MonitoredNode>, server: ServerSpec, journal: OutcomeJournal, endpoint?: string) {
    this.h = host;
    this.server = server;
    this.journal = journal;
    this.endpoint = endpoint;
    this.live = new LiveKeys(host.keys);
    const nodeLog = (): Logger => this.log();
    this.n = { store: host.store, keys: host.keys, server: server.id, leaseId: () => host.usableLeaseId() };
    this.load = new NodeLoad(host, { id: server.id, rus: server.rus }, () => this.log());
    const { store, keys, clock, log } = host;
    this.moveCopy = {
      store,
      keys,
      clock,
      log,
      server: server.id,
      usableLeaseId: () => host.usableLeaseId(),
      track: (p) => host.track(p),
      ru: (i) => this.rus.get(i),
      dead: () => this.dead,
    };
    this.reporter = new OutcomeReporter({
      n: this.n,
      journal,
      clock: host.clock,
      // Read when a line is written: a hollow process's nodes make their loggers only then.
      get log() {
        return nodeLog();
      },
      mayReport: () => host.registered() && !this.dead,
      onWritten: (e) => this.outcomeWritten(e),
      onSettled: (e) => {
        if (e.logPath) host.executor.attemptReported?.(e.logPath);
      },
      track: (p) => host.track(p),
    });
    this.drain = new NodeDrain({
      clock: host.clock,
      server: server.id,
      log: () => this.log(),
      running: () => this.running.size,
      dead: () => this.dead,
      stopRunning: (why) => {
        const kills = [...this.running.values()].map((r) => this.killRun(r, why));
        this.h.track(Promise.all(kills).then(() => this.reporter.kick()));
      },
    });
  }

  /** After a restart: report the successes a previous life of the monitor left unreported (left-successes.ts). */
  reportLeftSuccesses(): number {
    return reportLeftSuccesses({
      executor: this.h.executor,
      journal: this.journal,
      reporter: this.reporter,
      running: this.running,
      track: (p) => this.h.track(p),
      log: () => this.log(),
    });
  }

  /**
   * The node's logger, naming its server once: the host's own under a monitor (whose logger binds
   * the server already), a child of it under a hollow process (made per line: its nodes rarely log).
   */
  log(): Logger {
    return withBindings(this.h.log, { server: this.server.id });
  }

  get runningCount(): number {
    return this.running.size;
  }

  get isBlocked(): boolean {
    return this.load.blocked;
  }

  canLaunch(): boolean {
    return !this.dead && !this.draining && this.h.connected();
  }

  /** Nothing runs here, nothing is journalled: registration has nothing to reconcile. */
  holdsNothing(): boolean {
    return this.running.size === 0 && this.journal.entries().length === 0;
  }

  serverJson(): string {
    const rec: LiveServerRecord = {
      ...this.server,
      state: this.draining ? 'down' : 'up',
      ...(this.endpoint ? { endpoint: this.endpoint } : {}),
      blocked: this.load.blocked,
      executor: this.h.executor.kind,
      disconnectGraceMs: this.h.disconnectGraceMs,
    };
    return JSON.stringify(rec);
  }

  snapshot(): MonitorSnapshot {
    const busy = this.busyCount();
    return {
      server: this.server.id,
      platform: this.server.platform,
      executor: this.h.executor.kind,
      rus: this.server.rus,
      busy,
      blocked: this.load.blocked,
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

  /** Fast path from an owner: look at the RU now instead of waiting for the watch. */
  async launch(ruIndex: number): Promise<'started' | 'already-running' | 'not-assigned'> {
    if (this.running.has(ruIndex)) return 'already-running';
    if (!this.canLaunch()) return 'not-assigned';
    const kv = await this.h.store.get(this.h.keys.ru({ server: this.server.id, index: ruIndex }));
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
    if (this.dead) return false;
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
        const e = outcomeEntry({ ...attemptOf(i, r.rec, r.rev), startedAt: 0 }, { state: 'cancelled', endedAt: this.h.clock.now(), message: reason });
        return (await reportOutcome(this.n, e)) === 'written';
      }
    }
    return false;
  }

  /**
   * A task's stdout and stderr (`tarcil logs`): the attempt running here now, else the newest one
   * whose files are here; with `follow`, until that attempt ends. The simulated executor writes
   * none: FAILED_PRECONDITION says so.
   */
  readLog(job: string, task: number, follow: boolean, signal: AbortSignal, send: (c: LogChunk) => Promise<void>): Promise<void> {
    return readNodeTaskLog(
      { executor: this.h.executor, server: this.server.id, running: this.running, clock: this.h.clock },
      { job, task, follow, signal, send },
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Cordon and drain (`tarcil node`)

  /** The cordon record of this node changed (undefined: uncordoned). Agents keep placements away themselves. */
  setCordon(rec: CordonRecord | undefined): void {
    this.drain.setCordon(rec);
  }

  /** What `tarcil node`'s cordon says of this node now (undefined: none). */
  get cordonState(): CordonRecord | undefined {
    return this.drain.cordonState;
  }

  // ---------------------------------------------------------------------------------------------
  // Registration and the connection to the store

  /** Registers under `lease` on its own, reconciling what runs here with what the store says (register.ts). */
  async register(lease: HeldLease): Promise<void> {
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
      ...(this.h.executor.previousRun
        ? { previousRun: (a: { job: string; task: number; revision: number }) => previousRunOutcome(this.h.executor, a, () => this.h.clock.now(), this.log()) }
        : {}),
      clock: this.h.clock,
      log: this.log(),
    });
    for (const [i, a] of res.adopted) {
      const run = this.running.get(i);
      if (!run || run.commitId !== a.commitId) continue;
      run.rev = Math.max(run.rev, a.rev);
      run.handle?.setRevision?.(run.rev);
      this.stats.adopted++;
      this.log().info({ job: run.job, task: run.task, ru: i, lease: lease.id }, 'task kept running under the new lease');
    }
    this.stats.lost += res.lost;
    this.stats.registrations++;
    this.log().info({ rus: this.server.rus, lease: lease.id, endpoint: this.endpoint, adopted: res.adopted.size, lost: res.lost }, 'registered');
  }

  /** Registered by a batch (hollow.ts) that found nothing to reconcile. */
  registeredInBatch(): void {
    this.stats.registrations++;
  }

  /** The lease went unconfirmed or gone (`quiet`: the process says it once for all its nodes). */
  disconnected(why: string, quiet = false): void {
    this.stats.fenced++;
    if (!quiet) {
      this.log().warn(
        { why, running: this.running.size, graceMs: this.h.disconnectGraceMs },
        'no contact with the store: starting nothing new; running tasks keep going through the grace',
      );
    }
  }

  /** Registered again, or the lease answered again: write what the journal holds. */
  resumed(): void {
    this.reporter.kick();
  }

  /** The grace ran out without the store: kill every task (recorded lost once the store answers). */
  graceOut(why: string): void {
    if (this.running.size === 0) return;
    this.log().warn({ tasks: this.running.size }, `${why}: killing every task`);
    const kills = [...this.running.values()].map((r) => this.killRun(r, why));
    this.h.track(Promise.all(kills).then(() => this.reporter.kick()));
  }

  /** Closing: the reporter writes nothing more on its own (flushJournal does, last). */
  stopReporting(): void {
    this.drain.cancel();
    this.reporter.close();
  }

  /**
   * Graceful stop, once the node's server record says down: kills every task and records it lost
   * (its owner places it again elsewhere), then reports what the journal holds. Outcomes the store
   * could not take stay in the journal.
   */
  async stopAll(why: string): Promise<void> {
    await Promise.all([...this.running.values()].map((r) => this.killRun(r, why)));
  }

  /** After stopAll and once the background writes settled: one more try at every journalled outcome. */
  async flushJournal(): Promise<void> {
    for (const e of this.journal.entries()) await this.reporter.reportNow(e).catch(() => undefined);
  }

  /**
   * The node dies (a hollow node dropped, as if its machine went away): its tasks stop without an
   * outcome, it follows and writes nothing more. Its owners find its tasks lost once its server
   * record is gone and its grace has passed.
   */
  die(): void {
    this.dead = true;
    this.drain.cancel();
    this.reporter.close();
    for (const run of this.running.values()) {
      run.stopped = true;
      void run.handle?.kill();
    }
    this.running.clear();
  }

  /** RUs the node's view holds a task on (busy or reserved). */
  busyCount(): number {
    let busy = 0;
    for (const r of this.rus.values()) if (r.rec?.state === 'busy' || r.rec?.state === 'reserved') busy++;
    return busy;
  }

  // ---------------------------------------------------------------------------------------------
  // Following the RUs

  /** Every RU record of the node at one revision (after start and after every re-list). */
  onSnapshot(kvs: readonly KeyValue[]): void {
    const seen = new Set<number>();
    for (const kv of kvs) {
      const ref = this.h.keys.parseRu(kv.key);
      if (ref) seen.add(ref.index);
      this.onRu(kv, false);
    }
    for (const i of [...this.rus.keys()]) if (!seen.has(i)) this.applyRu(i, undefined, 0);
    this.recomputeLoad();
  }

  onRu(kv: KeyValue, deleted: boolean): void {
    if (this.dead) return;
    const ref = this.h.keys.parseRu(kv.key);
    if (!ref || ref.server !== this.server.id) return;
    const cur = this.rus.get(ref.index);
    if (cur && cur.rev > kv.modRevision && !deleted) return;
    const rec = deleted ? undefined : isFreeRuValue(kv.value) ? FREE_REC : parseJson<PlacedRuRecord>(kv);
    this.applyRu(ref.index, rec, kv.modRevision);
  }

  private applyRu(index: number, rec: PlacedRuRecord | undefined, rev: number): void {
    this.rus.set(index, { rec, rev });
    const run = this.running.get(index);
    if (rec && rec.state === 'busy' && rec.job !== undefined) {
      const same = !!run && run.job === rec.job && run.task === rec.task && run.commitId === rec.commitId;
      if (rec.stop !== undefined) {
        // A move's old copy: stop it, then free the RU, which lets the new copy start.
        if (run && same) return this.stopForMove(run, index, rec.stop);
        if (run) this.stop(run, `RU given to ${rec.job}#${rec.task}`);
        // Ended here before the stop came: that outcome stands (and frees the RU).
        if (this.journal.has(entryKey(rec))) return this.reporter.kick();
        return this.h.track(freeStopped(this.moveCopy, index, rec, rev));
      }
      if (run && same) {
        if (rev > run.rev) run.handle?.setRevision?.(rev);
        run.rev = Math.max(run.rev, rev);
        run.rec = rec;
        return;
      }
      if (run) this.stop(run, `RU given to ${rec.job}#${rec.task}`);
      // Ended here: its outcome is on its way, the task must not start again.
      if (this.journal.has(entryKey(rec))) return this.reporter.kick();
      // A move's new copy waits until its owner has seen the old one stop.
      if (rec.hold) return watchHold(this.moveCopy, index, rec, rev);
      if (this.canLaunch()) this.startRun(index, rec, rev);
      return;
    }
    if (!run) return;
    // Gone: the lease expired (a busy RU record has none, so that is not it) or an owner recorded
    // the task lost. Only the task record tells; without an answer, the next registration will.
    if (!rec) return this.h.track(this.checkStillHere(run));
    // Free, reserved or down: whoever changed the record recorded the task's fate.
    this.stop(run, 'RU no longer holds the task');
  }

  /** A move's old copy: stopped without an outcome of its own (its task moved on), then its RU freed. */
  private stopForMove(run: Run, index: number, why: string): void {
    if (run.stopped) return;
    this.forget(run);
    run.stopped = true;
    this.stats.killed++;
    this.stats.movedOut++;
    this.h.log.info({ server: this.server.id, job: run.job, task: run.task, ru: index, why }, 'stopping task: it moves to another RU');
    this.h.track(
      (async () => {
        try {
          await run.handle?.kill();
        } finally {
          const cur = this.rus.get(index);
          if (cur?.rec && cur.rec.stop !== undefined) await freeStopped(this.moveCopy, index, cur.rec, cur.rev);
          else
            this.h.log.info(
              { server: this.server.id, ru: index, job: run.job, task: run.task, now: cur?.rec?.state },
              "a stopped task's RU changed before it was freed",
            );
          this.recomputeLoad();
        }
      })(),
    );
  }

  private async checkStillHere(run: Run): Promise<void> {
    try {
      const tk = parseJson<LiveTaskRecord>(await this.h.store.get(this.h.keys.task(run.job, run.task)));
      // No record of its own: its placement started it and nothing was written since (the
      // record its chunk implies says it runs here, state/task-chunks.ts).
      if (!tk && run.rec.startRecorded) return;
      if (!taskHere(tk, this.server.id, run)) this.stop(run, `task record is ${tk?.state ?? 'gone'}`);
    } catch {
      // The store does not answer: the next registration decides.
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Runs and outcomes

  /** Kills a run and journals it: lost (the store will place it again) or cancelled. */
  private async killRun(run: Run, why: string, state: 'lost' | 'cancelled' = 'lost'): Promise<OutcomeEntry> {
    this.forget(run);
    run.stopped = true;
    this.stats.killed++;
    await run.handle?.kill();
    const e = outcomeEntry(run, { state, endedAt: this.h.clock.now(), message: why });
    await this.reporter.record(e);
    return e;
  }

  private outcomeWritten(e: OutcomeEntry): void {
    if (e.state === 'lost') this.stats.lost++;
    if (e.reported) this.h.track(this.h.store.delete(this.live.report(e.job, e.task)).catch(() => 0));
  }

  private stop(run: Run, why: string): void {
    if (this.running.get(run.ruIndex) === run) this.running.delete(run.ruIndex);
    if (run.stopped) return;
    run.stopped = true;
    this.stats.killed++;
    this.log().info({ job: run.job, task: run.task, ru: run.ruIndex, why }, 'stopping task');
    this.h.track(run.handle?.kill() ?? Promise.resolve());
  }

  private startRun(index: number, rec: PlacedRuRecord, rev: number): void {
    const run = newRun(index, rec, rev, this.h.clock.now());
    this.running.set(index, run);
    this.h.track(
      this.launchRun(run).then(
        () => this.h.launchBackoff.succeeded(),
        async (err: unknown) => {
          this.h.launchBackoff.failed(err);
          this.log().warn({ job: run.job, task: run.task, err: errorMessage(err) }, 'launch failed; trying again');
          if (this.running.get(index) === run) this.running.delete(index);
          // The store did not answer (etcd restarting): the RU still names the task, and no watch
          // event will come to say so again, so look again ourselves until it starts or moves on,
          // after the pause all the host's failed starts share.
          await this.h.clock.sleep(this.h.launchBackoff.delayMs());
          const cur = this.rus.get(index);
          if (!this.canLaunch() || this.running.has(index) || run.stopped) return;
          if (cur?.rec?.state === 'busy' && cur.rec.commitId === rec.commitId && cur.rev === rev) this.startRun(index, rec, rev);
        },
      ),
    );
  }

  private async launchRun(run: Run): Promise<void> {
    const lease = this.h.lease();
    if (!lease || !this.canLaunch()) return this.forget(run);
    const executor = this.h.executor;
    const spec = executor.kind === 'process' || run.rec.durationMs === undefined ? await this.h.jobSpec(run.job) : undefined;
    // Record "running" only if the RU still holds this attempt: the revision is the fence.
    const write = () => {
      const req = startTxn(this.h.keys, this.server.id, run, this.h.disconnectGraceMs);
      if (tracingOn()) traceRequest('node.asked', `${run.job}#${run.task}`, req);
      return this.h.store.txn(req);
    };
    const res = await (this.h.gate ? this.h.gate(write) : write());
    if (tracingOn()) trace('node.answered', `${run.job}#${run.task}`);
    // Not while the store is away, nor under a lease that is not the one the node holds now.
    if (!res.succeeded || run.stopped || this.h.lease() !== lease || !this.canLaunch()) return this.forget(run);
    const launch = launchOf(run, this.server.id, spec);
    if (executor.kind === 'process') {
      launch.held = {
        job: run.job,
        task: run.task,
        commitId: run.commitId,
        ruIndex: run.ruIndex,
        rec: { ...run.rec },
        placedRevision: run.placedRevision,
        startedAt: run.startedAt,
      };
      const access = this.h.store.directAccess?.();
      if (access) launch.report = successReport(this.h.keys, this.server.id, run, access);
    }
    if (executor.kind === 'process' && !launch.command) {
      this.forget(run);
      const e = outcomeEntry(run, { state: 'failed', endedAt: this.h.clock.now(), message: 'the process executor needs a command; the job has none' });
      await this.reporter.record(e);
      this.reporter.kick();
      return;
    }
    run.handle = executor.start(launch, (exit) => this.h.track(this.finished(run, exit)));
    this.stats.started++;
    // Placed here by a commit decided before the drain was seen, after its deadline: it goes too.
    if (this.drain.drainPassed()) {
      const e = this.killRun(run, `node ${this.server.id} drained: the deadline had passed when the task started`);
      this.h.track(e.then(() => this.reporter.kick()));
      return;
    }
    if (this.h.log.isLevelEnabled('debug')) this.log().debug({ job: run.job, task: run.task, ru: run.ruIndex, attempt: run.rec.attempt }, 'task started');
    this.recomputeLoad();
  }

  private forget(run: Run): void {
    if (this.running.get(run.ruIndex) === run) this.running.delete(run.ruIndex);
  }

  /** The process exited: journal its outcome first, then the task leaves `running`, then the store. */
  private async finished(run: Run, exit: TaskExit): Promise<void> {
    if (run.stopped) return;
    run.stopped = true;
    const outcome: TaskOutcome = { state: exit.state, endedAt: this.h.clock.now() };
    if (exit.exitCode !== undefined) outcome.exitCode = exit.exitCode;
    if (exit.message !== undefined) outcome.message = exit.message;
    const e = outcomeEntry(run, outcome);
    const observed = run.obs?.result(outcome.endedAt);
    if (observed) e.observed = observed;
    // append() makes the entry visible at once, so the RU's events cannot start the task again.
    const durable = this.reporter.record(e);
    this.forget(run);
    if (exit.state === 'succeeded') this.stats.completed++;
    else this.stats.failed++;
    if (this.h.log.isLevelEnabled('debug'))
      this.log().debug({ job: run.job, task: run.task, ru: run.ruIndex, state: exit.state, exitCode: exit.exitCode }, 'task ended');
    this.recomputeLoad();
    await durable;
    this.reporter.kick();
  }

  // ---------------------------------------------------------------------------------------------
  // Load monitor (paper §5.2)

  recomputeLoad(force = false): void {
    if (this.dead) return;
    if (this.load.check(this.rus.values(), this.running, force)) this.h.serverChanged(this);
  }
}
