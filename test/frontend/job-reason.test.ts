/**
 * A job's one current reason on a live front-end (the demo cell on the embedded store, simulated
 * executor): a constraint no server that is up meets, servers cordoned, a full cell with a queued
 * gang, a namespace at its quota; ExplainJob and GetJob carry it, `tarcil explain` and `tarcil
 * status` print it first. And `tarcil jobs` says what its limit left out.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { explainCommand, jobsCommand, statusCommand } from '../../src/cli/client.ts';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { Explanation__Output } from '../../src/rpc/gen/tarcil/v1/Explanation.ts';
import type { ListJobsResponse__Output } from '../../src/rpc/gen/tarcil/v1/ListJobsResponse.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { expandCluster, loadCatalog, resolveCluster } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { getJob, submit } from '../support/live.ts';

const store = new MemoryStore();
const keys = new Keys('/reason/');
const clock = new SystemClock();
const log = createLogger('test');
const catalog = loadCatalog();
const servers = expandCluster(resolveCluster('demo', catalog), catalog.platforms);
let monitors: MonitorProcess[] = [];
let sched: SchedulerProcess;
let c: SchedulerClient;
let address = '';

beforeAll(async () => {
  monitors = await Promise.all(
    servers.map((s) => startMonitor({ store, keys, clock, log, server: s, executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: 3 })),
  );
  sched = await startScheduler({
    name: 'reason',
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
  });
  address = `127.0.0.1:${sched.port}`;
  c = schedulerClient(address);
});
afterAll(async () => {
  c?.close();
  await sched?.close();
  await Promise.all(monitors.map((m) => m.close()));
  await store.close();
});

function call<T>(f: (cb: (err: Error | null, res?: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => f((err, res) => (err || res === undefined ? reject(err ?? new Error('no answer')) : resolve(res))));
}
const explain = (jobId: string): Promise<Explanation__Output> => call((cb) => c.ExplainJob({ jobId }, cb));
const cancel = (jobId: string): Promise<unknown> => call((cb) => c.CancelJob({ jobId }, cb));
const flags = { server: '', timeout: 10_000 };

/** Polls `f` until it returns a value (not undefined), for at most `ms`. */
async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The job's explanation once its scheduling call has begun (a decision is recorded). */
const decided = (jobId: string): Promise<Explanation__Output> =>
  until(`a decision for ${jobId}`, async () => {
    const e = await explain(jobId);
    return e.decisions.length > 0 ? e : undefined;
  });

async function lines(f: (out: (s: string) => void) => Promise<void>): Promise<string[]> {
  const out: string[] = [];
  await f((s) => out.push(...s.split('\n')));
  return out;
}

const submitted: string[] = [];
async function job(spec: Record<string, unknown>, namespace = ''): Promise<string> {
  const { jobId } = await submit(c, { specJson: JSON.stringify({ profile: 'spark-lr', durationMs: 120_000, ...spec }), namespace });
  submitted.push(jobId);
  return jobId;
}

