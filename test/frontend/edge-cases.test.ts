import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { Explanation__Output } from '../../src/rpc/gen/tarcil/v1/Explanation.ts';
import type { JobEvent__Output } from '../../src/rpc/gen/tarcil/v1/JobEvent.ts';
import type { Job__Output } from '../../src/rpc/gen/tarcil/v1/Job.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { expandCluster, loadCatalog, resolveCluster } from '../../src/model/catalog.ts';
import type { ServerSpec } from '../../src/model/types.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { getJob, submit, waitFinal } from '../support/live.ts';

/**
 * Regression tests over gRPC for what an unlucky or hostile client could do to a front-end of the
 * demo cell (10 servers, 24 RUs, 2 racks): each `it` names the behaviour it pins down.
 */
const catalog = loadCatalog();
const servers = expandCluster(resolveCluster('demo', catalog), catalog.platforms);
const clock = new SystemClock();
const log = createLogger('test');

interface Cell {
  store: MemoryStore;
  keys: Keys;
  sched: SchedulerProcess;
  monitors: Map<string, MonitorProcess>;
  c: SchedulerClient;
  startNode(s: ServerSpec): Promise<void>;
  stopNode(id: string): Promise<void>;
  close(): Promise<void>;
}

async function startCell(prefix: string, extra: { unplaceableTimeoutMs?: number; agentConfig?: { admission: boolean } } = {}): Promise<Cell> {
  const store = new MemoryStore();
  const keys = new Keys(prefix);
  const monitors = new Map<string, MonitorProcess>();
  const startNode = async (s: ServerSpec): Promise<void> => {
    monitors.set(s.id, await startMonitor({ store, keys, clock, log, server: s, executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: 3 }));
  };
  await Promise.all(servers.map(startNode));
  const sched = await startScheduler({
    name: 'edge',
    store,
    keys,
    catalog,
    clock,
    rng: new SeededRng(11),
    log,
    agents: 2,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: 3,
    ...extra,
  });
  const c = schedulerClient(`127.0.0.1:${sched.port}`);
  return {
    store,
    keys,
    sched,
    monitors,
    c,
    startNode,
    stopNode: async (id) => {
      await monitors.get(id)?.close();
      monitors.delete(id);
    },
    close: async () => {
      c.close();
      await sched.close();
      await Promise.all([...monitors.values()].map((m) => m.close()));
      await store.close();
    },
  };
}

function submitErr(c: SchedulerClient, spec: object): Promise<grpc.ServiceError> {
  return submit(c, { specJson: JSON.stringify(spec) }).then(
    (r) => {
      throw new Error(`accepted as ${r.jobId}, expected a refusal`);
    },
    (e: grpc.ServiceError) => e,
  );
}

