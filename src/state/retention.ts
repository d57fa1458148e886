/**
 * Retention: deletes finished jobs once their retention period has passed, with everything they
 * left in the store (task records, decision record, load reports, the request ids that created
 * them), in bounded batches of guarded transactions, so that a job that is not final is never
 * deleted; and audit records (`audit/<time>-<id>`, tenancy/audit.ts) older than the same period.
 * One process runs it at a time (the elected housekeeper, housekeeping.ts).
 */
import type { ClusterStore, KeyValue, Op, TxnRequest, TxnResult } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { errorMessage } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
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

/** What a job's final transaction writes under `finished/<time>-<job>` (Keys.finishedEntry). */
export interface FinishedEntry {
  job: string;
  /** The request id the job was submitted with (qualified by its namespace), and when. */
  request?: string;
  submittedAt?: number;
}

export function finishedEntry(job: string, rec: Pick<LiveJobRecord, 'request' | 'submittedAt'>): FinishedEntry {
  return rec.request !== undefined ? { job, request: rec.request, submittedAt: rec.submittedAt } : { job };
}

/**
 * Deletes what is due, when asked (`sweep`), following nothing: each job's final transaction also
 * writes `finished/<time>-<job>`, and a sweep reads those entries oldest first, a page at a time,
 * until one is not yet due. So the housekeeper receives no job record as it is written; what
 * finished before the index existed (a cell written by an older release) it learns once, from one
 * read of `jobs/` and `requests/` at its first sweep.
 *
 * A job is deleted by one transaction that compares the job record's mod revision with the one
 * seen final (for an index entry: the entry's own, written by the same transaction), and that
 * the job has no owner key: a job written since (un-finished, adopted, cancelled, anything) fails
 * the compare and is left alone, so no race deletes a live job. The same transaction deletes the
 * job's task records (one range delete), its decision record, its load reports, its index entry
 * and its request id when due. A request id not yet due when its job goes (a retention shorter
 * than the request floor), and one whose job is no longer stored, is deleted on its own once due,
 * comparing that the job is still absent. Transactions go out in batches of `batch` (nested, one
 * request each; etcd allows 128 operations per request) one after the other, yielding to the
 * event loop between batches, so a large backlog neither blocks the process nor floods the store.
 *
 * Memory: a few numbers per finished job found at the first sweep and per request id kept past
 * its job, bounded by what the retention period keeps.
 */
export class RetentionSweeper {
  private readonly live: LiveKeys;
  private readonly requestRetain: number;
  private readonly batch: number;
  /** Whether `jobs/` and `requests/` were read since start (the first sweep reads them). */
  private loaded = false;
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

  /** Starts sweeping: the first sweep reads what is stored. */
  start(): Promise<void> {
    this.stopped = false;
    this.loaded = false;
    return Promise.resolve();
  }

  /** The jobs and request ids stored now, read once (what finished before the index, and the request ids). */
  private async load(): Promise<void> {
    const { byPrefix } = await this.o.store.snapshot([this.o.keys.jobs(), this.live.request('')]);
    const [jobs = [], requests = []] = byPrefix;
    this.finals.clear();
    this.present.clear();
    this.requests.clear();
    this.byJob.clear();
    for (const kv of jobs) this.onKey(kv);
    for (const kv of requests) this.onKey(kv);
    this.loaded = true;
  }

  stop(): Promise<void> {
    this.stopped = true;
    this.loaded = false;
    this.finals.clear();
    this.present.clear();
    this.requests.clear();
    this.byJob.clear();
    return Promise.resolve();
  }

  private onKey(kv: KeyValue): void {
    const k = this.o.keys;
    const job = k.tail(k.jobs(), kv.key);
    if (job !== undefined) {
      this.present.add(job);
      const rec = parseJson<LiveJobRecord>(kv);
      if (rec && isFinalJob(rec.state)) this.finals.set(job, { finishedAt: rec.finishedAt ?? rec.updatedAt, rev: kv.modRevision });
      else this.finals.delete(job);
      return;
    }
    const id = k.tail(this.live.request(''), kv.key);
    if (id === undefined) return;
    const rec = parseJson<RequestRecord>(kv);
    if (rec) this.keepRequest(id, { job: rec.job, at: rec.at, rev: kv.modRevision });
  }

