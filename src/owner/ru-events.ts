/**
 * What a job owner learns from the RU records, since it follows no task record: its agents' view
 * follows every RU (they sample them), and a change of one names the task it concerns.
 *
 * - An RU freed as its task ended carries its outcome (release.ts outcomeSummary), at the same
 *   revision as the `tasks/` key: the owner applies a success or a cancellation as is, and reads
 *   the task record of any other end.
 * - Any other change of an RU that holds, or held, a task of a job owned here (a preemption by
 *   another job, a node adopting its task under a new lease, a copy given back, an RU freed
 *   without an outcome) makes the owner read that task's record, batched per job.
 * - What changes a task record without touching its RU is rare and watched for here by reading
 *   again: a task whose node records it `running` itself (a gang's, a move's copy, a task placed
 *   again) until it reads `running`; a task whose record names an RU that holds something else,
 *   until the record moves on (the node's late report lands on the record alone).
 *
 * The owner's own writes are applied as they land (transitions.ts, the commits); a fenced write
 * that fails reads the task records it compared (context.ts fencedTxn).
 */
import { isFinalTask, type LiveTaskRecord } from '../state/live-records.ts';
import { jobOfFreedRu, lastOfFreedRu, parseJson } from '../state/records.ts';
import type { RuRecord, RuRef } from '../model/types.ts';
import type { Occupant } from '../sampling/ru-index.ts';
import type { KeyValue } from '../store/types.ts';
import { errorMessage } from '../util/errors.ts';
import type { Placement } from '../agent/agent.ts';
import { type OwnerContext, type TaskReads } from './context.ts';
import { mergeTask, recordOutcome, type AdoptWindow, type Owned } from './job.ts';
import { findOutcome } from '../state/ru-history.ts';

/** Task records read in one transaction, of one job or several (etcd's default limit on operations is 128). */
export const READS_PER_TXN = 100;
/** Read transactions of one flush in flight at once: the rest wait here, not in the store's queue. */
export const READS_IN_FLIGHT = 4;
/** RU histories read at once. */
const HISTORY_READS = 16;

/** First and longest pause between two reads of a task watched for a change its RU does not show. */
const RECHECK_FIRST_MS = 500;
const RECHECK_MAX_MS = 5000;
/**
 * Rechecks are due on ticks of this length: every task due on one tick is read in the same flush,
 * packed into transactions, whatever job it is of and whenever it began to be watched.
 */
export const RECHECK_TICK_MS = 250;
/** How often the owner checks its placed and running tasks against the view (TaskRefresher.sweep). */
export const SWEEP_MS = 10_000;

/**
 * An RU record changed (kv, or deleted; `rec` as the view parsed it; `prev` the occupant the
 * view held before). `observe` hands a finished task's measured rates to the profile learner.
 */
export function onRuChange(
  m: OwnerContext,
  refresher: TaskRefresher,
  change: { kv: KeyValue; deleted: boolean; rec: RuRecord | undefined; prev: Occupant | null; ref: RuRef },
  observe: (o: Owned, observed: NonNullable<LiveTaskRecord['observed']>) => void,
): void {
  const { kv, deleted, rec, prev, ref } = change;
  let job: string | undefined;
  let index: number | undefined;
  if (!deleted && rec?.state === 'free') {
    // Most freed RUs are of other front-ends' jobs: those are not parsed.
    const of = jobOfFreedRu(kv.value);
    const mine = of !== undefined && (m.owned.has(of) || m.adoptWindow.has(of));
    const last = mine ? (lastOfFreedRu(kv.value) as LiveTaskRecord | undefined) : undefined;
    if (last && typeof last.job === 'string' && typeof last.index === 'number') {
      job = last.job;
      index = last.index;
      applyOutcome(m, refresher, { last, rev: kv.modRevision, ref }, observe);
    }
    // Every end is kept a while, ours too: if the job's owner loses its lease (this process, fenced
    // after a pause, drops its jobs and may adopt them back), its adopter takes them from there.
    if (of !== undefined) m.recentEnds.add(of, kv.value, kv.modRevision, ref);
  } else if (rec && (rec.state === 'busy' || rec.state === 'reserved') && typeof rec.job === 'string' && typeof rec.task === 'number') {
    job = rec.job;
    index = rec.task;
    note(m, refresher, rec.job, rec.task, kv.modRevision);
  }
  if (prev && !(prev.job === job && prev.task === index)) note(m, refresher, prev.job, prev.task, kv.modRevision);
  // The tasks this owner has on that RU, as its records say: the view may not know them (a server
  // it forgot when its lease expired, and whose RU changed before it came back).
  const jobs = m.ownedOn.get(ref.server);
  if (!jobs) return;
  for (const o of jobs) {
    for (const t of o.byServer.get(ref.server) ?? []) {
      if (o.tasks.get(t)?.rec.ru?.index !== ref.index || (o.id === job && t === index) || (o.id === prev?.job && t === prev.task)) continue;
      note(m, refresher, o.id, t, kv.modRevision);
    }
  }
}

