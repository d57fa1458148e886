import { Follower } from '../state/follow.ts';
import { LiveKeys, type LiveJobRecord, type LiveServerRecord, type LiveTaskRecord, type LoadReportRecord } from '../state/live-records.ts';
import { DEFAULT_LEASE_TTL_S, HeldLease } from '../state/lease.ts';
import { FREE_RU_VALUE, parseJson, type PlacedRuRecord } from '../state/records.ts';
import { releaseRu, type TaskOutcome } from '../state/release.ts';
import { N_RESOURCES, type JobSpec, type ServerSpec } from '../model/types.ts';
import { slowdown as perfSlowdown } from '../model/perf.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, Compare, KeyValue, Op } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import type { Executor, TaskExit, TaskHandle, TaskLaunch } from './executor.ts';

/** Interference slowdown of a task on a server: the shared performance model by default. */
export type SlowdownModel = (own: readonly number[], sum: readonly number[], ruCount: number) => number;

export interface MonitorOptions {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
  server: ServerSpec;
  executor: Executor;
  /** host:port of this node's NodeMonitor service, advertised in its server record. */
  endpoint?: string;
  leaseTtlSeconds?: number;
  /** A task whose rate falls below this share of its expected rate is reported (paper §5.2). */
  loadThreshold?: number;
  slowdown?: SlowdownModel;
  /**
   * How often running tasks' rates are looked at besides on RU changes (default 1000 ms): a
   * measured rate (the process executor's CPU rate) changes without any event.
   */
  loadIntervalMs?: number;
}

interface Run {
  ruIndex: number;
  job: string;
  task: number;
  commitId: string;
  rev: number;
  rec: PlacedRuRecord;
  startedAt: number;
  handle: TaskHandle | undefined;
  stopped: boolean;
  reported: boolean;
}

export interface MonitorSnapshot {
  server: string;
  platform: string;
  executor: string;
  rus: number;
  busy: number;
  blocked: boolean;
  running: { job: string; task: number; ruIndex: number; startedAt: number; rate: number; pid?: number }[];
  stats: LocalMonitor['stats'];
}

/**
 * The local monitor of one node (paper §5.1): registers the server and its RUs under a lease,
 * runs what the store says its RUs hold, frees each RU with a fenced transaction when its task
 * ends, and watches the tasks' rates.
 *
 * The store is the truth: a task runs here while, and only while, its RU record names it at the
 * revision the monitor started it from. The agent's LaunchTask call only makes the monitor look
 * sooner. If the monitor cannot confirm its lease in time it kills every task before etcd can
 * expire the lease (see HeldLease), then registers again; tasks it was running are recorded lost
 * and their owners place them again.
 */
export class LocalMonitor {
  readonly server: ServerSpec;
  private readonly o: MonitorOptions;
  private readonly live: LiveKeys;
  private lease: HeldLease | undefined;
  private follower: Follower | undefined;
  private readonly running = new Map<number, Run>();
  private readonly rus = new Map<number, { rec: PlacedRuRecord | undefined; rev: number }>();
  private readonly specs = new Map<string, JobSpec | null>();
  private readonly background = new Set<Promise<unknown>>();
  private registered = false;
  private closed = false;
  private blocked = false;
  private draining = false;
  private endpoint: string | undefined;
  readonly stats = { started: 0, completed: 0, failed: 0, killed: 0, fenced: 0, lost: 0, registrations: 0 };

  constructor(opts: MonitorOptions) {
    this.o = opts;
    this.server = opts.server;
    this.live = new LiveKeys(opts.keys);
    this.endpoint = opts.endpoint;
  }

  get leaseId(): string | undefined {
    return this.lease?.id;
  }

  /** Sets the advertised endpoint (known once the gRPC server has bound its port). */
  async setEndpoint(endpoint: string): Promise<void> {
    this.endpoint = endpoint;
    if (this.registered) await this.putServer();
  }

