/**
 * The live driver of the attempt loop (attempt.ts) for incremental jobs and gangs that fit one
 * transaction: chunks of at most picksPerTxn tasks, each decided (core.ts) and committed
 * (commit.ts), with awaits on the store and the clock. Chunks of a large job may be in flight
 * together (commit-ahead); a conflict resamples only the picks that changed.
 */
import type { Pick } from '../sampling/batch.ts';
import { hasQuotaNamespace } from '../tenancy/quota.ts';
import type { Next } from './attempt.ts';
import type { AttemptContext } from './attempt-context.ts';
import { tryCommit } from './commit.ts';
import { decide, type Decision } from './core.ts';
import { admit, waitForCapacity } from './waits.ts';

/**
 * The tasks of one scheduling call not yet placed, taken chunk by chunk. `next` is the first task
 * not yet taken: chunks take a prefix of what is left, so a cursor replaces removing placed tasks
 * from the array (quadratic for 100,000-task jobs). Tasks of a chunk that were not placed go back
 * to `back`, which is taken from first.
 */
class ChunkSource {
  private next = 0;
  private back: number[] = [];

  constructor(private readonly pending: readonly number[]) {}

  left(): number {
    return this.back.length + this.pending.length - this.next;
  }

  take(n: number): number[] {
    const chunk = this.back.length > 0 ? this.back.splice(0, n) : [];
    const k = Math.min(n - chunk.length, this.pending.length - this.next);
    for (let i = 0; i < k; i++) chunk.push(this.pending[this.next + i] as number);
    this.next += k;
    return chunk;
  }

  /** Tasks of a chunk that were not placed: taken again first. */
  giveBack(unplaced: number[]): void {
    if (unplaced.length > 0) this.back = unplaced.concat(this.back);
  }
}

/**
 * The live driver of the attempt loop (attempt.ts): awaits on the store and the clock. A gang
 * (that fits one transaction) is placed all at once. A request whose priority bypasses others'
 * waits for a freed RU after a lost race (untilFreed, the context's Attempt), as in the
 * simulator: woken first among the waiters rather than left to back off.
 */
export async function placeIncremental(cx: AttemptContext): Promise<void> {
  const { agent: a, job, at } = cx;
  const tasks = new ChunkSource(cx.tasks);
  const ahead = a.config.commitAhead > 1 && job.mode !== 'gang' && !a.config.recordJob && !hasQuotaNamespace(job.id);
  // Woken by a freed RU in the waiters' (fair) order: the next decision does not yield.
  let woken = false;
  while (tasks.left() > 0) {
    cx.assertOpen();
    const left = tasks.left();
    if (!woken && a.view.mustYield(job.id, Math.min(left, a.picksPerTxn))) {
      a.stats.fairYields++;
      await cx.waiting.ensure(left);
      woken = await waitForCapacity(cx, { need: left, why: 'waiting behind jobs of namespaces further below their fair share (fairShare)' });
      continue;
    }
    woken = false;
    if (!at.admitted) await admit(cx, left);
    const then = await placeSome(cx, tasks, ahead && left > a.picksPerTxn);
    if (then.kind === 'go' || tasks.left() === 0) continue;
    woken = await waitAsTold(cx, then, tasks.left());
  }
}

/** One step of the loop: a commit-ahead run, or (without one, or when it sent nothing) one chunk. */
async function placeSome(cx: AttemptContext, tasks: ChunkSource, ahead: boolean): Promise<Next> {
  const then = ahead ? await commitAheadRun(cx, tasks) : undefined;
  if (then) return then;
  const chunk = tasks.take(cx.agent.picksPerTxn);
  const res = await commitChunk(cx, { chunk, allOrNothing: cx.job.mode === 'gang', last: tasks.left() === 0, keep: [] });
  tasks.giveBack(chunk.slice(res.placed.length));
  return res.then;
}

/** Waits as the attempt loop says after a step that placed less than asked; true when a freed RU woke the call. */
async function waitAsTold(cx: AttemptContext, then: Exclude<Next, { kind: 'go' }>, left: number): Promise<boolean> {
  const { agent: a, rec } = cx;
  if (!cx.at.admitted) {
    rec.readmissions++;
    a.stats.readmissions++;
    await cx.waiting.ensure(left);
  }
  if (then.kind === 'capacity-wait') return waitForCapacity(cx, { ms: then.ms, need: left, why: then.why, quota: then.why !== undefined });
  if (then.kind === 'backoff' && then.untilFreed) return waitForCapacity(cx, { ms: then.ms, need: left });
  const q0 = a.clock.now();
  await a.clock.sleep(then.ms);
  rec.stageMs.queue += a.clock.now() - q0;
  return false;
}

