/**
 * The recent task ends of every job, as this process's view saw them on freed RUs.
 *
 * A task's success lives in its freed RU alone until its owner records it in the job's records.
 * When the owner's lease is lost (the process killed, or frozen past its TTL), the ends that came
 * between its last write and an adopter's scan were seen by every front-end's view, but by none
 * that still owned the job; an adopter that reaches the job later (a lost lease's thousands of
 * jobs are adopted a few at a time, for minutes) reads them from the RUs' history, and compaction
 * may have taken it by then: the task is recorded failed although it succeeded.
 *
 * So each front-end keeps the freed-RU values that carried an end, for RECENT_ENDS_MS and at most
 * RECENT_ENDS_MAX of them (the values as the watch delivered them, unparsed), and a job queued
 * for adoption takes its own into its adoption window (adoption.ts), where they are applied like
 * the ends that come while it waits. The ends of its own jobs are kept too: a front-end fenced
 * after a pause drops its jobs and may adopt them back.
 *
 * A process keeps nothing from before its start: while it is young it leaves orphaned jobs to the
 * members that have kept ends for longer (`endsSince` in each member record; adoption.ts), so that
 * a front-end restarted after a crash does not adopt its own former jobs without their ends.
 */
import type { RuRef } from '../model/types.ts';
import type { Clock } from '../util/clock.ts';

/** How long an end is kept. */
export const RECENT_ENDS_MS = 120_000;
/** Ends kept at most: past it the oldest go first (about 0.3 KB each). */
export const RECENT_ENDS_MAX = 200_000;

/** A freed RU's value that carried an end, with its revision and RU. */
export interface RecentEnd {
  value: string;
  rev: number;
  ref: RuRef;
  at: number;
}

export class RecentEnds {
  private readonly byJob = new Map<string, RecentEnd[]>();
  /** Every end kept, oldest first, from `head` on (the array is trimmed now and then). */
  private order: { job: string; end: RecentEnd }[] = [];
  private head = 0;
  private kept = 0;
  private chars = 0;
  /** When this process began keeping ends (its clock). */
  readonly since: number;

  constructor(
    private readonly clock: Clock,
    readonly keepMs = RECENT_ENDS_MS,
    private readonly max = RECENT_ENDS_MAX,
  ) {
    this.since = clock.now();
  }

  /** Ends kept now. */
  get size(): number {
    return this.kept;
  }

  /** The length of the values kept now, summed (about their bytes: the values are JSON). */
  get keptChars(): number {
    return this.chars;
  }

  add(job: string, value: string, rev: number, ref: RuRef): void {
    const at = this.clock.now();
    const end: RecentEnd = { value, rev, ref, at };
    const list = this.byJob.get(job);
    if (list) list.push(end);
    else this.byJob.set(job, [end]);
    this.order.push({ job, end });
    this.kept++;
    this.chars += value.length;
    this.expire(at);
  }

  /**
   * The ends kept of `job`, oldest first. They stay kept: an adoption that does not happen (it
   * failed, the lease was unconfirmed, a peer took the job) leaves them for the next one.
   */
  of(job: string): RecentEnd[] {
    this.expire(this.clock.now());
    return this.byJob.get(job)?.slice() ?? [];
  }

  private expire(now: number): void {
    const order = this.order;
    while (this.head < order.length) {
      const first = order[this.head] as { job: string; end: RecentEnd };
      if (first.end.at > now - this.keepMs && this.kept <= this.max) break;
      this.head++;
      // Ends leave only here, oldest first: the oldest kept is the first of its job's list.
      const list = this.byJob.get(first.job) as RecentEnd[];
      list.shift();
      this.kept--;
      this.chars -= first.end.value.length;
      if (list.length === 0) this.byJob.delete(first.job);
    }
    if (this.head > 4096 && this.head * 2 > order.length) {
      this.order = order.slice(this.head);
      this.head = 0;
    }
  }
}
