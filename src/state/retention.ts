/**
 * Retention: deletes finished jobs once their retention period has passed, with everything they
 * left in the store (task records, decision record, load reports, the request ids that created
 * them), in bounded batches of guarded transactions, so that a job that is not final is never
 * deleted; and audit records (`audit/<time>-<id>`, tenancy/audit.ts) older than the same period.
 * One process runs it at a time (the elected housekeeper, housekeeping.ts).
 */
import type { ClusterStore, KeyValue, Op, TxnRequest } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { errorMessage } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import { Follower } from './follow.ts';
import type { Keys } from './keys.ts';
import { isFinalJob, LiveKeys, type LiveJobRecord, type RequestRecord } from './live-records.ts';
import { parseJson } from './records.ts';
import { laterTurn } from '../util/turns.ts';

/** How long a finished job is kept when nothing else is said (`--retain`). */
export const DEFAULT_RETAIN_MS = 60 * 60_000;
/**
 * Request ids are kept at least this long after their request, whatever `--retain` says: longer
 * than any client keeps retrying one submission (`tarcil submit` gives up within about a minute).
 */
export const REQUEST_RETAIN_FLOOR_MS = 10 * 60_000;

/** How long a request id is kept after its request (and never while its job is stored). */
export function requestRetainMs(retainMs: number): number {
  return Math.max(retainMs, REQUEST_RETAIN_FLOOR_MS);
}

