import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobManager } from '../../src/owner/manager.ts';
import { parseJson } from '../../src/state/records.ts';
import { LiveKeys, type LiveServerRecord, type LiveTaskRecord } from '../../src/state/live-records.ts';
import { loadCatalog, parseJobSpec } from '../../src/model/catalog.ts';
import { hasTaskset, SimulatedExecutor } from '../../src/monitor/executor.ts';
import { LocalMonitor } from '../../src/monitor/monitor.ts';
import { DEFAULT_RUNTIME } from '../../src/monitor/runtime-loop.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { Keys } from '../../src/state/keys.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { until as pollUntil } from '../support/until.ts';
import { taskRecords } from '../support/task-records.ts';

const clock = new SystemClock();
const log = createLogger('test');
const catalog = loadCatalog();
let seq = 0;
const job = (input: Record<string, unknown>) => parseJobSpec(input, catalog, { id: `job-${++seq}`, now: Date.now() });

const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> => pollUntil(what, cond, ms, 25);

describe('process executor', () => {
  const store = new MemoryStore();
  const keys = new Keys('/proc/');
  const logDir = mkdtempSync(join(tmpdir(), 'tarcil-logs-'));
  let mon: MonitorProcess;
  let mgr: JobManager;
  beforeAll(async () => {
    mon = await startMonitor({
      store,
      keys,
      clock,
      log,
      server: { id: 'p0', platform: 'r3-xlarge', rack: 'r0', rus: 4, speed: 1, attributes: {} },
      executor: 'process',
      host: '127.0.0.1',
      port: 0,
      logDir,
      leaseTtlSeconds: 3,
    });
    mgr = new JobManager({ process: 'p', store, keys, clock, rng: new SeededRng(3), log, agents: 1, leaseTtlSeconds: 3 });
    await mgr.start();
  });
  afterAll(async () => {
    await mgr.close();
    await mon.close();
    await store.close();
    rmSync(logDir, { recursive: true, force: true });
  });

  const tasksOf = async (id: string): Promise<LiveTaskRecord[]> => await taskRecords<LiveTaskRecord>(store, keys, id);

  it('runs argv, records exit codes and writes per-task stdout/stderr logs', async () => {
    const spec = job({
      name: 'exits',
      profile: 'spark-lr',
      tasks: 2,
      command: { argv: ['sh', '-c', 'echo "out-$TARCIL_TASK $GREETING"; echo "err-$TARCIL_TASK" >&2; exit $((TARCIL_TASK * 3))'], env: { GREETING: 'hello' } },
    });
    await mgr.accept(spec);
    await until('job final', async () => (await tasksOf(spec.id)).filter((t) => ['succeeded', 'failed'].includes(t.state)).length === 2);
    const tasks = (await tasksOf(spec.id)).sort((a, b) => a.index - b.index);
    expect(tasks.map((t) => [t.state, t.exitCode])).toEqual([
      ['succeeded', 0],
      ['failed', 3],
    ]);
    for (const t of tasks) {
      expect(t.logPath).toBeTruthy();
      expect(readFileSync(`${t.logPath!}.stdout`, 'utf8')).toBe(`out-${t.index} hello\n`);
      expect(readFileSync(`${t.logPath!}.stderr`, 'utf8')).toBe(`err-${t.index}\n`);
    }
    await until('job failed', async () => parseJson<{ state: string }>(await store.get(keys.job(spec.id)))?.state === 'failed');
  });

  it('pins to the RU core with taskset where available', async () => {
    const spec = job({ name: 'pinned', profile: 'spark-lr', tasks: 1, command: { argv: ['sh', '-c', 'cat /proc/self/status | grep Cpus_allowed_list'] } });
    await mgr.accept(spec);
    await until('task final', async () => (await tasksOf(spec.id))[0]?.state === 'succeeded');
    const t = (await tasksOf(spec.id))[0]!;
    const out = readFileSync(`${t.logPath!}.stdout`, 'utf8');
    if (hasTaskset()) expect(out.trim()).toMatch(/^Cpus_allowed_list:\s+\d+$/);
  });

  it('kills a running process on cancel and records the task cancelled', async () => {
    const spec = job({ name: 'sleeper', profile: 'spark-lr', tasks: 1, command: { argv: ['sleep', '60'] } });
    await mgr.accept(spec);
    await until('running', () => Promise.resolve(mon.monitor.snapshot().running.some((r) => r.job === spec.id && r.pid !== undefined)));
    const pid = mon.monitor.snapshot().running.find((r) => r.job === spec.id)!.pid!;
    expect(existsSync(`/proc/${pid}`)).toBe(true);
    await mgr.cancel(spec.id);
    await until('cancelled', async () => parseJson<{ state: string }>(await store.get(keys.job(spec.id)))?.state === 'cancelled');
    expect((await tasksOf(spec.id))[0]?.state).toBe('cancelled');
    await until('process gone', () => Promise.resolve(!existsSync(`/proc/${pid}`) || readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z')));
  });
});

/**
 * One 2-RU server whose tasks all see the slowdown `sd()` gives, and one job manager: the load
 * monitor's cell, with blocks on unless `block` is false (set here, not left to DEFAULT_RUNTIME;
 * 'default' leaves it). `blocked()` reads the server record as the store holds it.
 */
async function slowCell(id: string, sd: () => number, loadIntervalMs?: number, block: boolean | 'default' = true) {
  const store = new MemoryStore();
  const keys = new Keys(`/${id}/`);
  const mon = new LocalMonitor({
    store,
    keys,
    clock,
    log,
    server: { id, platform: 'r3-xlarge', rack: 'r0', rus: 2, speed: 1, attributes: {} },
    executor: new SimulatedExecutor(clock),
    leaseTtlSeconds: 3,
    ...(loadIntervalMs !== undefined ? { loadIntervalMs } : {}),
    slowdown: sd,
    ...(block !== 'default' ? { block } : {}),
  });
  await mon.start();
  const mgr = new JobManager({ process: id, store, keys, clock, rng: new SeededRng(5), log, agents: 1, leaseTtlSeconds: 3 });
  await mgr.start();
  return {
    store,
    keys,
    mgr,
    mon,
    blocked: async (): Promise<boolean> => parseJson<LiveServerRecord>(await store.get(keys.server(id)))?.blocked === true,
    close: async (): Promise<void> => {
      await mgr.close();
      await mon.close();
      await store.close();
    },
  };
}

describe('load monitor and node failure', () => {
  it('keeps a blocked server blocked until its tasks are back above the recovery share (hysteresis)', async () => {
    // The slowdown every task sees, changed by the test: 3 (a third of the rate), then 1/0.55
    // (between the 0.5 threshold and the 0.6 recovery share), then 1.
    let sd = 3;
    const cell = await slowCell('h', () => sd, 50);
    await cell.mgr.accept(job({ name: 'long', profile: 'memcached', tasks: 1, durationMs: 60_000 }));
    await until('server blocked', cell.blocked);
    sd = 1 / 0.55;
    await new Promise((r) => setTimeout(r, 400));
    expect(await cell.blocked()).toBe(true);
    sd = 1;
    await until('unblocked', async () => !(await cell.blocked()), 5000);
    await cell.close();
  });

  it('reports a task well below its expected rate and blocks its server until it recovers', async () => {
    // A model in which every co-located task runs at a third of its rate.
    const cell = await slowCell('slow', () => 3);
    const { store, keys, mgr } = cell;
    const spec = job({ name: 'slowpoke', profile: 'memcached', tasks: 1, durationMs: 300 });
    await mgr.accept(spec);
    await until('server blocked', cell.blocked);
    expect((await store.range(`${keys.prefix}reports/${spec.id}/`)).kvs.length).toBe(1);
    expect(mgr.agents[0]!.state.server('slow')?.blocked).toBe(true);
    // Stretched ×3: 300 ms of work takes about 900 ms; then the server accepts placements again.
    await until('unblocked', async () => !(await cell.blocked()), 5000);
    await until('job done', async () => parseJson<{ state: string }>(await store.get(keys.job(spec.id)))?.state === 'succeeded');
    expect((await store.range(`${keys.prefix}reports/`)).kvs.length).toBe(0);
    await cell.close();
  });

  it('with blocks off, reports the same slow task but never blocks the server that blocks with them on; left unset, as DEFAULT_RUNTIME says', async () => {
    for (const flag of [true, false, 'default'] as const) {
      const block = flag === 'default' ? DEFAULT_RUNTIME.block : flag;
      const cell = await slowCell(`sw-${flag}`, () => 3, 50, flag);
      try {
        const spec = job({ name: 'slow', profile: 'memcached', tasks: 1, durationMs: 60_000 });
        await cell.mgr.accept(spec);
        // The look that writes the report has decided the block already (node-load.ts).
        await until('reported', async () => (await cell.store.range(`${cell.keys.prefix}reports/${spec.id}/`)).kvs.length === 1);
        expect(cell.mon.snapshot().blocked).toBe(block);
        // More looks at the same slow task change nothing; the server record and the agents' view agree.
        await new Promise((r) => setTimeout(r, 300));
        expect(cell.mon.snapshot().blocked).toBe(block);
        const seen = (): boolean => cell.mgr.agents[0]!.state.server(`sw-${flag}`)?.blocked ?? false;
        if (block) {
          await until('server blocked', cell.blocked);
          await until('the agent sees it blocked', seen);
        }
        expect(await cell.blocked()).toBe(block);
        expect(seen()).toBe(block);
        await cell.mgr.cancel(spec.id);
      } finally {
        await cell.close();
      }
    }
  });

  it('a node that leaves: its tasks are recorded lost and placed again on another node', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/fail/');
    const mk = (id: string): LocalMonitor =>
      new LocalMonitor({
        store,
        keys,
        clock,
        log,
        server: { id, platform: 'r3-xlarge', rack: 'r0', rus: 4, speed: 1, attributes: {} },
        executor: new SimulatedExecutor(clock),
        leaseTtlSeconds: 2,
      });
    const a = mk('a');
    await a.start();
    const mgr = new JobManager({ process: 'f', store, keys, clock, rng: new SeededRng(9), log, agents: 1, leaseTtlSeconds: 2 });
    await mgr.start();
    const spec = job({ name: 'survivor', profile: 'spark-lr', tasks: 3, durationMs: 800 });
    await mgr.accept(spec);
    await until('running on a', () => Promise.resolve(a.snapshot().running.length === 3));
    const b = mk('b');
    await b.start();
    // Graceful close records the tasks lost and revokes the lease: the node leaves at once.
    await a.close();
    await until('job done', async () => parseJson<{ state: string }>(await store.get(keys.job(spec.id)))?.state === 'succeeded', 10_000);
    const tasks = await taskRecords<LiveTaskRecord>(store, keys, spec.id);
    expect(tasks.every((t) => t.state === 'succeeded' && t.ru?.server === 'b')).toBe(true);
    expect(mgr.stats.rescheduled).toBe(3);
    expect(parseJson<{ rescheduled?: number }>(await store.get(keys.job(spec.id)))?.rescheduled).toBe(3);
    await mgr.close();
    await b.close();
    await store.close();
  });
});

describe('a monitor whose store does not answer when a task should start', () => {
  it('looks at the RU again and starts the task once the store is back', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/launch-retry/');
    // The first two starts of a task (the monitor's transaction that writes it running, or only
    // compares its RU when the placement wrote that) fail as if etcd were restarting; no watch
    // event will come to say the RU is still busy.
    let failed = 0;
    const flaky = wrapStore(store, {
      txn: async (req) => {
        const fenceOnly = req.success.length === 1 && req.success[0]?.type === 'get' && req.compare.some((c) => c.key.includes('/rus/'));
        const starting = fenceOnly || req.success.some((op) => op.type === 'put' && op.key.includes('/tasks/') && op.value.includes('"state":"running"'));
        if (starting && failed < 2) {
          failed++;
          throw new TarcilError('UNAVAILABLE', 'etcd restarting (simulated)');
        }
        return store.txn(req);
      },
    });
    const mon = await startMonitor({
      store: flaky,
      keys,
      clock,
      log,
      server: { id: 'f0', platform: 'r3-2xlarge', rack: 'r0', rus: 2, speed: 1, attributes: {} },
      executor: 'simulated',
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: 3,
    });
    const mgr = new JobManager({ process: 'f', store, keys, clock, rng: new SeededRng(4), log, agents: 1, leaseTtlSeconds: 3 });
    await mgr.start();
    try {
      const spec = job({ name: 'retried', profile: 'spark-lr', tasks: 1, durationMs: 50 });
      await mgr.accept(spec);
      await until('job final', async () => parseJson<{ state: string }>(await store.get(keys.job(spec.id)))?.state === 'succeeded', 10_000);
      expect(failed).toBe(2);
      expect(mon.monitor.stats.started).toBe(1);
    } finally {
      await mgr.close();
      await mon.close();
      await store.close();
    }
  });
});

