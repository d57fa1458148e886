/**
 * `locality: {mode: 'pack', required: true}` on a live cell (etcd, node monitors with the
 * simulated executor, one front-end of two agents): a gang lands on one server; one that no
 * server can hold is refused at submit naming the field; one that fits only on a server another
 * job holds waits, says so in its reason, and lands on that server once it is free. The cell:
 * six servers of 4 RUs and one of 8, on racks of their own.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { Job__Output } from '../../src/rpc/gen/tarcil/v1/Job.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import type { ServerSpec } from '../../src/model/types.ts';
import { Keys } from '../../src/state/keys.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { failure, getJob, submit, waitFinal } from '../support/live.ts';
import { until } from '../support/until.ts';

const clock = new SystemClock();
const log = createLogger('pack-required', 'silent');
const SERVERS: ServerSpec[] = [
  ...Array.from({ length: 6 }, (_, i) => ({ id: `small${i}`, platform: 'r3-2xlarge', rack: `r${i}`, rus: 4, speed: 1, attributes: {} })),
  { id: 'big', platform: 'r3-2xlarge', rack: 'r6', rus: 8, speed: 1, attributes: {} },
];

const spec = (over: Record<string, unknown>): string =>
  JSON.stringify({
    name: 'pod',
    profile: 'memcached',
    tasks: 7,
    mode: 'gang',
    durationMs: 300,
    locality: { mode: 'pack', scope: 'server', required: true },
    ...over,
  });

/** The servers a finished job's tasks ran on, from its task records. */
const serversOf = (j: Job__Output): Set<string> => new Set(j.taskList.map((t) => t.ru?.server ?? '?'));

describe('a required pack on a live cell (etcd)', () => {
  const keys = new Keys(`/pack-required-${Date.now()}/`);
  const endpoint = (): string => inject('etcdEndpoint').replace('http://', 'etcd://');
  let nodeStore: ClusterStore;
  let store: ClusterStore;
  let sched: SchedulerProcess;
  let c: SchedulerClient;
  let monitors: MonitorProcess[] = [];

  beforeAll(async () => {
    nodeStore = await openStore(endpoint());
    monitors = await Promise.all(
      SERVERS.map((server) =>
        startMonitor({ store: nodeStore, keys, clock, log, server, executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: 5 }),
      ),
    );
    store = await openStore(endpoint());
    sched = await startScheduler({
      name: 'fe',
      store,
      keys,
      catalog: loadCatalog(),
      clock,
      rng: new SeededRng(7),
      log,
      agents: 2,
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: 5,
      agentConfig: { recheckMs: 200 },
    });
    c = schedulerClient(`127.0.0.1:${sched.port}`);
    await until('every node registered', async () => (await nodeStore.range(keys.rus())).kvs.length === 32);
  });
  afterAll(async () => {
    c?.close();
    await sched?.close();
    for (const m of monitors) await m.close();
    await store?.close();
    await nodeStore?.close();
  });

  it('gangs of 7 submitted together all run on the one server that holds 7, one after the other', async () => {
    // A preference would put the second and third on the small servers, split.
    const ids = await Promise.all([0, 1, 2].map(async (k) => (await submit(c, { specJson: spec({ name: `seven-${k}`, durationMs: 100 }) })).jobId));
    for (const id of ids) {
      const j = await waitFinal(c, id);
      expect(j.state).toBe('succeeded');
      expect(j.taskList).toHaveLength(7);
      expect([...serversOf(j)]).toEqual(['big']);
    }
  });

  it('one that no server can hold is refused at submit, naming the field; a preference is accepted', async () => {
    const e = await failure(submit(c, { specJson: spec({ name: 'nine', tasks: 9 }) }));
    expect(e.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(e.details).toContain(
      'locality: this job can never run in this cell: a required pack puts all 9 tasks on one server; the largest server it may use has 8 RUs',
    );
    const ok = await submit(c, { specJson: spec({ name: 'nine-pref', tasks: 9, durationMs: 100, locality: { mode: 'pack', scope: 'server' } }) });
    expect((await waitFinal(c, ok.jobId)).state).toBe('succeeded');
  });

  it('the job spec without a gang is refused, naming the field and the rule', async () => {
    const e = await failure(submit(c, { specJson: spec({ name: 'inc', mode: 'incremental' }) }));
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.details).toContain("locality.required: true with mode 'pack' puts every task on one server (or rack), all or nothing: it needs mode 'gang'");
  });

  it('one that fits only where another job runs waits, says why, and lands there once it is free', async () => {
    // A holds the 8-RU server; the small servers have 24 RUs free, but none has 6.
    const a = await submit(c, { specJson: spec({ name: 'holder', tasks: 8, durationMs: 1000 }) });
    await until('the holder running', async () => (await getJob(c, a.jobId)).taskList.filter((t) => t.state === 'running').length === 8);
    const b = await submit(c, { specJson: spec({ name: 'waiter', tasks: 6, durationMs: 100 }) });
    let reason = '';
    await until('the waiter saying what it waits for', async () => {
      reason = (await getJob(c, b.jobId)).reason?.text ?? '';
      return reason.includes('pack is required');
    });
    expect(reason).toContain('waiting for a server with room for all 6 of its tasks (pack is required)');
    const ja = await waitFinal(c, a.jobId);
    const jb = await waitFinal(c, b.jobId);
    expect([...serversOf(ja)]).toEqual(['big']);
    expect(jb.state).toBe('succeeded');
    expect([...serversOf(jb)]).toEqual(['big']);
  });
});
