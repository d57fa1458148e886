import type * as grpc from '@grpc/grpc-js';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { Job__Output } from '../../src/rpc/gen/tarcil/v1/Job.ts';
import type { AgentConfig } from '../../src/agent/config.ts';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { expandCluster, loadCatalog, resolveCluster } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock, type Clock } from '../../src/util/clock.ts';
import { createLogger, type Logger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';

/** Promise wrappers over the generated Scheduler client, for tests. */
export function submit(c: SchedulerClient, req: Parameters<SchedulerClient['SubmitJob']>[0], deadlineMs = 10_000): Promise<{ jobId: string }> {
  return new Promise((resolve, reject) => {
    c.SubmitJob(req, { deadline: new Date(Date.now() + deadlineMs) }, (err, res) => (err || !res ? reject(err ?? new Error('empty')) : resolve(res)));
  });
}

export function getJob(c: SchedulerClient, jobId: string): Promise<Job__Output> {
  return new Promise((resolve, reject) => {
    c.GetJob({ jobId }, { deadline: new Date(Date.now() + 10_000) }, (err, res) => (err || !res ? reject(err ?? new Error('empty')) : resolve(res)));
  });
}

/** gRPC codes a polling client tries again: DEADLINE_EXCEEDED (a store slower than the front-end's deadline) and UNAVAILABLE. */
const TRANSIENT = new Set([4, 14]);

/**
 * Polls GetJob until the job is final. As the CLI's client does (src/cli/client.ts), an
 * answer that is transient is polled again; every other error fails at once, and the timeout bounds
 * both.
 */
export async function waitFinal(c: SchedulerClient, jobId: string, timeoutMs = 30_000, everyMs = 50): Promise<Job__Output> {
  const t0 = Date.now();
  for (;;) {
    let j: Job__Output | undefined;
    let last: unknown;
    try {
      j = await getJob(c, jobId);
    } catch (e) {
      if (!TRANSIENT.has((e as { code?: number }).code ?? -1)) throw e;
      last = e;
    }
    if (j && (j.state === 'succeeded' || j.state === 'failed' || j.state === 'cancelled')) return j;
    if (Date.now() - t0 > timeoutMs) throw new Error(`job ${jobId} not final after ${timeoutMs} ms: ${j ? JSON.stringify(j) : String(last)}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * The demo cell (10 servers, simulated executor) on a MemoryStore with one front-end, its client
 * and a close() for afterAll.
 */
export async function startDemoCell(o: {
  prefix: string;
  name: string;
  seed: number;
  agents: number;
  agentConfig?: Partial<AgentConfig>;
  metricsPort?: number;
  httpPort?: number;
}) {
  const store = new MemoryStore();
  const keys = new Keys(o.prefix);
  const clock = new SystemClock();
  const log = createLogger('test');
  const catalog = loadCatalog();
  const servers = expandCluster(resolveCluster('demo', catalog), catalog.platforms);
  const monitors = await Promise.all(
    servers.map((s) => startMonitor({ store, keys, clock, log, server: s, executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: 3 })),
  );
  const sched = await startScheduler({
    name: o.name,
    store,
    keys,
    catalog,
    clock,
    rng: new SeededRng(o.seed),
    log,
    agents: o.agents,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: 3,
    ...(o.metricsPort !== undefined ? { metricsPort: o.metricsPort } : {}),
    ...(o.httpPort !== undefined ? { httpPort: o.httpPort } : {}),
    ...(o.agentConfig ? { agentConfig: o.agentConfig } : {}),
  });
  const client = schedulerClient(`127.0.0.1:${sched.port}`);
  return {
    store,
    keys,
    sched,
    client,
    close: async (): Promise<void> => {
      client.close();
      await sched.close();
      await Promise.all(monitors.map((m) => m.close()));
      await store.close();
    },
  };
}

/**
 * n monitors with the simulated executor, servers n0…n(n-1) of 4 RUs on racks r0…, each on a
 * store of its own (`connect()`), with the given lease TTL; pushed onto `into` as they start, so
 * that a test's teardown closes those that started even if a later one fails.
 */
export async function startSimulatedMonitors(
  n: number,
  o: { connect: () => Promise<ClusterStore>; keys: Keys; clock: Clock; log: Logger; leaseTtlSeconds: number; into: MonitorProcess[] },
): Promise<void> {
  for (let i = 0; i < n; i++) {
    o.into.push(
      await startMonitor({
        store: await o.connect(),
        keys: o.keys,
        clock: o.clock,
        log: o.log,
        server: { id: `n${i}`, platform: 'r3-2xlarge', rack: `r${i}`, rus: 4, speed: 1, attributes: {} },
        executor: 'simulated',
        host: '127.0.0.1',
        port: 0,
        leaseTtlSeconds: o.leaseTtlSeconds,
      }),
    );
  }
}

/** A Scheduler RPC by name, with a 10 s deadline: its answer, or the ServiceError it failed with. */
export function unary<Req, Res>(c: SchedulerClient, method: string, req: Req): Promise<Res> {
  return new Promise((resolve, reject) => {
    (c as unknown as Record<string, (r: Req, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r: Res) => void) => void>)[method]!(
      req,
      { deadline: Date.now() + 10_000 },
      (e, r) => (e ? reject(e) : resolve(r)),
    );
  });
}

/** The ServiceError a call that must fail failed with; throws if it succeeded. */
export const failure = (p: Promise<unknown>): Promise<grpc.ServiceError> =>
  p.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (e: grpc.ServiceError) => e,
  );

/** What the test helpers below start a process on. */
interface TestProcessBase {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
}

/** A node monitor with the simulated executor: `id` (default s0), 4 RUs of r3-2xlarge, loopback on a free port. */
export function startSimNode(o: TestProcessBase & { id?: string; rack?: string; leaseTtlSeconds?: number }): Promise<MonitorProcess> {
  return startMonitor({
    store: o.store,
    keys: o.keys,
    clock: o.clock,
    log: o.log,
    server: { id: o.id ?? 's0', platform: 'r3-2xlarge', rack: o.rack ?? 'r0', rus: 4, speed: 1, attributes: {} },
    executor: 'simulated',
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: o.leaseTtlSeconds ?? 3,
  });
}

/** A front-end on loopback (free port) with the catalog, a seeded Rng and a 3 s lease unless `extra` says otherwise. */
export function startTestScheduler(
  o: TestProcessBase & { name: string; agents: number; seed: number },
  extra: Partial<Parameters<typeof startScheduler>[0]> = {},
): Promise<SchedulerProcess> {
  return startScheduler({
    name: o.name,
    store: o.store,
    keys: o.keys,
    catalog: loadCatalog(),
    clock: o.clock,
    rng: new SeededRng(o.seed),
    log: o.log,
    agents: o.agents,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: 3,
    ...extra,
  });
}
