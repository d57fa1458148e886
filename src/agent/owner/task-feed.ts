/**
 * The task records a job owner follows: those of the jobs it owns, and no others. Each owned job
 * has a list+watch of its own `tasks/<job>/` prefix (a Follower) from the moment the job is owned
 * until it is not; the map of owned jobs (`OwnedJobs`) starts and stops them, so no code path can
 * own a job without following its tasks or keep following a job it gave up.
 *
 * Every front-end following every task record cost each task write one watch delivery per
 * front-end; scoped this way a task write reaches its owner only. The list of a newly followed
 * job holds everything written before its watch starts (a job adopted with tasks placed, running
 * or ended), and its watch starts at the list's revision + 1, so a change made while the owner
 * took the job up is never lost between the two.
 */
import type { Keys } from '../../state/keys.ts';
import { Follower } from '../../state/follow.ts';
import type { ClusterStore, KeyValue } from '../../store/types.ts';
import type { Clock, Timer } from '../../util/clock.ts';
import { errorMessage } from '../../util/errors.ts';
import type { Logger } from '../../util/log.ts';
import type { Rng } from '../../util/rng.ts';
import type { Owned } from './context.ts';

/** Pause before following a job's tasks again after a non-transient failure of its first list. */
const REFOLLOW_MS = 1000;

export interface TaskFeedOptions {
  store: ClusterStore;
  clock: Clock;
  log: Logger;
  keys: Keys;
  rng?: Pick<Rng, 'next'>;
  /** A task record as listed or changed (deleted: the key is gone). */
  onTask(kv: KeyValue, deleted: boolean): void;
}

export class TaskFeeds {
  private readonly feeds = new Map<string, Follower>();
  private readonly retries = new Map<string, Timer>();
  private closed = false;

  constructor(private readonly o: TaskFeedOptions) {}

  /** Jobs whose tasks are followed now. */
  get size(): number {
    return this.feeds.size;
  }

  follow(job: string): void {
    if (this.closed || this.feeds.has(job)) return;
    const each = (kvs: KeyValue[]): void => {
      for (const kv of kvs) this.o.onTask(kv, false);
    };
    const f = new Follower({
      store: this.o.store,
      clock: this.o.clock,
      log: this.o.log,
      prefix: this.o.keys.tasks(job),
      ...(this.o.rng ? { rng: this.o.rng } : {}),
      onSnapshot: each,
      onEvent: (kv, deleted) => this.o.onTask(kv, deleted),
    });
    this.feeds.set(job, f);
    // A transient failure of the first list is retried by the Follower itself; anything else
    // (the store closed under us, a bug) is tried again later while the job is still followed.
    f.start().catch((err: unknown) => {
      if (this.closed || this.feeds.get(job) !== f) return;
      this.feeds.delete(job);
      void f.close();
      this.o.log.warn({ job, err: errorMessage(err) }, "following the job's tasks failed; trying again");
      this.retries.set(
        job,
        this.o.clock.setTimer(REFOLLOW_MS, () => {
          this.retries.delete(job);
          this.follow(job);
        }),
      );
    });
  }

  unfollow(job: string): void {
    const t = this.retries.get(job);
    if (t) {
      t.cancel();
      this.retries.delete(job);
    }
    const f = this.feeds.get(job);
    if (!f) return;
    this.feeds.delete(job);
    void f.close();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.retries.values()) t.cancel();
    this.retries.clear();
    const all = [...this.feeds.values()];
    this.feeds.clear();
    await Promise.allSettled(all.map((f) => f.close()));
  }
}

/** The jobs a process owns, by id: owning one follows its tasks (TaskFeeds), giving it up stops. */
export class OwnedJobs extends Map<string, Owned> {
  private feeds: TaskFeeds | undefined;

  /** From now on, every job owned has its tasks followed by `feeds`. */
  attach(feeds: TaskFeeds): void {
    this.feeds = feeds;
    for (const id of this.keys()) feeds.follow(id);
  }

  override set(id: string, o: Owned): this {
    super.set(id, o);
    this.feeds?.follow(id);
    return this;
  }

  override delete(id: string): boolean {
    const had = super.delete(id);
    if (had) this.feeds?.unfollow(id);
    return had;
  }

  override clear(): void {
    for (const id of this.keys()) this.feeds?.unfollow(id);
    super.clear();
  }
}