/**
 * One decision for `need` tasks of the call, with admission skipped (the loop asked it), the RUs
 * in `keep` (survivors of the chunk's last commit) and those freed moments ago that are left to
 * another front-end (handoff.ts) excluded, and counted in the record.
 */
function decideChunk(cx: AttemptContext, need: number, keep: readonly number[]): Decision {
  const { agent: a, job } = cx;
  const d = decide(a.core, {
    job,
    target: cx.target,
    m: need,
    cfg: a.config,
    skipAdmission: true,
    exclude: a.view.handoff.excludedWith(keep),
    ...(a.config.preemption && job.priority > a.config.bypassAbove ? a.view.fairDisplace(job.id) : {}),
  });
  cx.noteDecision(d);
  return d;
}

/**
 * Commit-ahead (AgentConfig.commitAhead): chunks of one job decided and sent while its earlier
 * chunks are still committing, at most `commitAhead` at once. A full chunk goes straight to the
 * store: its transaction (nearly) fills the op budget, so group commit would send it alone, and
 * its in-flight bound would hold the chunks back to two. A chunk in flight holds claims on its RUs, so the next decision sees them
 * taken and chooses what it would have chosen once they were committed: the decisions are the
 * attempt loop's, made chunk by chunk; only the waits for the store overlap. The run stops at
 * the first chunk the view cannot fill, the first conflict or error, or a fair-share yield; the
 * tasks it did not place go back to the source and the attempt loop goes on from there.
 * Undefined when it sent nothing (the view cannot fill even the first chunk): the caller places
 * that chunk chunk-by-chunk, which commits what it found and waits for the rest.
 */
async function commitAheadRun(cx: AttemptContext, tasks: ChunkSource): Promise<Next | undefined> {
  const { agent: a, job } = cx;
  const run = new AheadRun(cx, tasks);
  try {
    while (!run.stop && tasks.left() > 0) {
      if (run.inflight.size >= a.config.commitAhead) {
        await run.waitFor(Promise.race(run.inflight));
        continue;
      }
      cx.assertOpen();
      if (run.stop || tasks.left() === 0) break;
      const need = Math.min(a.picksPerTxn, tasks.left());
      // The loop let the first chunk through (fair share); each later one asks again, as there.
      if (run.asked > 0 && a.view.mustYield(job.id, need)) break;
      const d = decideChunk(cx, need, []);
      // Too few free RUs for a whole chunk: the chunk-by-chunk loop places what it can and waits.
      if (d.selection.picks.length < need) break;
      run.send(tasks.take(need), d.selection.picks);
    }
  } finally {
    // Every commit sent is answered before the run ends, whatever ended it.
    if (run.inflight.size > 0) await run.waitFor(Promise.allSettled([...run.inflight]));
  }
  return run.outcome();
}

/** The chunks of one commit-ahead run in flight, and what their answers said. */
class AheadRun {
  readonly inflight = new Set<Promise<void>>();
  stop = false;
  asked = 0;
  private conflicts = 0;
  private placed = 0;
  private failure: { err: unknown } | undefined;

  constructor(
    private readonly cx: AttemptContext,
    private readonly tasks: ChunkSource,
  ) {}

  /** Waits for `p`, counted in the record's commit stage. */
  async waitFor(p: Promise<unknown>): Promise<void> {
    const t0 = this.cx.agent.clock.monotonic();
    await p;
    this.cx.commitTime(t0);
  }

  send(chunk: number[], picks: Pick[]): void {
    this.asked += chunk.length;
    const p: Promise<void> = tryCommit(this.cx, {
      tasks: chunk,
      picks,
      finalForJob: false,
      ruState: 'busy',
      direct: chunk.length === this.cx.agent.picksPerTxn,
    })
      .then(
        (res) => {
          if (res.ok) {
            this.placed += chunk.length;
            return;
          }
          this.stop = true;
          this.conflicts += Math.max(1, chunk.length - res.survivors.length);
          // The whole chunk is decided again, with a fresh draw, by the attempt loop.
          if (res.survivors.length > 0) this.cx.unclaim(res.survivors);
          this.tasks.giveBack(chunk);
        },
        (err: unknown) => {
          this.stop = true;
          this.failure ??= { err };
          this.tasks.giveBack(chunk);
        },
      )
      .finally(() => this.inflight.delete(p));
    this.inflight.add(p);
  }

