/**
 * The optimistic placement commit: the picks are claimed in the agent's cache, the transaction
 * (state/placement.ts) compares the revisions the choice was based on, and the outcome is applied
 * at once: placements on success; on a conflict the fresh reads replace the stale view and the
 * picks that did not change stay chosen. A commit whose answer was lost is resolved from the store
 * before anything else is tried, since a blind retry could place the tasks twice; one not found
 * there is kept in AgentRuntime.unsureCommits until its tasks are placed again.
 */
import { trace, traceRequest } from '../util/trace.ts';
import type { RuRef } from '../model/types.ts';
import type { Pick } from '../sampling/batch.ts';
import { KEPT_PLACEMENTS, type Placement } from '../state/decisions.ts';
import { fenceHolds, placementTxn, type PlacementItem, type PlacementTxn } from '../state/placement.ts';
import { parseJson, storedQ, type PlacedTaskRecord } from '../state/records.ts';
import { chunkKeyOf, chunkTaskRecords } from '../state/task-chunks.ts';
import type { KeyValue, TxnResult } from '../store/types.ts';
import { errorMessage, TarcilError } from '../util/errors.ts';
import type { AgentRuntime, JobFence, UnsureTask } from './agent-runtime.ts';
import type { AttemptContext } from './attempt-context.ts';
import { conflictRead, frontEndRace } from './conflict-cause.ts';
import { hasQuotaNamespace, quotaMessage, quotaRoom, quotaToken, quotaTxnOps, readQuota, type QuotaRead } from '../tenancy/quota.ts';

/** One commit of a scheduling call (its job, decision record and task stamp are the context's). */
export interface CommitRequest {
  tasks: number[];
  picks: Pick[];
  /** The last chunk of the job (a standalone agent then writes the job record as placed). */
  finalForJob: boolean;
  ruState: 'busy' | 'reserved';
  /**
   * Straight to the store, not through group commit: a full chunk of a large job (commit-ahead),
   * whose transaction (nearly) fills the store's op budget, so it would seldom share a request.
   */
  direct?: boolean;
}

/** A commit refused in advance: the job's namespace has `room` RUs left of its quota. */
export interface QuotaRefusal {
  room: number;
  message: string;
}

export type CommitResult = { ok: true } | { ok: false; survivors: Pick[]; quota?: QuotaRefusal };

/** Server scope: the settle handle of a commit chained on this agent's earlier ones (chainServerCommits). */
type Chain = { settle(rev: number | undefined): void };

/**
 * One optimistic transaction (state/placement.ts): compare the revisions the choice was based on
 * (RU keys, or server epochs under the `server` scope), write RU, task and epoch records. On
 * failure the else branch reads what we compared so the cache refreshes exactly that, then we
 * resample. A job of a namespace other than default also compares its namespace record and, when
 * the namespace has an RU quota, its usage record, which the transaction updates
 * (tenancy/quota.ts); picks that would exceed the quota are refused before anything is written.
 */
export function tryCommit(cx: AttemptContext, req: CommitRequest): Promise<CommitResult> {
  return new PlacementCommit(cx, req).run();
}

/** The steps of one commit, in the order tryCommit takes them. */
class PlacementCommit {
  private readonly a: AgentRuntime;
  private readonly commitId: string;
  /** Each touched server's epoch revision the picks were based on (moved on by chaining). */
  private readonly servers = new Map<string, number>();
  private readonly refs: RuRef[];
  /** The job's fence, its commits whose answer was lost, and the chain: as they are once the commit is sent. */
  private fence: JobFence | undefined;
  private unsure: Map<number, UnsureTask> | undefined;
  private chained: Chain | undefined;
  /** When the transaction was built (its RU records' `since`). */
  private builtAt = 0;

  constructor(
    private readonly cx: AttemptContext,
    private readonly req: CommitRequest,
  ) {
    this.a = cx.agent;
    this.commitId = this.a.nextCommitId();
    for (const p of req.picks) if (!this.servers.has(p.server.id)) this.servers.set(p.server.id, p.epochRev);
    this.refs = req.picks.map((p) => ({ server: p.server.id, index: p.index }));
  }