describe('load monitor with the process executor (CPU rate) and the monitor /metrics', () => {
  it('reports a task that gets no CPU, blocks its server, shows it in /metrics, and unblocks once it ends', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/cpu-rate/');
    const logDir = mkdtempSync(join(tmpdir(), 'tarcil-cpu-'));
    const mon = await startMonitor({
      store,
      keys,
      clock,
      log,
      server: { id: 'c0', platform: 'r3-2xlarge', rack: 'r0', rus: 4, speed: 1, attributes: {} },
      executor: 'process',
      cpuRate: true,
      loadThreshold: 0.5,
      block: true,
      host: '127.0.0.1',
      port: 0,
      logDir,
      leaseTtlSeconds: 3,
      metricsPort: 0,
    });
    const mgr = new JobManager({ process: 'c', store, keys, clock, rng: new SeededRng(6), log, agents: 1, leaseTtlSeconds: 3 });
    await mgr.start();
    try {
      const busy = job({ name: 'busy', profile: 'spark-lr', tasks: 1, command: { argv: ['sh', '-c', 'while :; do :; done'] } });
      const idle = job({ name: 'idle', profile: 'spark-lr', tasks: 1, command: { argv: ['sleep', '30'] } });
      await mgr.accept(busy);
      await mgr.accept(idle);
      const live = new LiveKeys(keys);
      await until('the idle task is reported', async () => (await store.get(live.report(idle.id, 0))) !== undefined, 10_000);
      const rep = parseJson<{ rate: number }>(await store.get(live.report(idle.id, 0)));
      expect(rep?.rate).toBeLessThan(0.1);
      await until('server blocked', async () => parseJson<LiveServerRecord>(await store.get(keys.server('c0')))?.blocked === true);
      const busyRun = mon.monitor.snapshot().running.find((r) => r.job === busy.id);
      expect(busyRun?.rate).toBeGreaterThan(0);
      const text = await (await fetch(`http://127.0.0.1:${mon.metricsPort ?? 0}/metrics`)).text();
      expect(text).toContain('tarcil_monitor_blocked{server="c0",platform="r3-2xlarge"} 1');
      expect(text).toContain('tarcil_monitor_running_tasks{server="c0",platform="r3-2xlarge"} 2');
      expect(text).toMatch(/tarcil_monitor_task_events_total\{server="c0",platform="r3-2xlarge",event="started"\} 2/);
      await mgr.cancel(idle.id);
      await mgr.cancel(busy.id);
      await until('server unblocked', async () => parseJson<LiveServerRecord>(await store.get(keys.server('c0')))?.blocked === false);
      const states = async (): Promise<string[]> =>
        Promise.all([busy.id, idle.id].map(async (id) => parseJson<{ state: string }>(await store.get(keys.job(id)))?.state ?? ''));
      await until('both cancelled', async () => (await states()).every((st) => st === 'cancelled'));
      expect(mon.monitor.snapshot().running).toEqual([]);
    } finally {
      await mgr.close();
      await mon.close();
      await store.close();
      rmSync(logDir, { recursive: true, force: true });
    }
  });
});
