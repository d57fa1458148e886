/**
 * The context of one scheduling call of one job on one agent (SchedulingAgent.schedule, or a
 * move), made when the call starts and dropped when it returns: the agent it runs on (its handles
 * on the store, clock, rng and shared view, its options, counters and the job's fence:
 * AgentRuntime), the job and its target quality, the tasks the call places and how each is stamped
 * on its records, the decision record being built (what explain shows), the attempt loop's state
 * (attempt.ts) and the job's durable waiting entry. The call's steps (chunks.ts, gang.ts,
 * commit.ts, waits.ts) take it instead of long parameter lists.
 */
import type { JobSpec } from '../model/types.ts';
import { jobTarget, type JobTarget } from '../quality/index.ts';
import type { Pick } from '../sampling/batch.ts';
import type { DecisionRecord } from '../state/decisions.ts';
import type { TaskMove } from '../state/placement.ts';
import type { AttemptSummary } from '../state/records.ts';
import type { AgentRuntime } from './agent-runtime.ts';
import { Attempt } from './attempt.ts';
import type { Decision } from './core.ts';
import { WaitingEntry } from './waiting.ts';

/** How each task of one scheduling call is written (attempt number, the revision it compares). */
export interface TaskStamp {
  attempt: (task: number) => number;
  /** Revision of each task's record the decision saw (see PlacementItem.taskRev). */
  taskRev?: (task: number) => number;
  /** Earlier attempts of each task, carried on its new records. */
  previous?: (task: number) => AttemptSummary[] | undefined;
  /** A running copy the placement replaces (a move of the run-time loop). */
  move?: (task: number) => TaskMove | undefined;
}

/** What one call places, and how. */
export interface CallSpec {
  /** The tasks to place, in order. */
  tasks: readonly number[];
  stamp: TaskStamp;
  /** After a lost race, wait for the next freed RU instead of backing off (Attempt's `bypasses`). */
  bypasses?: boolean;
}

export class AttemptContext {
  readonly target: JobTarget;
  readonly tasks: readonly number[];
  readonly stamp: TaskStamp;
  readonly rec: DecisionRecord;
  readonly at: Attempt;
  /** The job's `queue/` entry while it waits (written at its first wait, removed when the call ends). */
  readonly waiting: WaitingEntry;

  constructor(
    readonly agent: AgentRuntime,
    readonly job: JobSpec,
    call: CallSpec,
  ) {
    this.target = jobTarget(job.profile.caused);
    this.tasks = call.tasks;
    this.stamp = call.stamp;
    this.rec = {
      job: job.id,
      agent: agent.id,
      target: this.target.T,
      admission: [],
      samples: [],
      placements: [],
      conflicts: 0,
      retries: 0,
      readmissions: 0,
      queuedMs: 0,
      stageMs: { admission: 0, size: 0, select: 0, commit: 0, queue: 0 },
      startedAt: agent.clock.now(),
    };
    this.at = new Attempt(agent.config, agent.rng, job.maxQueueMs, call.bypasses ?? false);
    this.waiting = new WaitingEntry(agent.store, agent.keys, job, agent.id, agent.clock);
  }

  /** Throws once the agent is closed or the job's scheduling was stopped. */
  assertOpen(): void {
    this.agent.assertOpen(this.job.id);
  }

  /** Counts a decision's stages and its sample in the record (the first sample and the latest ones kept). */
  noteDecision(d: Decision): void {
    const rec = this.rec;
    rec.stageMs.size += d.stageUs.size / 1000;
    rec.stageMs.select += d.stageUs.select / 1000;
    rec.samples.push({ R: d.R, f: d.f, candidates: d.selection.candidatesSeen });
    this.agent.stats.samples++;
    this.agent.stats.candidates += d.selection.candidatesSeen;
    if (rec.samples.length > 50) rec.samples.splice(1, 1);
  }

  /** Gives back this call's claims on picks it will not commit, in one batch of the view. */
  unclaim(picks: readonly Pick[]): void {
    const state = this.agent.state;
    state.batch(() => picks.forEach((p) => state.unclaim({ server: p.server.id, index: p.index }, this.rec)));
  }

  /** Adds the time since `t0` (the clock's monotonic reading) to the record's commit stage. */
  commitTime(t0: number): void {
    this.rec.stageMs.commit += this.agent.clock.monotonic() - t0;
  }
}