  async run(): Promise<CommitResult> {
    const { a, cx, req } = this;
    this.claim();
    // Read after the claims (an await lets this process's other decisions run), and only for a job
    // of a namespace other than default: default has no quota and its commits read nothing more.
    const quota = hasQuotaNamespace(cx.job.id) ? await readQuota(a.store, a.keys, cx.job.id) : undefined;
    if (quota && quotaRoom(quota) < req.picks.length) {
      this.unclaimAll();
      return { ok: false, survivors: [], quota: { room: quotaRoom(quota), message: quotaMessage(quota) } };
    }
    const chained = a.config.conflictScope === 'server' ? await chainServerCommits(a.serverTails, this.servers) : undefined;
    if (chained === false) {
      this.unclaimAll();
      cx.rec.conflicts++;
      a.stats.conflicts++;
      return { ok: false, survivors: [] };
    }
    this.chained = chained;
    this.fence = a.fenceOf(cx.job.id);
    this.unsure = a.unsureCommits.get(cx.job.id);
    // Read once, before the commit: the owner's task record, which the attempt is read from, may
    // already show this placement (from the watch) by the time the answer comes.
    const attempts = req.tasks.map((t) => cx.stamp.attempt(t));
    const txn = this.transaction(attempts, quota);
    const res = await this.send(txn);
    if (!res) return { ok: false, survivors: [] };
    a.stats.commits++;
    this.chained?.settle(res.succeeded ? res.revision : undefined);
    if (res.succeeded) return this.applied(txn, res.revision, attempts);
    return this.failed(txn, res);
  }

  /**
   * Claim the picks in the shared view until the commit resolves, so the other in-flight
   * decisions of this process (this agent's and its sibling agents') do not choose them too (or
   * score their neighbours as empty). The claim is this scheduling call's (its decision record
   * names it) and holds the occupant the commit writes, so applying our own commit changes
   * nothing more in the cache.
   */
  private claim(): void {
    const { a, cx, req } = this;
    const job = cx.job;
    req.picks.forEach((p, i) => {
      const ref = this.refs[i] as RuRef;
      // Survivors of a previous attempt are still claimed by us.
      if (!a.state.isClaimed(ref, cx.rec)) {
        a.state.claim(
          ref,
          { job: job.id, task: req.tasks[i] as number, caused: job.profile.caused, priority: job.priority, state: req.ruState, q: storedQ(p.quality.Q) },
          cx.rec,
        );
      }
    });
  }

  private unclaimAll(): void {
    const { a, cx } = this;
    a.state.batch(() => this.refs.forEach((r) => a.state.unclaim(r, cx.rec)));
  }

  private transaction(attempts: number[], quota: QuotaRead | undefined): PlacementTxn {
    const { a, cx, req, commitId, fence } = this;
    this.builtAt = a.clock.now();
    return placementTxn({
      keys: a.keys,
      agent: a.id,
      commitId,
      now: this.builtAt,
      job: cx.job,
      items: req.picks.map((p, i) => this.item(p, i, attempts[i] as number)),
      scope: a.config.conflictScope,
      ruState: req.ruState,
      ...(fence ? { fence } : {}),
      recordJob: req.finalForJob && a.config.recordJob,
      ...(quota
        ? {
            extra: quotaTxnOps(
              quota,
              cx.job.id,
              req.tasks.map((t) => quotaToken(t, commitId)),
            ),
          }
        : {}),
    });
  }

  private item(p: Pick, i: number, attempt: number): PlacementItem {
    const { taskRev, previous, move } = this.cx.stamp;
    const task = this.req.tasks[i] as number;
    const unsure = this.unsure;
    // The freed RU's last outcome, if the view still holds the revision the pick read (else the
    // compare fails anyway).
    const s = p.server;
    const prevLast = s.ruRevs[p.index] === p.ruRev ? s.ruLast?.[p.index] : undefined;
    return {
      ref: this.refs[i] as RuRef,
      task,
      attempt,
      ...(taskRev ? { taskRev: taskRev(task) } : {}),
      ...(previous?.(task) ? { previous: previous(task) } : {}),
      ...(move?.(task) ? { move: move(task) } : {}),
      ruRev: p.ruRev,
      ...(prevLast !== undefined ? { prevLast } : {}),
      basedOn: this.servers.get(p.server.id) ?? p.epochRev,
      q: storedQ(p.quality.Q),
      ...(p.server.disconnectGraceMs !== undefined ? { nodeGraceMs: p.server.disconnectGraceMs } : {}),
      ...(p.victim ? { victim: p.victim } : {}),
      ...(unsure?.has(task) ? { unsureChunk: unsure.get(task)?.chunk } : {}),
    };
  }

