/**
 * One backoff shared by every retry of one kind in a process (adoptions of a front-end, task
 * starts of a hollow process's nodes): while the store keeps failing them, the pause doubles at
 * each transient failure up to a bound, and each retry waits a jittered share of it; the first
 * success resets it. Retries with a backoff of their own each start from the smallest pause and
 * come back together, so ten thousand of them after an etcd restart are a storm; a shared one
 * lets the store's answers set the pace.
 */
import type { Rng } from './rng.ts';
import { isTransient } from './errors.ts';

export class SharedBackoff {
  private pause = 0;
  /** Transient failures seen (for metrics and tests). */
  failures = 0;

  constructor(
    private readonly minMs: number,
    private readonly maxMs: number,
    private readonly rng: Pick<Rng, 'next'> = { next: Math.random },
  ) {}

  /** The pause now (0 after a success). */
  get pauseMs(): number {
    return this.pause;
  }

  /** A retry failed: a transient failure (the store slow or unreachable) doubles the pause. */
  failed(err: unknown): void {
    if (!isTransient(err)) return;
    this.failures++;
    this.pause = Math.min(this.maxMs, Math.max(this.minMs, this.pause * 2));
  }

  succeeded(): void {
    this.pause = 0;
  }

  /**
   * A retry succeeded where many run at once: the pause halves (to 0 below minMs) instead of
   * resetting, so one lucky success among a crowd of failures does not release them all together.
   */
  eased(): void {
    this.pause = this.pause / 2 < this.minMs ? 0 : this.pause / 2;
  }

  /** How long a retry waits now: uniform in [pause/2, pause], at least minMs/2. */
  delayMs(): number {
    const p = Math.max(this.pause, this.minMs);
    return p * (0.5 + this.rng.next() / 2);
  }
}