  /** What the attempt loop says after the run (undefined: it sent nothing); rethrows the first failure. */
  outcome(): Next | undefined {
    const { at, rec } = this.cx;
    if (this.failure) throw this.failure.err;
    if (this.asked === 0) return undefined;
    if (this.conflicts === 0) return at.afterCommit({ placed: this.placed, conflicts: 0, asked: this.asked });
    const then = at.afterCommit({ placed: 0, conflicts: this.conflicts, asked: this.asked });
    if (at.admitted) rec.retries++;
    return then;
  }
}

/** One chunk being placed: its tasks (cut to a quota's room), and the picks kept from its last commit. */
interface ChunkTry {
  chunk: number[];
  /** A gang: all of the chunk or none. */
  allOrNothing: boolean;
  /** The call's last chunk. */
  last: boolean;
  /** Picks the store confirmed unchanged after a conflict: still chosen (and claimed). */
  keep: Pick[];
}

type ChunkResult = { placed: number[]; then: Next };

/**
 * Selects and commits one chunk of tasks; conflicting picks are resampled with a fresh draw after
 * the attempt loop's backoff. Returns the task indices placed and what the attempt loop says
 * comes next (go on, wait for a freed RU, or back off after a return to admission).
 */
async function commitChunk(cx: AttemptContext, t: ChunkTry): Promise<ChunkResult> {
  try {
    for (;;) {
      const out = await chunkRound(cx, t);
      if (out) return out;
    }
  } finally {
    if (t.keep.length > 0) cx.unclaim(t.keep);
  }
}

/** One decision and commit of a chunk; undefined: decide again. */
async function chunkRound(cx: AttemptContext, t: ChunkTry): Promise<ChunkResult | undefined> {
  const { agent: a, rec, at } = cx;
  cx.assertOpen();
  // With group commit, decide only when the decision can leave at once: a decision that
  // waited in the queue would reach the store staler, and conflict more.
  const t0 = a.clock.monotonic();
  await a.commitTurn();
  cx.assertOpen();
  cx.commitTime(t0);
  // A survivor that a rival took meanwhile (the watch replaced our claim with its write)
  // would only conflict again: resample it too.
  t.keep = t.keep.filter((p) => a.state.isClaimed({ server: p.server.id, index: p.index }, rec));
  const d = decideChunk(
    cx,
    t.chunk.length - t.keep.length,
    t.keep.map((p) => p.id),
  );
  const picks = t.keep.concat(d.selection.picks);
  const sel = at.afterSelection(picks.length, t.chunk.length, t.allOrNothing);
  if (sel.kind !== 'go') return { placed: [], then: sel };
  const tasks = t.chunk.slice(0, picks.length);
  const c0 = a.clock.monotonic();
  const res = await tryCommit(cx, { tasks, picks, finalForJob: t.last && tasks.length === t.chunk.length, ruState: 'busy' });
  cx.commitTime(c0);
  if (!res.ok && res.quota) {
    t.keep = [];
    // An incremental job takes what its namespace's quota leaves: fewer tasks now, the
    // rest once RUs are given back. A gang waits until all of its chunk fits.
    if (res.quota.room > 0 && !t.allOrNothing) {
      t.chunk = t.chunk.slice(0, res.quota.room);
      t.last = false;
      return undefined;
    }
    return { placed: [], then: at.afterQuota(res.quota.message) };
  }
  if (res.ok) {
    t.keep = [];
    return { placed: tasks, then: at.afterCommit({ placed: tasks.length, conflicts: 0, asked: t.chunk.length }) };
  }
  // Incremental: picks the store confirmed unchanged stay chosen (and claimed); only the
  // conflicting ones are resampled.
  t.keep = res.survivors;
  const then = at.afterCommit({ placed: 0, conflicts: Math.max(1, picks.length - t.keep.length), asked: t.chunk.length });
  if (!at.admitted) return { placed: [], then };
  rec.retries++;
  if (then.kind === 'backoff' && then.untilFreed) await waitForCapacity(cx, { ms: then.ms, need: t.chunk.length - t.keep.length });
  else await a.clock.sleep(then.kind === 'backoff' ? then.ms : 0);
  return undefined;
}