  /** Sends the transaction; an answer lost on the way is looked for in the store (undefined: it did not land, as far as we know). */
  private async send(txn: PlacementTxn): Promise<TxnResult | undefined> {
    const { a, cx, req } = this;
    try {
      traceRequest('commit.asked', cx.job.id, txn.req);
      const res = await (req.direct ? a.store : a.committer).txn(txn.req);
      trace('commit.answered', cx.job.id);
      return res;
    } catch (err) {
      return this.lost(txn, err);
    }
  }

  /**
   * The outcome is unknown (the store may have applied it before the error). Find out from the
   * store before trying anything else: a blind retry could place the tasks twice.
   */
  private async lost(txn: PlacementTxn, err: unknown): Promise<TxnResult | undefined> {
    const { a, cx, req } = this;
    const jobId = cx.job.id;
    const first = req.tasks[0] as number;
    const started = req.tasks.filter((_, i) => txn.startRecorded[i]);
    // The first task's own record, or (a task the commit started) the chunk record that holds it.
    const key = txn.startRecorded[0] ? chunkKeyOf(a.keys, jobId, first, started) : a.keys.task(jobId, first);
    const res = await resolveIndeterminate(cx, key, this.commitId, err);
    if (!res && started.length > 0) {
      let m = a.unsureCommits.get(jobId);
      if (!m) a.unsureCommits.set(jobId, (m = new Map<number, UnsureTask>()));
      req.picks.forEach((p, i) => {
        const t = req.tasks[i] as number;
        if (txn.startRecorded[i]) m.set(t, { chunk: chunkKeyOf(a.keys, jobId, t, started), Q: p.quality.Q, acceptable: p.quality.acceptable, score: p.score });
      });
    }
    if (!res) {
      this.chained?.settle(undefined);
      this.unclaimAll();
      cx.rec.conflicts++;
    }
    return res;
  }

  /** The commit landed: the record, the cache and the launch fast path learn its placements. */
  private applied(txn: PlacementTxn, revision: number, attempts: number[]): CommitResult {
    const { a, cx, req, unsure } = this;
    const rec = cx.rec;
    if (unsure) {
      for (const t of req.tasks) unsure.delete(t);
      if (unsure.size === 0) a.unsureCommits.delete(cx.job.id);
    }
    // Apply our own writes now: the watch will confirm them, but the next decision must not
    // see these RUs as free in the meantime.
    a.state.batch(() => {
      for (const w of txn.ruRecords) a.cache.applyKv(kvAt(w.key, JSON.stringify(w.rec), revision));
      for (const key of txn.epochKeys) a.cache.applyKv(kvAt(key, this.commitId, revision));
    });
    const placed = req.picks.map((p, i) => this.placement(p, i, { revision, attempt: attempts[i] as number, started: txn.startRecorded[i] === true }));
    // A running job's record keeps its first placements and counts the rest (what is stored
    // and explained anyway): a 100,000-task call does not hold every placement in memory.
    // Reservations of a gang are all kept: its confirmation takes them back from the record.
    const room = req.ruState === 'reserved' ? placed.length : Math.max(0, KEPT_PLACEMENTS - rec.placements.length);
    for (const pl of placed.slice(0, room)) rec.placements.push(pl);
    if (placed.length > room) rec.omittedPlacements = (rec.omittedPlacements ?? 0) + placed.length - room;
    a.stats.tasksPlaced += req.picks.length;
    a.notifyCommitted(cx.job, placed);
    return { ok: true };
  }

