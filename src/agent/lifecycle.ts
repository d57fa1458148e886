import { createHash } from 'node:crypto';
import type { JobSpec, JobState, RuRef, TaskState } from '../model/types.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, Compare, KeyValue, Op } from '../store/types.ts';
import type { Clock, Timer } from '../util/clock.ts';
import { invalid, isTarcilError, TarcilError } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import type { Rng } from '../util/rng.ts';
import { SchedulingAgent, type AgentConfig, type DecisionRecord, type Placement } from './agent.ts';
import { Follower } from '../state/follow.ts';
import {
  isFinalJob,
  isFinalTask,
  LiveKeys,
  type LiveJobRecord,
  type LiveServerRecord,
  type LiveTaskRecord,
  type OwnerRecord,
  type RequestRecord,
  type StoredDecisions,
} from '../state/live-records.ts';
import { cellFeasibility, type CellServer, type Feasibility } from './cell.ts';
import { trimDecision } from '../state/decisions.ts';
import { DEFAULT_LEASE_TTL_S, HeldLease } from '../state/lease.ts';
import { FREE_RU_VALUE, parseJson, type PlacedRuRecord } from '../state/records.ts';
import { freeReservation } from '../state/release.ts';

/** How an owner reaches node monitors (the gRPC client lives in frontend/, injected here). */
export interface NodeLink {
  launch(endpoint: string, req: { job: string; task: number; ruIndex: number; revision: number }): Promise<void>;
  /** Resolves true once the monitor has stopped the task and recorded the outcome. */
  kill(endpoint: string, req: { job: string; task: number; reason: string }): Promise<boolean>;
}

export interface JobManagerOptions {
  /** Names this process in agent ids and owner records. */
  process: string;
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  rng: Rng;
  log: Logger;
  agents: number;
  agentConfig?: Partial<AgentConfig>;
  /** TTL of the lease that binds this process's `owners/<job>` keys (default 10 s). */
  leaseTtlSeconds?: number;
  nodes?: NodeLink;
  /**
   * How long a server that left is still counted as part of the cell, so that a job it could run
   * waits for it instead of being refused (default 10 min).
   */
  departedMemoryMs?: number;
  /**
   * How long a job may wait for servers that are down (no server it may use is up, a gang or a
   * required spread larger than what is up) before its unplaced tasks fail (default 5 min).
   */
  unplaceableTimeoutMs?: number;
  /** Observers for metrics. */
  onDecision?: (job: JobSpec, rec: DecisionRecord) => void;
  onCommitted?: (job: JobSpec, placements: readonly Placement[]) => void;
}

