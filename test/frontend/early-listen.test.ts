/**
 * A front-end listens before its view of the cell is loaded (listenBeforeReady, as `tarcil
 * server` starts): a job submitted while the view loads is acknowledged and persisted at once,
 * placed nowhere, and runs once the view is in. Without the option startScheduler waits for it.
 * The view's first list is held back by a store that forwards everything else.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { expandCluster, loadCatalog, resolveCluster } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveJobRecord } from '../../src/state/live-records.ts';
import { parseJson } from '../../src/state/records.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { submit, waitFinal } from '../support/live.ts';
import { wrapStore } from '../support/wrap-store.ts';

const clock = new SystemClock();
const log = createLogger('test', 'silent');
const catalog = loadCatalog();

let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.reverse()) await f();
  cleanup = [];
});

/** A demo cell on an embedded store, and a view of it for one front-end whose first list of the RUs waits for release(). */
async function cell(prefix: string): Promise<{ inner: MemoryStore; store: ClusterStore; keys: Keys; release(): void; held(): number }> {
  const inner = new MemoryStore();
  const keys = new Keys(prefix);
  const servers = expandCluster(resolveCluster('demo', catalog), catalog.platforms);
  const monitors: MonitorProcess[] = await Promise.all(
    servers.map((s) => startMonitor({ store: inner, keys, clock, log, server: s, executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: 3 })),
  );
  cleanup.push(async () => {
    await Promise.all(monitors.map((m) => m.close()));
    await inner.close();
  });
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let held = 0;
  const store = wrapStore(inner, {
    txn: async (req) => {
      if (req.success.some((op) => op.type === 'get' && op.key === keys.rus())) {
        held++;
        await gate;
      }
      return inner.txn(req);
    },
  });
  return { inner, store, keys, release, held: () => held };
}

/** The front-end's `tarcil_scheduling` gauge, as a scrape would read it. */
async function scheduling(sched: SchedulerProcess): Promise<number> {
  const m = await sched.metrics.registry.getSingleMetric('tarcil_scheduling')?.get();
  return m?.values[0]?.value ?? Number.NaN;
}

function start(store: ClusterStore, keys: Keys, listenBeforeReady: boolean): Promise<SchedulerProcess> {
  return startScheduler({
    name: 'early',
    store,
    keys,
    catalog,
    clock,
    rng: new SeededRng(3),
    log,
    agents: 2,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: 3,
    listenBeforeReady,
    housekeeping: false,
  });
}

describe('a front-end that listens before its view of the cell is loaded', () => {
  it('acknowledges a job while the view loads, places nothing until it is in, then runs the job', async () => {
    const c0 = await cell('/early-a/');
    const sched = await start(c0.store, c0.keys, true);
    const client: SchedulerClient = schedulerClient(`127.0.0.1:${sched.port}`);
    cleanup.push(async () => {
      client.close();
      await sched.close();
    });
    expect(c0.held()).toBe(1);
    let ready = false;
    void sched.ready.then(() => (ready = true));
    const { jobId } = await submit(client, { specJson: JSON.stringify({ name: 'early', profile: 'spark-lr', tasks: 3, durationMs: 50 }) });
    // Persisted and owned at once; nothing placed while the view is not loaded.
    const rec = parseJson<LiveJobRecord>(await c0.inner.get(c0.keys.job(jobId)));
    expect(rec?.state).toBeDefined();
    await new Promise((r) => setTimeout(r, 300));
    expect(ready).toBe(false);
    expect((await c0.inner.range(c0.keys.tasks(jobId))).kvs).toHaveLength(0);
    expect(await scheduling(sched)).toBe(0);
    c0.release();
    await sched.ready;
    expect(await scheduling(sched)).toBe(1);
    const j = await waitFinal(client, jobId, 20_000);
    expect(j.state).toBe('succeeded');
    expect(j.taskStates.succeeded).toBe(3);
  }, 40_000);

  it('without the option, startScheduler resolves only once the view is loaded', async () => {
    const c0 = await cell('/early-b/');
    let resolved = false;
    const p = start(c0.store, c0.keys, false).then((s) => {
      resolved = true;
      return s;
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(c0.held()).toBe(1);
    expect(resolved).toBe(false);
    c0.release();
    const sched = await p;
    cleanup.push(() => sched.close());
    await sched.ready;
  }, 40_000);
});
