/**
 * The housekeeper: one front-end at a time, elected through the store's election, deletes what
 * retention lets go (retention.ts) and compacts the store's history to a revision a safe margin
 * behind the current one, so that neither the key count nor etcd's history grows without bound.
 */
import { oldestCandidate } from '../store/election.ts';
import type { Campaign, ClusterStore } from '../store/types.ts';
import type { Clock, Timer } from '../util/clock.ts';
import { errorMessage } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import type { Keys } from './keys.ts';
import { RetentionSweeper } from './retention.ts';

/** How far behind compaction stays when nothing else is said: the revision of 5 minutes ago. */
export const DEFAULT_COMPACT_MARGIN_MS = 5 * 60_000;
/** TTL of the housekeeper's election lease. */
export const DEFAULT_ELECTION_TTL_S = 10;

export interface HousekeeperOptions {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
  /** This process, as the election shows it. */
  process: string;
  /** A finished job is deleted this long after it finished. */
  retainMs: number;
  requestRetainMs?: number;
  /**
   * Compaction keeps the history of the last `compactMarginMs`: it compacts to the revision seen
   * that long ago. 0 turns tarcil's own compaction off (etcd's auto-compaction may do it).
   */
  compactMarginMs?: number;
  /** Period of the retention sweep (default retain / 10, within 1 s and 1 min). */
  sweepEveryMs?: number;
  /** Period of the revision samples and compactions (default margin / 5, within 1 s and 1 min). */
  compactEveryMs?: number;
  electionTtlSeconds?: number;
  /** Jobs per batch of deletes (see RetentionSweeper). */
  batch?: number;
}

/** Checks in a row that find a waiting candidate stuck (see Housekeeper.stuck) before it stands again. */
export const STUCK_CHECKS = 3;
const STUCK = 'stuck: not elected though nobody else led';

const clamp = (x: number, lo: number, hi: number): number => Math.max(lo, Math.min(hi, x));

/**
 * Campaigns in the election `<prefix>housekeeper` for as long as it runs; while it leads, it runs
 * the retention sweep and compaction on timers; when its campaign is lost it stops both and stands
 * again.
 *
 * Two processes may briefly both believe they lead (a leader that has not yet heard that its
 * lease expired). That is harmless by construction: every delete compares what it deletes, and
 * compacting twice, or to an older revision than already compacted, changes nothing.
 *
 * Compaction target: the leader samples the store's revision every `compactEveryMs` and compacts
 * to the newest sample at least `compactMarginMs` old, so a watcher less than the margin behind
 * never loses history it still needs; one further behind gets COMPACTED and re-lists (Follower).
 * A new leader starts with no samples and so compacts only once it has led for the margin.
 */
export class Housekeeper {
  private readonly name: string;
  private readonly sweeper: RetentionSweeper;
  private readonly marginMs: number;
  private readonly sweepEveryMs: number;
  private readonly compactEveryMs: number;
  private campaign: Campaign | undefined;
  private closed = false;
  private loop: Promise<void> | undefined;
  private readonly timers = new Set<Timer>();
  private samples: Array<{ at: number; rev: number }> = [];
  private busy = { sweep: false, compact: false };
  private stopLeading: (() => void) | undefined;
  private onClose: () => void = () => undefined;
  private readonly closing = new Promise<void>((resolve) => {
    this.onClose = resolve;
  });
  leading = false;
  /** Elections won, compactions, the revision last compacted to, and waits found stuck (see stuck()). */
  readonly stats = { elected: 0, compactions: 0, compactedTo: 0, stuck: 0 };

  constructor(private readonly o: HousekeeperOptions) {
    this.name = `${o.keys.prefix}housekeeper`;
    this.sweeper = new RetentionSweeper({
      store: o.store,
      keys: o.keys,
      clock: o.clock,
      log: o.log,
      retainMs: o.retainMs,
      ...(o.requestRetainMs !== undefined ? { requestRetainMs: o.requestRetainMs } : {}),
      ...(o.batch !== undefined ? { batch: o.batch } : {}),
    });
    this.marginMs = o.compactMarginMs ?? DEFAULT_COMPACT_MARGIN_MS;
    this.sweepEveryMs = o.sweepEveryMs ?? clamp(Math.round(o.retainMs / 10), 1000, 60_000);
    this.compactEveryMs = o.compactEveryMs ?? clamp(Math.round(this.marginMs / 5), 1000, 60_000);
  }

  get retention(): RetentionSweeper {
    return this.sweeper;
  }

  /** Stands in the election in the background. */
  start(): void {
    this.loop ??= this.run();
  }

