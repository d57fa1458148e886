/**
 * Preempted tasks wait in the durable queue (`queue/…`, reason 'preempted'). A standalone agent
 * (one without a job owner above it) watches the queue; one agent claims an entry by deleting it
 * in a transaction that compares its revision, then places the tasks again from the job's stored
 * spec. A task whose spec cannot be found is marked failed with the reason: it never disappears
 * silently. (Under a job owner, the owner claims its own preempted tasks: owner/transitions.ts.)
 */
import type { JobSpec } from '../model/types.ts';
import { Follower } from '../state/follow.ts';
import type { Keys } from '../state/keys.ts';
import { parseQueueEntry } from '../state/queue.ts';
import { parseJson, type JobRecord } from '../state/records.ts';
import type { ClusterStore, KeyValue } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { errorMessage } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import type { Rng } from '../util/rng.ts';

export interface PreemptedQueueOptions {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  rng: Rng;
  log: Logger;
  /** Places the claimed tasks again. */
  reschedule(job: JobSpec, tasks: number[]): Promise<unknown>;
  isClosed(): boolean;
}

export class PreemptedQueue {
  private follower: Follower | undefined;
  private readonly background = new Set<Promise<unknown>>();
  /** Tasks claimed for rescheduling. */
  claimed = 0;

  constructor(private readonly o: PreemptedQueueOptions) {}

  async start(): Promise<void> {
    this.follower = new Follower({
      store: this.o.store,
      clock: this.o.clock,
      rng: this.o.rng,
      log: this.o.log,
      prefix: this.o.keys.queue(),
      onSnapshot: (kvs) => {
        for (const kv of kvs) this.onEntry(kv);
      },
      onEvent: (kv, deleted) => {
        if (!deleted) this.onEntry(kv);
      },
    });
    await this.follower.start();
  }

  async close(): Promise<void> {
    await this.follower?.close();
    await Promise.allSettled([...this.background]);
  }

  private onEntry(kv: KeyValue): void {
    const entry = parseQueueEntry(kv);
    if (entry?.reason !== 'preempted') return;
    const p = this.claimAndReschedule(kv, entry.job, entry.tasks).catch((err: unknown) => {
      this.o.log.error({ err: errorMessage(err), job: entry.job }, 'rescheduling a preempted task failed');
    });
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }

  private async claimAndReschedule(kv: KeyValue, jobId: string, tasks: number[]): Promise<void> {
    const k = this.o.keys;
    const claim = await this.o.store.txn({
      compare: [{ key: kv.key, target: 'mod', op: '==', value: kv.modRevision }],
      success: [
        { type: 'delete', key: kv.key },
        { type: 'get', key: k.job(jobId) },
      ],
    });
    if (!claim.succeeded || this.o.isClosed()) return; // another agent took it
    const job = parseJson<JobRecord>(claim.responses[1]?.[0]);
    if (!job) {
      for (const t of tasks) {
        await this.o.store.put(
          k.task(jobId, t),
          JSON.stringify({ job: jobId, index: t, state: 'failed', attempt: 1, message: 'preempted, and the job spec was not found to reschedule it' }),
        );
      }
      this.o.log.error({ job: jobId, tasks }, 'preempted task has no job spec; marked failed');
      return;
    }
    this.claimed += tasks.length;
    await this.o.reschedule(job.spec, tasks);
  }
}