function unary<T>(fn: (cb: (err: grpc.ServiceError | null, res?: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => fn((err, res) => (err || res === undefined ? reject(err ?? new Error('empty')) : resolve(res))));
}

function explain(c: SchedulerClient, jobId: string): Promise<Explanation__Output> {
  return unary((cb) => c.ExplainJob({ jobId }, { deadline: new Date(Date.now() + 10_000) }, cb));
}

function cancel(c: SchedulerClient, jobId: string): Promise<Job__Output> {
  return unary((cb) => c.CancelJob({ jobId }, { deadline: new Date(Date.now() + 10_000) }, cb));
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Collects a WatchJob stream until it ends (or `stopAfterMs`, then cancels it). */
function collect(c: SchedulerClient, jobId: string, stopAfterMs?: number): Promise<{ events: JobEvent__Output[]; bytes: number[]; err?: grpc.ServiceError }> {
  return new Promise((resolve) => {
    const events: JobEvent__Output[] = [];
    const bytes: number[] = [];
    const s = c.WatchJob({ jobId }, { deadline: new Date(Date.now() + 60_000) });
    let done = false;
    const end = (err?: grpc.ServiceError): void => {
      if (done) return;
      done = true;
      resolve(err ? { events, bytes, err } : { events, bytes });
    };
    s.on('data', (ev: JobEvent__Output) => {
      events.push(ev);
      bytes.push(JSON.stringify(ev).length);
    });
    s.on('end', () => end());
    s.on('error', (e: grpc.ServiceError) => end(e.code === grpc.status.CANCELLED && done ? undefined : e));
    if (stopAfterMs !== undefined) {
      setTimeout(() => {
        end();
        s.cancel();
      }, stopAfterMs).unref();
    }
  });
}

const spec = (over: object): object => ({ name: 'edge', profile: 'spark-lr', tasks: 1, durationMs: 50, ...over });

describe('front-end edge cases (demo cell, embedded store)', () => {
  let cell: Cell;
  beforeAll(async () => {
    // Admission control on (off by default): some of these cases are about its margin and holds.
    cell = await startCell('/edge/', { agentConfig: { admission: true } });
  });
  afterAll(async () => {
    await cell?.close();
  });

  it('WatchJob of a job that does not exist answers NOT_FOUND at once', async () => {
    const r = await collect(cell.c, 'j-does-not-exist');
    expect(r.err?.code).toBe(grpc.status.NOT_FOUND);
    expect(r.events).toHaveLength(0);
  });

  it('ListJobs refuses an unknown state filter, naming it', async () => {
    const err = await unary((cb) => cell.c.ListJobs({ states: ['succeeded', 'finished'] }, cb)).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err?.details).toContain('states[1]');
  });

  it('reflection on the front-end port lists the Scheduler service, not NodeMonitor', async () => {
    const names = await listServicesByReflection(`127.0.0.1:${cell.sched.port}`);
    expect(names).toContain('tarcil.v1.Scheduler');
    expect(names).not.toContain('tarcil.v1.NodeMonitor');
  });

  it('a job whose constraints match no server is refused with FAILED_PRECONDITION and the reason; nothing is stored', async () => {
    const before = (await cell.store.range(cell.keys.jobs())).kvs.length;
    const err = await submitErr(cell.c, spec({ constraints: { attributes: { zone: 'nowhere' } } }));
    expect(err.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(err.details).toContain('zone=nowhere');
    expect(err.details).toContain('demo-a');
    expect((await cell.store.range(cell.keys.jobs())).kvs.length).toBe(before);
  });

  it('a gang larger than the RUs it may use is refused up front (whole cell, and one platform)', async () => {
    const all = await submitErr(cell.c, spec({ mode: 'gang', tasks: 25 }));
    expect(all.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(all.details).toMatch(/gang of 25 tasks.*24/);
    const one = await submitErr(cell.c, spec({ mode: 'gang', tasks: 9, constraints: { platforms: ['r3-xlarge'] } }));
    expect(one.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(one.details).toMatch(/gang of 9 tasks.*8/);
  });

  it('a required spread that the cell cannot keep is refused; spread never runs two live tasks on one server or rack', async () => {
    const servers11 = await submitErr(cell.c, spec({ tasks: 11, locality: { mode: 'spread', scope: 'server' } }));
    expect(servers11.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(servers11.details).toContain('10');
    const racks3 = await submitErr(cell.c, spec({ tasks: 3, mode: 'gang', locality: { mode: 'spread', scope: 'rack' } }));
    expect(racks3.code).toBe(grpc.status.FAILED_PRECONDITION);
    // What the cell can keep: 10 tasks on 10 servers, a gang of 2 over the 2 racks.
    const a = await submit(cell.c, {
      specJson: JSON.stringify(spec({ name: 'spread10', tasks: 10, durationMs: 1500, locality: { mode: 'spread', scope: 'server' } })),
    });
    const b = await submit(cell.c, {
      specJson: JSON.stringify(spec({ name: 'racks2', tasks: 2, mode: 'gang', durationMs: 300, locality: { mode: 'spread', scope: 'rack' } })),
    });
    const [ja, jb] = await Promise.all([waitFinal(cell.c, a.jobId), waitFinal(cell.c, b.jobId)]);
    expect(ja.state).toBe('succeeded');
    expect(new Set(ja.taskList.map((t) => t.ru?.server)).size).toBe(10);
    const rackOf = new Map(servers.map((s) => [s.id, s.rack]));
    expect(jb.state).toBe('succeeded');
    expect(new Set(jb.taskList.map((t) => rackOf.get(t.ru?.server ?? ''))).size).toBe(2);
    // As a preference, 11 tasks on 10 servers are accepted and run.
    const pref = await submit(cell.c, {
      specJson: JSON.stringify(spec({ name: 'pref', tasks: 11, locality: { mode: 'spread', scope: 'server', required: false } })),
    });
    expect((await waitFinal(cell.c, pref.jobId)).state).toBe('succeeded');
  });

  it('an idle cell admits at once a job that needs every RU (no margin it could never meet)', async () => {
    await until('an idle cell', async () => {
      const cl = await unary<{ busy: number }>((cb) => cell.c.GetCluster({}, cb));
      return cl.busy === 0 ? true : undefined;
    });
    const { jobId } = await submit(cell.c, { specJson: JSON.stringify(spec({ name: 'fill', tasks: 24, durationMs: 200, maxQueueMs: 30_000 })) });
    const j = await waitFinal(cell.c, jobId, 20_000);
    expect(j.state).toBe('succeeded');
    const e = await explain(cell.c, jobId);
    expect(e.admission[0]?.action).toBe('admit');
    expect(e.admission[0]?.reason).toMatch(/waiting cannot reach it/);
    expect(e.queuedMs).toBe(0);
  });

  it('cancel stops a job that is waiting for RUs, without waiting for one to free', async () => {
    const filler = await submit(cell.c, { specJson: JSON.stringify(spec({ name: 'filler', tasks: 24, durationMs: 120_000 })) });
    await until('the filler running on every RU', async () => ((await getJob(cell.c, filler.jobId)).taskStates.running === 24 ? true : undefined));
    const waiting = await submit(cell.c, { specJson: JSON.stringify(spec({ name: 'waiting', tasks: 2, durationMs: 100 })) });
    // It waits, and says why.
    const w = await until('a reason on the waiting job', async () => {
      const j = await getJob(cell.c, waiting.jobId);
      return j.message !== '' ? j : undefined;
    });
    expect(['queued', 'admitted']).toContain(w.state);
    expect(w.message).toMatch(/waiting|queued/);
    await cancel(cell.c, waiting.jobId);
    const j = await waitFinal(cell.c, waiting.jobId, 5_000);
    expect(j.state).toBe('cancelled');
    expect(j.taskStates.cancelled).toBe(2);
    await cancel(cell.c, filler.jobId);
    expect((await waitFinal(cell.c, filler.jobId, 10_000)).state).toBe('cancelled');
  });

  it('WatchJob events carry changed tasks only, with revisions that never repeat after a last part', async () => {
    const { jobId } = await submit(cell.c, { specJson: JSON.stringify(spec({ name: 'watched', tasks: 30, durationMs: 30 })) });
    const r = await collect(cell.c, jobId);
    expect(r.err).toBeUndefined();
    const finals = r.events.filter((e) => ['succeeded', 'failed', 'cancelled'].includes(e.job?.state ?? ''));
    expect(finals).toHaveLength(1);
    expect(r.events[r.events.length - 1]).toBe(finals[0]);
    let last = 0;
    let open = false;
    for (const e of r.events) {
      expect(e.job?.taskList ?? []).toHaveLength(0);
      const rev = Number(e.revision);
      if (open) expect(rev).toBe(last);
      else expect(rev).toBeGreaterThan(last);
      last = rev;
      open = e.more;
    }
    // Every task's final state reached the client through the deltas.
    const state = new Map<number, string>();
    for (const e of r.events) for (const t of e.tasks) state.set(t.index, t.state);
    expect(state.size).toBe(30);
    expect([...state.values()].every((s) => s === 'succeeded')).toBe(true);
  });

  it('a 100,000-task job with a WatchJob stream open: bounded events, health answers, cancel ends it', async () => {
    const { jobId } = await submit(cell.c, { specJson: JSON.stringify(spec({ name: 'x-big', tasks: 100_000, durationMs: 1000 })) });
    const watch = collect(cell.c, jobId);
    // The process keeps answering while it works on the job (each GetJob has a 10 s deadline).
    await until('tasks running', async () => (((await getJob(cell.c, jobId)).taskStates.running ?? 0) > 0 ? true : undefined));
    const t0 = Date.now();
    await cancel(cell.c, jobId);
    const j = await waitFinal(cell.c, jobId, 60_000);
    const cancelMs = Date.now() - t0;
    expect(j.state).toBe('cancelled');
    expect(j.taskStates.cancelled).toBe(100_000);
    expect(j.taskList.length).toBeLessThanOrEqual(5000);
    const r = await watch;
    expect(r.err).toBeUndefined();
    expect(r.events[r.events.length - 1]?.job?.state).toBe('cancelled');
    // No event carries the whole job: at most one part's worth of tasks, and a bounded size.
    expect(Math.max(...r.events.map((e) => e.tasks.length))).toBeLessThanOrEqual(1000);
    expect(Math.max(...r.bytes)).toBeLessThan(400_000);
    console.log(`100,000-task job: ${r.events.length} events, largest ${Math.max(...r.bytes)} bytes, cancelled in ${cancelMs} ms`);
    await until('every RU free again', async () => ((await unary<{ busy: number }>((cb) => cell.c.GetCluster({}, cb))).busy === 0 ? true : undefined));
  });
});

describe('jobs that need servers that are down (embedded store)', () => {
  let cell: Cell;
  beforeAll(async () => {
    cell = await startCell('/edge-down/', { unplaceableTimeoutMs: 4000 });
  });
  afterAll(async () => {
    await cell?.close();
  });

  it('waits with the reason while the servers it needs are down, runs when one comes back, and fails visibly after the bound', async () => {
    const r3 = servers.filter((s) => s.platform === 'r3-xlarge');
    for (const s of r3) await cell.stopNode(s.id);
    // Servers that left are still listed, as down with when they left (leftAtMs).
    await until('r3 servers gone', async () =>
      (await unary<{ servers: { platform: string; state: string; leftAtMs: number }[] }>((cb) => cell.c.GetCluster({}, cb))).servers.every(
        (s) => s.platform !== 'r3-xlarge' || (s.state === 'down' && s.leftAtMs > 0),
      )
        ? true
        : undefined,
    );
    const a = await submit(cell.c, { specJson: JSON.stringify(spec({ name: 'needs-r3', constraints: { platforms: ['r3-xlarge'] } })) });
    const ja = await getJob(cell.c, a.jobId);
    expect(ja.state).toBe('queued');
    expect(ja.message).toContain('down');
    expect((await explain(cell.c, a.jobId)).waitingFor).toContain('down');
    await cell.startNode(r3[0] as ServerSpec);
    expect((await waitFinal(cell.c, a.jobId, 15_000)).state).toBe('succeeded');

    await cell.stopNode((r3[0] as ServerSpec).id);
    await until('r3 server gone again', async () =>
      (await unary<{ servers: { platform: string; state: string; leftAtMs: number }[] }>((cb) => cell.c.GetCluster({}, cb))).servers.every(
        (s) => s.platform !== 'r3-xlarge' || (s.state === 'down' && s.leftAtMs > 0),
      )
        ? true
        : undefined,
    );
    const b = await submit(cell.c, { specJson: JSON.stringify(spec({ name: 'gives-up', tasks: 3, constraints: { platforms: ['r3-xlarge'] } })) });
    const jb = await waitFinal(cell.c, b.jobId, 15_000);
    expect(jb.state).toBe('failed');
    expect(jb.message).toContain('gave up');
    expect(jb.taskStates.failed).toBe(3);
  });

  it('explain of a gang that was re-placed still shows its original placement', async () => {
    const { jobId } = await submit(cell.c, {
      specJson: JSON.stringify(
        spec({ name: 'gang-replaced', tasks: 3, mode: 'gang', durationMs: 60_000, constraints: { platforms: ['m3-large', 'c3-large'] } }),
      ),
    });
    const running = await until('the gang running', async () => {
      const j = await getJob(cell.c, jobId);
      return j.taskStates.running === 3 ? j : undefined;
    });
    const victim = running.taskList.find((t) => t.index === 0)?.ru;
    expect(victim).toBeDefined();
    await cell.stopNode(victim?.server ?? '');
    await until('task 0 placed again elsewhere', async () => {
      const t = (await getJob(cell.c, jobId)).taskList.find((x) => x.index === 0);
      return t && t.ru?.server !== victim?.server && (t.state === 'running' || t.state === 'placed') ? true : undefined;
    });
    const e = await explain(cell.c, jobId);
    const task0 = e.placements.filter((p) => p.task === 0).map((p) => p.ru?.server);
    expect(task0).toContain(victim?.server);
    expect(task0.length).toBeGreaterThanOrEqual(2);
    await cancel(cell.c, jobId);
    expect((await waitFinal(cell.c, jobId, 10_000)).state).toBe('cancelled');
  });
});

/** The service names a server advertises through gRPC reflection (v1alpha, as grpcurl asks). */
async function listServicesByReflection(addr: string): Promise<string[]> {
  const protoLoader = await import('@grpc/proto-loader');
  const { createRequire } = await import('node:module');
  const require = createRequire(import.meta.url);
  const file = require.resolve('@grpc/reflection/build/proto/grpc/reflection/v1alpha/reflection.proto');
  const def = protoLoader.loadSync(file, { keepCase: true });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    grpc: {
      reflection: {
        v1alpha: {
          ServerReflection: new (
            a: string,
            c: grpc.ChannelCredentials,
          ) => grpc.Client & { ServerReflectionInfo(): grpc.ClientDuplexStream<object, { list_services_response?: { service: { name: string }[] } }> };
        };
      };
    };
  };
  const client = new pkg.grpc.reflection.v1alpha.ServerReflection(addr, grpc.credentials.createInsecure());
  try {
    return await new Promise<string[]>((resolve, reject) => {
      const call = client.ServerReflectionInfo();
      call.on('data', (res: { list_services_response?: { service: { name: string }[] } }) => {
        resolve((res.list_services_response?.service ?? []).map((s) => s.name));
        call.end();
      });
      call.on('error', reject);
      call.write({ list_services: '*' });
    });
  } finally {
    client.close();
  }
}
