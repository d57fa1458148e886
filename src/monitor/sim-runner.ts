/**
 * Runs the tasks placed on a simulated cell without node monitors (demo and benchmarks): ends each
 * task after its modelled duration through the real release transaction.
 */
import { parseJson, type PlacedRuRecord } from '../state/records.ts';
import { releaseRu } from '../state/release.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, KeyValue } from '../store/types.ts';
import { Follower } from '../state/follow.ts';
import type { Clock, Timer } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import { errorMessage } from '../util/errors.ts';

/**
 * Runs placed tasks with the simulated executor: each busy RU is held for the task's modelled
 * duration, then freed with a fenced transaction. It follows the store (list + watch), so it
 * works with any number of agents in any process. One runner can serve every server of an
 * embedded cluster, or a subset (a node's own servers).
 */
export class SimulatedRunner {
  private readonly store: ClusterStore;
  private readonly keys: Keys;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly durationOf: (rec: PlacedRuRecord) => number;
  private readonly servers: ReadonlySet<string> | undefined;
  private follower: Follower | undefined;
  private readonly running = new Map<string, { rev: number; timer: Timer }>();
  private closed = false;
  readonly stats = { started: 0, completed: 0, fenced: 0 };
  private readonly inflight = new Set<Promise<unknown>>();

  constructor(opts: {
    store: ClusterStore;
    keys: Keys;
    clock: Clock;
    log: Logger;
    durationOf: (rec: PlacedRuRecord) => number;
    servers?: ReadonlySet<string>;
  }) {
    this.store = opts.store;
    this.keys = opts.keys;
    this.clock = opts.clock;
    this.log = opts.log.child({ component: 'sim-runner' });
    this.durationOf = opts.durationOf;
    this.servers = opts.servers;
  }

  get runningCount(): number {
    return this.running.size;
  }

  async start(): Promise<void> {
    this.follower = new Follower({
      store: this.store,
      clock: this.clock,
      log: this.log,
      prefix: this.keys.rus(),
      onSnapshot: (kvs) => {
        for (const kv of kvs) this.onKv(kv);
      },
      onEvent: (kv, deleted) => this.onKv(kv, deleted),
    });
    await this.follower.start();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const r of this.running.values()) r.timer.cancel();
    this.running.clear();
    await this.follower?.close();
    await Promise.allSettled([...this.inflight]);
  }

  private onKv(kv: KeyValue, deleted = false): void {
    const ref = this.keys.parseRu(kv.key);
    if (!ref || (this.servers && !this.servers.has(ref.server))) return;
    const current = this.running.get(kv.key);
    const rec = deleted ? undefined : parseJson<PlacedRuRecord>(kv);
    if (!rec || rec.state !== 'busy') {
      if (current) {
        current.timer.cancel();
        this.running.delete(kv.key);
      }
      return;
    }
    if (current && current.rev === kv.modRevision) return;
    if (current) current.timer.cancel();
    const due = Math.max(0, rec.since + this.durationOf(rec) - this.clock.now());
    const rev = kv.modRevision;
    const timer = this.clock.setTimer(due, () => {
      const p = this.finish(kv.key, ref, rev, rec);
      this.inflight.add(p);
      void p.finally(() => this.inflight.delete(p));
    });
    this.running.set(kv.key, { rev, timer });
    this.stats.started++;
  }

  private async finish(key: string, ref: { server: string; index: number }, rev: number, rec: PlacedRuRecord): Promise<void> {
    if (this.closed) return;
    try {
      const ok = await releaseRu(this.store, this.keys, ref, rev, rec, { state: 'succeeded', endedAt: this.clock.now() });
      if (ok) this.stats.completed++;
      else this.stats.fenced++;
    } catch (err) {
      this.log.warn({ err: errorMessage(err), key }, 'release failed; will retry');
      if (!this.closed) {
        const timer = this.clock.setTimer(100, () => void this.finish(key, ref, rev, rec));
        this.running.set(key, { rev, timer });
        return;
      }
    }
    const cur = this.running.get(key);
    if (cur && cur.rev === rev) this.running.delete(key);
  }
}