  async start(): Promise<void> {
    await this.register();
    const prefix = this.o.keys.serverRus(this.server.id);
    this.follower = new Follower({
      store: this.o.store,
      clock: this.o.clock,
      log: this.o.log,
      prefix,
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
   * then revokes the lease so the node leaves the pool at once.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Leave the pool first, so nothing new lands here while the tasks are stopped.
    this.draining = true;
    if (this.registered) await this.putServer().catch(() => undefined);
    await this.follower?.close();
    const runs = [...this.running.values()];
    await Promise.all(
      runs.map(async (r) => {
        this.running.delete(r.ruIndex);
        r.stopped = true;
        await r.handle?.kill();
        await this.release(r, { state: 'lost', endedAt: this.o.clock.now(), message: `monitor of ${this.server.id} shut down` }).catch(() => false);
      }),
    );
    await Promise.allSettled([...this.background]);
    await this.lease?.revoke();
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
      this.running.delete(run.ruIndex);
      run.stopped = true;
      await run.handle?.kill();
      this.stats.killed++;
      await this.release(run, { state: 'cancelled', endedAt: this.o.clock.now(), message: reason });
      this.recomputeLoad();
      return true;
    }
    for (const [i, r] of this.rus) {
      if (r.rec && r.rec.job === job && r.rec.task === task) {
        const fake: Run = { ruIndex: i, job, task, commitId: r.rec.commitId, rev: r.rev, rec: r.rec, startedAt: 0, handle: undefined, stopped: true, reported: false };
        return this.release(fake, { state: 'cancelled', endedAt: this.o.clock.now(), message: reason });
      }
    }
    return false;
  }

  // ---------------------------------------------------------------------------------------------
  // Registration

  private async register(): Promise<void> {
    this.lease = await HeldLease.grant({
      store: this.o.store,
      clock: this.o.clock,
      log: this.o.log.child({ component: 'monitor-lease', server: this.server.id }),
      ttlSeconds: this.o.leaseTtlSeconds ?? DEFAULT_LEASE_TTL_S,
      onFenced: (why) => this.onFenced(why),
    });
    const k = this.o.keys;
    for (let attempt = 0; ; attempt++) {
      const existing = await this.o.store.range(k.serverRus(this.server.id));
      const byIndex = new Map<number, KeyValue>();
      for (const kv of existing.kvs) {
        const ref = k.parseRu(kv.key);
        if (ref) byIndex.set(ref.index, kv);
      }
      const compare: Compare[] = [];
      const success: Op[] = [
        { type: 'put', key: k.server(this.server.id), value: this.serverJson(), lease: this.lease.id },
        { type: 'put', key: k.epoch(this.server.id), value: `register:${this.server.id}` },
      ];
      const now = this.o.clock.now();
      for (let i = 0; i < this.server.rus; i++) {
        const kv = byIndex.get(i);
        compare.push({ key: k.ru({ server: this.server.id, index: i }), target: 'mod', op: '==', value: kv?.modRevision ?? 0 });
        success.push({ type: 'put', key: k.ru({ server: this.server.id, index: i }), value: FREE_RU_VALUE, lease: this.lease.id });
        const rec = parseJson<PlacedRuRecord>(kv);
        if (rec && (rec.state === 'busy' || rec.state === 'reserved') && rec.job !== undefined) {
          // Whatever the store says ran here did not survive the restart of this monitor.
          const lost: LiveTaskRecord = {
            job: rec.job,
            index: rec.task,
            state: 'lost',
            ru: { server: this.server.id, index: i },
            attempt: rec.attempt + 1,
            placedAt: rec.since,
            endedAt: now,
            commitId: rec.commitId,
            agent: rec.agent,
            message: `monitor of ${this.server.id} restarted`,
          };
          success.push({ type: 'put', key: k.task(rec.job, rec.task), value: JSON.stringify(lost) });
          this.stats.lost++;
        }
      }
      for (const [i, kv] of byIndex) if (i >= this.server.rus) success.push({ type: 'delete', key: kv.key });
      const res = await this.o.store.txn({ compare, success });
      if (res.succeeded) break;
      if (attempt > 20) throw new Error(`could not register server ${this.server.id}: its RUs keep changing`);
    }
    this.registered = true;
    this.stats.registrations++;
    this.o.log.info({ server: this.server.id, rus: this.server.rus, lease: this.lease.id, endpoint: this.endpoint }, 'registered');
  }

  private serverJson(): string {
    const rec: LiveServerRecord = {
      ...this.server,
      state: this.draining ? 'down' : 'up',
      ...(this.endpoint ? { endpoint: this.endpoint } : {}),
      blocked: this.blocked,
      executor: this.o.executor.kind,
    };
    return JSON.stringify(rec);
  }

  private async putServer(): Promise<void> {
    const lease = this.lease;
    if (!lease || lease.fenced) return;
    await this.o.store.put(this.o.keys.server(this.server.id), this.serverJson(), { lease: lease.id });
  }

  private onFenced(why: string): void {
    this.stats.fenced++;
    this.registered = false;
    for (const r of [...this.running.values()]) {
      this.running.delete(r.ruIndex);
      r.stopped = true;
      this.track(r.handle?.kill() ?? Promise.resolve());
    }
    if (this.closed) return;
    this.o.log.warn({ server: this.server.id, why }, 'killed every task; registering again');
    const again = async (): Promise<void> => {
      let delay = 200;
      while (!this.closed) {
        try {
          await this.register();
          const rus = await this.o.store.range(this.o.keys.serverRus(this.server.id));
          for (const kv of rus.kvs) this.onRu(kv, false);
          return;
        } catch (err) {
          this.o.log.warn({ err: (err as Error).message }, 'registration failed; retrying');
          await this.o.clock.sleep(delay);
          delay = Math.min(delay * 2, 3000);
        }
      }
    };
    this.track(again());
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
      if (this.registered && !this.closed) this.startRun(index, rec, rev);
      return;
    }
    // Free, reserved, down or gone: whoever changed the record recorded the task's fate.
    if (run) this.stop(run, 'RU no longer holds the task');
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
    const run: Run = {
      ruIndex: index,
      job: rec.job,
      task: rec.task,
      commitId: rec.commitId,
      rev,
      rec,
      startedAt: this.o.clock.now(),
      handle: undefined,
      stopped: false,
      reported: false,
    };
    this.running.set(index, run);
    this.track(
      this.launchRun(run).catch(async (err: unknown) => {
        this.o.log.warn({ job: run.job, task: run.task, err: (err as Error).message }, 'launch failed; trying again');
        if (this.running.get(index) === run) this.running.delete(index);
        // The store did not answer (etcd restarting): the RU still names the task, and no watch
        // event will come to say so again, so look again ourselves until it starts or moves on.
        await this.o.clock.sleep(Math.min(200 * 2 ** attempt, 2000));
        const cur = this.rus.get(index);
        if (this.closed || !this.registered || this.running.has(index) || run.stopped) return;
        if (cur?.rec?.state === 'busy' && cur.rec.commitId === rec.commitId && cur.rev === rev) this.startRun(index, rec, rev, attempt + 1);
      }),
    );
  }