function applyOutcome(
  m: OwnerContext,
  refresher: TaskRefresher,
  ended: { last: LiveTaskRecord; rev: number; ref: RuRef },
  observe: (o: Owned, observed: NonNullable<LiveTaskRecord['observed']>) => void,
): void {
  const { last, rev, ref } = ended;
  // What the owner keeps of a success or a cancellation is all there (context.ts kept); of any
  // other end it reads the whole record (the job's message quotes it, a new attempt carries it).
  const whole = last.state === 'succeeded' || last.state === 'cancelled';
  const o = m.owned.get(last.job);
  if (!o) {
    // A job being adopted: its adoption applies this once the job is ours (adoption.ts).
    const w = m.adoptWindow.get(last.job);
    if (w) keepForAdoption(w, last, rev, ref);
    return;
  }
  // A task seen ending (not one seen ended already, after a re-list): what its node measured
  // goes to the profile learner once.
  const before = o.tasks.get(last.index);
  if (before && before.rev >= rev) {
    // Known at a newer revision already. If this owner still holds the task live there, this end
    // is one of its attempt's that a later record of the task superseded, or one the sweep reads.
    if ((before.rec.state === 'placed' || before.rec.state === 'running') && before.rec.commitId === last.commitId)
      m.o.log.warn(
        { job: o.id, task: last.index, rev, known: before.rev, state: before.rec.state },
        'a task end older than the record this owner holds; the periodic check reads it',
      );
    return;
  }
  if (last.observed && before && !isFinalTask(before.rec.state) && isFinalTask(last.state)) observe(o, last.observed);
  // A success seen ending: how long its class's tasks run, for the `ratio` wait order (agent/wait-order.ts).
  const from = last.startedAt ?? before?.rec.startedAt ?? last.placedAt ?? before?.rec.placedAt;
  if (before && !isFinalTask(before.rec.state) && last.state === 'succeeded' && typeof from === 'number' && typeof last.endedAt === 'number')
    m.runTimes.observe(o.spec.profile.name, last.endedAt - from);
  if (!whole) {
    void refresher.refresh(o, [last.index]);
    return;
  }
  recordOutcome(o, last, rev, ref);
  m.queue.add(o);
}

/**
 * An end of a task of a job queued for adoption, kept in its window: a success or a cancellation
 * as is, to be applied once the job is owned; any other end, to be read then.
 */
export function keepForAdoption(w: AdoptWindow, last: LiveTaskRecord, rev: number, ref: RuRef): void {
  if (last.state === 'succeeded' || last.state === 'cancelled') w.tasks.push({ index: last.index, rec: last, rev, ru: ref });
  else (w.refresh ??= new Set()).add(last.index);
}

/** A change at `rev` of an RU that concerns task `index` of `job`: read its record unless known. */
function note(m: OwnerContext, refresher: TaskRefresher, job: string, index: number, rev: number): void {
  const o = m.owned.get(job);
  if (!o) {
    const w = m.adoptWindow.get(job);
    if (w) (w.refresh ??= new Set()).add(index);
    return;
  }
  // A commit of ours: its answer applies it.
  if (o.scheduling.has(index)) return;
  const cur = o.tasks.get(index);
  if (cur && cur.rev >= rev) return;
  void refresher.refresh(o, [index]);
}

/**
 * Reads task records of owned jobs again, batched: every request made in one turn of the event
 * loop goes out together, one transaction of gets per job (per 100 tasks).
 */
