import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { submitWithRetry } from '../../src/cli/client.ts';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startGrpcServer, type GrpcServerHandle } from '../../src/rpc/grpc.ts';
import { loadProtos } from '../../src/rpc/proto.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { openStore } from '../../src/store/index.ts';
import { Keys } from '../../src/state/keys.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { addressInUse, freePort } from '../support/etcd.ts';
import { submit, waitFinal } from '../support/live.ts';
import { taskRecords } from '../support/task-records.ts';

/**
 * SubmitJob with a client request id: a retry after a lost answer, or racing the first attempt,
 * gets the original job and creates no second one; on the embedded store and on etcd.
 */
const clock = new SystemClock();
const log = createLogger('idem');
const spec = (name: string, tasks = 1): string => JSON.stringify({ name, profile: 'spark-lr', tasks, durationMs: 50 });

describe.each(['memory', 'etcd'] as const)('idempotent SubmitJob (%s store)', (kind) => {
  let store: ClusterStore;
  let sched: SchedulerProcess;
  let monitor: MonitorProcess;
  let c: SchedulerClient;
  const keys = new Keys(`/idem-${kind}-${Date.now()}/`);

  beforeAll(async () => {
    store = await openStore(kind === 'memory' ? 'memory://' : inject('etcdEndpoint').replace('http://', 'etcd://'));
    monitor = await startMonitor({
      store,
      keys,
      clock,
      log,
      server: { id: 's0', platform: 'r3-2xlarge', rack: 'r0', rus: 4, speed: 1, attributes: {} },
      executor: 'simulated',
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: 3,
    });
    sched = await startScheduler({
      name: 'idem',
      store,
      keys,
      catalog: loadCatalog(),
      clock,
      rng: new SeededRng(3),
      log,
      agents: 2,
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: 3,
    });
    c = schedulerClient(`127.0.0.1:${sched.port}`);
  });
  afterAll(async () => {
    c?.close();
    await sched?.close();
    await monitor?.close();
    await store?.close();
  });

  const storedJobs = async (): Promise<string[]> => (await store.range(keys.jobs())).kvs.map((kv) => keys.tail(keys.jobs(), kv.key) ?? '');

  it('a retry with the same request id returns the original job; without one it would be a second job', async () => {
    const before = (await storedJobs()).length;
    const a = await submit(c, { specJson: spec('once'), requestId: 'req-1' });
    const b = await submit(c, { specJson: spec('once'), requestId: 'req-1' });
    expect(b.jobId).toBe(a.jobId);
    expect((await storedJobs()).length).toBe(before + 1);
    expect((await waitFinal(c, a.jobId)).state).toBe('succeeded');
    // After the job finished, the key still names it.
    expect((await submit(c, { specJson: spec('once'), requestId: 'req-1' })).jobId).toBe(a.jobId);
    expect(sched.manager.stats.duplicates).toBeGreaterThanOrEqual(2);
  });

  it('concurrent attempts with one request id (a retry racing the first) create exactly one job', async () => {
    const before = new Set(await storedJobs());
    const results = await Promise.all(Array.from({ length: 8 }, () => submit(c, { specJson: spec('raced', 2), requestId: 'race-7' })));
    expect(new Set(results.map((r) => r.jobId)).size).toBe(1);
    const created = (await storedJobs()).filter((id) => !before.has(id));
    expect(created).toEqual([results[0]?.jobId]);
    expect((await waitFinal(c, created[0] ?? '')).state).toBe('succeeded');
    expect(await taskRecords(store, keys, created[0] ?? '')).toHaveLength(2);
  });

  it('refuses a request id reused for another spec, and a malformed one, writing nothing', async () => {
    await submit(c, { specJson: spec('first'), requestId: 'reuse-1' });
    const before = await storedJobs();
    const reuse = await submit(c, { specJson: spec('second'), requestId: 'reuse-1' }).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    expect(reuse?.code).toBe(grpc.status.ALREADY_EXISTS);
    expect(reuse?.details).toContain('request_id');
    for (const bad of ['a/b', 'x'.repeat(129), 'sp ace', '../../jobs/x']) {
      const err = await submit(c, { specJson: spec('bad'), requestId: bad }).then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      );
      expect(err?.code, bad).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err?.details, bad).toContain('request_id');
    }
    expect(await storedJobs()).toEqual(before);
  });

  it('the client retries a lost acknowledgement with the same key and gets the persisted job', async () => {
    // A front-end whose first SubmitJob is carried out but its answer replaced by UNAVAILABLE,
    // as when the connection drops after the job was persisted.
    const real = sched.service.handlers();
    let lost = 0;
    const lossy: GrpcServerHandle = await startGrpcServer({
      host: '127.0.0.1',
      port: 0,
      register: (server) => {
        server.addService(loadProtos().proto.tarcil.v1.Scheduler.service, {
          ...real,
          SubmitJob: (call, cb) => {
            if (lost > 0) return real.SubmitJob(call, cb);
            lost++;
            real.SubmitJob(call, () => cb({ code: grpc.status.UNAVAILABLE, details: 'connection reset (simulated)' }));
          },
        } satisfies typeof real);
        return ['tarcil.v1.Scheduler'];
      },
    });
    const lc = schedulerClient(`127.0.0.1:${lossy.port}`);
    try {
      const before = new Set(await storedJobs());
      const res = await submitWithRetry(lc, { specJson: spec('lossy'), requestId: 'lossy-1' }, { timeout: 5000, retryBaseMs: 20 });
      expect(lost).toBe(1);
      const created = (await storedJobs()).filter((id) => !before.has(id));
      expect(created).toEqual([res.jobId]);
      expect((await waitFinal(c, res.jobId)).state).toBe('succeeded');
    } finally {
      lc.close();
      await lossy.close(200);
    }
  });
});

