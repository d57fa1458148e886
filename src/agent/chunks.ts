/**
 * The chunk path's steps (attempt-steps.ts) on the live agent, for incremental jobs and gangs that
 * fit one transaction: chunks of at most picksPerTxn tasks, each decided (core.ts) and committed
 * (commit.ts) with awaits on the store and the clock. Chunks of a large job may be in flight
 * together (commit-ahead); a conflict resamples only the picks that changed.
 */
import type { Pick } from '../sampling/batch.ts';
import type { AttemptContext } from './attempt-context.ts';
import type { Outcome, Step } from './attempt-steps.ts';
import { tryCommit } from './commit.ts';
import { decide, type Decision } from './core.ts';

/** What a commit-ahead run sent (0: nothing), placed, and lost to conflicts. */
interface AheadCounts {
  asked: number;
  placed: number;
  conflicts: number;
  /** The run's last chunk found this many free RUs fewer than it needed: the rest waits for freed ones. */
  short?: number;
}

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
 * The chunk path's steps on the live agent (attempt-steps.ts, driven by attempt-driver.ts): the
 * chunk being placed, its decisions and commits, and commit-ahead runs. A chunk's kept picks stay
 * claimed from one commit to the next; when the chunk ends, they are given back and its tasks not
 * placed go back to the source.
 */
export class ChunkPlacer {
  private readonly tasks: ChunkSource;
  /** The chunk as taken, and as placed now (a quota's cut). */
  private orig: number[] = [];
  private cur: number[] = [];
  /** Picks the store confirmed unchanged after a conflict: still chosen (and claimed). */
  private keep: Pick[] = [];
  private picks: Pick[] = [];
  /** The call's last chunk. */
  private last = false;
  private placed = 0;
  private open = false;

  constructor(private readonly cx: AttemptContext) {
    this.tasks = new ChunkSource(cx.tasks);
  }

  /** Tasks not placed yet. */
  left(): number {
    return this.tasks.left();
  }

  /** Ends the chunk being placed: kept picks are given back, its tasks not placed go back to the source. */
  endChunk(): void {
    if (!this.open) return;
    this.open = false;
    if (this.keep.length > 0) this.cx.unclaim(this.keep);
    this.keep = [];
    this.tasks.giveBack(this.orig.slice(this.placed));
  }

  /**
   * Before a decision for the chunk (a fresh one is taken first): with group commit, decide only
   * when the decision can leave at once: a decision that waited in the queue would reach the
   * store staler, and conflict more.
   */
  async turn(s: Extract<Step, { kind: 'decide' }>): Promise<void> {
    const { cx } = this;
    const a = cx.agent;
    if (s.fresh) {
      this.endChunk();
      this.orig = this.cur = this.tasks.take(s.chunk);
      this.last = this.tasks.left() === 0;
      this.placed = 0;
      this.open = true;
    } else if (s.chunk < this.cur.length) {
      this.cur = this.cur.slice(0, s.chunk);
      this.last = false;
    }
    const t0 = a.clock.monotonic();
    await a.commitTurn();
    cx.assertOpen();
    cx.commitTime(t0);
  }

  /**
   * One decision for the chunk. Synchronous, and its commit is sent in the same turn of the event
   * loop (its picks claimed), so no other decision of this process sees its RUs free meanwhile.
   */
  decide(): Outcome {
    const { cx } = this;
    const a = cx.agent;
    // A survivor that a rival took meanwhile (the watch replaced our claim with its write)
    // would only conflict again: resample it too. So would one on a server that is no longer this
    // front-end's to sample (the homes turned since it was chosen: its new home samples it now).
    const allow = a.view.handoff.partition();
    const away = allow ? this.keep.filter((p) => !allow(p.server)) : [];
    if (away.length > 0) cx.unclaim(away);
    this.keep = this.keep.filter((p) => a.state.isClaimed({ server: p.server.id, index: p.index }, cx.rec));
    const d = decideChunk(
      cx,
      this.cur.length - this.keep.length,
      this.keep.map((p) => p.id),
    );
    this.picks = this.keep.concat(d.selection.picks);
    return { kind: 'decided', picks: this.picks.length, kept: this.keep.length };
  }

  /** Commits the chunk's picks. Incremental: picks the store confirmed unchanged stay chosen (and claimed). */
  async commit(): Promise<Outcome> {
    const { cx } = this;
    const tasks = this.cur.slice(0, this.picks.length);
    const c0 = cx.agent.clock.monotonic();
    const res = await tryCommit(cx, { tasks, picks: this.picks, finalForJob: this.last && tasks.length === this.cur.length, ruState: 'busy' });
    cx.commitTime(c0);
    if (!res.ok && res.quota) {
      this.keep = [];
      return { kind: 'committed', placed: 0, conflicts: 0, quota: res.quota };
    }
    if (res.ok) {
      this.keep = [];
      this.placed += tasks.length;
      return { kind: 'committed', placed: tasks.length, conflicts: 0 };
    }
    this.keep = res.survivors;
    return { kind: 'committed', placed: 0, conflicts: Math.max(1, this.picks.length - this.keep.length), kept: this.keep.length };
  }

  /** A commit-ahead run over what is left. */
  async ahead(): Promise<Outcome> {
    this.endChunk();
    return { kind: 'ahead', ...(await commitAheadRun(this.cx, this.tasks)) };
  }
}

/**
 * One decision for `need` tasks of the call, with admission skipped (the loop asked it), the RUs
 * in `keep` (survivors of the chunk's last commit) and those freed moments ago that are left to
 * another front-end (handoff.ts) excluded, on a nearly full cell among this front-end's servers
 * alone (handoff.ts partition()), and counted in the record.
 */
function decideChunk(cx: AttemptContext, need: number, keep: readonly number[]): Decision {
  const { agent: a, job } = cx;
  const allow = a.view.handoff.partition();
  const d = decide(a.core, {
    job,
    target: cx.target,
    m: need,
    cfg: a.config,
    skipAdmission: true,
    exclude: a.view.handoff.excludedWith(keep),
    ...(allow ? { allow } : {}),
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
 * the first chunk the view cannot fill (it sends what that decision found, as the chunk path
 * would, and says how many it was short: the attempt loop then waits for freed RUs), the first
 * conflict or error, or a fair-share yield; the tasks it did not place go back to the source and
 * the attempt loop goes on from there. When it sent nothing (no free RU found), the attempt loop
 * takes that chunk by the chunk path. A short chunk is not decided twice: on a nearly full cell a
 * large job woken for a few freed RUs found them once, not once ahead and once again.
 */
async function commitAheadRun(cx: AttemptContext, tasks: ChunkSource): Promise<AheadCounts> {
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
      const got = d.selection.picks.length;
      if (got === 0) break;
      run.send(tasks.take(got), d.selection.picks);
      // Too few free RUs for a whole chunk: what was found is sent, the rest waits for freed RUs.
      if (got < need) {
        run.short = need - got;
        break;
      }
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
  /** Free RUs the last chunk lacked (0: every chunk was whole). */
  short = 0;
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

  /** What the run sent (0: nothing), placed and lost; rethrows the first failure. */
  outcome(): AheadCounts {
    if (this.failure) throw this.failure.err;
    return { asked: this.asked, placed: this.placed, conflicts: this.conflicts, ...(this.short > 0 ? { short: this.short } : {}) };
  }
}
