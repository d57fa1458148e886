/**
 * The takers of freed RUs: which front-ends have jobs waiting for a freed RU now. Each such
 * front-end keeps `takers/<lease>` (bound to its owner lease, so it leaves with the front-end) while
 * any of its jobs waits, and deletes it when none does (agent/handoff.ts). A node follows these few
 * keys and, as it frees an RU, names one taker in the freed record (`for`, records.ts freedRuValue):
 * the one with the highest random weight of the RU's key and its lease, so that the takers share the
 * freed RUs evenly and any two nodes that see the same takers name the same one.
 *
 * Naming the taker in the record itself is what makes it hold on a loaded cell: every front-end
 * learns whose the RU is from the very event that tells it the RU is free, however late that event
 * reaches it; no front-end has to agree with the others about homes or turns.
 */
import type { RuRef } from '../model/types.ts';
import type { KeyValue } from '../store/types.ts';
import type { Keys } from './keys.ts';

/** FNV-1a over a string, continued from `h`. */
function fnv(s: string, h = 0x811c9dc5): number {
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A 32-bit finaliser (murmur3's), so that nearby keys give unrelated weights. */
function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The taker with the highest weight for `ruKey` (rendezvous hashing); undefined when there is none. */
export function chooseTaker(ruKey: string, takers: Iterable<string>): string | undefined {
  const base = fnv(ruKey);
  let best: string | undefined;
  let bestWeight = -1;
  for (const t of takers) {
    const w = mix(fnv(t, base));
    if (w > bestWeight || (w === bestWeight && best !== undefined && t < best)) {
      best = t;
      bestWeight = w;
    }
  }
  return best;
}

/**
 * A node process's view of the takers: fed by the process's own follower (the `takers/` prefix
 * listed and watched with its RUs, one watch for all its nodes).
 */
export class Takers {
  private readonly leases = new Set<string>();

  constructor(private readonly keys: Keys) {}

  /** The prefix to follow. */
  get prefix(): string {
    return this.keys.takers();
  }

  /** Every takers key at one revision (a snapshot of the prefix). */
  reset(kvs: readonly KeyValue[]): void {
    this.leases.clear();
    for (const kv of kvs) this.apply(kv, false);
  }

  /** A change of the follow: returns false for a key that is not a takers key (nothing done). */
  apply(kv: KeyValue, deleted: boolean): boolean {
    const lease = this.keys.tail(this.prefix, kv.key);
    if (lease === undefined) return false;
    if (deleted) this.leases.delete(lease);
    else this.leases.add(lease);
    return true;
  }

  /** The takers as this process sees them now. */
  get size(): number {
    return this.leases.size;
  }

  /** The front-end to hand RU `ref` to as it is freed (none when no front-end waits). */
  to(ref: RuRef): string | undefined {
    if (this.leases.size === 0) return undefined;
    return chooseTaker(this.keys.ru(ref), this.leases);
  }
}
