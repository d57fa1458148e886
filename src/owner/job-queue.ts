/**
 * The owner's work queue: the jobs to evaluate. Whatever learns something about an owned job (a
 * submission, an adoption, a record read, an RU event, a write's answer, a timer) adds the job
 * here and goes on; the queue runs the job's evaluation (evaluate.ts: facts, plan, apply) on a
 * later turn of the event loop, one evaluation per turn as long passes take turns (`laterTurn`).
 * At most one evaluation runs per job and at most one waits behind it, so the changes of one burst
 * (many tasks ending together) are looked at once, and the turn that brought them is not
 * lengthened by it. A new job's first evaluation does not queue behind them: every submission
 * answered during one turn is first evaluated in the next, together (it has nothing to wait for
 * and look at once; starting every evaluation so cost more store requests per task and more
 * CPU under overload, bench/README, ceiling). A failed evaluation is tried again after a pause
 * shared by every job of the process: a store that times out gets fewer evaluations, not more.
 */
import type { SharedBackoff } from '../util/backoff.ts';
import { errorMessage, isTransient } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import { laterTurn } from '../util/turns.ts';

/** What the queue keeps on each job (context.ts Owned). */
export interface QueuedJob {
  readonly id: string;
  /** No longer owned here: never evaluated again. */
  readonly dropped: boolean;
  /** An evaluation waits to start. */
  evalQueued: boolean;
  /** The job's evaluations, one after the other. */
  chain: Promise<void>;
  /** The next evaluation looks at every task, not only those that changed. */
  full: boolean;
}

/** A failed evaluation is tried again after at least this long; while the store keeps timing out the shared pause doubles up to EVAL_RETRY_MAX_MS. */
export const EVAL_RETRY_MIN_MS = 500;
export const EVAL_RETRY_MAX_MS = 10_000;

/** What the queue needs of its process. */
export interface JobQueueDeps<O extends QueuedJob> {
  /** One evaluation of the job; a throw is retried after the shared pause. */
  run(o: O): Promise<void>;
  log: Logger;
  retries: SharedBackoff;
  /** A timer that stops with the process. */
  later(ms: number, fn: () => void): void;
  /** A background promise the process waits for when it closes. */
  track(p: Promise<unknown>): void;
  /** The process is closed: nothing more runs. */
  closed(): boolean;
  /**
   * Nothing is acted on: the agents are not started yet (`'starting'`: the job is evaluated
   * once they are), or the owner lease is unconfirmed (`'paused'`: the job is looked at in full
   * on resuming, so what changes meanwhile is not taken and then skipped).
   */
  hold(): 'starting' | 'paused' | undefined;
}

export class JobQueue<O extends QueuedJob = QueuedJob> {
  /** Jobs added before the agents started, evaluated by `release()`. */
  private readonly held = new Set<O>();

  constructor(private readonly d: JobQueueDeps<O>) {}

  /** The pause a failed evaluation waits now before it is tried again (shared by every job). */
  get retryPauseMs(): number {
    return this.d.retries.pauseMs;
  }

  /**
   * Evaluates the job soon (once, for every add before it starts): on a later turn, or with
   * `first` (a job just submitted here) on the next one.
   */
  add(o: O, first = false): void {
    if (o.dropped || o.evalQueued || this.d.closed()) return;
    const hold = this.d.hold();
    if (hold === 'starting') {
      this.held.add(o);
      return;
    }
    if (hold === 'paused') {
      o.full = true;
      return;
    }
    o.evalQueued = true;
    const p = o.chain.then(() => this.runOnce(o, first));
    o.chain = p;
    this.d.track(p);
  }

  /** The agents have started: the jobs held meanwhile are evaluated (those still owned, `owns`). */
  release(owns: (o: O) => boolean): void {
    const held = [...this.held];
    this.held.clear();
    for (const o of held) if (owns(o)) this.add(o);
  }

  private async runOnce(o: O, first: boolean): Promise<void> {
    await (first ? nextTurn() : laterTurn());
    o.evalQueued = false;
    if (o.dropped || this.d.closed()) return;
    try {
      await this.d.run(o);
      this.d.retries.eased();
    } catch (err) {
      if (this.d.closed()) return;
      this.d.retries.failed(err);
      const delay = Math.round(isTransient(err) ? this.d.retries.delayMs() : EVAL_RETRY_MIN_MS);
      this.d.log.warn({ job: o.id, err: errorMessage(err), delay }, 'job evaluation failed; retrying');
      this.d.later(delay, () => this.add(o));
    }
  }
}

/** Resolves in the next check phase of the event loop, with every other first evaluation asked for before it. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
