import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { MonitorMetrics } from '../../src/node/metrics.ts';
import { N_RESOURCES, type RuRecord, type ServerSpec } from '../../src/model/types.ts';
import { ProcessExecutor, SimulatedExecutor, type Executor } from '../../src/monitor/executor.ts';
import { LocalMonitor } from '../../src/monitor/monitor.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveServerRecord, LiveTaskRecord } from '../../src/state/live-records.ts';
import { lastOfFreedRu, parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { history } from '../support/audit.ts';
import { tcpProxy, type TcpProxy } from '../support/proxy.ts';
import { until as pollUntil } from '../support/until.ts';
import { reportedTask } from '../support/task-records.ts';
import { isChunkKey } from '../../src/state/task-chunks.ts';

/**
 * Issue 15, the node monitor's side: outcomes are journalled and written once the store answers,
 * a monitor rides out an outage shorter than its grace (tasks keep running, adopted under a new
 * lease), kills its tasks when the grace runs out, reports after its own restart what finished
 * before it, and counts as killed only what it killed.
 *
 * Each monitor reaches the test's etcd through a TCP proxy that can cut its connection (etcd keeps
 * running, so a cut longer than the TTL lets etcd expire the lease); the test reads and places
 * through its own direct connection, placing tasks as an agent would (RU record busy without a
 * lease, task record placed), with no job owner that could record a task lost or place it again:
 * whatever happens to a task here is the monitor's doing. Process-executor tasks append to an
 * execution record of their own, so a second run shows there whatever etcd says.
 */
const TTL = 2;
const clock = new SystemClock();
const log = createLogger('outage');
const etcdUrl = (): string => inject('etcdEndpoint').replace('http://', 'etcd://');
const etcdPort = (): number => Number(new URL(inject('etcdEndpoint')).port);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> => pollUntil(what, cond, ms, 25);

const cleanup: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

interface Node {
  proxy: TcpProxy;
  store: ClusterStore;
  mon: LocalMonitor;
}

/** A test cell: a direct store, a key prefix, and a scratch directory. */
async function cell(name: string): Promise<{ direct: ClusterStore; keys: Keys; dir: string; startRev: number }> {
  const direct = await openStore(etcdUrl());
  const dir = mkdtempSync(join(tmpdir(), `tarcil-outage-${name}-`));
  cleanup.push(
    () => direct.close(),
    () => rmSync(dir, { recursive: true, force: true }),
  );
  return { direct, keys: new Keys(`/outage-${name}-${Date.now()}/`), dir, startRev: await direct.revision() };
}

const server = (id: string, rus = 2): ServerSpec => ({ id, platform: 'r3-xlarge', rack: 'r0', rus, speed: 1, attributes: {} });

/** A monitor on its own etcd connection, through a proxy the test can cut. */
async function monitor(keys: Keys, spec: ServerSpec, executor: Executor, extra: { graceMs: number; journalDir?: string }): Promise<Node> {
  const proxy = await tcpProxy(etcdPort());
  const store = await openStore(`etcd://127.0.0.1:${proxy.port}`);
  const mon = new LocalMonitor({
    store,
    keys,
    clock,
    log,
    server: spec,
    executor,
    leaseTtlSeconds: TTL,
    disconnectGraceMs: extra.graceMs,
    ...(extra.journalDir ? { journalDir: extra.journalDir } : {}),
  });
  await mon.start();
  cleanup.push(
    () => proxy.close(),
    () => store.close(),
    async () => {
      proxy.heal();
      await mon.close().catch(() => undefined);
    },
  );
  return { proxy, store, mon };
}

let seq = 0;
/** Places task 0 of a new job on an RU as an agent's commit would. */
async function place(
  direct: ClusterStore,
  keys: Keys,
  srv: string,
  ru: number,
  o: { durationMs?: number; argv?: string[] },
): Promise<{ job: string; commitId: string }> {
  const job = `j${++seq}-${Date.now().toString(36)}`;
  const commitId = `c-${job}`;
  const now = Date.now();
  if (o.argv) {
    const spec = { id: job, name: job, command: { argv: o.argv } };
    await direct.put(keys.job(job), JSON.stringify({ spec, state: 'placed', placed: 1, updatedAt: now, submittedAt: now }));
  }
  const ruKey = keys.ru({ server: srv, index: ru });
  const cur = await direct.get(ruKey);
  const rec: PlacedRuRecord = {
    state: 'busy',
    job,
    task: 0,
    caused: new Array<number>(N_RESOURCES).fill(0.1),
    priority: 0,
    agent: 'test',
    since: now,
    attempt: 0,
    basedOn: 0,
    commitId,
    ...(o.durationMs !== undefined ? { durationMs: o.durationMs } : {}),
  };
  const task = { job, index: 0, state: 'placed', ru: { server: srv, index: ru }, attempt: 0, placedAt: now, basedOn: 0, commitId, agent: 'test' };
  const commit = {
    compare: [{ key: ruKey, target: 'mod' as const, op: '==' as const, value: cur?.modRevision ?? 0 }],
    success: [
      { type: 'put' as const, key: ruKey, value: JSON.stringify(rec) },
      { type: 'put' as const, key: keys.task(job, 0), value: JSON.stringify(task) },
    ],
  };
  // The test's own setup, not what it checks: a commit whose answer a loaded etcd did not give in
  // time is looked up (it may have landed) and sent again if it did not.
  const landed = async (): Promise<boolean> => parseJson<PlacedRuRecord>(await direct.get(ruKey))?.commitId === commitId;
  for (let attempt = 1; ; attempt++) {
    try {
      expect((await direct.txn(commit)).succeeded || (attempt > 1 && (await landed()))).toBe(true);
      break;
    } catch (err) {
      if (attempt >= 3 || !(err instanceof TarcilError) || err.code !== 'UNAVAILABLE') throw err;
      if (await landed()) break;
    }
  }
  return { job, commitId };
}

/** Task 0's record, or the outcome its freed RU carries (a success is recorded there alone: no owner runs here). */
const taskOf = async (direct: ClusterStore, keys: Keys, job: string, from: number): Promise<LiveTaskRecord | undefined> =>
  reportedTask(direct, keys, job, 0, from);
/** Every state the task went through, from the store's history: its record's, and the outcomes its freed RU carried. */
async function statesOf(direct: ClusterStore, keys: Keys, job: string, from: number): Promise<string[]> {
  const tasks = await history(direct, keys.tasks(job), from + 1);
  const rus = (await history(direct, keys.rus(), from + 1)).filter((ev) => {
    const last = ev.type === 'put' ? lastOfFreedRu(ev.kv.value) : undefined;
    // A failure or a loss is in the task record too (src/state/release.ts).
    return last?.job === job && (last.state === 'succeeded' || last.state === 'cancelled');
  });
  const evs = [...tasks, ...rus].sort((a, b) => a.kv.modRevision - b.kv.modRevision);
  // A chunk record (src/state/task-chunks.ts) is the record `running` of the tasks it started.
  return evs.map((ev) => {
    if (ev.kv.key.startsWith(keys.rus())) return String(lastOfFreedRu(ev.kv.value)?.state);
    return ev.type === 'put' && isChunkKey(ev.kv.key) ? 'running' : (parseJson<LiveTaskRecord>(ev.kv)?.state ?? 'deleted');
  });
}
/** A shell task that records its runs in `file`: a start line, then (if not killed) an end line. */
const recorded = (file: string, sleepS: number): string[] => ['sh', '-c', `echo start >> ${file}; sleep ${sleepS}; echo end >> ${file}`];
/**
 * A shell task that records its start in `file`, runs until the test creates `gate`, then records
 * its end: it ends when the test says so, however late a loaded machine lets the test look.
 */
const gated = (file: string, gate: string): string[] => ['sh', '-c', `echo start >> ${file}; while [ ! -e ${gate} ]; do sleep 0.05; done; echo end >> ${file}`];
const open = (gate: string): void => writeFileSync(gate, '');
const lines = (file: string): string[] =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
    : [];
const alive = (pid: number): boolean => existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z');
const ruState = async (direct: ClusterStore, keys: Keys, srv: string, ru: number): Promise<string | undefined> =>
  parseJson<RuRecord>(await direct.get(keys.ru({ server: srv, index: ru })))?.state;
const leaseOf = async (direct: ClusterStore, keys: Keys, id: string): Promise<string | undefined> => (await direct.get(keys.server(id)))?.lease;

describe('a node monitor through an etcd outage', () => {
  it('a task that exits while etcd is unreachable has its outcome written once etcd is back, never lost, never run again', async () => {
    const c = await cell('exit');
    const runs = join(c.dir, 'runs');
    const node = await monitor(c.keys, server('e0'), new ProcessExecutor({ clock, logDir: join(c.dir, 'logs') }), { graceMs: 10_000 });
    const lease0 = await leaseOf(c.direct, c.keys, 'e0');
    const gate = join(c.dir, 'gate');
    const { job } = await place(c.direct, c.keys, 'e0', 0, { argv: gated(runs, gate) });
    // Started by the monitor, not only recorded running: the record is in the store a moment
    // before the monitor reads its answer and starts the process, and a partition in between
    // would cut that answer off.
    await until('running', () => node.mon.snapshot().running.some((r) => r.job === job && r.pid !== undefined));

    node.proxy.partition();
    open(gate);
    await until('the task exited', () => lines(runs).includes('end'));
    await until('its outcome is journalled', () => node.mon.snapshot().journalled === 1);
    // The outage outlives the lease: etcd expires it (the server record goes).
    await until('etcd expired the lease', async () => (await leaseOf(c.direct, c.keys, 'e0')) === undefined);
    expect((await taskOf(c.direct, c.keys, job, c.startRev))?.state).toBe('running');
    node.proxy.heal();

    await until('outcome written', async () => (await taskOf(c.direct, c.keys, job, c.startRev))?.state === 'succeeded');
    await until('registered again', async () => (await leaseOf(c.direct, c.keys, 'e0')) !== undefined);
    await sleep(500);
    expect(await leaseOf(c.direct, c.keys, 'e0')).not.toBe(lease0);
    expect(await statesOf(c.direct, c.keys, job, c.startRev)).toEqual(['placed', 'running', 'succeeded']);
    expect((await taskOf(c.direct, c.keys, job, c.startRev))?.exitCode).toBe(0);
    expect(lines(runs)).toEqual(['start', 'end']);
    expect(node.mon.stats).toMatchObject({ started: 1, completed: 1, killed: 0, lost: 0 });
    expect(node.mon.snapshot().journalled).toBe(0);
    expect(await ruState(c.direct, c.keys, 'e0', 0)).toBe('free');
  }, 40_000);

  it('an outage shorter than the grace keeps the task running; the monitor adopts it under a new lease and records its outcome once', async () => {
    const c = await cell('adopt');
    const runs = join(c.dir, 'runs');
    const node = await monitor(c.keys, server('a0'), new ProcessExecutor({ clock, logDir: join(c.dir, 'logs') }), { graceMs: 10_000 });
    const lease0 = await leaseOf(c.direct, c.keys, 'a0');
    const gate = join(c.dir, 'gate');
    const { job, commitId } = await place(c.direct, c.keys, 'a0', 1, { argv: gated(runs, gate) });
    await until('running', () => node.mon.snapshot().running.some((r) => r.job === job && r.pid !== undefined));
    const pid = node.mon.snapshot().running[0]!.pid!;

    node.proxy.partition();
    await until('etcd expired the lease', async () => (await leaseOf(c.direct, c.keys, 'a0')) === undefined);
    await sleep(700);
    // Past the lease, within the grace: the task still runs, and the node starts nothing new.
    expect(alive(pid)).toBe(true);
    expect(node.mon.snapshot()).toMatchObject({ connected: false, running: [expect.objectContaining({ job, pid })] });
    node.proxy.heal();

    await until('registered under a new lease', async () => {
      const l = await leaseOf(c.direct, c.keys, 'a0');
      return l !== undefined && l !== lease0;
    });
    // The registration is in the store a moment before the monitor has read its answer.
    await until('adopted under the new lease', () => node.mon.stats.adopted > 0);
    expect(node.mon.stats.adopted).toBe(1);
    expect(alive(pid)).toBe(true);
    const ru = parseJson<PlacedRuRecord>(await c.direct.get(c.keys.ru({ server: 'a0', index: 1 })));
    expect(ru).toMatchObject({ state: 'busy', job, commitId });
    expect((await taskOf(c.direct, c.keys, job, c.startRev))?.state).toBe('running');
    // Read until present: on a loaded machine the 2-s lease can lapse again and the record come back.
    let srv: LiveServerRecord | undefined;
    await until('the server record', async () => (srv = parseJson<LiveServerRecord>(await c.direct.get(c.keys.server('a0')))) !== undefined);
    expect(srv?.disconnectGraceMs).toBe(10_000);

    open(gate);
    await until('succeeded', async () => (await taskOf(c.direct, c.keys, job, c.startRev))?.state === 'succeeded', 15_000);
    await sleep(300);
    const states = await statesOf(c.direct, c.keys, job, c.startRev);
    expect(states.filter((s) => s === 'lost')).toEqual([]);
    expect(states.filter((s) => s === 'succeeded')).toEqual(['succeeded']);
    expect(lines(runs)).toEqual(['start', 'end']);
    expect(node.mon.stats).toMatchObject({ started: 1, completed: 1, killed: 0, lost: 0 });
    expect(node.mon.stats.fenced).toBeGreaterThan(0);
    expect(await ruState(c.direct, c.keys, 'a0', 1)).toBe('free');
  }, 40_000);

  it('an outage longer than the grace kills the task at about lease expiry + grace and records it lost', async () => {
    const GRACE = 2000;
    const c = await cell('grace');
    const runs = join(c.dir, 'runs');
    const node = await monitor(c.keys, server('g0'), new ProcessExecutor({ clock, logDir: join(c.dir, 'logs') }), { graceMs: GRACE });
    const { job } = await place(c.direct, c.keys, 'g0', 0, { argv: recorded(runs, 30) });
    await until('running', () => node.mon.snapshot().running.some((r) => r.job === job && r.pid !== undefined));
    const pid = node.mon.snapshot().running[0]!.pid!;

    const cutAt = Date.now();
    node.proxy.partition();
    let expiredAt: number | undefined;
    let killedAt: number | undefined;
    await until(
      'expired and killed',
      async () => {
        if (expiredAt === undefined && (await leaseOf(c.direct, c.keys, 'g0')) === undefined) expiredAt = Date.now();
        if (killedAt === undefined && !alive(pid)) killedAt = Date.now();
        return expiredAt !== undefined && killedAt !== undefined;
      },
      15_000,
    );
    // Not killed when the lease went unconfirmed (TTL − 0.5 s), as a monitor used to: only once the
    // lease could have expired (its last confirmed keepalive was sent at most TTL/4 before the cut,
    // and answered) and the grace has passed. The deadline is that keepalive's send time + TTL +
    // grace, so before cut + TTL + grace; the allowance after it is for a loaded machine (the
    // monitor's timer, the supervisor's 200-ms check, the task's exit and this poll all run late
    // there), and is less than a TTL: a kill that waited for another lease period would fail.
    expect(killedAt! - cutAt).toBeGreaterThanOrEqual(TTL * 750 + GRACE - 250);
    expect(killedAt! - cutAt).toBeLessThanOrEqual(TTL * 1000 + GRACE + 1500);
    expect(expiredAt!).toBeGreaterThan(cutAt);
    expect((await taskOf(c.direct, c.keys, job, c.startRev))?.state).toBe('running');

    node.proxy.heal();
    await until('recorded lost', async () => (await taskOf(c.direct, c.keys, job, c.startRev))?.state === 'lost');
    const t = await taskOf(c.direct, c.keys, job, c.startRev);
    expect(t?.message).toMatch(/grace/);
    await until('RU free', async () => (await ruState(c.direct, c.keys, 'g0', 0)) === 'free');
    // Counted once the journal has dropped the outcome, a moment after the store took it.
    await until('counted lost', () => node.mon.stats.lost === 1);
    await sleep(300);
    expect(await statesOf(c.direct, c.keys, job, c.startRev)).toEqual(['placed', 'running', 'lost']);
    expect(lines(runs)).toEqual(['start']);
    // Stopped once, by whichever saw the deadline first: the monitor's grace timer (killed) or the
    // task's supervisor (which exits as fenced: the monitor counts a task that ended not succeeded).
    const { started, completed, killed, failed, lost } = node.mon.stats;
    expect({ started, completed, stopped: killed + failed, lost }).toEqual({ started: 1, completed: 0, stopped: 1, lost: 1 });
  }, 40_000);

  it('a monitor restarted from its journal reports a task that finished before the restart', async () => {
    const c = await cell('restart');
    const journalDir = join(c.dir, 'journal');
    const spec = server('r0');
    const a = await monitor(c.keys, spec, new ProcessExecutor({ clock, logDir: join(c.dir, 'logs') }), { graceMs: 10_000, journalDir });
    const gate = join(c.dir, 'gate');
    const { job, commitId } = await place(c.direct, c.keys, 'r0', 0, { argv: gated(join(c.dir, 'runs'), gate) });
    // Started by the monitor, not only recorded running (see the first test).
    await until('running', () => a.mon.snapshot().running.some((r) => r.job === job && r.pid !== undefined));
    a.proxy.partition();
    open(gate);
    await until('its outcome is journalled', () => a.mon.snapshot().journalled === 1);
    // The monitor goes away before etcd hears of it: its connection closes, it stops.
    await a.store.close();
    await a.mon.close();
    const names = readdirSync(journalDir).filter((f) => f.endsWith('.jsonl'));
    expect(names).toHaveLength(1);
    const file = join(journalDir, names[0]!);
    const entries = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { op: string; e?: { job: string; commitId: string; state: string } });
    expect(entries.map((l) => [l.op, l.e?.job, l.e?.commitId, l.e?.state])).toEqual([['add', job, commitId, 'succeeded']]);
    expect((await taskOf(c.direct, c.keys, job, c.startRev))?.state).toBe('running');

    const b = await monitor(c.keys, spec, new SimulatedExecutor(clock), { graceMs: 10_000, journalDir });
    await until('outcome written', async () => (await taskOf(c.direct, c.keys, job, c.startRev))?.state === 'succeeded');
    await sleep(300);
    expect(await statesOf(c.direct, c.keys, job, c.startRev)).toEqual(['placed', 'running', 'succeeded']);
    expect(b.mon.stats).toMatchObject({ started: 0, killed: 0, lost: 0 });
    expect(await ruState(c.direct, c.keys, 'r0', 0)).toBe('free');
    expect(readFileSync(file, 'utf8')).toBe('');
  }, 40_000);

  it('the killed counter does not count tasks that completed normally, and registrations are no task event', async () => {
    const c = await cell('metric');
    const node = await monitor(c.keys, server('m0', 4), new SimulatedExecutor(clock), { graceMs: 10_000 });
    const jobs: string[] = [];
    for (let round = 0; round < 3; round++) {
      for (let ru = 0; ru < 4; ru++) jobs.push((await place(c.direct, c.keys, 'm0', ru, { durationMs: 150 + ru * 20 })).job);
      await until('round done', async () => {
        const ts = await Promise.all(jobs.map((j) => taskOf(c.direct, c.keys, j, c.startRev)));
        return ts.every((t) => t?.state === 'succeeded');
      });
      await until('RUs free', async () => (await c.direct.range(c.keys.serverRus('m0'))).kvs.every((kv) => parseJson<RuRecord>(kv)?.state === 'free'));
    }
    await sleep(300);
    expect(node.mon.stats).toMatchObject({ started: 12, completed: 12, killed: 0, lost: 0, registrations: 1 });
    const text = await new MonitorMetrics(node.mon).registry.metrics();
    expect(text).toContain('tarcil_monitor_task_events_total{server="m0",platform="r3-xlarge",event="completed"} 12');
    expect(text).toContain('tarcil_monitor_task_events_total{server="m0",platform="r3-xlarge",event="killed"} 0');
    expect(text).not.toMatch(/task_events_total\{[^}]*event="registrations"/);
    expect(text).toContain('tarcil_monitor_registrations_total{server="m0",platform="r3-xlarge"} 1');
  }, 40_000);
});