  private async launchRun(run: Run): Promise<void> {
    const k = this.o.keys;
    const lease = this.lease;
    if (!lease || lease.fenced) return;
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
      placedRevision: run.rev,
      startedAt: run.startedAt,
      server: this.server.id,
    };
    const res = await this.o.store.txn({
      compare: [{ key: k.ru({ server: this.server.id, index: run.ruIndex }), target: 'mod', op: '==', value: run.rev }],
      success: [{ type: 'put', key: k.task(run.job, run.task), value: JSON.stringify(running) }],
    });
    if (!res.succeeded || run.stopped || lease.fenced) {
      if (this.running.get(run.ruIndex) === run) this.running.delete(run.ruIndex);
      return;
    }
    const launch: TaskLaunch = { job: run.job, task: run.task, ruIndex: run.ruIndex, revision: run.rev };
    const duration = run.rec.durationMs ?? spec?.durationMs;
    if (duration !== undefined) launch.durationMs = duration;
    if (spec?.command) launch.command = spec.command;
    if (this.o.executor.kind === 'process' && !launch.command) {
      await this.release(run, { state: 'failed', endedAt: this.o.clock.now(), message: 'the process executor needs a command; the job has none' });
      if (this.running.get(run.ruIndex) === run) this.running.delete(run.ruIndex);
      return;
    }
    run.handle = this.o.executor.start(launch, (exit) => this.track(this.finished(run, exit)));
    this.stats.started++;
    this.recomputeLoad();
  }

  private async jobSpec(job: string): Promise<JobSpec | undefined> {
    if (this.specs.has(job)) return this.specs.get(job) ?? undefined;
    const rec = parseJson<LiveJobRecord>(await this.o.store.get(this.o.keys.job(job)));
    const spec = rec?.spec ?? null;
    this.specs.set(job, spec);
    if (this.specs.size > 1000) this.specs.delete(this.specs.keys().next().value as string);
    return spec ?? undefined;
  }

  private async finished(run: Run, exit: TaskExit): Promise<void> {
    if (run.stopped) return;
    const outcome: TaskOutcome = { state: exit.state, endedAt: this.o.clock.now() };
    if (exit.exitCode !== undefined) outcome.exitCode = exit.exitCode;
    if (exit.message !== undefined) outcome.message = exit.message;
    let delay = 100;
    while (!this.closed && !run.stopped) {
      try {
        await this.release(run, outcome);
        break;
      } catch (err) {
        this.o.log.warn({ job: run.job, task: run.task, err: (err as Error).message }, 'release failed; retrying');
        await this.o.clock.sleep(delay);
        delay = Math.min(delay * 2, 2000);
      }
    }
    if (this.running.get(run.ruIndex) === run) this.running.delete(run.ruIndex);
    if (exit.state === 'succeeded') this.stats.completed++;
    else this.stats.failed++;
    this.recomputeLoad();
  }

  /** Fenced release (releaseRu): frees the RU under this monitor's lease and records the outcome. */
  private async release(run: Run, outcome: TaskOutcome): Promise<boolean> {
    const lease = this.lease;
    if (!lease || lease.fenced) return false;
    const fields: Record<string, unknown> = { startedAt: run.startedAt, server: this.server.id };
    if (run.handle?.logPath) fields.logPath = run.handle.logPath;
    const ok = await releaseRu(this.o.store, this.o.keys, { server: this.server.id, index: run.ruIndex }, run.rev, run.rec, outcome, {
      lease: lease.id,
      taskFields: fields,
    });
    if (run.reported) await this.o.store.delete(this.live.report(run.job, run.task)).catch(() => 0);
    return ok;
  }

  // ---------------------------------------------------------------------------------------------
  // Load monitor (paper §5.2)

  private recomputeLoad(): void {
    const slow = this.o.slowdown ?? ((own, sum, n) => perfSlowdown(own, sum, n));
    const sum = new Array<number>(N_RESOURCES).fill(0);
    for (const r of this.rus.values()) {
      if (r.rec?.state !== 'busy' || !Array.isArray(r.rec.caused)) continue;
      for (let i = 0; i < N_RESOURCES; i++) sum[i] = (sum[i] as number) + (r.rec.caused[i] ?? 0);
    }
    const threshold = this.o.loadThreshold ?? 0.5;
    let anySlow = false;
    for (const run of this.running.values()) {
      if (!run.handle) continue;
      if (Array.isArray(run.rec.caused)) run.handle.setSlowdown(slow(run.rec.caused, sum, this.server.rus));
      const rate = run.handle.rate();
      if (rate < threshold) {
        anySlow = true;
        if (!run.reported) {
          run.reported = true;
          const rep: LoadReportRecord = { job: run.job, task: run.task, server: this.server.id, rate, at: this.o.clock.now() };
          const lease = this.lease;
          if (lease && !lease.fenced) {
            this.track(this.o.store.put(this.live.report(run.job, run.task), JSON.stringify(rep), { lease: lease.id }).catch(() => 0));
          }
          this.o.log.warn({ job: run.job, task: run.task, rate: Number(rate.toFixed(2)) }, 'task well below its expected rate');
        }
      }
    }
    if (anySlow !== this.blocked) {
      this.blocked = anySlow;
      this.o.log.info({ server: this.server.id, blocked: anySlow }, anySlow ? 'no new placements here until the slow task recovers' : 'accepting placements again');
      if (this.registered) this.track(this.putServer().catch(() => undefined));
    }
  }

  private track(p: Promise<unknown>): void {
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }
}
