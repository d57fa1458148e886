/**
 * `tarcil node cordon|drain|uncordon` on a real etcd: a front-end and two monitors in this process
 * (a, b). A cordon keeps new placements away, outlives the monitor's re-registration and shows in
 * GetCluster; a drain lets tasks that end by themselves end, and stops those still running at its
 * deadline so that their owner places them again elsewhere; uncordon reverses both; bad requests
 * write nothing; a node that shuts down shows as down instead of vanishing.
 */
import * as grpc from '@grpc/grpc-js';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { Cluster__Output } from '../../src/rpc/gen/tarcil/v1/Cluster.ts';
import type { Explanation__Output } from '../../src/rpc/gen/tarcil/v1/Explanation.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { Server__Output } from '../../src/rpc/gen/tarcil/v1/Server.ts';
import type { SetNodeSchedulingRequest } from '../../src/rpc/gen/tarcil/v1/SetNodeSchedulingRequest.ts';
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
import { getJob, submit, waitFinal } from '../support/live.ts';
import { parseJson } from '../../src/state/records.ts';
import type { CordonRecord } from '../../src/state/live-records.ts';

const keys = new Keys(`/node-drain-${process.pid}/`);
const clock = new SystemClock();
const log = createLogger('test');
const spec = (id: string): ServerSpec => ({ id, platform: 'r3-2xlarge', rack: 'r0', rus: 2, speed: 1, attributes: {} });
let store: ClusterStore;
let sched: SchedulerProcess;
let c: SchedulerClient;
const monitors = new Map<string, MonitorProcess>();

async function startNode(id: string): Promise<void> {
  monitors.set(id, await startMonitor({ store, keys, clock, log, server: spec(id), executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: 3 }));
}

beforeAll(async () => {
  store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
  await startNode('a');
  await startNode('b');
  sched = await startScheduler({
    name: 'nd',
    store,
    keys,
    catalog: loadCatalog(),
    clock,
    rng: new SeededRng(4),
    log,
    agents: 1,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: 3,
  });
  c = schedulerClient(`127.0.0.1:${sched.port}`);
});
afterAll(async () => {
  c?.close();
  await sched?.close();
  for (const m of monitors.values()) await m.close();
  await store?.close();
});

const BIN = join(import.meta.dirname, '..', '..', 'src', 'cli', 'bin.js');

