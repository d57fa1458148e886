/**
 * The durable trace of a job that has to wait (admission queue, or no eligible RU free): a
 * `waiting` entry under `queue/<job>/`, removed once the job is placed. It names the agent that
 * holds the job, so operators (and adopting agents) can see every waiting job.
 */
import type { JobSpec } from '../model/types.ts';
import type { Keys } from '../state/keys.ts';
import { queuePut } from '../state/queue.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';

export class WaitingEntry {
  private key: string | undefined;
  constructor(
    private readonly store: ClusterStore,
    private readonly keys: Keys,
    private readonly job: JobSpec,
    private readonly agent: string,
    private readonly clock: Clock,
  ) {}

  async ensure(needed: number): Promise<void> {
    if (this.key) return;
    const since = this.clock.now();
    const put = queuePut(this.keys, since, { reason: 'waiting', job: this.job.id, agent: this.agent, needed, since });
    this.key = put.key;
    await this.store.put(put.key, put.value);
  }

  async remove(): Promise<void> {
    if (!this.key) return;
    const key = this.key;
    this.key = undefined;
    await this.store.delete(key);
  }
}