describe('submitWithRetry', () => {
  it('retries while no server answers, then succeeds once one does; gives up on a non-transient error', async () => {
    // The client dials the port before any server listens there, so the port is picked beforehand;
    // another process may take it before the server binds it. Then the same again on a new port.
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      const lc = schedulerClient(`127.0.0.1:${port}`);
      let calls = 0;
      let started: GrpcServerHandle | undefined;
      try {
        // Nothing listens yet: the first attempts fail with UNAVAILABLE.
        const later = new Promise<GrpcServerHandle>((resolve, reject) => {
          setTimeout(() => {
            startGrpcServer({
              host: '127.0.0.1',
              port,
              register: (server) => {
                server.addService(loadProtos().proto.tarcil.v1.Scheduler.service, {
                  SubmitJob: (call: grpc.ServerUnaryCall<{ requestId: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
                    calls++;
                    if (call.request.requestId === 'bad') cb({ code: grpc.status.INVALID_ARGUMENT, details: 'tasks: must be an integer' });
                    else cb(null, { jobId: `j-for-${call.request.requestId}` });
                  },
                });
                return ['tarcil.v1.Scheduler'];
              },
            }).then(resolve, reject);
          }, 400);
        });
        const first = submitWithRetry(lc, { specJson: '{}', requestId: 'k-1' }, { timeout: 1000, retries: 8, retryBaseMs: 100 });
        first.catch(() => undefined); // awaited below, unless the port was taken
        try {
          started = await later;
        } catch (err) {
          if (attempt < 5 && addressInUse(err)) continue; // (the finally closes this client, which ends its call)
          throw err;
        }
        const res = await first;
        expect(res.jobId).toBe('j-for-k-1');
        expect(calls).toBe(1);
        const refused = await submitWithRetry(lc, { specJson: '{}', requestId: 'bad' }, { timeout: 1000, retries: 8, retryBaseMs: 10 }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(refused).toBeInstanceOf(TarcilError);
        expect((refused as TarcilError).code).toBe('INVALID_ARGUMENT');
        expect(calls).toBe(2);
        return;
      } finally {
        lc.close();
        await started?.close(200);
      }
    }
  });
});