export interface SubmitResult {
  jobId: string;
  record: LiveJobRecord;
  revision: number;
  /** True when the request id had already created this job (nothing new was written). */
  duplicate: boolean;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function checkRequestId(id: string): string {
  if (!REQUEST_ID.test(id)) throw invalid('request_id', 'must be 1-128 characters of A-Z a-z 0-9 . _ : -');
  return id;
}

/** What makes two submissions the same job: the spec without the id and time the front-end gave it. */
function specDigest(spec: JobSpec): string {
  return createHash('sha256')
    .update(JSON.stringify({ ...spec, id: '', submittedAt: 0 }))
    .digest('hex');
}

interface TaskView {
  rec: LiveTaskRecord;
  rev: number;
}

interface Owned {
  id: string;
  spec: JobSpec;
  agent: SchedulingAgent;
  rec: LiveJobRecord;
  jobRev: number;
  tasks: Map<number, TaskView>;
  /** Task records by state (tasks without a record are not counted: they are queued). */
  counts: Map<TaskState, number>;
  /** Live (placed or running) tasks by server: a server that leaves marks them for evaluation. */
  byServer: Map<string, Set<number>>;
  /**
   * Tasks whose records changed since the last evaluation. Evaluation looks only at these (or at
   * every task when `full` is set), so its cost follows what changed, not the job's size.
   */
  dirty: Set<number>;
  full: boolean;
  scheduling: Set<number>;
  stopping: Set<number>;
  decisions: DecisionRecord[];
  lastDecisions: string;
  evalQueued: boolean;
  chain: Promise<void>;
  dropped: boolean;
  /** A gang whose reservations may have been left half-done (adopted, or an attempt failed). */
  reconcile: boolean;
  /** Why the job waits, when it does: written to the job record's message. */
  note: string | undefined;
  /** Since when the job's unplaced tasks wait for servers that are down (see cell.ts). */
  blockedSince: number | undefined;
}

/** A full pass over a job's tasks yields to the event loop this often (a 100,000-task job). */
const YIELD_EVERY = 5000;

function fmtDuration(ms: number): string {
  return ms >= 60_000 ? `${(ms / 60_000).toFixed(ms % 60_000 === 0 ? 0 : 1)} min` : `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)} s`;
}

function yieldNow(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Decision records kept per job: the first (the original placement) and the latest ones. */
const KEPT_DECISIONS = 5;

function keepFirstAndLatest<T>(list: T[], max: number): T[] {
  return list.length <= max ? list : [list[0] as T, ...list.slice(list.length - (max - 1))];
}

/**
 * Job lifecycle and ownership for the agents of one process.
 *
 * Ownership: a job is owned through `owners/<job>`, a key bound to this process's lease and
 * created in the same transaction as the job record, so an acknowledged job always has an owner
 * or, once that owner's lease has expired, no owner key at all — which every other process
 * notices (watch on `owners/` plus a periodic sweep) and races to fill with a create-only
 * transaction. The winner adopts the job: it reads the job's tasks and carries on from them.
 *
 * Fencing: every write for an owned job compares the owner key's lease (placement commits through
 * SchedulingAgent.setFence, job records, task state changes, cancellations), so an owner that was
 * paused past its TTL cannot write after its successor has taken over; the RU record's revision
 * fences the monitors' writes for a task attempt. No task is ever placed unless the RU write
 * succeeds against the revision that was read, so a task has at most one RU at any revision.
 */
export class JobManager {
  readonly agents: SchedulingAgent[];
  private readonly o: JobManagerOptions;
  private readonly live: LiveKeys;
  private readonly ttl: number;
  private readonly departedMemoryMs: number;
  private readonly unplaceableTimeoutMs: number;
  private lease: HeldLease | undefined;
  private readonly owned = new Map<string, Owned>();
  private readonly jobFinal = new Map<string, boolean>();
  /** Job id → lease of its `owners/<job>` key, as the watch last showed it. */
  private readonly ownerKeys = new Map<string, string>();
  /** Submissions whose transaction is in flight (their owner key may show up before the answer). */
  private readonly submitting = new Set<string>();
  private readonly servers = new Map<string, LiveServerRecord>();
  /** Every server of the cell: registered now, or gone within departedMemoryMs (see cell.ts). */
  private readonly cell = new Map<string, CellServer & { leftAt?: number }>();
  private readonly adopting = new Set<string>();
  private followers: Follower[] = [];
  private readonly background = new Set<Promise<unknown>>();
  private timers: Timer[] = [];
  private nextAgent = 0;
  private closed = false;
  private started = false;
  readonly stats = { submitted: 0, duplicates: 0, adopted: 0, lost: 0, rescheduled: 0, finished: 0, fencedLeases: 0 };

  constructor(opts: JobManagerOptions) {
    this.o = opts;
    this.live = new LiveKeys(opts.keys);
    this.ttl = opts.leaseTtlSeconds ?? DEFAULT_LEASE_TTL_S;
    this.departedMemoryMs = opts.departedMemoryMs ?? 10 * 60_000;
    this.unplaceableTimeoutMs = opts.unplaceableTimeoutMs ?? 5 * 60_000;
    this.agents = Array.from(
      { length: Math.max(1, opts.agents) },
      (_, i) =>
        new SchedulingAgent({
          id: `${opts.process}/a${i + 1}`,
          store: opts.store,
          keys: opts.keys,
          clock: opts.clock,
          rng: opts.rng.fork(),
          log: opts.log,
          // The owner keeps the job record and reschedules preempted tasks itself.
          config: { ...opts.agentConfig, recordJob: false, consumeQueue: false },
          onCommitted: (job, placements) => this.committed(job, placements),
        }),
    );
  }

  get leaseId(): string | undefined {
    return this.lease?.id;
  }

  /** Jobs this process owns now. */
  ownedJobs(): string[] {
    return [...this.owned.keys()];
  }

  /** The in-progress decision for a job owned here (what `explain` shows while it waits). */
  inflightDecision(jobId: string): DecisionRecord | undefined {
    const o = this.owned.get(jobId);
    return o?.agent.inflight.get(jobId);
  }

  async start(): Promise<void> {
    await this.grantLease();
    await Promise.all(this.agents.map((a) => a.start()));
    const k = this.o.keys;
    const mk = (prefix: string, onSnapshot: (kvs: KeyValue[]) => void, onEvent: (kv: KeyValue, deleted: boolean) => void): Follower =>
      new Follower({ store: this.o.store, clock: this.o.clock, log: this.o.log, prefix, onSnapshot, onEvent });
    this.followers = [
      mk(
        k.servers(),
        (kvs) => {
          this.servers.clear();
          for (const kv of kvs) this.onServer(kv, false);
          const now = this.o.clock.now();
          for (const [id, c] of this.cell) {
            if (!this.servers.has(id) && c.leftAt === undefined) Object.assign(c, { up: false, leftAt: now });
          }
        },
        (kv, del) => this.onServer(kv, del),
      ),
      mk(
        k.owners(),
        (kvs) => {
          this.ownerKeys.clear();
          for (const kv of kvs) this.onOwner(kv, false);
        },
        (kv, del) => this.onOwner(kv, del),
      ),
      mk(
        k.jobs(),
        (kvs) => {
          for (const kv of kvs) this.onJob(kv, false);
        },
        (kv, del) => this.onJob(kv, del),
      ),
      mk(
        k.allTasks(),
        (kvs) => {
          for (const kv of kvs) this.onTask(kv, false);
        },
        (kv, del) => this.onTask(kv, del),
      ),
    ];
    for (const f of this.followers) await f.start();
    this.started = true;
    this.sweep();
    this.every(Math.max(200, (this.ttl * 1000) / 2), () => this.sweep());
    this.every(1000, () => this.persistProgress());
  }

  /**
   * Stops scheduling and gives up ownership at once (revoking the lease deletes every owner key,
   * so other processes adopt the jobs without waiting for the TTL).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) t.cancel();
    this.timers = [];
    for (const o of this.owned.values()) o.agent.abort(o.id);
    await Promise.all(this.followers.map((f) => f.close()));
    await Promise.all(this.agents.map((a) => a.close()));
    await Promise.allSettled([...this.background]);
    await this.lease?.revoke();
    this.owned.clear();
  }

  /**
   * Persists a validated job with its owner key in one transaction, then schedules it. Resolves
   * once the job is durable: that is the acknowledgement.
   *
   * With a request id, `requests/<id>` is created in that same transaction, so a client retrying
   * after a lost answer (or racing its own first attempt) gets the job the first attempt created:
   * `duplicate` is then true and nothing new is written. A request id reused for a different
   * spec is refused (ALREADY_EXISTS), since answering with the other job would hide the mistake.
   */
  async submit(spec: JobSpec, opts: { requestId?: string } = {}): Promise<SubmitResult> {
    if (!this.started || this.closed) throw new TarcilError('UNAVAILABLE', 'the scheduler is not running');
    const lease = this.lease;
    if (!lease || lease.fenced) throw new TarcilError('UNAVAILABLE', 'this scheduler has no valid lease; retry shortly');
    const k = this.o.keys;
    const now = this.o.clock.now();
    const requestKey = opts.requestId !== undefined ? this.live.request(checkRequestId(opts.requestId)) : undefined;
    const digest = specDigest(spec);
    if (requestKey) {
      // The common retry: answered from a read, without touching an agent or the lease.
      const seen = await this.o.store.get(requestKey);
      if (seen) return this.existing(seen, digest);
    }
    const f = this.feasibility(spec);
    if (f.kind === 'never') throw new TarcilError('FAILED_PRECONDITION', `${f.field}: this job can never run in this cell: ${f.reason}`, { field: f.field });
    const agent = this.pickAgent();
    const note = f.kind === 'not-now' ? this.blockedNote(f.reason, now) : undefined;
    const record: LiveJobRecord = {
      spec,
      ...(note ? { message: note } : {}),
      state: 'queued',
      placed: 0,
      updatedAt: now,
      submittedAt: spec.submittedAt,
      owner: agent.id,
      rescheduled: 0,
      taskStates: { queued: spec.tasks },
    };
    const owner: OwnerRecord = { agent: agent.id, process: this.o.process, since: now };
    const compare: Compare[] = [{ key: k.job(spec.id), target: 'version', op: '==', value: 0 }];
    const success: Op[] = [
      { type: 'put', key: k.job(spec.id), value: JSON.stringify(record) },
      { type: 'put', key: k.owner(spec.id), value: JSON.stringify(owner), lease: lease.id },
    ];
    const failure: Op[] = [];
    if (requestKey) {
      const req: RequestRecord = { job: spec.id, digest, at: now };
      compare.push({ key: requestKey, target: 'version', op: '==', value: 0 });
      success.push({ type: 'put', key: requestKey, value: JSON.stringify(req) });
      failure.push({ type: 'get', key: requestKey });
    }
    this.submitting.add(spec.id);
    let res;
    try {
      res = await this.o.store.txn({ compare, success, failure });
    } catch (err) {
      // The outcome is unknown: the job may be stored, owned through our lease. Ask the store;
      // if it cannot answer now, the sweep finds the job later (it is ours) and schedules it.
      const landed = await this.o.store.get(k.owner(spec.id)).catch(() => undefined);
      if (!landed || landed.lease !== lease.id) throw err;
      const jkv = await this.o.store.get(k.job(spec.id)).catch(() => undefined);
      if (!jkv) throw err;
      res = { succeeded: true, revision: jkv.modRevision, responses: [] };
    } finally {
      this.submitting.delete(spec.id);
    }
    if (!res.succeeded) {
      const seen = res.responses[0]?.[0];
      if (requestKey && seen) return this.existing(seen, digest);
      throw new TarcilError('ALREADY_EXISTS', `job ${spec.id} exists already`, { field: 'id' });
    }
    this.stats.submitted++;
    this.jobFinal.set(spec.id, false);
    this.ownerKeys.set(spec.id, lease.id);
    const o = this.newOwned(spec, agent, record, res.revision);
    if (note) {
      o.note = note;
      o.blockedSince = now;
    }
    this.evaluate(o);
    return { jobId: spec.id, record, revision: res.revision, duplicate: false };
  }

  /** The job an earlier request with the same id created (see submit). */
  private async existing(requestKv: KeyValue, digest: string): Promise<SubmitResult> {
    const req = parseJson<RequestRecord>(requestKv);
    if (!req) throw new TarcilError('INTERNAL', `unreadable request record ${requestKv.key}`);
    if (req.digest !== digest) {
      throw new TarcilError('ALREADY_EXISTS', `request_id was already used for another job spec (job ${req.job})`, { field: 'request_id' });
    }
    const kv = await this.o.store.get(this.o.keys.job(req.job));
    const record = parseJson<LiveJobRecord>(kv);
    if (!kv || !record) throw new TarcilError('INTERNAL', `request ${requestKv.key} names job ${req.job}, which is not stored`);
    this.stats.duplicates++;
    return { jobId: req.job, record, revision: kv.modRevision, duplicate: true };
  }

  /** Requests cancellation (from any process); the job's owner stops its tasks. */
  async cancel(jobId: string): Promise<LiveJobRecord> {
    const k = this.o.keys;
    for (let attempt = 0; attempt < 10; attempt++) {
      const kv = await this.o.store.get(k.job(jobId));
      const rec = parseJson<LiveJobRecord>(kv);
      if (!kv || !rec) throw new TarcilError('NOT_FOUND', `job ${jobId} does not exist`, { field: 'job_id' });
      if (isFinalJob(rec.state) || rec.cancelRequested) return rec;
      const next: LiveJobRecord = { ...rec, cancelRequested: true, updatedAt: this.o.clock.now() };
      const res = await this.o.store.txn({
        compare: [{ key: kv.key, target: 'mod', op: '==', value: kv.modRevision }],
        success: [{ type: 'put', key: kv.key, value: JSON.stringify(next) }],
      });
      if (res.succeeded) return next;
    }
    throw new TarcilError('UNAVAILABLE', `job ${jobId} kept changing; cancel again`);
  }

  // ---------------------------------------------------------------------------------------------
  // Lease

  private async grantLease(): Promise<void> {
    this.lease = await HeldLease.grant({
      store: this.o.store,
      clock: this.o.clock,
      log: this.o.log.child({ component: 'owner-lease' }),
      ttlSeconds: this.ttl,
      onFenced: () => this.onFenced(),
    });
  }

  /** Our lease can no longer be trusted: stop everything done under it, then get a new one. */
  private onFenced(): void {
    this.stats.fencedLeases++;
    for (const o of [...this.owned.values()]) this.drop(o, 'owner lease fenced');
    if (this.closed) return;
    const again = async (): Promise<void> => {
      let delay = 200;
      while (!this.closed) {
        try {
          await this.grantLease();
          this.o.log.info({ lease: this.lease?.id }, 'new owner lease; adopting unowned jobs');
          this.sweep();
          return;
        } catch (err) {
          this.o.log.warn({ err: (err as Error).message }, 'cannot grant an owner lease; retrying');
          await this.o.clock.sleep(delay);
          delay = Math.min(delay * 2, 3000);
        }
      }
    };
    this.track(again());
  }

  // ---------------------------------------------------------------------------------------------
  // Watches

  private onServer(kv: KeyValue, deleted: boolean): void {
    const id = this.o.keys.tail(this.o.keys.servers(), kv.key);
    if (id === undefined) return;
    if (deleted) {
      this.servers.delete(id);
      const c = this.cell.get(id);
      if (c) Object.assign(c, { up: false, leftAt: this.o.clock.now() });
      for (const o of this.owned.values()) {
        const on = o.byServer.get(id);
        if (!on || on.size === 0) continue;
        for (const t of on) o.dirty.add(t);
        this.evaluate(o);
      }
      return;
    }
    const rec = parseJson<LiveServerRecord>(kv);
    if (!rec) return;
    this.servers.set(id, rec);
    const wasUp = this.cell.get(id)?.up === true;
    this.cell.set(id, { spec: rec, up: rec.state !== 'down' });
    for (const a of this.agents) a.state.setBlocked(id, rec.blocked === true);
    // A server (back) up may be what a waiting job needs.
    if (!wasUp && rec.state !== 'down') for (const o of this.owned.values()) if (o.blockedSince !== undefined) this.evaluate(o);
  }

  private onOwner(kv: KeyValue, deleted: boolean): void {
    const id = this.o.keys.tail(this.o.keys.owners(), kv.key);
    if (id === undefined) return;
    if (!deleted) {
      this.ownerKeys.set(id, kv.lease);
      return;
    }
    this.ownerKeys.delete(id);
    const mine = this.owned.get(id);
    if (mine) this.drop(mine, 'owner key deleted');
    if (this.jobFinal.get(id) === false) this.scheduleAdopt(id);
  }

  private onJob(kv: KeyValue, deleted: boolean): void {
    const id = this.o.keys.tail(this.o.keys.jobs(), kv.key);
    if (id === undefined) return;
    const o = this.owned.get(id);
    if (deleted) {
      this.jobFinal.delete(id);
      if (o) this.drop(o, 'job record deleted');
      return;
    }
    const rec = parseJson<LiveJobRecord>(kv);
    if (!rec) return;
    this.jobFinal.set(id, isFinalJob(rec.state));
    if (o && kv.modRevision > o.jobRev) this.takeRecord(o, rec, kv.modRevision);
  }

  /** The stored job record is newer than ours (a cancellation, or our own write seen back). */
  private takeRecord(o: Owned, rec: LiveJobRecord, rev: number): void {
    // A cancellation concerns every task, not only those that changed.
    if (rec.cancelRequested && !o.rec.cancelRequested) o.full = true;
    o.rec = rec;
    o.jobRev = rev;
    this.evaluate(o);
  }

  private onTask(kv: KeyValue, deleted: boolean): void {
    const ref = this.live.parseTask(kv.key);
    if (!ref) return;
    const o = this.owned.get(ref.job);
    if (!o) return;
    this.mergeTask(o, ref.index, deleted ? undefined : parseJson<LiveTaskRecord>(kv), kv.modRevision);
    this.evaluate(o);
  }

  private mergeTask(o: Owned, index: number, rec: LiveTaskRecord | undefined, rev: number): void {
    const cur = o.tasks.get(index);
    if (cur && cur.rev >= rev) return;
    if (cur) this.untrack(o, index, cur.rec);
    if (rec) {
      o.tasks.set(index, { rec, rev });
      o.counts.set(rec.state, (o.counts.get(rec.state) ?? 0) + 1);
      if ((rec.state === 'placed' || rec.state === 'running') && rec.ru) {
        let on = o.byServer.get(rec.ru.server);
        if (!on) o.byServer.set(rec.ru.server, (on = new Set()));
        on.add(index);
      }
    } else o.tasks.delete(index);
    o.dirty.add(index);
  }

  private untrack(o: Owned, index: number, rec: LiveTaskRecord): void {
    o.counts.set(rec.state, (o.counts.get(rec.state) ?? 1) - 1);
    if (rec.ru) {
      const on = o.byServer.get(rec.ru.server);
      on?.delete(index);
      if (on?.size === 0) o.byServer.delete(rec.ru.server);
    }
  }

  /** Forgets a task record (a gang reservation given back): the task is queued again. */
  private forgetTask(o: Owned, index: number): void {
    const cur = o.tasks.get(index);
    if (!cur) return;
    this.untrack(o, index, cur.rec);
    o.tasks.delete(index);
    o.dirty.add(index);
  }

  /** A commit of one of our agents: record the placements before the watch brings them. */
  private committed(job: JobSpec, placements: readonly Placement[]): void {
    const o = this.owned.get(job.id);
    if (o) {
      for (const p of placements) {
        const rec: LiveTaskRecord = { job: job.id, index: p.task, state: 'placed', ru: p.ru, attempt: 0, placedAt: this.o.clock.now() };
        this.mergeTask(o, p.task, rec, p.commitRevision);
      }
    }
    this.o.onCommitted?.(job, placements);
    const nodes = this.o.nodes;
    if (!nodes) return;
    for (const p of placements) {
      const endpoint = this.servers.get(p.ru.server)?.endpoint;
      if (!endpoint) continue;
      // Fast path only: the monitor follows its RUs in the store and starts the task anyway.
      const req = { job: job.id, task: p.task, ruIndex: p.ru.index, revision: p.commitRevision };
      this.track(
        nodes.launch(endpoint, req).catch((err: unknown) => {
          this.o.log.debug({ job: job.id, task: p.task, endpoint, err: (err as Error).message }, 'launch RPC failed; the monitor will see the commit');
        }),
      );
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Adoption

  private sweep(): void {
    if (this.closed || !this.lease || this.lease.fenced) return;
    for (const [id, final] of this.jobFinal) {
      if (final || this.owned.has(id)) continue;
      const ownerLease = this.ownerKeys.get(id);
      if (ownerLease === undefined) this.scheduleAdopt(id);
      // Ours by the store, unknown to us: a submission whose answer was lost with the connection
      // (the transaction landed, the reply did not). Nobody else may adopt it while our lease
      // lives, so we must take it up ourselves or it waits forever.
      else if (ownerLease === this.lease.id && !this.submitting.has(id)) this.scheduleAdopt(id, true);
    }
  }

  private scheduleAdopt(id: string, ours = false): void {
    if (this.closed || this.adopting.has(id) || this.owned.has(id)) return;
    this.adopting.add(id);
    // Jitter spreads the jobs of a dead process over the survivors instead of one taking all.
    const jitter = this.o.rng.next() * Math.min(1000, this.ttl * 250);
    const p = this.o.clock
      .sleep(jitter)
      .then(() => this.tryAdopt(id, ours))
      .catch((err: unknown) => this.o.log.warn({ job: id, err: (err as Error).message }, 'adoption failed; the sweep will retry'))
      .finally(() => this.adopting.delete(id));
    this.track(p);
  }

  /**
   * Takes up a job: one with no owner key (create it, bound to our lease), or, with `ours`, one
   * whose owner key is already bound to our lease but which this process does not hold.
   */
  private async tryAdopt(id: string, ours = false): Promise<void> {
    const lease = this.lease;
    if (this.closed || !lease || lease.fenced || this.owned.has(id) || this.submitting.has(id)) return;
    const k = this.o.keys;
    const kv = await this.o.store.get(k.job(id));
    const rec = parseJson<LiveJobRecord>(kv);
    if (!kv || !rec || isFinalJob(rec.state)) return;
    const agent = this.pickAgent();
    const owner: OwnerRecord = { agent: agent.id, process: this.o.process, since: this.o.clock.now() };
    const res = await this.o.store.txn({
      compare: [
        ours ? { key: k.owner(id), target: 'lease', op: '==', value: lease.id } : { key: k.owner(id), target: 'version', op: '==', value: 0 },
        { key: kv.key, target: 'mod', op: '==', value: kv.modRevision },
      ],
      success: [
        ...(ours ? [] : [{ type: 'put' as const, key: k.owner(id), value: JSON.stringify(owner), lease: lease.id }]),
        { type: 'get', key: k.tasks(id), prefix: true },
      ],
    });
    if (!res.succeeded || this.closed || this.owned.has(id) || lease !== this.lease) return;
    this.stats.adopted++;
    const o = this.newOwned(rec.spec, agent, rec, kv.modRevision);
    o.reconcile = rec.spec.mode === 'gang';
    for (const t of res.responses[ours ? 0 : 1] ?? []) {
      const r = this.live.parseTask(t.key);
      if (r) this.mergeTask(o, r.index, parseJson<LiveTaskRecord>(t), t.modRevision);
    }
    this.o.log.info({ job: id, agent: agent.id, tasks: o.tasks.size }, 'adopted job');
    this.evaluate(o);
  }

  private newOwned(spec: JobSpec, agent: SchedulingAgent, rec: LiveJobRecord, jobRev: number): Owned {
    const o: Owned = {
      id: spec.id,
      spec,
      agent,
      rec,
      jobRev,
      tasks: new Map(),
      counts: new Map(),
      byServer: new Map(),
      dirty: new Set(),
      full: true,
      scheduling: new Set(),
      stopping: new Set(),
      decisions: [],
      lastDecisions: '',
      evalQueued: false,
      chain: Promise.resolve(),
      dropped: false,
      reconcile: false,
      note: rec.message,
      blockedSince: undefined,
    };
    this.owned.set(spec.id, o);
    return o;
  }

  private drop(o: Owned, why: string): void {
    if (o.dropped) return;
    o.dropped = true;
    o.agent.abort(o.id);
    this.owned.delete(o.id);
    this.o.log.info({ job: o.id, why }, 'no longer owner of job');
  }

  // ---------------------------------------------------------------------------------------------
  // Evaluation: make the job's records move towards a final state

  private evaluate(o: Owned): void {
    if (o.dropped || o.evalQueued || this.closed) return;
    o.evalQueued = true;
    const p = o.chain.then(async () => {
      o.evalQueued = false;
      if (o.dropped || this.closed) return;
      try {
        await this.evaluateNow(o);
      } catch (err) {
        if (this.closed) return;
        this.o.log.warn({ job: o.id, err: (err as Error).message }, 'job evaluation failed; retrying');
        const t = this.o.clock.setTimer(500, () => this.evaluate(o));
        this.timers.push(t);
      }
    });
    o.chain = p;
    this.track(p);
  }

  /**
   * The tasks to look at: those whose records changed since the last evaluation, or all of them
   * after adoption, a cancellation or a failed evaluation (`full`).
   */
  private takeDirty(o: Owned): Iterable<number> {
    if (o.full) {
      o.full = false;
      o.dirty.clear();
      const n = o.spec.tasks;
      return (function* () {
        for (let t = 0; t < n; t++) yield t;
      })();
    }
    const list = [...o.dirty];
    o.dirty.clear();
    return list;
  }

  private async evaluateNow(o: Owned): Promise<void> {
    if (o.reconcile && o.scheduling.size === 0) {
      await this.reconcileGang(o);
      if (o.dropped) return;
      o.reconcile = false;
    }
    try {
      if (o.rec.cancelRequested) await this.evaluateCancel(o);
      else await this.evaluateTasks(o);
    } catch (err) {
      o.full = true; // what was taken from `dirty` is looked at again on the retry
      throw err;
    }
    if (o.dropped) return;
    await this.writeSummary(o);
  }

  private async evaluateTasks(o: Owned): Promise<void> {
    const toSchedule: number[] = [];
    let seen = 0;
    for (const t of this.takeDirty(o)) {
      if (++seen % YIELD_EVERY === 0) await yieldNow();
      if (o.scheduling.has(t)) continue;
      const cur = o.tasks.get(t);
      const st = cur?.rec.state;
      if (cur && (st === 'placed' || st === 'running') && cur.rec.ru && !this.servers.has(cur.rec.ru.server)) {
        // The node's lease expired (or it never registered with us yet): confirm with the store.
        const alive = await this.o.store.get(this.o.keys.server(cur.rec.ru.server));
        if (!alive) {
          const lost = await this.markLost(o, t, cur, `server ${cur.rec.ru.server} left the cluster`);
          if (o.dropped) return;
          if (lost) toSchedule.push(t);
          continue;
        }
      }
      if (!cur || st === 'queued' || st === 'lost') toSchedule.push(t);
    }
    if (toSchedule.length === 0) return;
    const f = this.feasibility(o.spec);
    if (f.kind !== 'ok') {
      await this.holdUnplaceable(o, toSchedule, f.reason);
      return;
    }
    if (o.blockedSince !== undefined) {
      o.blockedSince = undefined;
      o.note = undefined;
    }
    await this.startSchedule(o, toSchedule);
  }

  /** The cell (as it is now) cannot take the job: wait with the reason, and fail after the bound. */
  private async holdUnplaceable(o: Owned, tasks: number[], reason: string): Promise<void> {
    const now = this.o.clock.now();
    o.blockedSince ??= now;
    if (now - o.blockedSince < this.unplaceableTimeoutMs) {
      o.note = this.blockedNote(reason, o.blockedSince);
      for (const t of tasks) o.dirty.add(t); // looked at again on the next tick (persistProgress)
      return;
    }
    o.note = `${reason}; gave up after ${fmtDuration(this.unplaceableTimeoutMs)}`;
    const per = Math.max(1, this.o.store.maxTxnOps - 2);
    for (let i = 0; i < tasks.length && !o.dropped; i += per) await this.setTaskStates(o, tasks.slice(i, i + per), 'failed', o.note);
  }

  private blockedNote(reason: string, since: number): string {
    return `${reason}; waiting for them, the job fails at ${new Date(since + this.unplaceableTimeoutMs).toISOString()} if they are not back`;
  }

  /** Can the job run in the cell, and now? (see cell.ts) */
  feasibility(spec: JobSpec): Feasibility {
    const horizon = this.o.clock.now() - this.departedMemoryMs;
    for (const [id, c] of this.cell) if (c.leftAt !== undefined && c.leftAt < horizon) this.cell.delete(id);
    return cellFeasibility(this.cell.values(), spec);
  }

  /**
   * Cancellation: stop the scheduling call, stop placed and running tasks through their monitors,
   * and record the queued ones as cancelled, many per transaction. Tasks that never had a record
   * get none: the summary counts them as cancelled.
   */
  private async evaluateCancel(o: Owned): Promise<void> {
    if (o.scheduling.size > 0) o.agent.abort(o.id);
    const unplaced: number[] = [];
    let seen = 0;
    for (const t of this.takeDirty(o)) {
      if (++seen % YIELD_EVERY === 0) await yieldNow();
      if (o.scheduling.has(t) || o.stopping.has(t)) continue;
      const cur = o.tasks.get(t);
      if (!cur || isFinalTask(cur.rec.state)) continue;
      if (cur.rec.state === 'queued' || cur.rec.state === 'lost') unplaced.push(t);
      else this.stopTask(o, t, cur);
    }
    const per = Math.max(1, this.o.store.maxTxnOps - 2);
    for (let i = 0; i < unplaced.length && !o.dropped; i += per) {
      await this.setTaskStates(o, unplaced.slice(i, i + per), 'cancelled', 'cancelled before it was placed');
    }
  }

  private async startSchedule(o: Owned, tasks: number[]): Promise<void> {
    const lease = this.lease;
    if (!lease || lease.fenced) return;
    // Preempted tasks come back with a durable queue entry; we take them over from it.
    await this.claimPreempted(o, tasks);
    let again = 0;
    for (const t of tasks) if (o.tasks.get(t)?.rec.state === 'lost') again++;
    if (again > 0) {
      this.stats.rescheduled += again;
      o.rec = { ...o.rec, rescheduled: (o.rec.rescheduled ?? 0) + again };
    }
    for (const t of tasks) o.scheduling.add(t);
    o.agent.setFence(o.id, { key: this.o.keys.owner(o.id), lease: lease.id });
    const p = o.agent
      .schedule(o.spec, tasks)
      .then(
        (rec) => {
          if (o.blockedSince === undefined) o.note = undefined;
          o.decisions = keepFirstAndLatest([...o.decisions, rec], KEPT_DECISIONS);
          this.o.onDecision?.(o.spec, rec);
        },
        async (err: unknown) => {
          if (isTarcilError(err, 'CANCELLED') || isTarcilError(err, 'CLOSED')) return;
          if (isTarcilError(err, 'FAILED_PRECONDITION')) {
            // The agent's view of the cell cannot take the job (it shrank since the last check):
            // the next evaluation checks the cell again, and waits or fails with the reason.
            o.note = err.message;
            await this.o.clock.sleep(500);
            return;
          }
          this.o.log.warn({ job: o.id, err: (err as Error).message }, 'scheduling failed; retrying');
          // A gang attempt may have stopped between its reservation transactions.
          if (o.spec.mode === 'gang') o.reconcile = true;
          await this.o.clock.sleep(500);
        },
      )
      .catch((err: unknown) => this.o.log.warn({ job: o.id, err: (err as Error).message }, 'scheduling cleanup failed'))
      .finally(() => {
        // What this call did not place is looked at again by the next evaluation.
        for (const t of tasks) {
          o.scheduling.delete(t);
          o.dirty.add(t);
        }
        if (!o.dropped) {
          this.track(this.persistDecisions(o, false));
          this.evaluate(o);
        }
      });
    this.track(p);
  }

  /**
   * A gang larger than one transaction is reserved chunk by chunk, then confirmed (reserved →
   * busy) chunk by chunk. An owner that stops part-way (it died, lost its lease, or the store
   * failed) leaves RUs `reserved`: no monitor runs a reserved RU, and only the job's owner turns
   * it busy, so left alone the job would wait forever. Here the owner settles them, all or
   * nothing: if confirmation had begun (an RU of the job is busy, or a task ran), the remaining
   * reservations are confirmed, since part of the gang may be running; otherwise every
   * reservation is given back and the whole gang is scheduled again.
   */
  private async reconcileGang(o: Owned): Promise<void> {
    const lease = this.lease;
    if (!lease || lease.fenced) return;
    const k = this.o.keys;
    const fence = { key: k.owner(o.id), lease: lease.id };
    const held: { t: number; ref: RuRef; ruKv: KeyValue; ru: PlacedRuRecord }[] = [];
    let confirmed = false;
    for (const [t, v] of o.tasks) {
      const st = v.rec.state;
      if (st === 'running' || st === 'succeeded' || st === 'failed') confirmed = true;
      if (st !== 'placed' || !v.rec.ru) continue;
      const ruKv = await this.o.store.get(k.ru(v.rec.ru));
      const ru = parseJson<PlacedRuRecord>(ruKv);
      if (!ruKv || !ru || ru.job !== o.id || ru.task !== t) continue;
      if (ru.state === 'busy') confirmed = true;
      else if (ru.state === 'reserved') held.push({ t, ref: v.rec.ru, ruKv, ru });
    }
    if (held.length === 0) return;
    this.o.log.info({ job: o.id, reserved: held.length, confirmed }, confirmed ? 'completing a gang confirmation left half-done' : 'releasing gang reservations left half-done');
    for (const h of held) {
      if (confirmed) {
        const res = await this.o.store.txn({
          compare: [this.ownerFence(o, lease), { key: h.ruKv.key, target: 'mod', op: '==', value: h.ruKv.modRevision }],
          success: [
            { type: 'put', key: h.ruKv.key, value: JSON.stringify({ ...h.ru, state: 'busy', since: this.o.clock.now() }) },
            { type: 'put', key: k.epoch(h.ref.server), value: `${o.agent.id}:gang` },
          ],
          failure: [{ type: 'get', key: k.owner(o.id) }],
        });
        if (!res.succeeded) {
          this.checkOwnership(o, res.responses[0]?.[0], lease);
          throw new TarcilError('UNAVAILABLE', `gang ${o.id}: reservation of task ${h.t} changed while completing it`);
        }
      } else {
        const ok = await freeReservation(this.o.store, k, { ru: h.ref, ruRevision: h.ruKv.modRevision, job: o.id, task: h.t, by: o.agent.id }, fence);
        if (!ok) {
          const owner = await this.o.store.get(k.owner(o.id));
          this.checkOwnership(o, owner, lease);
          throw new TarcilError('UNAVAILABLE', `gang ${o.id}: reservation of task ${h.t} changed while releasing it`);
        }
        this.forgetTask(o, h.t);
      }
    }
  }

  private async claimPreempted(o: Owned, tasks: number[]): Promise<void> {
    const preempted = new Set<number>();
    for (const t of tasks) if (o.tasks.get(t)?.rec.state === 'queued') preempted.add(t);
    if (preempted.size === 0) return;
    const res = await this.o.store.range(this.o.keys.queue());
    for (const kv of res.kvs) {
      const e = parseJson<{ job: string; tasks?: number[]; reason?: string }>(kv);
      if (e?.job === o.id && e.reason === 'preempted' && (e.tasks ?? []).some((t) => preempted.has(t))) {
        await this.o.store.txn({
          compare: [{ key: kv.key, target: 'mod', op: '==', value: kv.modRevision }],
          success: [{ type: 'delete', key: kv.key }],
        });
      }
    }
    this.stats.rescheduled += preempted.size;
  }

  /** The task's node is gone: record it lost (fenced), so that it is placed again. */
  private async markLost(o: Owned, t: number, cur: TaskView, why: string): Promise<boolean> {
    const lease = this.lease;
    if (!lease) return false;
    const k = this.o.keys;
    const ref = cur.rec.ru as RuRef;
    const ruKv = await this.o.store.get(k.ru(ref));
    const ru = parseJson<PlacedRuRecord>(ruKv);
    const next: LiveTaskRecord = {
      ...cur.rec,
      state: 'lost',
      attempt: cur.rec.attempt + 1,
      endedAt: this.o.clock.now(),
      message: why,
    };
    const compare: Compare[] = [this.ownerFence(o, lease)];
    const success: Op[] = [{ type: 'put', key: k.task(o.id, t), value: JSON.stringify(next) }];
    if (ruKv && ru && ru.job === o.id && ru.task === t) {
      // The RU record goes with its server: a node that comes back registers its RUs afresh.
      compare.push({ key: ruKv.key, target: 'mod', op: '==', value: ruKv.modRevision });
      success.push({ type: 'delete', key: ruKv.key });
    } else {
      compare.push({ key: k.task(o.id, t), target: 'mod', op: '==', value: cur.rev });
    }
    const res = await this.o.store.txn({ compare, success, failure: [{ type: 'get', key: k.owner(o.id) }] });
    if (!res.succeeded) {
      this.checkOwnership(o, res.responses[0]?.[0], lease);
      return false;
    }
    this.mergeTask(o, t, next, res.revision);
    this.stats.lost++;
    this.o.log.info({ job: o.id, task: t, why }, 'task lost; rescheduling');
    return true;
  }

  /** Cancels a placed or running task: through its monitor if it answers, else directly. */
  private stopTask(o: Owned, t: number, cur: TaskView): void {
    o.stopping.add(t);
    const run = async (): Promise<void> => {
      const ref = cur.rec.ru;
      const endpoint = ref ? this.servers.get(ref.server)?.endpoint : undefined;
      let done = false;
      if (endpoint && this.o.nodes) {
        done = await this.o.nodes.kill(endpoint, { job: o.id, task: t, reason: 'cancelled' }).catch(() => false);
      }
      if (!done) await this.releaseDirectly(o, t, cur);
    };
    this.track(
      run()
        .catch((err: unknown) => this.o.log.warn({ job: o.id, task: t, err: (err as Error).message }, 'stopping a task failed; will retry'))
        .finally(() => {
          o.stopping.delete(t);
          this.evaluate(o);
        }),
    );
  }

  private async releaseDirectly(o: Owned, t: number, cur: TaskView): Promise<void> {
    const lease = this.lease;
    if (!lease) return;
    const k = this.o.keys;
    const ref = cur.rec.ru;
    const next: LiveTaskRecord = { ...cur.rec, state: 'cancelled', endedAt: this.o.clock.now(), message: 'cancelled' };
    const compare: Compare[] = [this.ownerFence(o, lease)];
    const success: Op[] = [{ type: 'put', key: k.task(o.id, t), value: JSON.stringify(next) }];
    const ruKv = ref ? await this.o.store.get(k.ru(ref)) : undefined;
    const ru = parseJson<PlacedRuRecord>(ruKv);
    if (ref && ruKv && ru && ru.job === o.id && ru.task === t) {
      const server = await this.o.store.get(k.server(ref.server));
      compare.push({ key: ruKv.key, target: 'mod', op: '==', value: ruKv.modRevision });
      if (server) {
        // Free, and bound to the node's lease like the monitor's own free RUs.
        success.push({ type: 'put', key: ruKv.key, value: FREE_RU_VALUE, ...(server.lease !== '0' ? { lease: server.lease } : {}) });
        success.push({ type: 'put', key: k.epoch(ref.server), value: `cancel:${o.id}#${t}` });
      } else {
        success.push({ type: 'delete', key: ruKv.key });
      }
    } else {
      compare.push({ key: k.task(o.id, t), target: 'mod', op: '==', value: cur.rev });
    }
    const res = await this.o.store.txn({ compare, success, failure: [{ type: 'get', key: k.owner(o.id) }] });
    if (res.succeeded) this.mergeTask(o, t, next, res.revision);
    else this.checkOwnership(o, res.responses[0]?.[0], lease);
  }

  /** Moves queued tasks to a final state, in one fenced transaction (at most maxTxnOps − 2 tasks). */
  private async setTaskStates(o: Owned, tasks: number[], state: TaskState, message: string): Promise<void> {
    const lease = this.lease;
    if (!lease || tasks.length === 0) return;
    const k = this.o.keys;
    const now = this.o.clock.now();
    const compare: Compare[] = [this.ownerFence(o, lease)];
    const success: Op[] = [];
    const next = new Map<number, LiveTaskRecord>();
    for (const t of tasks) {
      const cur = o.tasks.get(t);
      const rec: LiveTaskRecord = { ...(cur?.rec ?? { job: o.id, index: t, attempt: 0 }), state, endedAt: now, message };
      next.set(t, rec);
      compare.push({ key: k.task(o.id, t), target: 'mod', op: '==', value: cur?.rev ?? 0 });
      success.push({ type: 'put', key: k.task(o.id, t), value: JSON.stringify(rec) });
    }
    const res = await this.o.store.txn({ compare, success, failure: [{ type: 'get', key: k.owner(o.id) }] });
    if (res.succeeded) for (const [t, rec] of next) this.mergeTask(o, t, rec, res.revision);
    else {
      this.checkOwnership(o, res.responses[0]?.[0], lease);
      // A task changed meanwhile (its watch event marks it for the next evaluation).
      for (const t of tasks) o.dirty.add(t);
    }
  }

  private ownerFence(o: Owned, lease: HeldLease): Compare {
    return { key: this.o.keys.owner(o.id), target: 'lease', op: '==', value: lease.id };
  }

  private checkOwnership(o: Owned, ownerKv: KeyValue | undefined, lease: HeldLease): void {
    if (!ownerKv || ownerKv.lease !== lease.id) this.drop(o, 'ownership lost (fenced write)');
  }

  // ---------------------------------------------------------------------------------------------
  // Summary and final state

  /** The job's state from the task counts (O(states), kept up to date by mergeTask). */
  private summarize(o: Owned): { state: JobState; counts: Partial<Record<TaskState, number>>; placed: number } {
    const counts: Partial<Record<TaskState, number>> = {};
    for (const [st, c] of o.counts) if (c > 0) counts[st] = c;
    const unrecorded = o.spec.tasks - o.tasks.size;
    if (unrecorded > 0) {
      // Tasks never placed have no record; a cancelled job does not write one for each.
      const as: TaskState = o.rec.cancelRequested ? 'cancelled' : 'queued';
      counts[as] = (counts[as] ?? 0) + unrecorded;
    }
    const n = o.spec.tasks;
    const c = (s: TaskState): number => counts[s] ?? 0;
    const placed = n - c('queued') - c('lost') - (o.rec.cancelRequested ? unrecorded : 0);
    const finals = c('succeeded') + c('failed') + c('cancelled');
    let state: JobState;
    if (finals === n) {
      if (c('cancelled') > 0 && o.rec.cancelRequested) state = 'cancelled';
      else if (c('failed') > 0) state = 'failed';
      else if (c('cancelled') > 0) state = 'cancelled';
      else state = 'succeeded';
    } else if (c('running') > 0 || finals > 0) {
      // Under way: some task runs or has run; a moment with none running (the next ones wait for
      // a free RU) does not send the job back to queued.
      state = 'running';
    }
    else if (placed === n) state = 'placed';
    else if (this.admitted(o)) state = 'admitted';
    else state = o.rec.state === 'admitted' ? 'admitted' : 'queued';
    return { state, counts, placed };
  }

  /** A failed job says why: the reason it could not be placed, or its first failed task's. */
  private finalMessage(o: Owned, state: JobState): string {
    if (state === 'cancelled') return 'cancelled';
    if (state !== 'failed') return '';
    if (o.note) return o.note;
    let failed = 0;
    let first: LiveTaskRecord | undefined;
    for (const v of o.tasks.values()) {
      if (v.rec.state !== 'failed') continue;
      failed++;
      if (!first || v.rec.index < first.index) first = v.rec;
    }
    return first ? `${failed} of ${o.spec.tasks} tasks failed; task ${first.index}: ${first.message ?? `exit code ${first.exitCode ?? '?'}`}` : 'failed';
  }

  private admitted(o: Owned): boolean {
    if (o.decisions.length > 0) return true;
    const rec = o.agent.inflight.get(o.id);
    if (!rec) return false;
    const last = rec.admission[rec.admission.length - 1];
    return last === undefined ? rec.samples.length > 0 : last.action !== 'queue';
  }

  private async writeSummary(o: Owned): Promise<void> {
    const lease = this.lease;
    if (!lease || lease.fenced) return;
    const s = this.summarize(o);
    const final = isFinalJob(s.state);
    const message = final ? this.finalMessage(o, s.state) : (o.note ?? '');
    const same =
      s.state === o.rec.state &&
      s.placed === o.rec.placed &&
      message === (o.rec.message ?? '') &&
      JSON.stringify(s.counts) === JSON.stringify(o.rec.taskStates ?? {});
    if (same && !final) return;
    if (final && (o.scheduling.size > 0 || o.stopping.size > 0)) return;
    const k = this.o.keys;
    const now = this.o.clock.now();
    const next: LiveJobRecord = { ...o.rec, state: s.state, placed: s.placed, taskStates: s.counts, updatedAt: now, owner: o.agent.id };
    if (message !== '') next.message = message;
    else delete next.message;
    if (final) next.finishedAt = now;
    const success: Op[] = [{ type: 'put', key: k.job(o.id), value: JSON.stringify(next) }];
    if (final) {
      // Everything the job held goes in the same transaction as its final state: no orphans.
      success.push({ type: 'delete', key: k.owner(o.id) });
      success.push({ type: 'delete', key: this.live.jobReports(o.id), prefix: true });
      const queue = await this.o.store.range(k.queue());
      for (const kv of queue.kvs) {
        const e = parseJson<{ job?: string }>(kv);
        if (e?.job === o.id) success.push({ type: 'delete', key: kv.key });
      }
      success.push({ type: 'put', key: k.decision(o.id), value: this.decisionsJson(o, false) });
    }
    const res = await this.o.store.txn({
      compare: [this.ownerFence(o, lease), { key: k.job(o.id), target: 'mod', op: '==', value: o.jobRev }],
      success,
      failure: [{ type: 'get', key: k.owner(o.id) }, { type: 'get', key: k.job(o.id) }],
    });
    if (!res.succeeded) {
      this.checkOwnership(o, res.responses[0]?.[0], lease);
      const jkv = res.responses[1]?.[0];
      const jrec = parseJson<LiveJobRecord>(jkv);
      if (!o.dropped && jkv && jrec) this.takeRecord(o, jrec, jkv.modRevision);
      return;
    }
    o.rec = next;
    o.jobRev = res.revision;
    if (final) {
      this.stats.finished++;
      this.jobFinal.set(o.id, true);
      this.owned.delete(o.id);
      o.dropped = true;
      o.agent.release(o.id);
      this.o.log.info({ job: o.id, state: s.state, rescheduled: next.rescheduled ?? 0 }, 'job finished');
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Decisions (what `explain` reads)

  private decisionsJson(o: Owned, inProgress: boolean): string {
    const records = [...o.decisions];
    const live = o.agent.inflight.get(o.id);
    if (live) records.push(live);
    const kept = keepFirstAndLatest(records, KEPT_DECISIONS).map((r) => trimDecision(r));
    const d: StoredDecisions = { records: kept, inProgress, updatedAt: this.o.clock.now() };
    return JSON.stringify(d);
  }

  private async persistDecisions(o: Owned, inProgress: boolean): Promise<void> {
    const lease = this.lease;
    if (!lease || lease.fenced || o.dropped) return;
    const json = this.decisionsJson(o, inProgress);
    const sig = json.replace(/"updatedAt":\d+/, '');
    if (sig === o.lastDecisions) return;
    o.lastDecisions = sig;
    await this.o.store
      .txn({
        compare: [this.ownerFence(o, lease)],
        success: [{ type: 'put', key: this.o.keys.decision(o.id), value: json }],
      })
      .catch((err: unknown) => this.o.log.debug({ job: o.id, err: (err as Error).message }, 'decision record not written'));
  }

  /** While jobs wait, keep their decision records (and admitted state) current for `explain`. */
  private persistProgress(): void {
    for (const o of this.owned.values()) {
      if (o.blockedSince !== undefined) {
        this.evaluate(o);
        continue;
      }
      if (o.scheduling.size === 0) continue;
      this.track(this.persistDecisions(o, true));
      // Why it waits (admission queue, no free RU it may use), for the job's message.
      // (Kept between waits, cleared when the scheduling call ends: no rewrite per attempt.)
      const waiting = o.agent.inflight.get(o.id)?.waiting;
      if ((waiting !== undefined && waiting !== o.note) || (o.rec.state === 'queued' && this.admitted(o))) {
        if (waiting !== undefined) o.note = waiting;
        this.evaluate(o);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------

  private pickAgent(): SchedulingAgent {
    const a = this.agents[this.nextAgent++ % this.agents.length];
    if (!a) throw new TarcilError('INTERNAL', 'no agents');
    return a;
  }

  private every(ms: number, fn: () => void): void {
    const tick = (): void => {
      if (this.closed) return;
      fn();
      this.timers.push(this.o.clock.setTimer(ms, tick));
    };
    this.timers.push(this.o.clock.setTimer(ms, tick));
    if (this.timers.length > 64) this.timers = this.timers.slice(-16);
  }

  private track(p: Promise<unknown>): void {
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }
}


