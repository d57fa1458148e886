/**
 * /readyz follows the store: a front-end and a monitor on an etcd of their own answer 200 while it
 * serves, 503 naming the store while it is stopped (a load balancer then takes them out), and 200
 * again once it is back; /healthz (the process is alive) stays 200 throughout.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { startEtcd, type RestartableEtcdProcess } from '../support/etcd.ts';
import { until as pollUntil } from '../support/until.ts';

let etcd: RestartableEtcdProcess;
let store: ClusterStore;
let sched: SchedulerProcess;
let mon: MonitorProcess;

beforeAll(async () => {
  etcd = await startEtcd({ bin: process.env.TARCIL_TEST_ETCD_BIN });
  store = await openStore(etcd.endpoint.replace('http://', 'etcd://'));
  const keys = new Keys('/readyz/');
  const clock = new SystemClock();
  const log = createLogger('test');
  mon = await startMonitor({
    store,
    keys,
    clock,
    log,
    server: { id: 'rz0', platform: 'r3-2xlarge', rack: 'r0', rus: 2, speed: 1, attributes: {} },
    executor: 'simulated',
    host: '127.0.0.1',
    port: 0,
    metricsPort: 0,
    leaseTtlSeconds: 3,
  });
  sched = await startScheduler({
    name: 'rz',
    store,
    keys,
    catalog: loadCatalog(),
    clock,
    rng: new SeededRng(1),
    log,
    agents: 1,
    host: '127.0.0.1',
    port: 0,
    metricsPort: 0,
    leaseTtlSeconds: 3,
  });
});
afterAll(async () => {
  await sched?.close();
  await mon?.close();
  await store?.close();
  await etcd?.stop();
});

async function get(port: number | undefined, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text() };
}

const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> => pollUntil(what, cond, ms, 100);

describe("the front-end's requests to etcd", () => {
  it('are exported with the adaptive limit on them: in flight, queued and the limit', async () => {
    const body = (await get(sched.metricsPort, '/metrics')).body;
    const value = (state: string): number => Number(new RegExp(`^tarcil_store_requests\\{state="${state}"\\} (\\S+)$`, 'm').exec(body)?.[1]);
    expect(value('limit')).toBeGreaterThanOrEqual(4);
    expect(value('in_flight')).toBeGreaterThanOrEqual(0);
    expect(value('queued')).toBe(0);
    expect(body).toMatch(/^tarcil_store_limit_decreases_total \d+$/m);
  });

  it("are timed, by kind, in the front-end's and the monitor's metrics", async () => {
    // The front-end and the monitor share this test's store handle: its reads (the front-end's
    // lists) and writes (the monitor's registration, and this put) are timed for both.
    await store.put('/readyz/probe', 'x');
    for (const [port, kinds] of [
      [sched.metricsPort, ['read', 'write']],
      [mon.metricsPort, ['write']],
    ] as const) {
      const body = (await get(port, '/metrics')).body;
      for (const kind of kinds) {
        const count = Number(new RegExp(`^tarcil_store_request_seconds_count\\{kind="${kind}"\\} (\\S+)$`, 'm').exec(body)?.[1]);
        expect(count, `${kind} requests timed on :${port}`).toBeGreaterThan(0);
        // Cumulative buckets, the last (+Inf) holding every request.
        const buckets = [...body.matchAll(new RegExp(`^tarcil_store_request_seconds_bucket\\{le="([^"]+)",kind="${kind}"\\} (\\S+)$`, 'gm'))].map((m) =>
          Number(m[2]),
        );
        expect(buckets.length).toBe(15);
        expect(buckets.every((c, i) => i === 0 || c >= (buckets[i - 1] as number))).toBe(true);
        expect(buckets[buckets.length - 1]).toBe(count);
      }
    }
  });
});

describe('the requests to etcd by the records they touch', () => {
  it("are counted in the metrics: the front-end's member record written, the cell's RUs read, a key outside the cell as other", async () => {
    const rows = async (port: number | undefined): Promise<Map<string, number>> =>
      new Map(
        [...(await get(port, '/metrics')).body.matchAll(/^tarcil_store_requests_by_record_total\{kind="(\w+)",records="([^"]+)"\} (\S+)$/gm)].map((m) => [
          `${m[1]} ${m[2]}`,
          Number(m[3]),
        ]),
      );
    const fe = await rows(sched.metricsPort);
    expect(fe.get('write members'), [...fe.keys()].join(', ')).toBeGreaterThan(0);
    expect(fe.get('read rus'), [...fe.keys()].join(', ')).toBeGreaterThan(0);
    // The front-end and the monitor share this test's store handle, so both count its requests.
    const before = fe.get('write other') ?? 0;
    await store.put('/elsewhere/probe', 'x');
    expect((await rows(sched.metricsPort)).get('write other')).toBe(before + 1);
    expect((await rows(mon.metricsPort)).get('write other')).toBe(before + 1);
  });
});

describe('/readyz with the store down', () => {
  it('answers 503 naming the store while etcd is stopped, 200 before and after; /healthz stays 200', async () => {
    for (const port of [sched.metricsPort, mon.metricsPort]) {
      expect(await get(port, '/readyz')).toEqual({ status: 200, body: 'ok\n' });
      expect((await get(port, '/healthz')).status).toBe(200);
    }
    await etcd.halt();
    const front = await get(sched.metricsPort, '/readyz');
    expect(front.status).toBe(503);
    expect(front.body).toMatch(/^store unreachable: /);
    const node = await get(mon.metricsPort, '/readyz');
    expect(node.status).toBe(503);
    expect(node.body).toMatch(/^store unreachable: /);
    for (const port of [sched.metricsPort, mon.metricsPort]) expect(await get(port, '/healthz')).toEqual({ status: 200, body: 'ok\n' });

    await etcd.restart();
    await until('the front-end ready again', async () => (await get(sched.metricsPort, '/readyz')).status === 200);
    await until('the monitor ready again', async () => (await get(mon.metricsPort, '/readyz')).status === 200);
  }, 60_000);
});
