/**
 * The adoption gate: bounded concurrency and one shared backoff for all the adoptions of a
 * process (see adoption.ts), so that the orphans of a dead front-end are taken up at the pace the
 * store sustains rather than all at once.
 */
import { bulkhead, type BulkheadPolicy } from 'cockatiel';
import type { Clock } from '../util/clock.ts';
import { SharedBackoff } from '../util/backoff.ts';
import { isTransient } from '../util/errors.ts';
import type { Rng } from '../util/rng.ts';

/** Adoptions one process runs at once; the others wait their turn. */
export const ADOPT_CONCURRENCY = 8;
/** The gate's pause after a failed adoption doubles from this, up to ADOPT_BACKOFF_MAX_MS. */
export const ADOPT_BACKOFF_MIN_MS = 100;
export const ADOPT_BACKOFF_MAX_MS = 5000;

export class AdoptionGate {
  private readonly slots: BulkheadPolicy;
  private readonly backoff: SharedBackoff;
  /** Adoptions that failed (the sweep schedules them again). */
  failures = 0;

  constructor(
    private readonly clock: Clock,
    private readonly rng: Pick<Rng, 'next'>,
    private readonly concurrency = ADOPT_CONCURRENCY,
  ) {
    this.slots = bulkhead(concurrency, Number.MAX_SAFE_INTEGER);
    this.backoff = new SharedBackoff(ADOPT_BACKOFF_MIN_MS, ADOPT_BACKOFF_MAX_MS, rng);
  }

  /** Adoptions waiting for a slot. */
  get queued(): number {
    return Number.MAX_SAFE_INTEGER - this.slots.queueSlots;
  }

  /** Adoptions running now. */
  get running(): number {
    return this.concurrency - this.slots.executionSlots;
  }

  /** The pause a slot takes after a transient failure now (0 after a success). */
  get backoffMs(): number {
    return this.backoff.pauseMs;
  }

  /**
   * Runs fn in a slot. A transient failure (the store did not answer in time or could not be
   * reached) makes the slot wait out the shared pause, doubled at each failure and reset by a
   * success, before it takes the next adoption; the error is rethrown for the caller to log.
   */
  run(fn: () => Promise<void>, closed: () => boolean = () => false): Promise<void> {
    return this.slots.execute(async () => {
      try {
        await fn();
        this.backoff.succeeded();
      } catch (err) {
        this.failures++;
        if (isTransient(err)) {
          this.backoff.failed(err);
          if (!closed()) await this.clock.sleep(this.backoff.delayMs());
        }
        throw err;
      }
    });
  }
}