  /** Resigns (another process takes over at once) and stops. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
    this.stopLeading?.();
    await this.campaign?.resign().catch(() => undefined);
    await this.loop;
  }

  private async run(): Promise<void> {
    const ttl = this.o.electionTtlSeconds ?? DEFAULT_ELECTION_TTL_S;
    let pause = 500;
    while (!this.closed) {
      let c: Campaign;
      try {
        c = this.o.store.campaign(this.name, this.o.process, ttl);
      } catch (err) {
        this.o.log.warn({ err: errorMessage(err) }, 'housekeeper: cannot stand in the election');
        await this.pause(pause);
        continue;
      }
      this.campaign = c;
      const lost = new Promise<string>((resolve) => c.onLost((err) => resolve(errorMessage(err))));
      const closing = new Promise<string>((resolve) => {
        this.stopLeading = () => resolve('closing');
      });
      const waiting = { over: false };
      const won = await Promise.race([c.elected().then(() => 'elected'), lost, closing, this.stuck(c, ttl, waiting)]).catch((err: unknown) =>
        errorMessage(err),
      );
      waiting.over = true;
      if (won === 'elected' && !this.closed) {
        pause = 500;
        const why = await this.lead(Promise.race([lost, closing]));
        this.o.log.info({ why }, 'housekeeper: no longer leading');
      } else if (won === STUCK && !this.closed) {
        this.stats.stuck++;
        this.o.log.warn({ checks: STUCK_CHECKS, everyS: ttl }, 'housekeeper: this candidate was not elected though nobody else led; standing again');
      } else if (!this.closed) {
        this.o.log.warn({ why: won }, 'housekeeper: campaign failed; standing again');
        pause = Math.min(pause * 2, 5000);
      }
      await c.resign().catch(() => undefined);
      if (!this.closed) await this.pause(pause);
    }
  }

  /**
   * Settles with STUCK when, while this candidate waits, the election is seen led by nobody or by
   * this candidate's own key at STUCK_CHECKS checks in a row, one lease TTL apart; never settles
   * otherwise. A waiting candidate waits for the key before its own to go; were that wait to hang
   * (a watch that stopped without a word), the candidate would hold its place, and with it every
   * later candidate, and the cell would have no retention or compaction for good. A hand-over
   * takes milliseconds and a dead leader's lease one TTL: neither spans the checks.
   */
  private async stuck(c: Campaign, ttlSeconds: number, waiting: { over: boolean }): Promise<string> {
    let seen = 0;
    while (!this.closed && !waiting.over) {
      await this.pause(ttlSeconds * 1000);
      if (this.closed || waiting.over) break;
      const oldest = await oldestCandidate(this.o.store, this.name).then(
        (kv) => kv?.key ?? null,
        () => 'unknown',
      );
      const mine = c.key();
      seen = oldest === null || (mine !== undefined && oldest === mine) ? seen + 1 : 0;
      if (seen >= STUCK_CHECKS) return STUCK;
    }
    return new Promise<string>(() => undefined);
  }

  /** Waits `ms`, or less if the housekeeper is closed meanwhile. */
  private async pause(ms: number): Promise<void> {
    let timer: Timer | undefined;
    await Promise.race([this.closing, new Promise<void>((resolve) => (timer = this.o.clock.setTimer(ms, resolve)))]);
    timer?.cancel();
  }

  /** Runs the sweep and compaction until `over` settles; returns why it ended. */
  private async lead(over: Promise<string>): Promise<string> {
    this.leading = true;
    this.stats.elected++;
    this.samples = [];
    this.o.log.info({ process: this.o.process, marginMs: this.marginMs, retainMs: this.o.retainMs }, 'housekeeper: elected; running retention and compaction');
    let why: string;
    try {
      await this.sweeper.start();
      this.every(this.sweepEveryMs, () => void this.sweepOnce());
      if (this.marginMs > 0) {
        void this.sample();
        this.every(this.compactEveryMs, () => void this.sample());
      }
      why = await over;
    } catch (err) {
      why = `cannot follow the store: ${errorMessage(err)}`;
    }
    this.leading = false;
    for (const t of this.timers) t.cancel();
    this.timers.clear();
    await this.sweeper.stop();
    return why;
  }

  /** One retention sweep now, unless one is under way (tests call it too). */
  async sweepOnce(): Promise<void> {
    if (!this.leading || this.busy.sweep) return;
    this.busy.sweep = true;
    try {
      await this.sweeper.sweep();
    } catch (err) {
      this.o.log.warn({ err: errorMessage(err) }, 'housekeeper: retention sweep failed');
    } finally {
      this.busy.sweep = false;
    }
  }

  /** Takes a revision sample and compacts to the newest sample at least the margin old. */
  async sample(): Promise<void> {
    if (!this.leading || this.busy.compact || this.marginMs <= 0) return;
    this.busy.compact = true;
    try {
      const now = this.o.clock.now();
      this.samples.push({ at: now, rev: await this.o.store.revision() });
      let target: number | undefined;
      while (this.samples.length > 0 && (this.samples[0]?.at ?? Infinity) <= now - this.marginMs) {
        target = this.samples.shift()?.rev;
      }
      if (target !== undefined && target > this.stats.compactedTo && this.leading) {
        await this.o.store.compact(target);
        this.stats.compactions++;
        this.stats.compactedTo = target;
        this.o.log.info({ revision: target }, 'housekeeper: compacted the store history');
      }
    } catch (err) {
      this.o.log.warn({ err: errorMessage(err) }, 'housekeeper: compaction failed');
    } finally {
      this.busy.compact = false;
    }
  }

  private every(ms: number, fn: () => void): void {
    const tick = (): void => {
      if (!this.leading) return;
      fn();
      const t = this.o.clock.setTimer(ms, () => {
        this.timers.delete(t);
        tick();
      });
      this.timers.add(t);
    };
    const t = this.o.clock.setTimer(ms, () => {
      this.timers.delete(t);
      tick();
    });
    this.timers.add(t);
  }
}
