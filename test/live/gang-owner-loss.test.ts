import { afterEach, describe, expect, it } from 'vitest';
import { JobManager } from '../../src/owner/manager.ts';
import type { LiveTaskRecord } from '../../src/state/live-records.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { Keys } from '../../src/state/keys.ts';
import type { TxnRequest } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { audit, history, waitAllFinal } from '../support/audit.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { DyingStore } from '../support/owner-harness.ts';

const clock = new SystemClock();
const log = createLogger('gang-loss');
const TASKS = 10;
let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
  cleanup = [];
});

const putsRu = (req: TxnRequest, state: string): boolean =>
  req.success.some((op) => op.type === 'put' && op.key.includes('/rus/') && op.value.includes(`"state":"${state}"`));

function nth(pred: (req: TxnRequest) => boolean, n: number): (req: TxnRequest) => boolean {
  let seen = 0;
  return (req) => pred(req) && ++seen === n;
}

describe('a gang job larger than one transaction whose owner dies part-way', () => {
  it.each([
    // Chunk 1 reserved, chunk 2 in flight: nothing of the gang may run until all of it is placed again.
    { when: 'mid-reservation', dieAt: nth((r) => putsRu(r, 'reserved'), 2), confirmed: false },
    // Chunk 1 confirmed (running), the rest still reserved: the adopter completes the confirmation.
    { when: 'mid-confirmation', dieAt: nth((r) => putsRu(r, 'busy'), 2), confirmed: true },
  ])(
    '$when: the adopter settles the reservations and the gang runs once, whole',
    async ({ dieAt, confirmed }) => {
      // 14 ops per transaction: 4 placements each, so a gang of 10 takes three.
      const store = new MemoryStore({ maxTxnOps: 14 });
      const keys = new Keys('/gang/');
      const monitors: MonitorProcess[] = [];
      for (let i = 0; i < 4; i++) {
        monitors.push(
          await startMonitor({
            store,
            keys,
            clock,
            log,
            server: { id: `g${i}`, platform: 'r3-2xlarge', rack: 'r0', rus: 4, speed: 1, attributes: {} },
            executor: 'simulated',
            host: '127.0.0.1',
            port: 0,
            leaseTtlSeconds: 5,
          }),
        );
      }
      cleanup.push(async () => {
        await Promise.all(monitors.map((m) => m.close()));
        await store.close();
      });
      const startRev = await store.revision();
      const dying = new DyingStore(store, dieAt);
      const a = new JobManager({ process: 'A', store: dying, keys, clock, rng: new SeededRng(1), log, agents: 1, leaseTtlSeconds: 2 });
      await a.start();
      const b = new JobManager({ process: 'B', store, keys, clock, rng: new SeededRng(2), log, agents: 1, leaseTtlSeconds: 2 });
      await b.start();
      cleanup.push(() => b.close());
      expect(a.agents[0]?.picksPerTxn).toBe(4);

      const job = makeJob('gang-1', TEST_PROFILES[4]!, TASKS, { mode: 'gang', durationMs: 1500, maxQueueMs: 0 });
      await a.accept(job);
      for (let i = 0; i < 100 && !dying.dead; i++) await new Promise((r) => setTimeout(r, 20));
      expect(dying.dead).toBe(true);

      // A left RUs reserved behind it.
      const left = (await store.range(keys.rus())).kvs.map((kv) => parseJson<PlacedRuRecord>(kv)).filter((r) => r?.state === 'reserved');
      expect(left.length).toBeGreaterThanOrEqual(4);

      const pending = await waitAllFinal(store, keys, [job.id], 25_000);
      expect(pending).toEqual([]);
      expect(b.stats.adopted).toBe(1);
      await new Promise((r) => setTimeout(r, 200));

      const f = await audit(store, keys, startRev);
      expect(f.states.get(job.id)?.state).toBe('succeeded');
      expect(f.finals.get(job.id)).toBe(1);
      expect(f.tasks.map((t) => t.state)).toEqual(Array(TASKS).fill('succeeded'));
      expect(f.doubleBooked).toBe(0);
      expect(f.heldTwice).toBe(0);
      expect(f.overlappingRuns).toBe(0);
      expect([...f.orphanOwners, ...f.orphanQueue, ...f.orphanRus, ...f.strayRus]).toEqual([]);

      // Each task ran exactly once: one attempt recorded running, never a second.
      const runs = new Map<number, Set<number>>();
      const events = await history(store, keys.tasks(job.id), startRev + 1);
      let firstRun = Infinity;
      for (const ev of events) {
        const t = parseJson<LiveTaskRecord>(ev.kv);
        if (t?.state !== 'running') continue;
        firstRun = Math.min(firstRun, ev.kv.modRevision);
        let s = runs.get(t.index);
        if (!s) runs.set(t.index, (s = new Set()));
        s.add(t.placedRevision ?? -1);
      }
      expect([...runs.keys()].sort((x, y) => x - y)).toEqual(Array.from({ length: TASKS }, (_, i) => i));
      expect([...runs.values()].every((s) => s.size === 1)).toBe(true);

      // Never half-run: no task started before the whole gang was reserved (a confirmation spans
      // several transactions, so tasks start as their chunk is confirmed, but only once all of the
      // gang holds RUs), and every task ended up on a busy RU.
      const ruEvents = await history(store, keys.rus(), startRev + 1);
      const busyAt = new Map<number, number>();
      const reservedAt = new Map<number, number>();
      for (const ev of ruEvents) {
        const r = parseJson<PlacedRuRecord>(ev.kv);
        if (r?.job === job.id && r.state === 'busy') busyAt.set(r.task, ev.kv.modRevision);
        if (r?.job === job.id && r.state === 'reserved') reservedAt.set(r.task, ev.kv.modRevision);
      }
      expect(busyAt.size).toBe(TASKS);
      expect(reservedAt.size).toBe(TASKS);
      expect(Math.max(...reservedAt.values())).toBeLessThan(firstRun);
      // A's reservations were given back (mid-reservation) or completed (mid-confirmation).
      const byA = ruEvents.filter((ev) => parseJson<PlacedRuRecord>(ev.kv)?.agent === 'A/a1').map((ev) => parseJson<PlacedRuRecord>(ev.kv)?.state);
      expect(byA).toContain('reserved');
      if (confirmed) expect(byA).toContain('busy');
    },
    60_000,
  );
});