describe('the one current reason', () => {
  it('a constraint no server that is up meets: which one, and how many servers have it', async () => {
    // The two r3-xlarge servers leave the cell (their monitors stop); the front-end remembers them.
    const r3 = servers.flatMap((s, i) => (s.platform === 'r3-xlarge' ? [i] : []));
    expect(r3.length).toBe(2);
    for (const i of r3) await monitors[i]?.close();
    const id = await job({ name: 'needs-r3', tasks: 1, constraints: { platforms: ['r3-xlarge'] } });
    const e = await explain(id);
    expect(e.reason?.kind).toBe('constraint');
    expect(e.reason?.constraint).toBe('platform r3-xlarge');
    expect(e.reason?.serversMatching).toBe(2);
    expect(e.reason?.text).toBe('no server it may use is up: platform r3-xlarge is met by 2 servers, all down');
    expect(e.text.split('\n')[0]).toBe(`now: ${e.reason?.text}`);
    await cancel(id);
  });

  it('servers cordoned: which ones', async () => {
    const c3 = servers.filter((s) => s.platform === 'c3-large').map((s) => s.id);
    for (const server of c3) await call((cb) => c.SetNodeScheduling({ server, action: 'cordon', reason: 'test' }, cb));
    try {
      const id = await job({ name: 'needs-c3', tasks: 2, constraints: { platforms: ['c3-large'] } });
      const r = (
        await until('the cordon in the view', async () => {
          const e = await explain(id);
          return e.reason?.kind === 'cordoned' ? e : undefined;
        })
      ).reason;
      expect(r?.servers).toEqual([...c3].sort());
      expect(r?.rusUsable).toBe(0);
      expect(r?.text).toContain(`every server it may use is cordoned or draining: ${[...c3].sort().join(', ')}`);
      await cancel(id);
    } finally {
      for (const server of c3) await call((cb) => c.SetNodeScheduling({ server, action: 'uncordon', reason: '' }, cb));
    }
  });

  it('a full cell and a queued gang: the cell is full, N of M busy, who holds them, what the gang needs', async () => {
    // 16 RUs are up (the r3 servers left): a resident job takes them all.
    const resident = await job({ name: 'resident', tasks: 16 });
    await until('the resident job placed', async () => ((await getJob(c, resident)).taskStates['running'] === 16 ? true : undefined));
    const gang = await job({ name: 'gang', tasks: 6, mode: 'gang' });
    const e = await decided(gang);
    const r = e.reason;
    expect(r?.kind).toBe('cell-full');
    expect([r?.rusBusy, r?.rusUsable, r?.needed]).toEqual([16, 16, 6]);
    expect(r?.holders).toEqual([{ job: resident, rus: 16 }]);
    expect(r?.text).toMatch(new RegExp(`^the cell is full: 16 of 16 RUs it may use are busy, held by job ${resident} \\(16\\); it needs 6 at once`));
    // explain prints it first; status prints it first and the gang's size instead of an empty table.
    flags.server = address;
    // (The time waited in the text grows between the calls: what comes before it must not change.)
    const head = (t: string | undefined): string => (t ?? '').replace(/; (estimated wait|waited) .*$/, '');
    const ex = await lines((out) => explainCommand(gang, flags, out));
    expect(head(ex[0])).toBe(`now: ${head(r?.text)}`);
    const st = await lines((out) => statusCommand(gang, flags, out));
    expect(head(st[0])).toBe(`now: ${head((await getJob(c, gang)).reason?.text)}`);
    expect(st[0]).toContain('the cell is full: 16 of 16 RUs');
    expect(st).toContain('  a gang of 6 tasks, placed all at once: none placed yet');
    expect(st.join('\n')).not.toContain('│');
    // A running job's reason says so.
    expect((await getJob(c, resident)).reason?.kind).toBe('running');
    await cancel(gang);
    await cancel(resident);
    await until('the resident job ended', async () => ((await getJob(c, resident)).state === 'cancelled' ? true : undefined));
  });

  it('a namespace at its quota: its RUs in use and its limit', async () => {
    await call((cb) => c.PutNamespace({ name: 'small', maxRus: 2 }, cb));
    const first = await job({ name: 'first', tasks: 2 }, 'small');
    await until('the first job running', async () => ((await getJob(c, first)).taskStates['running'] === 2 ? true : undefined));
    const second = await job({ name: 'second', tasks: 1 }, 'small');
    const r = (await decided(second)).reason;
    expect(r?.kind).toBe('quota');
    expect([r?.namespace, r?.quotaUsed, r?.quotaLimit]).toEqual(['small', 2, 2]);
    expect(r?.text).toBe('namespace small is at its quota: 2 of 2 RUs in use; 1 task waits for an RU of the quota');
    await cancel(second);
    await cancel(first);
  });
});

describe('lists say what they left out', () => {
  it('ListJobs counts the jobs that match; tarcil jobs says "N of M jobs" when its limit cut the list', async () => {
    const inDefault = submitted.filter((id) => !id.includes('/'));
    expect(inDefault.length).toBe(4);
    const res = await call<ListJobsResponse__Output>((cb) => c.ListJobs({ limit: 2 }, cb));
    expect(res.jobs.length).toBe(2);
    expect(res.total).toBe(4);
    const byState = await call<ListJobsResponse__Output>((cb) => c.ListJobs({ limit: 1, states: ['cancelled'] }, cb));
    expect(byState.total).toBe((await Promise.all(inDefault.map((id) => getJob(c, id)))).filter((j) => j.state === 'cancelled').length);
    flags.server = address;
    const cut = await lines((out) => jobsCommand({ ...flags, limit: 2 }, out));
    expect(cut).toContain('2 of 4 jobs; --limit N or --all to see more');
    const all = await lines((out) => jobsCommand({ ...flags, limit: 2, all: true }, out));
    expect(all.join('\n')).not.toContain(' of 4 jobs');
    for (const id of inDefault) expect(all.join('\n')).toContain(id);
  });
});
