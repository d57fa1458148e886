import type * as grpc from '@grpc/grpc-js';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { submitCommand } from '../../src/cli/client.ts';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import { executorMix, executorWarnings } from '../../src/frontend/executor-fit.ts';
import type { Explanation__Output } from '../../src/rpc/gen/tarcil/v1/Explanation.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { SubmitJobResponse__Output } from '../../src/rpc/gen/tarcil/v1/SubmitJobResponse.ts';
import type { Cluster__Output } from '../../src/rpc/gen/tarcil/v1/Cluster.ts';
import { startScheduler } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import type { LiveServerRecord } from '../../src/state/live-records.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { failure, unary } from '../support/live.ts';
import { until } from '../support/until.ts';

const SPARK = readFileSync(new URL('../../profiles/jobs/spark-lr.json', import.meta.url), 'utf8');
const COMMAND = JSON.stringify({
  ...(JSON.parse(readFileSync(new URL('../../profiles/jobs/inline-command.json', import.meta.url), 'utf8')) as object),
  command: { argv: ['true'] },
});

const rec = (id: string, executor?: string): LiveServerRecord => ({
  id,
  platform: 'r3-2xlarge',
  rack: 'r0',
  rus: 2,
  speed: 1,
  attributes: {},
  state: 'up',
  ...(executor ? { executor } : {}),
});