  private placement(p: Pick, i: number, o: { revision: number; attempt: number; started: boolean }): Placement {
    const task = this.req.tasks[i] as number;
    const pl: Placement = {
      task,
      ru: this.refs[i] as RuRef,
      Q: p.quality.Q,
      acceptable: p.quality.acceptable,
      score: p.score,
      commitRevision: o.revision,
      commitId: this.commitId,
    };
    if (o.attempt > 0) pl.attempt = o.attempt;
    // Set before the commit is announced: the owner records a move as one at once.
    const mv = this.cx.stamp.move?.(task);
    if (mv) pl.movedFrom = { server: mv.from.server, index: mv.from.index, rate: mv.rate, commitId: mv.rec.commitId };
    if (o.started) pl.startRecorded = true;
    const sides = p.quality.sides;
    if (sides)
      pl.sides = { selfQ: sides.selfQ, neighboursQ: sides.neighboursQ, neighbours: sides.neighbours, neighboursAcceptable: sides.neighboursAcceptable };
    if (p.victim) {
      pl.preempted = { job: p.victim.job, task: p.victim.task, priority: p.victim.priority };
      this.a.stats.preemptions++;
    }
    return pl;
  }

  /** The transaction failed: a lost fence or a task placed meanwhile stop the call; otherwise a conflict, and the picks that still stand. */
  private failed(txn: PlacementTxn, res: TxnResult): CommitResult {
    const { a, cx, fence } = this;
    if (fence && txn.fenceResponse !== undefined && !fenceHolds(fence, res.responses.slice(txn.fenceResponse))) {
      this.unclaimAll();
      a.lostFence(cx.job.id, fence.lease);
    }
    // A task placed meanwhile (a commit of ours whose answer was lost landed late, or another
    // owner's): this call must not place it again; the owner looks at the job afresh.
    for (const r of res.responses.slice(txn.unsureResponses)) {
      const kv = r?.[0];
      if (kv) this.landedLate(kv);
    }
    for (const r of res.responses.slice(txn.taskResponses, txn.unsureResponses)) {
      const t = parseJson<PlacedTaskRecord>(r?.[0]);
      if (t && t.state !== 'queued' && t.state !== 'lost') {
        this.unclaimAll();
        throw new TarcilError('ABORTED', `task ${t.index} of job ${cx.job.id} was placed meanwhile (${t.commitId ?? 'unknown commit'}); the owner looks again`);
      }
    }
    return this.conflicted(txn, res);
  }

  /** A commit whose answer was lost landed after all: its tasks run where it put them. */
  private landedLate(kv: KeyValue): never {
    const { a, cx, unsure } = this;
    const job = cx.job;
    this.unclaimAll();
    // Scored as that commit's picks were (the scores it was decided on).
    const landed = chunkTaskRecords(job.id, kv).map((t): Placement => {
      const u = unsure?.get(t.index);
      return {
        task: t.index,
        ru: t.ru as RuRef,
        Q: u?.Q ?? 0,
        acceptable: u?.acceptable ?? false,
        score: u?.score ?? 0,
        commitRevision: kv.modRevision,
        commitId: t.commitId ?? '',
        startRecorded: true,
      };
    });
    for (const p of landed) unsure?.delete(p.task);
    if (unsure?.size === 0) a.unsureCommits.delete(job.id);
    a.notifyCommitted(job, landed);
    throw new TarcilError('ABORTED', `tasks of job ${job.id} were placed by a commit whose answer was lost; the owner looks again`);
  }

  /** Does pick `i` still stand as the decision saw it (its RU, or under the server scope its server's epoch)? */
  private unchanged(i: number): boolean {
    const p = this.req.picks[i] as Pick;
    return this.a.config.conflictScope === 'server' ? p.server.epochRev === this.servers.get(p.server.id) : p.server.ruRevs[p.index] === p.ruRev;
  }

