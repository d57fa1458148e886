/**
 * The one list+watch loop of tarcil: every component that follows part of the store (an agent's
 * cluster cache, a job owner, a node monitor, the simulated runner, the preempted-task queue)
 * follows it through a Follower.
 */
import type { ClusterStore, KeyValue, WatchBatch, WatchHandle } from '../store/types.ts';
import { errorMessage, isTransient, type TarcilError } from '../util/errors.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import type { Rng } from '../util/rng.ts';

export interface FollowOptions {
  store: ClusterStore;
  clock: Clock;
  log: Logger;
  /** One prefix, or several listed at one revision and watched from the next. */
  prefix: string | readonly string[];
  /**
   * Every key under the prefixes at one revision: after start and after every re-list. `byPrefix`
   * holds them per prefix, in the order given.
   */
  onSnapshot(kvs: KeyValue[], revision: number, byPrefix: KeyValue[][]): void;
  /** Each change, in order (used when onBatch is not given). */
  onEvent?(kv: KeyValue, deleted: boolean, revision: number): void;
  /** Each batch of changes applied at one revision, whole (takes the place of onEvent). */
  onBatch?(batch: WatchBatch): void;
  /**
   * Given (with several prefixes), a watch that ends costs a list of its own prefix only, handed
   * here with the revision it was read at, and a watch of that prefix from the next; the others
   * go on. Without it every prefix is listed again. A quiet prefix's watch resumes from the
   * revision it was made at, which compaction passes: after etcd restarts, only that prefix is
   * read again and the busy prefixes' watches resume where they were, missing no change.
   */
  onRelistPrefix?(index: number, kvs: KeyValue[], revision: number): void;
  /** Bounds of the pause after a failed re-list: see {@link relistBackoffMs} (default 50 ms and 2 s). */
  backoffMs?: { first: number; max: number };
  /**
   * Draws the jitter of that pause. Without one it is Math.random, seeded differently in every
   * process: the jitter is there so that the many followers that lost their watches together (etcd
   * restarted) do not come back to it in lockstep, which one seed shared by all would defeat.
   */
  rng?: Pick<Rng, 'next'>;
}

const DEFAULT_BACKOFF_MS = { first: 50, max: 2000 };

/**
 * The pause after the `failures`-th failed re-list in a row (1, 2, …): uniform in [c/2, c] with
 * c = min(max, first · 2^(failures − 1)), so 25–50 ms, 50–100 ms, … up to 1–2 s with the defaults.
 */
export function relistBackoffMs(backoff: { first: number; max: number }, failures: number, rand: () => number): number {
  const cap = Math.min(backoff.max, backoff.first * 2 ** Math.max(0, failures - 1));
  return cap / 2 + rand() * (cap / 2);
}

/**
 * List a prefix, then watch it from the list's revision + 1; when a watch ends (etcd restarted,
 * history compacted, connection lost) list again and re-watch, at once and then with a bounded,
 * jittered exponential backoff while re-listing fails, until closed.
 * etcd3 does not resume a broken watch by itself, and a component that silently stops following
 * the store is the worst kind of failure: it keeps answering from stale state.
 */
export class Follower {
  private watches: (WatchHandle | undefined)[] = [];
  /** Generation of each prefix's watch, when prefixes are listed again one at a time. */
  private readonly prefixGen: number[] = [];
  private closed = false;
  private restarting = false;
  /** Generation of the current watches: an error from an older one (already replaced) is ignored. */
  private gen = 0;
  /** A current watch ended while a re-list was under way: list again once it is done. */
  private again = false;
  private readonly rand: () => number;
  relists = 0;
  /** Lists of one prefix alone after its watch ended (onRelistPrefix). */
  prefixRelists = 0;

  constructor(private readonly o: FollowOptions) {
    const rng = o.rng;
    this.rand = rng ? () => rng.next() : Math.random;
  }

