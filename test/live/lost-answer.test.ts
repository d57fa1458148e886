import { afterEach, describe, expect, it } from 'vitest';
import { JobManager } from '../../src/owner/manager.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { Keys } from '../../src/state/keys.ts';
import type { ClusterStore, TxnRequest } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { waitAllFinal } from '../support/audit.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { wrapStore } from '../support/wrap-store.ts';

/**
 * The submit transaction lands in the store but its answer is lost (etcd restarted mid-call):
 * the job is stored, owned through this process's lease, and unknown to it. Nobody else may
 * adopt it while that lease lives, so the process itself must take it up, or it waits forever.
 */
const clock = new SystemClock();
const log = createLogger('lost-answer');
let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
  cleanup = [];
});

/** Applies the first submit transaction, then reports it failed; optionally fails reads for a while too. */
function lossy(inner: ClusterStore, readsDownMs: number): { store: ClusterStore; counter: { lost: number } } {
  let downUntil = 0;
  const isSubmit = (req: TxnRequest): boolean =>
    req.success.some((op) => op.type === 'put' && op.key.includes('/owners/')) && req.success.some((op) => op.type === 'put' && op.key.includes('/jobs/'));
  const unavailable = (): TarcilError => new TarcilError('UNAVAILABLE', 'connection reset (simulated)');
  const counter = { lost: 0 };
  const s = wrapStore(inner, {
    txn: async (req) => {
      if (counter.lost === 0 && isSubmit(req)) {
        await inner.txn(req);
        counter.lost++;
        downUntil = Date.now() + readsDownMs;
        throw unavailable();
      }
      if (Date.now() < downUntil) throw unavailable();
      return inner.txn(req);
    },
    get: async (key) => {
      if (Date.now() < downUntil) throw unavailable();
      return inner.get(key);
    },
  });
  return { store: s, counter };
}

describe('a submission whose answer is lost', () => {
  it.each([
    { how: 'the store answers the read-back: acknowledged after all', readsDownMs: 0, acked: true },
    { how: 'the store stays away: refused now, then found by a scan and run', readsDownMs: 400, acked: false },
  ])(
    '$how',
    async ({ readsDownMs, acked }) => {
      const store = new MemoryStore();
      const keys = new Keys('/lost/');
      const monitor: MonitorProcess = await startMonitor({
        store,
        keys,
        clock,
        log,
        server: { id: 'l0', platform: 'r3-2xlarge', rack: 'r0', rus: 4, speed: 1, attributes: {} },
        executor: 'simulated',
        host: '127.0.0.1',
        port: 0,
        leaseTtlSeconds: 5,
      });
      const { store: s, counter } = lossy(store, readsDownMs);
      const m = new JobManager({ process: 'P', store: s, keys, clock, rng: new SeededRng(5), log, agents: 1, leaseTtlSeconds: 2 });
      await m.start();
      cleanup.push(async () => {
        await m.close();
        await monitor.close();
        await store.close();
      });
      const job = makeJob('lost-1', TEST_PROFILES[0]!, 2, { durationMs: 100 });
      const res = await m.accept(job).then(
        (r) => r.jobId,
        (e: unknown) => e,
      );
      expect(counter.lost).toBe(1);
      if (acked) expect(res).toBe('lost-1');
      else expect((res as TarcilError).code).toBe('UNAVAILABLE');
      // Stored either way, and it must run to the end, under the lease it was stored with.
      expect(await waitAllFinal(store, keys, ['lost-1'], 15_000)).toEqual([]);
      const rec = JSON.parse((await store.get(keys.job('lost-1')))?.value ?? '{}') as { state: string };
      expect(rec.state).toBe('succeeded');
      expect(m.stats.adopted).toBe(acked ? 0 : 1);
    },
    30_000,
  );
});