  private conflicted(txn: PlacementTxn, res: TxnResult): CommitResult {
    const { a, cx, req } = this;
    const rec = cx.rec;
    rec.conflicts++;
    a.stats.conflicts++;
    const compared = req.picks.map((p) => p.ruRev);
    const reads = res.responses.slice(0, txn.taskResponses);
    const { cause, rivalSince: since, rivalPick } = conflictRead(a.id, a.keys, this.refs, compared, reads, (i) => this.unchanged(i));
    a.stats.conflictCauses[cause]++;
    if (cause === 'front-end' && since !== undefined && rivalPick !== undefined) {
      const moved = a.view.handoff.homeMoved((req.picks[rivalPick] as Pick).server, since, this.builtAt);
      a.stats.frontEndRaces[frontEndRace(moved, a.view.handoff.splitting())]++;
      a.stats.frontEndLagMs += Math.max(0, this.builtAt - since);
    }
    // Apply the fresh reads first: a changed RU (or server, under the server scope) replaces our
    // claim with its real state; an unchanged one keeps our claim and stays a valid pick.
    const survivors: Pick[] = [];
    a.state.batch(() => {
      for (const got of res.responses.slice(0, txn.taskResponses)) for (const kv of got ?? []) a.cache.applyKv(kv);
      req.picks.forEach((p, i) => {
        const ref = this.refs[i] as RuRef;
        if (this.unchanged(i) && a.state.isClaimed(ref, rec)) survivors.push(p);
        else a.state.unclaim(ref, rec);
      });
    });
    a.log.debug({ job: cx.job.id, conflicts: rec.conflicts, kept: survivors.length }, 'commit conflict; resampling the rest');
    return { ok: false, survivors };
  }
}

/**
 * Server scope: a decision that read server S at epoch E while this agent's own commit on S
 * (also based on E) is in flight has already counted that commit's RUs as neighbours (they are
 * claimed). If that commit succeeds, the neighbourhood is exactly what was scored, so this
 * decision compares against the epoch revision that commit produced instead of conflicting
 * with its own agent. Returns false if an earlier commit it depends on failed, otherwise a
 * handle to settle once this commit resolves.
 */
async function chainServerCommits(tails: AgentRuntime['serverTails'], servers: Map<string, number>): Promise<false | Chain> {
  let settle!: (rev: number | undefined) => void;
  const done = new Promise<number | undefined>((r) => (settle = r));
  const waits: [string, Promise<number | undefined>][] = [];
  for (const [sid, epoch] of servers) {
    const tail = tails.get(sid);
    if (tail && tail.base === epoch) waits.push([sid, tail.result]);
    tails.set(sid, { base: epoch, result: done });
  }
  const handle = {
    settle: (rev: number | undefined): void => {
      settle(rev);
      for (const sid of servers.keys()) if (tails.get(sid)?.result === done) tails.delete(sid);
    },
  };
  for (const [sid, result] of waits) {
    const after = await result;
    if (after === undefined) {
      handle.settle(undefined);
      return false;
    }
    servers.set(sid, after);
  }
  return handle;
}

/**
 * After a failed transaction call: did our commit land? Reads `key`, a record the same
 * transaction wrote (the first task's record, or the chunk record of the tasks it started),
 * until the store answers. Returns a success result carrying the commit's revision, or undefined
 * if the commit did not happen. (A task's record written since, by its outcome, names the commit
 * too; a chunk record is never written again.)
 */
async function resolveIndeterminate(
  cx: AttemptContext,
  key: string,
  commitId: string,
  cause: unknown,
): Promise<{ succeeded: true; revision: number; responses: [] } | undefined> {
  const a = cx.agent;
  const jobId = cx.job.id;
  a.log.warn({ job: jobId, err: errorMessage(cause) }, 'commit outcome unknown; checking the store');
  let delay = a.config.backoffBaseMs * 10;
  for (;;) {
    a.assertOpen(jobId);
    try {
      const kv = await a.store.get(key);
      const t = parseJson<{ commitId?: string; placedRevision?: number }>(kv);
      if (kv && t?.commitId === commitId) return { succeeded: true, revision: t.placedRevision ?? kv.modRevision, responses: [] };
      return undefined;
    } catch {
      await a.clock.sleep(delay);
      delay = Math.min(Math.max(delay, 1) * 2, 2000);
    }
  }
}

function kvAt(key: string, value: string, rev: number): KeyValue {
  return { key, value, createRevision: rev, modRevision: rev, version: 1, lease: '0' };
}