/** "1 h", "20 s", "90 min": a retention period as messages print it. */
export function fmtRetain(ms: number): string {
  if (ms >= 3_600_000 && ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
  return ms >= 1000 ? `${Number((ms / 1000).toFixed(3))} s` : `${ms} ms`;
}

/** What a job that is not stored is reported as: unknown, or aged out. */
export function agedOutMessage(jobId: string, retainMs: number): string {
  return `job ${jobId} not found: it does not exist, or it finished more than ${fmtRetain(retainMs)} ago and was deleted (finished jobs are kept for ${fmtRetain(retainMs)})`;
}

export interface RetentionOptions {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
  /** A finished job is deleted this long after it finished. */
  retainMs: number;
  /** A request id is kept this long after its request at least (default {@link requestRetainMs}). */
  requestRetainMs?: number;
  /** Jobs deleted per request to the store, each in its own guarded transaction (default 25). */
  batch?: number;
}

export interface SweepResult {
  jobs: number;
  requests: number;
  /** Deletes whose compares failed: the job changed meanwhile (it is looked at again next time). */
  raced: number;
  /** Audit records (`audit/<time>-<id>`) older than the retention period. */
  audits: number;
}

interface FinalJob {
  finishedAt: number;
  rev: number;
}

interface Request {
  job: string;
  at: number;
  rev: number;
}

const YIELD_EVERY = 5000;

/**
 * Follows `jobs/` and `requests/` while it runs and deletes what is due, when asked (`sweep`).
 *
 * A job is deleted by one transaction that compares the job record's mod revision with the one
 * seen final, and that the job has no owner key: a job written since (un-finished, adopted,
 * cancelled, anything) fails the compare and is left alone, so no race deletes a live job. The
 * same transaction deletes the job's task records (one range delete), its decision record, its
 * load reports and its request ids that are due. Request ids whose job is no longer stored are
 * deleted on their own once due, comparing that the job is still absent. Transactions go out in
 * batches of `batch` (nested, one request each; etcd allows 128 operations per request) one after
 * the other, yielding to the event loop between batches, so a large backlog neither blocks the
 * process nor floods the store.
 *
 * Memory: a few numbers per finished job and per request id still stored, bounded by what the
 * retention period keeps.
 */
export class RetentionSweeper {
  private readonly live: LiveKeys;
  private readonly requestRetain: number;
  private readonly batch: number;
  private follower: Follower | undefined;
  private readonly finals = new Map<string, FinalJob>();
  private readonly present = new Set<string>();
  private readonly requests = new Map<string, Request>();
  private readonly byJob = new Map<string, Set<string>>();
  private stopped = false;
  readonly totals = { jobs: 0, requests: 0, raced: 0, audits: 0, sweeps: 0 };

  constructor(private readonly o: RetentionOptions) {
    this.live = new LiveKeys(o.keys);
    this.requestRetain = o.requestRetainMs ?? requestRetainMs(o.retainMs);
    this.batch = Math.max(1, Math.min(o.batch ?? 25, Math.floor(o.store.maxTxnOps / 8)));
  }

  /** Finished jobs known (tests, metrics). */
  get finishedJobs(): number {
    return this.finals.size;
  }

  async start(): Promise<void> {
    this.stopped = false;
    const k = this.o.keys;
    this.follower = new Follower({
      store: this.o.store,
      clock: this.o.clock,
      log: this.o.log,
      prefix: [k.jobs(), this.live.request('')],
      onSnapshot: (_kvs, _rev, byPrefix) => {
        const [jobs = [], requests = []] = byPrefix;
        this.jobsSnapshot(jobs);
        this.requests.clear();
        this.byJob.clear();
        for (const kv of requests) this.onKey(kv, false);
      },
      onEvent: (kv, deleted) => this.onKey(kv, deleted),
    });
    await this.follower.start();
  }

  private jobsSnapshot(kvs: readonly KeyValue[]): void {
    this.finals.clear();
    this.present.clear();
    for (const kv of kvs) this.onKey(kv, false);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.follower?.close();
    this.follower = undefined;
    this.finals.clear();
    this.present.clear();
    this.requests.clear();
    this.byJob.clear();
  }

  private onKey(kv: KeyValue, deleted: boolean): void {
    const k = this.o.keys;
    const job = k.tail(k.jobs(), kv.key);
    if (job !== undefined) {
      if (deleted) {
        this.finals.delete(job);
        this.present.delete(job);
        return;
      }
      this.present.add(job);
      const rec = parseJson<LiveJobRecord>(kv);
      if (rec && isFinalJob(rec.state)) this.finals.set(job, { finishedAt: rec.finishedAt ?? rec.updatedAt, rev: kv.modRevision });
      else this.finals.delete(job);
      return;
    }
    const id = k.tail(this.live.request(''), kv.key);
    if (id === undefined) return;
    if (deleted) {
      this.forgetRequest(id);
      return;
    }
    const rec = parseJson<RequestRecord>(kv);
    if (!rec) return;
    this.forgetRequest(id);
    this.requests.set(id, { job: rec.job, at: rec.at, rev: kv.modRevision });
    let s = this.byJob.get(rec.job);
    if (!s) this.byJob.set(rec.job, (s = new Set()));
    s.add(id);
  }

  private forgetRequest(id: string): void {
    const r = this.requests.get(id);
    if (!r) return;
    this.requests.delete(id);
    const s = this.byJob.get(r.job);
    s?.delete(id);
    if (s?.size === 0) this.byJob.delete(r.job);
  }

  /** Deletes every finished job and request id that is due now. */
  async sweep(): Promise<SweepResult> {
    const now = this.o.clock.now();
    const k = this.o.keys;
    const out: SweepResult = { jobs: 0, requests: 0, raced: 0, audits: 0 };
    const due: Array<{ id: string; rev: number }> = [];
    let seen = 0;
    for (const [id, f] of this.finals) {
      if (f.finishedAt + this.o.retainMs <= now) due.push({ id, rev: f.rev });
      if (++seen % YIELD_EVERY === 0) await laterTurn();
    }
    const jobTxns = due.map(({ id, rev }): TxnRequest => {
      const success: Op[] = [
        { type: 'delete', key: k.job(id) },
        { type: 'delete', key: k.tasks(id), prefix: true },
        { type: 'delete', key: k.decision(id) },
        { type: 'delete', key: this.live.jobReports(id), prefix: true },
        // A cancellation's mark its owner did not clear (it asked for an already final job).
        { type: 'delete', key: k.cancel(id) },
      ];
      for (const r of this.byJob.get(id) ?? []) {
        const req = this.requests.get(r);
        if (req && req.at + this.requestRetain <= now) success.push({ type: 'delete', key: this.live.request(r) });
      }
      return {
        compare: [
          { key: k.job(id), target: 'mod', op: '==', value: rev },
          { key: k.owner(id), target: 'version', op: '==', value: 0 },
        ],
        success,
      };
    });
    await this.run(jobTxns, (i, ok) => {
      const d = due[i];
      if (!d) return;
      if (!ok) {
        out.raced++;
        return;
      }
      out.jobs++;
      this.finals.delete(d.id);
      this.present.delete(d.id);
      for (const r of this.byJob.get(d.id) ?? []) {
        const req = this.requests.get(r);
        if (req && req.at + this.requestRetain <= now) {
          out.requests++;
          this.forgetRequest(r);
        }
      }
    });
    // Request ids whose job is gone (deleted above, earlier, or never stored).
    const orphans: Array<{ id: string; job: string; rev: number }> = [];
    for (const [id, r] of this.requests) {
      if (r.at + this.requestRetain <= now && !this.present.has(r.job)) orphans.push({ id, job: r.job, rev: r.rev });
    }
    await this.run(
      orphans.map((r) => ({
        compare: [
          { key: k.job(r.job), target: 'version', op: '==', value: 0 },
          { key: this.live.request(r.id), target: 'mod', op: '==', value: r.rev },
        ],
        success: [{ type: 'delete', key: this.live.request(r.id) }],
      })),
      (i, ok) => {
        const r = orphans[i];
        if (!r) return;
        if (!ok) {
          out.raced++;
          return;
        }
        out.requests++;
        this.forgetRequest(r.id);
      },
    );
    out.audits = await this.sweepAudits(now);
    this.totals.jobs += out.jobs;
    this.totals.requests += out.requests;
    this.totals.audits += out.audits;
    this.totals.raced += out.raced;
    this.totals.sweeps++;
    if (out.jobs + out.requests + out.raced + out.audits > 0) this.o.log.info({ ...out }, 'retention sweep');
    return out;
  }

  /**
   * Audit records older than the retention period. Their keys sort by time (`audit/<16-digit
   * ms>-<id>`), so the oldest are read first, a page at a time, and deleted by key; a record has
   * no other state to guard, so the deletes need no compare.
   */
  private async sweepAudits(now: number): Promise<number> {
    const base = this.o.keys.audits();
    const per = Math.max(1, Math.min(100, this.o.store.maxTxnOps));
    let deleted = 0;
    for (let page = 0; page < 100 && !this.stopped; page++) {
      const kvs = (await this.o.store.range(base, { limit: per })).kvs;
      const due = kvs.filter((kv) => {
        const m = /^(\d{16})-/.exec(kv.key.slice(base.length));
        return m !== null && Number(m[1]) + this.o.retainMs <= now;
      });
      if (due.length === 0) break;
      try {
        await this.o.store.txn({ compare: [], success: due.map((kv): Op => ({ type: 'delete', key: kv.key })) });
      } catch (err) {
        this.o.log.warn({ err: errorMessage(err), batch: due.length }, 'retention: a batch of audit deletes failed');
        break;
      }
      deleted += due.length;
      if (due.length < kvs.length) break;
      await laterTurn();
    }
    return deleted;
  }

  /** Sends the transactions in batches, one batch at a time; stops early when stopped. */
  private async run(txns: TxnRequest[], done: (index: number, succeeded: boolean) => void): Promise<void> {
    for (let at = 0; at < txns.length && !this.stopped; at += this.batch) {
      const part = txns.slice(at, at + this.batch);
      try {
        const res = await this.o.store.txns(part);
        res.forEach((r, j) => done(at + j, r.succeeded));
      } catch (err) {
        // Transient (the store is away) or not, the next sweep tries again from what it sees.
        this.o.log.warn({ err: errorMessage(err), batch: part.length }, 'retention: a batch of deletes failed');
        return;
      }
      await laterTurn();
    }
  }
}