export class TaskRefresher implements TaskReads {
  private readonly pending = new Map<Owned, Set<number>>();
  private flushing: Promise<void> | undefined;
  /** Tasks read again until a change their RU does not show (see the file's comment): next pause. */
  private readonly watched = new Map<Owned, Map<number, number>>();
  /** Per job, the tasks the last sweep found stale, with the task's and its RU's revisions then. */
  private readonly swept = new WeakMap<Owned, Map<number, string>>();
  /** Rechecks due, by tick (RECHECK_TICK_MS): each tick's go out together. */
  private readonly due = new Map<number, [Owned, number][]>();
  constructor(
    private readonly m: OwnerContext,
    private readonly view: {
      /** Whether the view's RU holds this task now. */
      holds(ru: RuRef, job: string, task: number): boolean;
      /** The revision of the RU's record in the view (undefined: its server is not in the view). */
      revision(ru: RuRef): number | undefined;
    },
  ) {}

  private holds(ru: RuRef, job: string, task: number): boolean {
    return this.view.holds(ru, job, task);
  }

  /** The task's RU if its record says placed or running there and the view's RU does not hold it. */
  private unheldOn(o: Owned, t: number): RuRef | undefined {
    const rec = o.tasks.get(t)?.rec;
    return (rec?.state === 'placed' || rec?.state === 'running') && rec.ru && !this.holds(rec.ru, o.id, t) ? rec.ru : undefined;
  }

  /**
   * The owner's check of what it believes against the view, run every SWEEP_MS: a task it holds
   * placed or running whose RU, at a revision newer than the task's record, holds something else
   * ended (or left) without this owner learning it, however that came about (a change seen while
   * the task was being committed, a lost answer, a re-list). Its record and its RU's history are
   * read, as for any task whose RU moved on. Tasks already watched, being scheduled or stopped,
   * found compacted already, and tasks on servers the view does not have (their node's grace
   * decides: apply.ts awaitNode) are left alone, and so is a task asked about already while
   * neither its record nor its RU has moved since. Returns how many tasks it read again.
   */
  sweep(): number {
    let found = 0;
    for (const o of this.m.owned.values()) {
      if (o.dropped) continue;
      const w = this.watched.get(o);
      const stale: number[] = [];
      const asked = this.swept.get(o);
      const marks = new Map<number, string>();
      for (const on of o.byServer.values()) {
        for (const t of on) {
          const ru = this.unheldOn(o, t);
          // Being placed, stopped or watched, or found compacted already (its failure being written): seen to elsewhere.
          if (!ru || o.scheduling.has(t) || o.stopping.has(t) || w?.has(t) || o.outcomes.compacted.has(t)) continue;
          const rev = this.view.revision(ru);
          const v = o.tasks.get(t);
          if (!v || rev === undefined || rev <= v.rev) continue;
          // Asked already, and neither the record nor the RU moved since: its answer stands (the
          // view behind the store) or its read is being retried (watch).
          const mark = `${v.rev}/${rev}`;
          marks.set(t, mark);
          if (asked?.get(t) !== mark) stale.push(t);
        }
      }
      if (marks.size > 0) this.swept.set(o, marks);
      else this.swept.delete(o);
      if (stale.length === 0) continue;
      found += stale.length;
      const v = o.tasks.get(stale[0] as number);
      const first = {
        task: stale[0],
        state: v?.rec.state,
        rev: v?.rev,
        implied: v?.implied === true,
        commitId: v?.rec.commitId,
        ruRev: v?.rec.ru && this.view.revision(v.rec.ru),
      };
      this.m.o.log.warn(
        { job: o.id, tasks: stale.slice(0, 20), count: stale.length, first },
        'tasks whose RU moved on without this owner seeing it; reading them again',
      );
      void this.refresh(o, stale);
    }
    return found;
  }

  /**
   * Reads these tasks' records soon; resolves once they are applied. Until then the job's
   * outcomes are `reading`: the job record's `seen` waits (summary.ts).
   */
  refresh(o: Owned, tasks: Iterable<number>): Promise<void> {
    let set = this.pending.get(o);
    if (!set) this.pending.set(o, (set = new Set()));
    for (const t of tasks) set.add(t);
    this.flushing ??= Promise.resolve().then(() => this.flush());
    o.outcomes.reading++;
    return this.flushing.finally(() => {
      o.outcomes.reading--;
    });
  }