  /**
   * The first list and watch. A slow or briefly unreachable store (UNAVAILABLE, DEADLINE_EXCEEDED:
   * a process started while etcd is loaded, restarting or electing a leader) costs a pause, with
   * the re-list backoff, not the process; any other error is thrown.
   */
  async start(): Promise<void> {
    const backoff = this.o.backoffMs ?? DEFAULT_BACKOFF_MS;
    for (let failures = 0; !this.closed;) {
      try {
        await this.listAndWatch();
        return;
      } catch (err) {
        if (this.closed || !isTransient(err)) throw err;
        failures++;
        const delay = Math.round(relistBackoffMs(backoff, failures, this.rand));
        this.o.log.warn({ prefix: this.prefixes.join(','), err: errorMessage(err), failures, delay }, 'first list failed; retrying');
        await this.o.clock.sleep(delay);
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const ws = this.watches;
    this.watches = [];
    await Promise.allSettled(ws.flatMap((w) => (w ? [w.close()] : [])));
  }

  private get prefixes(): readonly string[] {
    return typeof this.o.prefix === 'string' ? [this.o.prefix] : this.o.prefix;
  }

  private async listAndWatch(): Promise<void> {
    const gen = this.gen;
    const prefixes = this.prefixes;
    let byPrefix: KeyValue[][];
    let revision: number;
    if (prefixes.length === 1) {
      const res = await this.o.store.range(prefixes[0] as string);
      byPrefix = [res.kvs];
      revision = res.revision;
    } else {
      ({ byPrefix, revision } = await this.o.store.snapshot(prefixes));
    }
    if (this.closed || gen !== this.gen) return;
    this.o.onSnapshot(byPrefix.flat(), revision, byPrefix);
    const alone = this.o.onRelistPrefix !== undefined && prefixes.length > 1;
    const onError = (err: TarcilError, index: number, pgen: number): void => {
      if (this.closed || gen !== this.gen) return;
      if (alone) {
        if (pgen === this.prefixGen[index]) void this.relistPrefix(index, err);
        return;
      }
      // The first of the current watches to end starts a re-list; the others (one per prefix)
      // and the watches it replaces have nothing more to say.
      this.gen++;
      this.o.log.warn({ prefix: prefixes.join(','), code: err.code, err: err.message }, 'watch ended; re-listing');
      if (this.restarting) this.again = true;
      else void this.restart();
    };
    const pgens = prefixes.map((_, i) => (this.prefixGen[i] = (this.prefixGen[i] ?? 0) + 1));
    const made = await Promise.allSettled(
      prefixes.map((prefix, i) =>
        this.o.store.watch({ prefix, fromRevision: revision + 1, onEvents: this.deliver, onError: (err) => onError(err, i, pgens[i] ?? 0) }),
      ),
    );
    const watches = made.flatMap((m) => (m.status === 'fulfilled' ? [m.value] : []));
    const failed = made.find((m): m is PromiseRejectedResult => m.status === 'rejected');
    if (failed || this.closed || gen !== this.gen) {
      // Not all watching, closed meanwhile, or already ended: none of these watches is kept.
      await Promise.allSettled(watches.map((w) => w.close()));
      if (failed) throw failed.reason;
      return;
    }
    // A prefix whose watch ended meanwhile is being listed again on its own: its new watch, set
    // there, is kept (the one made here has ended).
    this.watches = watches.map((w, i) => (pgens[i] === this.prefixGen[i] ? w : this.watches[i]));
  }

  /** Hands a batch of changes to the follower's callbacks. */
  private readonly deliver = (b: WatchBatch): void => {
    if (this.o.onBatch) this.o.onBatch(b);
    else for (const ev of b.events) this.o.onEvent?.(ev.kv, ev.type === 'delete', b.revision);
  };

  /** One prefix listed and watched again on its own (onRelistPrefix); the others' watches go on. */
  private async relistPrefix(index: number, err: TarcilError): Promise<void> {
    const gen = this.gen;
    const pgen = (this.prefixGen[index] = (this.prefixGen[index] ?? 0) + 1);
    const prefix = this.prefixes[index] as string;
    const stale = (): boolean => this.closed || gen !== this.gen || pgen !== this.prefixGen[index];
    this.o.log.warn({ prefix, code: err.code, err: err.message }, 'watch ended; listing its prefix again');
    const old = this.watches[index];
    this.watches[index] = undefined;
    await old?.close();
    const backoff = this.o.backoffMs ?? DEFAULT_BACKOFF_MS;
    for (let failures = 0; !stale();) {
      try {
        const res = await this.o.store.range(prefix);
        if (stale()) return;
        this.o.onRelistPrefix?.(index, res.kvs, res.revision);
        const w = await this.o.store.watch({
          prefix,
          fromRevision: res.revision + 1,
          onEvents: this.deliver,
          onError: (e) => {
            if (!stale()) void this.relistPrefix(index, e);
          },
        });
        if (stale()) {
          await w.close();
          return;
        }
        this.watches[index] = w;
        this.prefixRelists++;
        return;
      } catch (e) {
        failures++;
        const delay = Math.round(relistBackoffMs(backoff, failures, this.rand));
        this.o.log.warn({ prefix, err: errorMessage(e), failures, delay }, 'list of one prefix failed; retrying');
        await this.o.clock.sleep(delay);
      }
    }
  }

  private async restart(): Promise<void> {
    if (this.restarting || this.closed) return;
    this.restarting = true;
    try {
      do {
        this.again = false;
        const old = this.watches;
        this.watches = [];
        await Promise.allSettled(old.flatMap((w) => (w ? [w.close()] : [])));
        const backoff = this.o.backoffMs ?? DEFAULT_BACKOFF_MS;
        for (let failures = 0; !this.closed;) {
          try {
            await this.listAndWatch();
            this.relists++;
            break;
          } catch (err) {
            failures++;
            const delay = Math.round(relistBackoffMs(backoff, failures, this.rand));
            this.o.log.warn({ prefix: this.prefixes.join(','), err: errorMessage(err), failures, delay }, 're-list failed; retrying');
            await this.o.clock.sleep(delay);
          }
        }
      } while (this.again && !this.closed);
    } finally {
      this.restarting = false;
    }
  }
}
