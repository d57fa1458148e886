/**
 * A front-end and two nodes in this process on the embedded store, as `tarcil up` runs them: `p0`
 * (2 RUs, the process executor, its logs in a temporary folder) and `s0` (the simulated executor),
 * for the tests of what differs between the executors (task logs, the dashboard's nodes and logs).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';

export interface MixedCell {
  store: MemoryStore;
  keys: Keys;
  logDir: string;
  /** The process-executor node, p0. */
  proc: MonitorProcess;
  /** The simulated-executor node, s0. */
  sim: MonitorProcess;
  sched: SchedulerProcess;
  client: SchedulerClient;
  close(): Promise<void>;
}

export async function startMixedCell(o: {
  name: string;
  prefix: string;
  seed: number;
  simRack: string;
  simRus: number;
  httpPort?: number;
}): Promise<MixedCell> {
  const store = new MemoryStore();
  const keys = new Keys(o.prefix);
  const clock = new SystemClock();
  const log = createLogger('test');
  const logDir = mkdtempSync(join(tmpdir(), `tarcil-${o.name}-`));
  const common = { store, keys, clock, log, host: '127.0.0.1', port: 0, leaseTtlSeconds: 3 };
  const proc = await startMonitor({
    ...common,
    server: { id: 'p0', platform: 'r3-2xlarge', rack: 'r0', rus: 2, speed: 1, attributes: { exec: 'process' } },
    executor: 'process',
    logDir,
  });
  const sim = await startMonitor({
    ...common,
    server: { id: 's0', platform: 'r3-2xlarge', rack: o.simRack, rus: o.simRus, speed: 1, attributes: { exec: 'simulated' } },
    executor: 'simulated',
  });
  const sched = await startScheduler({
    ...common,
    name: o.name,
    catalog: loadCatalog(),
    rng: new SeededRng(o.seed),
    agents: 1,
    ...(o.httpPort !== undefined ? { httpPort: o.httpPort } : {}),
  });
  const client = schedulerClient(`127.0.0.1:${sched.port}`);
  return {
    store,
    keys,
    logDir,
    proc,
    sim,
    sched,
    client,
    async close() {
      client.close();
      await sched.close();
      await proc.close();
      await sim.close();
      await store.close();
      rmSync(logDir, { recursive: true, force: true });
    },
  };
}