  /** The job's placed or running tasks whose RU, as the view shows it, does not hold them. */
  unheld(o: Owned): number[] {
    const out: number[] = [];
    for (const t of o.tasks.keys()) if (this.unheldOn(o, t)) out.push(t);
    return out;
  }

  /**
   * Of these placements (whose monitors record them running without touching the RU), the ones
   * still `placed` once their records are read again; they are watched until they start.
   */
  async unstarted(o: Owned, placements: readonly Placement[]): Promise<Placement[]> {
    const placed = (): Placement[] =>
      placements.filter((p) => {
        const rec = o.tasks.get(p.task)?.rec;
        return rec?.state === 'placed' && rec.attempt === (p.attempt ?? 0) && rec.ru?.server === p.ru.server && rec.ru.index === p.ru.index;
      });
    if (placed().length === 0) return [];
    await this.refresh(
      o,
      placed().map((p) => p.task),
    );
    const still = placed();
    for (const p of still) this.watch(o, p.task);
    return still;
  }

  /**
   * Reads task `t` again after a pause, and on, with a growing pause, while its record says
   * `placed` (`started`) or names an RU that holds something else.
   */
  watch(o: Owned, t: number): void {
    let w = this.watched.get(o);
    if (!w) this.watched.set(o, (w = new Map<number, number>()));
    if (w.has(t)) return;
    w.set(t, RECHECK_FIRST_MS);
    this.dueIn(RECHECK_FIRST_MS, o, t);
  }

  /** Task `t` rechecked on the first tick at least `ms` from now (one timer per tick). */
  private dueIn(ms: number, o: Owned, t: number): void {
    const now = this.m.o.clock.now();
    const tick = Math.ceil((now + ms) / RECHECK_TICK_MS);
    let list = this.due.get(tick);
    if (!list) {
      this.due.set(tick, (list = []));
      this.m.later(tick * RECHECK_TICK_MS - now, () => {
        const all = this.due.get(tick) ?? [];
        this.due.delete(tick);
        // In one turn: every one of them joins the same flush (refresh).
        for (const [oo, tt] of all) this.recheck(oo, tt);
      });
    }
    list.push([o, t]);
  }

  private recheck(o: Owned, t: number): void {
    const w = this.watched.get(o);
    const pause = w?.get(t);
    if (!w || pause === undefined) return;
    if (o.dropped || this.m.closed) {
      this.forget(o, t);
      return;
    }
    this.refresh(o, [t])
      .then(() => {
        if (!this.waiting(o, t)) return this.forget(o, t);
        const next = Math.min(RECHECK_MAX_MS, pause * 2);
        w.set(t, next);
        this.dueIn(next, o, t);
      })
      .catch(() => this.dueIn(pause, o, t));
  }

  private forget(o: Owned, t: number): void {
    const w = this.watched.get(o);
    w?.delete(t);
    if (w?.size === 0) this.watched.delete(o);
  }

  /** Still waiting for a change its RU does not show: not started yet, or its RU holds another. */
  private waiting(o: Owned, t: number): boolean {
    if (o.dropped || this.m.owned.get(o.id) !== o) return false;
    const rec = o.tasks.get(t)?.rec;
    if (!rec || (rec.state !== 'placed' && rec.state !== 'running') || !rec.ru) return false;
    return rec.state === 'placed' || !this.holds(rec.ru, o.id, t);
  }

