/**
 * What clients see of retention: a front-end with a short --retain deletes a finished job, and
 * GetJob, `tarcil status`, `tarcil explain`, CancelJob and WatchJob then say that the job is not
 * found and that finished jobs are kept only that long; `tarcil jobs` prints the retention; a
 * running job is still there.
 */
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { explainCommand, jobsCommand, statusCommand } from '../../src/cli/client.ts';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { expandCluster, loadCatalog, resolveCluster } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { getJob, submit, waitFinal } from '../support/live.ts';

const store = new MemoryStore();
const keys = new Keys('/retain-api/');
const clock = new SystemClock();
const log = createLogger('test', 'silent');
let sched: SchedulerProcess;
let monitors: MonitorProcess[] = [];
let c: SchedulerClient;
let server = '';

beforeAll(async () => {
  const catalog = loadCatalog();
  const servers = expandCluster(resolveCluster('demo', catalog), catalog.platforms);
  monitors = await Promise.all(
    servers.map((s) => startMonitor({ store, keys, clock, log, server: s, executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: 3 })),
  );
  sched = await startScheduler({
    name: 'ret',
    store,
    keys,
    catalog,
    clock,
    rng: new SeededRng(3),
    log,
    agents: 1,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: 3,
    retainMs: 1500,
  });
  server = `127.0.0.1:${sched.port}`;
  c = schedulerClient(server);
});
afterAll(async () => {
  c?.close();
  await sched?.close();
  await Promise.all(monitors.map((m) => m.close()));
  await store.close();
});

const spec = (name: string, durationMs: number): string => JSON.stringify({ name, profile: 'spark-lr', tasks: 2, durationMs });

function unaryError(call: (cb: (err: grpc.ServiceError | null) => void) => void): Promise<grpc.ServiceError | null> {
  return new Promise((resolve) => call((err) => resolve(err)));
}

describe('a job that aged out', () => {
  it('is NOT_FOUND with a message naming the retention, everywhere a client asks; a running one stays', async () => {
    const { jobId } = await submit(c, { specJson: spec('short', 50), requestId: 'retain-api-1' });
    const { jobId: longId } = await submit(c, { specJson: spec('long', 60_000) });
    await waitFinal(c, jobId);
    const lines: string[] = [];
    await jobsCommand({ server, timeout: 5000, limit: 10 }, (l) => lines.push(l));
    expect(lines.join('\n')).toContain(jobId);
    expect(lines.join('\n')).toContain('(finished jobs are deleted 1.5 s after they end)');

    // Deleted within the retention (1.5 s) and a sweep period (1 s).
    const t0 = Date.now();
    for (;;) {
      const err = await getJob(c, jobId).then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      );
      if (err) {
        expect(err.code).toBe(5);
        expect(err.details).toBe(
          `job ${jobId} not found: it does not exist, or it finished more than 1.5 s ago and was deleted (finished jobs are kept for 1.5 s)`,
        );
        break;
      }
      if (Date.now() - t0 > 20_000) throw new Error('the finished job was never deleted');
      await new Promise((r) => setTimeout(r, 100));
    }
    expect((await store.range(keys.tasks(jobId))).kvs).toEqual([]);

    const status = await statusCommand(jobId, { server, timeout: 5000, json: false }, () => undefined).catch((e: unknown) => e);
    expect(status).toBeInstanceOf(TarcilError);
    expect((status as TarcilError).code).toBe('NOT_FOUND');
    expect((status as TarcilError).message).toMatch(/finished jobs are kept for 1.5 s/);
    const explain = await explainCommand(jobId, { server, timeout: 5000, json: false }, () => undefined).catch((e: unknown) => e);
    expect((explain as TarcilError).message).toMatch(/not found: it does not exist, or it finished more than 1.5 s ago/);
    const cancel = await unaryError((cb) => c.CancelJob({ jobId }, cb));
    expect(cancel?.code).toBe(5);
    expect(cancel?.details).toMatch(/finished jobs are kept for 1.5 s/);
    const watched = await new Promise<grpc.ServiceError>((resolve) => {
      const s = c.WatchJob({ jobId });
      s.on('data', () => undefined);
      s.on('error', resolve);
    });
    expect(watched.code).toBe(5);
    expect(watched.details).toMatch(/finished jobs are kept for 1.5 s/);

    // The same request id again: the job it made is gone, and the answer says so.
    const again = await submit(c, { specJson: spec('short', 50), requestId: 'retain-api-1' }).catch((e: grpc.ServiceError) => e);
    expect((again as grpc.ServiceError).code).toBe(6);
    expect((again as grpc.ServiceError).details).toMatch(new RegExp(`job ${jobId}, which has finished and been deleted`));

    // The running job is still there, several retention periods later.
    expect((await getJob(c, longId)).state).toMatch(/placed|running/);
    await unaryError((cb) => c.CancelJob({ jobId: longId }, cb));
  }, 60_000);
});