/** Runs `tarcil args` without blocking this process (whose front-end it talks to). */
function tarcil(args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args, '--server', `127.0.0.1:${sched.port}`],
      { encoding: 'utf8', env: { ...process.env, TARCIL_LOG: 'silent' } },
      (err, stdout, stderr) => {
        resolve({ status: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, f: () => Promise<T | undefined | false> | T | undefined | false, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

function setNode(req: SetNodeSchedulingRequest): Promise<Server__Output> {
  return new Promise((resolve, reject) =>
    c.SetNodeScheduling(req, { deadline: new Date(Date.now() + 10_000) }, (err, res) => (err || !res ? reject(err ?? new Error('empty')) : resolve(res))),
  );
}

function cluster(): Promise<Cluster__Output> {
  return new Promise((resolve, reject) => c.GetCluster({}, (err, res) => (err || !res ? reject(err ?? new Error('empty')) : resolve(res))));
}

function explain(jobId: string): Promise<Explanation__Output> {
  return new Promise((resolve, reject) => c.ExplainJob({ jobId }, (err, res) => (err || !res ? reject(err ?? new Error('empty')) : resolve(res))));
}

const server = async (id: string): Promise<Server__Output | undefined> => (await cluster()).servers.find((s) => s.id === id);
/** The front-end's agents have seen the cordon (or its end). */
const seen = (id: string, cordoned: boolean): Promise<true> =>
  until(`the agents see ${id} ${cordoned ? 'cordoned' : 'uncordoned'}`, () => sched.manager.view.state.server(id)?.cordoned === cordoned || undefined);

async function serversOf(jobId: string): Promise<string[]> {
  const j = await getJob(c, jobId);
  return j.taskList.map((t) => t.ru?.server ?? '');
}

describe('tarcil node cordon / uncordon', () => {
  it('a cordoned node takes no new placement, also after its monitor registers again; uncordon lets placements back', async () => {
    const s = await setNode({ server: 'a', action: 'cordon', reason: 'disk check' });
    expect(s).toMatchObject({ id: 'a', state: 'cordoned', cordoned: true, draining: false, cordonReason: 'disk check' });
    // Answered once this front-end's agents see it: nothing they decide from now on goes there.
    expect(sched.manager.view.state.server('a')?.cordoned).toBe(true);
    // Two tasks of 1 s: a cell of 4 RUs would spread them; only b takes them.
    const j1 = await submit(c, { specJson: JSON.stringify({ name: 'cordon-1', profile: 'spark-lr', tasks: 2, durationMs: 200 }) });
    expect((await waitFinal(c, j1.jobId)).state).toBe('succeeded');
    expect(await serversOf(j1.jobId)).toEqual(['b', 'b']);

    // The monitor of a restarts: it registers again (a new lease, its server record rewritten).
    await monitors.get('a')!.close();
    await until('a gone from the store', async () => (await store.get(keys.server('a'))) === undefined || undefined);
    await startNode('a');
    await until('a registered again', async () => (await server('a'))?.endpoint !== '' || undefined);
    expect(await server('a')).toMatchObject({ state: 'cordoned', cordoned: true });
    await seen('a', true);
    const j2 = await submit(c, { specJson: JSON.stringify({ name: 'cordon-2', profile: 'spark-lr', tasks: 2, durationMs: 200 }) });
    expect((await waitFinal(c, j2.jobId)).state).toBe('succeeded');
    expect(await serversOf(j2.jobId)).toEqual(['b', 'b']);

    expect(await setNode({ server: 'a', action: 'uncordon', reason: '' })).toMatchObject({ id: 'a', state: 'up', cordoned: false });
    expect(await store.get(keys.cordon('a'))).toBeUndefined();
    expect(sched.manager.view.state.server('a')?.cordoned).toBe(false);
    // Now 4 tasks need both servers.
    const j3 = await submit(c, { specJson: JSON.stringify({ name: 'cordon-3', profile: 'spark-lr', tasks: 4, durationMs: 300 }) });
    expect((await waitFinal(c, j3.jobId)).state).toBe('succeeded');
    expect((await serversOf(j3.jobId)).sort()).toEqual(['a', 'a', 'b', 'b']);
  }, 60_000);

  it('refuses a bad request naming the field, and writes nothing', async () => {
    const bad: [SetNodeSchedulingRequest, grpc.status, RegExp][] = [
      [{ server: 'nosuch', action: 'cordon' }, grpc.status.NOT_FOUND, /^server: no server 'nosuch' in the cell/],
      [{ server: '', action: 'cordon' }, grpc.status.INVALID_ARGUMENT, /^server: is required/],
      [{ server: 'a/../b', action: 'cordon' }, grpc.status.INVALID_ARGUMENT, /^server: must be a server id/],
      [{ server: 'a', action: 'evict' }, grpc.status.INVALID_ARGUMENT, /^action: must be one of cordon, drain, uncordon \(got "evict"\)/],
      [{ server: 'a', action: 'cordon', deadlineMs: 1000 }, grpc.status.INVALID_ARGUMENT, /^deadline_ms: applies to drain only/],
      [{ server: 'a', action: 'drain', deadlineMs: -1 }, grpc.status.INVALID_ARGUMENT, /^deadline_ms: must be a duration from 0 to 7 days/],
      [{ server: 'a', action: 'drain', deadlineMs: 8 * 86_400_000 }, grpc.status.INVALID_ARGUMENT, /^deadline_ms: must be a duration from 0 to 7 days/],
      [{ server: 'a', action: 'cordon', reason: 'x'.repeat(257) }, grpc.status.INVALID_ARGUMENT, /^reason: must be at most 256 characters/],
    ];
    for (const [req, code, re] of bad) {
      const err = (await setNode(req).catch((e: unknown) => e)) as grpc.ServiceError;
      expect(err.code, JSON.stringify(req)).toBe(code);
      expect(err.details).toMatch(re);
    }
    expect((await store.range(keys.cordons())).kvs).toEqual([]);
  });
});

describe('tarcil node drain', () => {
  it('tasks that end before the deadline end there; the node then shows drained', async () => {
    await setNode({ server: 'b', action: 'cordon', reason: '' });
    await seen('b', true);
    const j = await submit(c, { specJson: JSON.stringify({ name: 'drain-short', profile: 'spark-lr', tasks: 2, durationMs: 1500 }) });
    await until('both tasks running on a', async () => {
      const t = await getJob(c, j.jobId);
      return t.taskStates.running === 2 || undefined;
    });
    await setNode({ server: 'b', action: 'uncordon', reason: '' });
    const s = await setNode({ server: 'a', action: 'drain', deadlineMs: 3_600_000, reason: 'kernel update' });
    expect(s).toMatchObject({ state: 'draining', draining: true, cordoned: true, busy: 2, cordonReason: 'kernel update' });
    expect(s.drainDeadlineMs).toBeGreaterThan(Date.now() + 3_500_000);
    const done = await waitFinal(c, j.jobId);
    expect(done.state).toBe('succeeded');
    for (const t of done.taskList) expect(t, 'ran once, where it was').toMatchObject({ attempt: 0, ru: { server: 'a' } });
    await until('a drained', async () => (await server('a'))?.state === 'drained' || undefined);
    await setNode({ server: 'a', action: 'uncordon', reason: '' });
    await seen('a', false);
  }, 60_000);

  it('at the deadline the tasks still running are stopped and placed again on another node; explain says why', async () => {
    await setNode({ server: 'b', action: 'cordon', reason: '' });
    await seen('b', true);
    const j = await submit(c, { specJson: JSON.stringify({ name: 'drain-long', profile: 'spark-lr', tasks: 2, durationMs: 3000 }) });
    await until('both tasks running on a', async () => (await getJob(c, j.jobId)).taskStates.running === 2 || undefined);
    await setNode({ server: 'b', action: 'uncordon', reason: '' });
    await seen('b', false);
    await setNode({ server: 'a', action: 'drain', deadlineMs: 300, reason: 'rack move' });
    const e = await explain(j.jobId);
    expect(e.text).toMatch(/nodes taking no new placements \(tarcil node\): a \(draining, deadline \d\d:\d\d:\d\d UTC: rack move\)/);
    const done = await waitFinal(c, j.jobId);
    expect(done.state).toBe('succeeded');
    for (const t of done.taskList) {
      expect(t).toMatchObject({ attempt: 1, ru: { server: 'b' } });
      expect(t.previous).toHaveLength(1);
      expect(t.previous[0]).toMatchObject({ state: 'lost', ru: { server: 'a' } });
      expect(t.previous[0]!.message).toMatch(/^node a drained: the deadline passed before the task ended/);
    }
    expect(await server('a')).toMatchObject({ state: 'drained', busy: 0 });
    expect(await setNode({ server: 'a', action: 'uncordon', reason: '' })).toMatchObject({ state: 'up', draining: false });
  }, 60_000);
});

describe('a node that shuts down', () => {
  it('stays in GetCluster as down, with when it left, instead of vanishing', async () => {
    await startNode('c');
    await until('c registered', async () => (await server('c'))?.state === 'up' || undefined);
    const before = Date.now();
    await monitors.get('c')!.close();
    monitors.delete('c');
    await until('c no longer registered', async () => (await store.get(keys.server('c'))) === undefined || undefined);
    const s = await until('c shown as down', async () => {
      const x = await server('c');
      return x?.state === 'down' && x.leftAtMs > 0 ? x : undefined;
    });
    expect(s.leftAtMs).toBeGreaterThanOrEqual(before - 1000);
    expect(s.rus.every((r) => r.state === 'down')).toBe(true);
    const cl = await cluster();
    expect(cl.down).toBeGreaterThanOrEqual(2);
    // A node that left can still be cordoned (it will not take placements when it comes back).
    expect(await setNode({ server: 'c', action: 'cordon', reason: '' })).toMatchObject({ id: 'c', state: 'down', cordoned: true });
    await setNode({ server: 'c', action: 'uncordon', reason: '' });
  }, 60_000);
});

describe('the tarcil node command', () => {
  it('cordons, drains and uncordons, saying what it did; a bad deadline is refused by name', async () => {
    const cordon = await tarcil(['node', 'cordon', 'b', '--reason', 'bios update']);
    expect(cordon.status).toBe(0);
    expect(cordon.stdout).toBe('node b cordoned: no new placements; nothing runs there (undo: tarcil node uncordon b)\n');
    expect(parseJson<CordonRecord>(await store.get(keys.cordon('b')))).toMatchObject({ server: 'b', mode: 'cordon', reason: 'bios update', by: 'nd' });
    const table = await tarcil(['cluster']);
    expect(table.stdout).toMatch(/\bb\b.*\bcordoned\b/);
    expect(table.stdout).toContain('node b cordoned: bios update\n');
    expect(table.stdout).toMatch(/node c left the cell at \d\d:\d\d:\d\d UTC \(not registered now\)/);
    const drain = await tarcil(['node', 'drain', 'b', '--deadline', '90s', '--json']);
    expect(JSON.parse(drain.stdout)).toMatchObject({ id: 'b', state: 'drained', draining: true });
    const bad = await tarcil(['node', 'drain', 'b', '--deadline', '9d']);
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toContain("--deadline must be a duration such as 1500ms, 90s, 30m or 1h (a bare number is seconds), at most 168h (got '9d')");
    const unknown = await tarcil(['node', 'cordon', 'zz']);
    expect(unknown.status).not.toBe(0);
    expect(unknown.stderr).toContain("server: no server 'zz' in the cell");
    // --wait: returns once the tasks that ran there were stopped at the deadline and moved.
    await tarcil(['node', 'cordon', 'a']);
    await setNode({ server: 'b', action: 'uncordon', reason: '' });
    const j = await submit(c, { specJson: JSON.stringify({ name: 'cli-wait', profile: 'spark-lr', tasks: 2, durationMs: 60_000 }) });
    await until('both tasks running on b', async () => (await getJob(c, j.jobId)).taskStates.running === 2 || undefined);
    await setNode({ server: 'a', action: 'uncordon', reason: '' });
    const waited = await tarcil(['node', 'drain', 'b', '--deadline', '1s', '--wait']);
    expect(waited.status).toBe(0);
    expect(waited.stdout).toMatch(
      /^node b draining: no new placements; its 2 tasks finish, or at \d\d:\d\d:\d\d UTC \(deadline 1s\) are stopped and placed elsewhere/,
    );
    expect(waited.stdout).toMatch(/node b drained: no task runs there\n$/);
    // Stopped at the deadline (recorded lost), then placed again by the owner, on a.
    await until('both tasks placed again on a', async () => {
      const j2 = await getJob(c, j.jobId);
      return j2.taskList.every((t) => (t.state === 'placed' || t.state === 'running') && t.ru?.server === 'a') || undefined;
    });
    expect((await serversOf(j.jobId)).sort()).toEqual(['a', 'a']);
    await new Promise<void>((resolve, reject) => c.CancelJob({ jobId: j.jobId }, (err) => (err ? reject(err) : resolve())));
    const un = await tarcil(['node', 'uncordon', 'b']);
    expect(un.stdout).toBe('node b uncordoned: it takes new placements again\n');
    expect(await store.get(keys.cordon('b'))).toBeUndefined();
  }, 60_000);
});