  /**
   * Tasks whose record says placed or running on an RU that holds something else: how each left
   * it, from the RU's history since the later of its record and the job record's `seen`
   * (state/ru-history.ts). Ended: its outcome. Left otherwise (the node's report may land on the
   * record alone): read again until the record moves on. History compacted: failed, saying so
   * (a task that may have finished is never run again).
   */
  private async fromHistory(o: Owned, tasks: readonly number[]): Promise<void> {
    const unknown: number[] = [];
    /** The first task found compacted: what its search started from, for the log. */
    let first: Record<string, unknown> | undefined;
    for (let i = 0; i < tasks.length; i += HISTORY_READS) {
      const part = tasks.slice(i, i + HISTORY_READS);
      await Promise.all(
        part.map(async (t) => {
          const v = o.tasks.get(t);
          const ru = v?.rec.ru;
          // Found compacted already, its failure not yet recorded: nothing more to learn there.
          if (!v || !ru || o.outcomes.compacted.has(t)) return;
          const a = { job: o.id, task: t, ...(typeof v.rec.commitId === 'string' ? { commitId: v.rec.commitId } : {}) };
          const after = Math.max(v.rev, o.rec.seen ?? 0);
          const answer = await findOutcome(this.m.o.store, this.m.o.keys, ru, a, after);
          this.m.stats.historyReads++;
          if (answer.kind === 'ended' && answer.carried) this.m.stats.outcomesCarried++;
          if (answer.kind === 'ended') recordOutcome(o, answer.last, answer.rev, ru);
          else if (answer.kind === 'departed' && v.rec.state === 'running') this.watch(o, t);
          else if (answer.kind === 'compacted') {
            unknown.push(t);
            const since = v.rec.startedAt ?? v.rec.placedAt;
            first ??= {
              task: t,
              state: v.rec.state,
              after,
              recordRev: v.rev,
              seen: o.rec.seen,
              sinceStartMs: since === undefined ? undefined : this.m.o.clock.now() - since,
            };
          }
        }),
      );
    }
    if (unknown.length === 0 || o.dropped) return;
    this.m.o.log.error({ job: o.id, tasks: unknown, first }, 'task outcomes not recorded and compacted out of the RU history; recording the tasks failed');
    // The job's next evaluation records them (plan.ts fail-compacted; flush queues it).
    for (const t of unknown) {
      o.outcomes.compacted.add(t);
      o.dirty.add(t);
    }
  }

  /**
   * Reads what is pending: the tasks of every job packed into transactions of READS_PER_TXN
   * gets, READS_IN_FLIGHT at a time. A transaction that fails puts its tasks on recheck (watch),
   * so that a store that sheds load is asked again on ticks, in packed reads, not task by task.
   */
  private async flush(): Promise<void> {
    const batch = [...this.pending];
    this.pending.clear();
    this.flushing = undefined;
    const reads: [Owned, number][] = [];
    for (const [o, set] of batch) for (const t of set) reads.push([o, t]);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < reads.length && !this.m.closed) {
        const part = reads.slice(next, next + READS_PER_TXN);
        next += part.length;
        await this.read(part.filter(([o]) => !o.dropped));
      }
    };
    await Promise.all(Array.from({ length: Math.min(READS_IN_FLIGHT, Math.ceil(reads.length / READS_PER_TXN)) }, worker));
    for (const [o] of batch) if (!o.dropped && !this.m.closed) this.m.queue.add(o);
  }

  /** One transaction of gets: the records applied, and the history read of tasks whose RU holds something else. */
  private async read(part: readonly [Owned, number][]): Promise<void> {
    if (part.length === 0) return;
    const k = this.m.o.keys;
    try {
      const res = await this.m.o.store.txn({ compare: [], success: part.map(([o, t]) => ({ type: 'get' as const, key: k.task(o.id, t) })) });
      this.m.stats.taskReads += part.length;
      const unheld = new Map<Owned, number[]>();
      part.forEach(([o, t], j) => {
        const kv = res.responses[j]?.[0];
        const cur = o.tasks.get(t);
        if (kv) mergeTask(o, t, parseJson<LiveTaskRecord>(kv), kv.modRevision);
        // No record of its own: gone, unless it never had one (its chunk's still holds).
        else if (cur && !cur.implied) mergeTask(o, t, undefined, res.revision);
        if (this.unheldOn(o, t)) {
          const list = unheld.get(o);
          if (list) list.push(t);
          else unheld.set(o, [t]);
        }
      });
      for (const [o, tasks] of unheld) if (!o.dropped) await this.fromHistory(o, tasks);
    } catch (err) {
      const jobs = new Set(part.map(([o]) => o.id));
      this.m.o.log.warn(
        { jobs: jobs.size, job: [...jobs][0], tasks: part.length, err: errorMessage(err) },
        'reading task records failed; will read them again',
      );
      for (const [o, t] of part) if (!o.dropped) this.watch(o, t);
    }
  }
}
