/**
 * Seeded random numbers (Rng): every random choice of the scheduler and the simulator draws from
 * an injected, forkable generator, so runs can be replayed.
 */
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';

/** Seeded randomness, injected so that a run with the same seed gives the same numbers. */
export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [0, n). */
  int(n: number): number;
  /** An independent stream derived from this one (for per-agent or per-component streams). */
  fork(): Rng;
}

export class SeededRng implements Rng {
  private readonly g: RandomGenerator;

  constructor(seed: number) {
    // xoroshiro128plus seeded with nearby small integers starts with correlated outputs (seeds
    // 0..5 all begin near 1.0): scramble the seed with the murmur3 finaliser and discard a warm-up
    // so that agents seeded 1, 2, 3 draw independent-looking streams.
    this.g = xoroshiro128plus(scramble(seed));
    for (let i = 0; i < 16; i++) this.g.next();
  }
  next(): number {
    // Two 32-bit draws give 53 bits of mantissa, like Math.random().
    const hi = (this.g.next() >>> 0) >>> 5; // 27 bits
    const lo = (this.g.next() >>> 0) >>> 6; // 26 bits
    return (hi * 67108864 + lo) / 9007199254740992;
  }
  int(n: number): number {
    if (n <= 0) return 0;
    return Math.floor(this.next() * n);
  }
  fork(): Rng {
    return new SeededRng(this.g.next() ^ 0x5bd1e995);
  }
}

function scramble(seed: number): number {
  let h = seed | 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h | 0;
}

/** Fisher-Yates partial shuffle helpers live in sampling; this one is for small utilities. */
export function pick<T>(rng: Rng, items: readonly T[]): T | undefined {
  if (items.length === 0) return undefined;
  return items[rng.int(items.length)];
}
