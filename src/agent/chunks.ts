/**
 * The live driver of the attempt loop (attempt.ts) for incremental jobs and gangs that fit one
 * transaction: chunks of at most picksPerTxn tasks, each decided (core.ts) and committed
 * (commit.ts), with awaits on the store and the clock. Chunks of a large job may be in flight
 * together (commit-ahead); a conflict resamples only the picks that changed.
 */
import type { JobSpec } from '../model/types.ts';
import type { JobTarget } from '../quality/index.ts';
import type { Pick } from '../sampling/batch.ts';
import type { DecisionRecord } from '../state/decisions.ts';
import { hasQuotaNamespace } from '../tenancy/quota.ts';
import { Attempt, type Next } from './attempt.ts';
import type { TaskStamp } from './commit.ts';
import { decide } from './core.ts';
import type { GangHost } from './gang.ts';
import type { SharedView } from './shared-view.ts';
import type { WaitingEntry } from './waiting.ts';

/** What the chunk loop uses of its agent. */
export interface ChunkHost extends GangHost {
  readonly view: SharedView;
  readonly stats: { readmissions: number; fairYields: number };
  /** Resolves when a commit built now leaves in the next request (group commit; at once when off). */
  commitTurn(): Promise<void>;
  /** True when a freed RU woke the wait (rather than its time running out). */
  waitForCapacity(rec: DecisionRecord, job: JobSpec, ms?: number, need?: number, why?: string, quota?: boolean): Promise<boolean>;
}

/** The tasks of one scheduling call not yet placed, taken chunk by chunk (placeIncremental). */
interface ChunkSource {
  left(): number;
  take(n: number): number[];
  /** Tasks of a chunk that were not placed: taken again first. */
  giveBack(unplaced: number[]): void;
}

