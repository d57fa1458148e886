import { describe, expect, inject, it } from 'vitest';
import { parseOnly, PROPERTIES, runApiProperty, summarize, type StoreKind } from '../support/api-property.ts';

/**
 * The Scheduler API property (test/support/api-property.ts) against a running front-end of the
 * demo cell, on the embedded MemoryStore and on the private etcd of the global setup, each under
 * a fresh key prefix. A small budget here; `npx tsx bench/api-fuzz.ts` runs it for minutes.
 *
 * Environment:
 *   TARCIL_API_FUZZ_RUNS   scenarios per store (default 25)
 *   TARCIL_API_FUZZ_MS     time limit per store, including shrinking (default 35000)
 *   TARCIL_API_FUZZ_SEED   replay: the seed fast-check printed
 *   TARCIL_API_FUZZ_PATH   replay: the path fast-check printed (with the seed)
 *   TARCIL_API_FUZZ_ONLY   comma-separated property names: only those fail a run
 *   TARCIL_API_FUZZ_STORES comma-separated: memory, etcd (default both)
 *   TARCIL_API_FUZZ_EXAMPLES=0  skip the fixed boundary scenarios that run first
 */
const RUNS = Number(process.env.TARCIL_API_FUZZ_RUNS ?? 25);
const TIME_MS = Number(process.env.TARCIL_API_FUZZ_MS ?? 35_000);
const SEED = process.env.TARCIL_API_FUZZ_SEED;
const PATH = process.env.TARCIL_API_FUZZ_PATH;
const ONLY = parseOnly(process.env.TARCIL_API_FUZZ_ONLY);
const STORES = (process.env.TARCIL_API_FUZZ_STORES ?? 'memory,etcd').split(',').map((s) => s.trim()) as StoreKind[];
const HEAP_LIMIT = 1.5 * 2 ** 30;

describe('Scheduler API, property-based', () => {
  it.each(STORES)(
    `keeps every documented answer and leaves the cell idle (%s store, ${RUNS} scenarios)`,
    async (kind) => {
      const r = await runApiProperty({
        kind,
        ...(kind === 'etcd' ? { etcdEndpoint: inject('etcdEndpoint') } : {}),
        numRuns: RUNS,
        timeLimitMs: TIME_MS,
        ...(SEED !== undefined ? { seed: Number(SEED) } : {}),
        ...(PATH !== undefined ? { path: PATH } : {}),
        ...(ONLY ? { only: ONLY } : {}),
        examples: process.env.TARCIL_API_FUZZ_EXAMPLES !== '0',
      });
      const heap = process.memoryUsage();
      console.log(`${summarize(r)}\n  test process heap ${(heap.heapUsed / 2 ** 20).toFixed(0)} MiB, rss ${(heap.rss / 2 ** 20).toFixed(0)} MiB`);
      if (!r.ok) {
        const broken = Object.keys(r.violations).map((p) => `${p}: ${PROPERTIES[p as keyof typeof PROPERTIES]}`);
        throw new Error(`${r.report}\n\nproperties broken during the run (with shrinking):\n  ${broken.join('\n  ')}`);
      }
      expect(r.numRuns).toBeGreaterThan(0);
      expect(r.health).toBe('SERVING');
      expect(heap.heapUsed).toBeLessThan(HEAP_LIMIT);
    },
    TIME_MS + 120_000,
  );
});
