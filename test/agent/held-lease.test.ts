import { describe, expect, it } from 'vitest';
import { HeldLease } from '../../src/state/lease.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { Lease } from '../../src/store/types.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { wrapStore } from '../support/wrap-store.ts';

/**
 * HeldLease through outages of the store (virtual time): keepalives sent while the store does not
 * answer are answered when it comes back, as a paused etcd or a healed partition does. An outage
 * shorter than the budget (TTL − 1 s) must not fence the holder, even two of them close together;
 * a longer one must.
 */
async function run(outages: [number, number][], untilMs: number): Promise<{ fencedAt: number | undefined; keepalives: number }> {
  const clock = new ManualClock(0);
  const inner = new MemoryStore({ clock });
  const down = (t: number): [number, number] | undefined => outages.find(([a, b]) => t >= a && t < b);
  let keepalives = 0;
  const waiting: { until: number; resolve: () => void }[] = [];
  const store = wrapStore(inner, {
    grantLease: async (ttl, opts) => {
      const l = await inner.grantLease(ttl, opts);
      const lease: Lease = {
        id: l.id,
        ttlSeconds: l.ttlSeconds,
        onLost: (cb) => l.onLost(cb),
        keepAliveOnce: () => {
          keepalives++;
          const o = down(clock.now());
          // Held back until the outage ends, then answered (etcd applies it then).
          if (o) return new Promise<void>((resolve) => waiting.push({ until: o[1], resolve })).then(() => l.keepAliveOnce());
          return l.keepAliveOnce();
        },
        revoke: () => l.revoke(),
        release: () => l.release(),
      };
      return lease;
    },
  });
  let fencedAt: number | undefined;
  const held = await HeldLease.grant({ store, clock, log: createLogger('held'), ttlSeconds: 5, onFenced: () => (fencedAt ??= clock.now()) });
  for (let t = 0; t < untilMs && fencedAt === undefined; t += 10) {
    clock.advance(10);
    for (const w of waiting.splice(0)) {
      if (clock.now() >= w.until) w.resolve();
      else waiting.push(w);
    }
    for (let i = 0; i < 5; i++) await Promise.resolve();
  }
  held.release();
  await inner.close();
  return { fencedAt, keepalives };
}

describe('HeldLease through store outages', () => {
  it('rides out two 2 s outages 2 s apart with a 5 s lease', async () => {
    const r = await run(
      [
        [1300, 3300],
        [5300, 7300],
      ],
      12_000,
    );
    expect(r.fencedAt).toBeUndefined();
    expect(r.keepalives).toBeGreaterThan(8);
  });

  it('rides out a 2 s outage at every phase of the keepalive cycle', async () => {
    for (let start = 1000; start < 2300; start += 100) {
      const r = await run([[start, start + 2000]], 6000);
      expect(r.fencedAt, `outage from ${start} ms`).toBeUndefined();
    }
  });

  it('fences the holder when the store stays away longer than the budget, before the TTL', async () => {
    const r = await run([[1000, 9000]], 10_000);
    expect(r.fencedAt).toBeDefined();
    expect(r.fencedAt).toBeLessThan(1000 + 5000);
  });
});