  /** A request id to delete once due and its job is gone (or with its job). */
  private keepRequest(id: string, r: Request): void {
    this.forgetRequest(id);
    this.requests.set(id, r);
    let s = this.byJob.get(r.job);
    if (!s) this.byJob.set(r.job, (s = new Set()));
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
    if (!this.loaded) await this.load();
    const now = this.o.clock.now();
    const k = this.o.keys;
    const out: SweepResult = { jobs: 0, requests: 0, raced: 0, audits: 0 };
    await this.sweepFinished(now, out);
    const due: Array<{ id: string; rev: number; finishedAt: number }> = [];
    let seen = 0;
    for (const [id, f] of this.finals) {
      if (f.finishedAt + this.o.retainMs <= now) due.push({ id, rev: f.rev, finishedAt: f.finishedAt });
      if (++seen % YIELD_EVERY === 0) await laterTurn();
    }
    const jobTxns = due.map(({ id, rev, finishedAt }): TxnRequest => {
      // Its index entry too, if the release that finished it wrote one.
      const success: Op[] = [...this.jobDeletes(id), { type: 'delete', key: k.finishedEntry(finishedAt, id) }];
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
          // The request record as read at the first sweep (one kept past its job was not read: 0).
          ...(r.rev > 0 ? [{ key: this.live.request(r.id), target: 'mod' as const, op: '==' as const, value: r.rev }] : []),
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

  /** What a job's deletion removes besides its index entry. */
  private jobDeletes(id: string): Op[] {
    const k = this.o.keys;
    return [
      { type: 'delete', key: k.job(id) },
      { type: 'delete', key: k.tasks(id), prefix: true },
      { type: 'delete', key: k.decision(id) },
      { type: 'delete', key: this.live.jobReports(id), prefix: true },
      // A cancellation's mark its owner did not clear (it asked for an already final job).
      { type: 'delete', key: k.cancel(id) },
    ];
  }

  /**
   * The jobs of `finished/` that are due, oldest first, a page at a time: each deleted with its
   * entry when its record is still the one its final transaction wrote (the same revision as the
   * entry) and it has no owner. An entry whose job changed since, or is gone, is deleted alone;
   * a job final again by then was read back and is deleted later, as one found at the first sweep.
   */
  private async sweepFinished(now: number, out: SweepResult): Promise<void> {
    const k = this.o.keys;
    const base = k.finished();
    const per = Math.max(1, this.batch);
    for (let page = 0; page < 1000 && !this.stopped; page++) {
      const kvs = (await this.o.store.range(base, { limit: per })).kvs;
      const due: { kv: KeyValue; job: string; entry: FinishedEntry }[] = [];
      for (const kv of kvs) {
        const m = /^(\d{16})-(.+)$/.exec(kv.key.slice(base.length));
        if (!m || Number(m[1]) + this.o.retainMs > now) break;
        const entry = parseJson<FinishedEntry>(kv) ?? { job: m[2] as string };
        due.push({ kv, job: m[2] as string, entry });
      }
      if (due.length === 0) return;
      // A request id's record is written when its job is submitted.
      const requestAt = (e: FinishedEntry): number => (e.request === undefined ? now : (this.requests.get(e.request)?.at ?? e.submittedAt ?? now));
      const requestDue = (e: FinishedEntry): boolean => e.request !== undefined && requestAt(e) + this.requestRetain <= now;
      const failed = await this.run(
        due.map(({ kv, job, entry }) => ({
          compare: [
            { key: k.job(job), target: 'mod', op: '==', value: kv.modRevision },
            { key: k.owner(job), target: 'version', op: '==', value: 0 },
          ],
          success: [
            ...this.jobDeletes(job),
            { type: 'delete', key: kv.key },
            ...(requestDue(entry) ? [{ type: 'delete' as const, key: this.live.request(entry.request as string) }] : []),
          ],
          failure: [
            { type: 'delete', key: kv.key },
            { type: 'get', key: k.job(job) },
          ],
        })),
        (i, ok, res) => {
          const d = due[i];
          if (!d) return;
          if (!ok) {
            out.raced++;
            const cur = res.responses[1]?.[0];
            const rec = parseJson<LiveJobRecord>(cur);
            if (cur && rec && isFinalJob(rec.state)) this.finals.set(d.job, { finishedAt: rec.finishedAt ?? rec.updatedAt, rev: cur.modRevision });
            return;
          }
          out.jobs++;
          this.finals.delete(d.job);
          this.present.delete(d.job);
          const r = d.entry.request;
          if (r === undefined) return;
          if (requestDue(d.entry)) {
            out.requests++;
            this.forgetRequest(r);
          } else this.keepRequest(r, { job: d.job, at: requestAt(d.entry), rev: this.requests.get(r)?.rev ?? 0 });
        },
      );
      if (failed || due.length < kvs.length) return;
    }
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

  /**
   * Sends the transactions in batches, one batch at a time; stops early when stopped. True when a
   * batch failed (the store is away, or refused it), and the rest were not sent.
   */
  private async run(txns: TxnRequest[], done: (index: number, succeeded: boolean, result: TxnResult) => void): Promise<boolean> {
    for (let at = 0; at < txns.length && !this.stopped; at += this.batch) {
      const part = txns.slice(at, at + this.batch);
      try {
        const res = await this.o.store.txns(part);
        res.forEach((r, j) => done(at + j, r.succeeded, r));
      } catch (err) {
        // Transient (the store is away) or not, the next sweep tries again from what it sees.
        this.o.log.warn({ err: errorMessage(err), batch: part.length }, 'retention: a batch of deletes failed');
        return true;
      }
      await laterTurn();
    }
    return false;
  }
}