/** The live driver of the attempt loop (attempt.ts): awaits on the store and the clock. */
export async function placeIncremental(
  h: ChunkHost,
  job: JobSpec,
  target: JobTarget,
  pending: number[],
  rec: DecisionRecord,
  allAtOnce: boolean,
  waiting: WaitingEntry,
  stamp: TaskStamp,
): Promise<void> {
  // A request whose priority bypasses others' waits for a freed RU after a lost race (untilFreed),
  // as in the simulator: woken first among the waiters rather than left to back off.
  const at = new Attempt(h.config, h.rng, job.maxQueueMs, job.priority > h.config.bypassAbove);
  // `next` is the first task not yet taken: chunks take a prefix of what is left, so a cursor
  // replaces removing placed tasks from the array (quadratic for 100,000-task jobs). Tasks of a
  // chunk that were not placed go back to `back`, which is taken from first.
  let next = 0;
  let back: number[] = [];
  const tasks: ChunkSource = {
    left: () => back.length + pending.length - next,
    take: (n) => {
      const chunk = back.length > 0 ? back.splice(0, n) : [];
      const k = Math.min(n - chunk.length, pending.length - next);
      for (let i = 0; i < k; i++) chunk.push(pending[next + i] as number);
      next += k;
      return chunk;
    },
    giveBack: (unplaced) => {
      if (unplaced.length > 0) back = unplaced.concat(back);
    },
  };
  const ahead = h.config.commitAhead > 1 && !allAtOnce && !h.config.recordJob && !hasQuotaNamespace(job.id);
  // Woken by a freed RU in the waiters' (fair) order: the next decision does not yield.
  let woken = false;
  while (tasks.left() > 0) {
    h.assertOpen(job.id);
    const left = tasks.left();
    if (!woken && h.view.mustYield(job.id, Math.min(left, h.picksPerTxn))) {
      h.stats.fairYields++;
      await waiting.ensure(left);
      woken = await h.waitForCapacity(rec, job, h.config.recheckMs, left, 'waiting behind jobs of namespaces further below their fair share (fairShare)');
      continue;
    }
    woken = false;
    if (!at.admitted) await h.admit(job, target, left, rec, at, waiting);
    let then = ahead && left > h.picksPerTxn ? await commitAheadRun(h, job, target, tasks, rec, at, stamp) : undefined;
    if (!then) {
      const chunk = tasks.take(h.picksPerTxn);
      const res = await commitChunk(h, job, target, chunk, rec, at, allAtOnce, tasks.left() === 0, stamp);
      tasks.giveBack(chunk.slice(res.placed.length));
      then = res.then;
    }
    if (then.kind === 'go' || tasks.left() === 0) continue;
    if (!at.admitted) {
      rec.readmissions++;
      h.stats.readmissions++;
      await waiting.ensure(tasks.left());
    }
    if (then.kind === 'capacity-wait') {
      woken = await h.waitForCapacity(rec, job, then.ms, tasks.left(), then.why, then.why !== undefined);
    } else if (then.kind === 'backoff' && then.untilFreed) {
      woken = await h.waitForCapacity(rec, job, then.ms, tasks.left());
    } else {
      const q0 = h.clock.now();
      await h.clock.sleep(then.ms);
      rec.stageMs.queue += h.clock.now() - q0;
    }
  }
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
async function commitAheadRun(
  h: ChunkHost,
  job: JobSpec,
  target: JobTarget,
  tasks: ChunkSource,
  rec: DecisionRecord,
  at: Attempt,
  stamp: TaskStamp,
): Promise<Next | undefined> {
  const inflight = new Set<Promise<void>>();
  let stop = false;
  let conflicts = 0;
  let asked = 0;
  let placed = 0;
  let failure: { err: unknown } | undefined;
  const waitFor = async (p: Promise<unknown>): Promise<void> => {
    const t0 = h.clock.monotonic();
    await p;
    rec.stageMs.commit += h.clock.monotonic() - t0;
  };
  try {
    while (!stop && tasks.left() > 0) {
      if (inflight.size >= h.config.commitAhead) {
        await waitFor(Promise.race(inflight));
        continue;
      }
      h.assertOpen(job.id);
      if (stop || tasks.left() === 0) break;
      const need = Math.min(h.picksPerTxn, tasks.left());
      // The loop let the first chunk through (fair share); each later one asks again, as there.
      if (asked > 0 && h.view.mustYield(job.id, need)) break;
      const d = decide(h.core, job, target, need, h.config, {
        skipAdmission: true,
        exclude: h.view.handoff.excludedWith([]),
        ...(h.config.preemption && job.priority > h.config.bypassAbove ? h.view.fairDisplace(job.id) : {}),
      });
      rec.stageMs.size += d.stageUs.size / 1000;
      rec.stageMs.select += d.stageUs.select / 1000;
      rec.samples.push({ R: d.R, f: d.f, candidates: d.selection.candidatesSeen });
      if (rec.samples.length > 50) rec.samples.splice(1, 1);
      // Too few free RUs for a whole chunk: the chunk-by-chunk loop places what it can and waits.
      if (d.selection.picks.length < need) break;
      const chunk = tasks.take(need);
      asked += chunk.length;
      const p: Promise<void> = h
        .tryCommit(job, chunk, d.selection.picks, rec, false, 'busy', stamp, chunk.length === h.picksPerTxn)
        .then(
          (res) => {
            if (res.ok) {
              placed += chunk.length;
              return;
            }
            stop = true;
            conflicts += Math.max(1, chunk.length - res.survivors.length);
            // The whole chunk is decided again, with a fresh draw, by the attempt loop.
            if (res.survivors.length > 0) h.state.batch(() => res.survivors.forEach((s) => h.state.unclaim({ server: s.server.id, index: s.index }, rec)));
            tasks.giveBack(chunk);
          },
          (err: unknown) => {
            stop = true;
            failure ??= { err };
            tasks.giveBack(chunk);
          },
        )
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
  } finally {
    // Every commit sent is answered before the run ends, whatever ended it.
    if (inflight.size > 0) await waitFor(Promise.allSettled([...inflight]));
  }
  if (failure) throw failure.err;
  if (asked === 0) return undefined;
  if (conflicts === 0) return at.afterCommit({ placed, conflicts: 0, asked });
  const then = at.afterCommit({ placed: 0, conflicts, asked });
  if (at.admitted) rec.retries++;
  return then;
}

/**
 * Selects and commits one chunk of tasks; conflicting picks are resampled with a fresh draw after
 * the attempt loop's backoff. Returns the task indices placed and what the attempt loop says
 * comes next (go on, wait for a freed RU, or back off after a return to admission).
 */
async function commitChunk(
  h: ChunkHost,
  job: JobSpec,
  target: JobTarget,
  chunk: number[],
  rec: DecisionRecord,
  at: Attempt,
  allOrNothing: boolean,
  lastChunk: boolean,
  stamp: TaskStamp,
): Promise<{ placed: number[]; then: Next }> {
  let keep: Pick[] = [];
  try {
    for (;;) {
      h.assertOpen(job.id);
      // With group commit, decide only when the decision can leave at once: a decision that
      // waited in the queue would reach the store staler, and conflict more.
      const t0 = h.clock.monotonic();
      await h.commitTurn();
      h.assertOpen(job.id);
      rec.stageMs.commit += h.clock.monotonic() - t0;
      // A survivor that a rival took meanwhile (the watch replaced our claim with its write)
      // would only conflict again: resample it too.
      keep = keep.filter((p) => h.state.isClaimed({ server: p.server.id, index: p.index }, rec));
      const need = chunk.length - keep.length;
      const d = decide(h.core, job, target, need, h.config, {
        skipAdmission: true,
        // The survivors, and RUs freed moments ago that are left to another front-end (handoff.ts).
        exclude: h.view.handoff.excludedWith(keep.map((p) => p.id)),
        ...(h.config.preemption && job.priority > h.config.bypassAbove ? h.view.fairDisplace(job.id) : {}),
      });
      rec.stageMs.size += d.stageUs.size / 1000;
      rec.stageMs.select += d.stageUs.select / 1000;
      rec.samples.push({ R: d.R, f: d.f, candidates: d.selection.candidatesSeen });
      if (rec.samples.length > 50) rec.samples.splice(1, 1);
      const picks = keep.concat(d.selection.picks);
      const sel = at.afterSelection(picks.length, chunk.length, allOrNothing);
      if (sel.kind !== 'go') return { placed: [], then: sel };
      const tasks = chunk.slice(0, picks.length);
      const c0 = h.clock.monotonic();
      const res = await h.tryCommit(job, tasks, picks, rec, lastChunk && tasks.length === chunk.length, 'busy', stamp);
      rec.stageMs.commit += h.clock.monotonic() - c0;
      if (!res.ok && res.quota) {
        keep = [];
        // An incremental job takes what its namespace's quota leaves: fewer tasks now, the
        // rest once RUs are given back. A gang waits until all of its chunk fits.
        if (res.quota.room > 0 && !allOrNothing) {
          chunk = chunk.slice(0, res.quota.room);
          lastChunk = false;
          continue;
        }
        return { placed: [], then: at.afterQuota(res.quota.message) };
      }
      if (res.ok) {
        keep = [];
        return { placed: tasks, then: at.afterCommit({ placed: tasks.length, conflicts: 0, asked: chunk.length }) };
      }
      // Incremental: picks the store confirmed unchanged stay chosen (and claimed); only the
      // conflicting ones are resampled.
      keep = res.survivors;
      const then = at.afterCommit({ placed: 0, conflicts: Math.max(1, picks.length - keep.length), asked: chunk.length });
      if (!at.admitted) return { placed: [], then };
      rec.retries++;
      if (then.kind === 'backoff' && then.untilFreed) await h.waitForCapacity(rec, job, then.ms, chunk.length - keep.length);
      else await h.clock.sleep(then.kind === 'backoff' ? then.ms : 0);
    }
  } finally {
    if (keep.length > 0) h.state.batch(() => keep.forEach((p) => h.state.unclaim({ server: p.server.id, index: p.index }, rec)));
  }
}