describe('what the cell’s executors make of a spec (the rule)', () => {
  const mix = (...e: (string | undefined)[]): ReturnType<typeof executorMix> => executorMix(e.map((x, i) => rec(`s${i}`, x)));

  it('refuses a spec without a command when every node runs the process executor, naming the field and the rule', () => {
    let err: unknown;
    try {
      executorWarnings({}, mix('process', 'process'));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TarcilError);
    expect((err as TarcilError).code).toBe('INVALID_ARGUMENT');
    expect((err as TarcilError).field).toBe('command');
    expect((err as TarcilError).message).toMatch(/^command: is required in this cell: its 2 servers all run the process executor/);
    expect(() => executorWarnings({}, mix('process'))).toThrow(/its one server runs the process executor/);
  });

  it('warns of a command no node runs, or of tasks without one where some node needs one; says nothing when the cell fits or does not say', () => {
    const cmd = { command: { argv: ['true'] } };
    expect(executorWarnings(cmd, mix('simulated', 'simulated', 'simulated'))).toEqual([
      expect.stringMatching(/^command: not run in this cell: its 3 servers all run the simulated executor/),
    ]);
    expect(executorWarnings(cmd, mix('simulated', 'process'))).toEqual([
      expect.stringMatching(/^command: 1 of this cell's 2 servers run the simulated executor/),
    ]);
    expect(executorWarnings({}, mix('simulated', 'process', 'process'))).toEqual([
      expect.stringMatching(/^command: none given, and 2 of this cell's 3 servers run the process executor/),
    ]);
    expect(executorWarnings(cmd, mix('process', 'process'))).toEqual([]);
    expect(executorWarnings({}, mix('simulated'))).toEqual([]);
    // No node registered, or none that says what it runs: nothing is judged.
    expect(executorWarnings({}, mix())).toEqual([]);
    expect(executorWarnings(cmd, mix(undefined, undefined))).toEqual([]);
    // A node that does not say keeps an all-process cell from refusing (it may run anything).
    expect(executorWarnings({}, mix('process', undefined))).toEqual([expect.stringMatching(/none given, and 1 of this cell's 2 servers/)]);
  });
});

describe('SubmitJob and explain against live nodes of each executor', () => {
  const dirs: string[] = [];
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of closers.reverse()) await c();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** A cell on the embedded store with one node of 2 RUs per executor given, and its client. */
  async function cell(executors: ('simulated' | 'process')[]): Promise<{ c: SchedulerClient; port: number }> {
    const store = new MemoryStore();
    const keys = new Keys('/fit/');
    const clock = new SystemClock();
    const log = createLogger('test', 'silent');
    const logDir = mkdtempSync(join(tmpdir(), 'tarcil-fit-'));
    dirs.push(logDir);
    const monitors: MonitorProcess[] = [];
    closers.push(async () => {
      await Promise.all(monitors.map((m) => m.close()));
      await store.close();
    });
    for (const [i, executor] of executors.entries()) {
      monitors.push(
        await startMonitor({
          store,
          keys,
          clock,
          log,
          server: { id: `${executor}-${i}`, platform: 'r3-2xlarge', rack: 'r0', rus: 2, speed: 1, attributes: {} },
          executor,
          host: '127.0.0.1',
          port: 0,
          leaseTtlSeconds: 3,
          logDir: join(logDir, String(i)),
        }),
      );
    }
    const sched = await startScheduler({
      name: 'fit',
      store,
      keys,
      catalog: loadCatalog(),
      clock,
      rng: new SeededRng(1),
      log,
      agents: 1,
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: 3,
    });
    const c = schedulerClient(`127.0.0.1:${sched.port}`);
    closers.push(async () => {
      c.close();
      await sched.close();
    });
    await until('the nodes registered', async () => (await unary<object, Cluster__Output>(c, 'GetCluster', {})).servers.length === executors.length);
    return { c, port: sched.port };
  }
  const submit = (c: SchedulerClient, specJson: string): Promise<SubmitJobResponse__Output> => unary(c, 'SubmitJob', { specJson });
  const explain = (c: SchedulerClient, jobId: string): Promise<Explanation__Output> => unary(c, 'ExplainJob', { jobId });

  it('a process cell refuses a spec without a command (INVALID_ARGUMENT, field command) and takes one with a command without a warning', async () => {
    const { c } = await cell(['process', 'process']);
    const err: grpc.ServiceError = await failure(submit(c, SPARK));
    expect(err.code).toBe(3); // INVALID_ARGUMENT
    expect(err.details).toMatch(/^command: is required in this cell: its 2 servers all run the process executor/);
    const ok = await submit(c, COMMAND);
    expect(ok.jobId).not.toBe('');
    expect(ok.warnings).toEqual([]);
    expect((await explain(c, ok.jobId)).text).not.toContain('warning:');
  });

  it('a simulated cell takes a command with a warning in the answer, in explain and on the command line; a spec without one with none', async () => {
    const { c, port } = await cell(['simulated']);
    const res = await submit(c, COMMAND);
    expect(res.warnings).toEqual([expect.stringMatching(/^command: not run in this cell: its one server runs the simulated executor/)]);
    expect((await explain(c, res.jobId)).text).toMatch(/\nwarning: command: not run in this cell/);
    const plain = await submit(c, SPARK);
    expect(plain.warnings).toEqual([]);
    expect((await explain(c, plain.jobId)).text).not.toContain('warning:');

    // `tarcil submit` prints the warning on stderr, the job id on stdout.
    const dir = mkdtempSync(join(tmpdir(), 'tarcil-fit-spec-'));
    dirs.push(dir);
    const file = join(dir, 'cmd.json');
    writeFileSync(file, COMMAND);
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const out: string[] = [];
    let written = '';
    try {
      await submitCommand(file, { server: `127.0.0.1:${port}`, timeout: 10_000, wait: false }, (s) => out.push(s));
      written = err.mock.calls.map((x) => String(x[0])).join('');
    } finally {
      err.mockRestore();
    }
    expect(out.join('\n')).toMatch(/^submitted j-/);
    expect(written).toMatch(/^warning: command: not run in this cell/);
  });

  it('a mixed cell takes a spec without a command, saying that a task placed on a process node fails', async () => {
    const { c } = await cell(['simulated', 'process']);
    const res = await submit(c, SPARK);
    expect(res.warnings).toEqual([expect.stringMatching(/^command: none given, and 1 of this cell's 2 servers run the process executor/)]);
  });
});
