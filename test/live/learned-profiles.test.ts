/**
 * Profiles that learn, live on etcd: the node monitors measure each task's share of its expected
 * rate amid its neighbours' pressure, the outcome carries it, the owner's front-end folds it into
 * the class's stored estimate (`profiles/<name>`), later jobs of the class are scheduled with the
 * learned vector, and `GetProfile` / `tarcil profile --learned` show declared and learned. The
 * class here is more sensitive on resource 0 than it declares (the simulated executor's model is
 * told its real vector), so the estimate must move up on resource 0 and nowhere else.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { ProfileEstimate__Output } from '../../src/rpc/gen/tarcil/v1/ProfileEstimate.ts';
import { startScheduler } from '../../src/frontend/runtime.ts';
import { startMonitor } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { slowdown as perfSlowdown } from '../../src/model/perf.ts';
import type { JobSpec, ServerSpec } from '../../src/model/types.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveJobRecord } from '../../src/state/live-records.ts';
import { ProfileBook, readProfile } from '../../src/state/profiles.ts';
import { parseJson } from '../../src/state/records.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { startEtcd, type EtcdProcess } from '../support/etcd.ts';
import { submit, waitFinal } from '../support/live.ts';
import { freedOutcomes } from '../support/task-records.ts';
import { until } from '../support/until.ts';

const catalog = loadCatalog();
const clock = new SystemClock();
const log = createLogger('test');
const platform = Object.keys(catalog.platforms)[0] as string;
const perf = Object.fromEntries(Object.keys(catalog.platforms).map((p) => [p, 1]));
const zero = (): number[] => new Array<number>(10).fill(0);
/** Declares 30 on resource 0; really presses (and so tolerates) as if 50. */
const DECLARED = [30, 0, 0, 0, 0, 0, 0, 0, 0, 0];
const REAL0 = 50;
const learner = { name: 'learner', family: 'test', caused: DECLARED, platformPerf: perf };
const heavy = { name: 'heavy70', family: 'test', caused: [70, 0, 0, 0, 0, 0, 0, 0, 0, 0], platformPerf: perf };

let etcd: EtcdProcess;
let store: ClusterStore;
beforeAll(async () => {
  etcd = await startEtcd({ bin: process.env.TARCIL_TEST_ETCD_BIN });
  store = await openStore(etcd.endpoint.replace('http://', 'etcd://'));
});
afterAll(async () => {
  await store?.close();
  await etcd?.stop();
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The executor's truth: the learner class's real vector has REAL0 on resource 0. */
const truth = (own: readonly number[], sum: readonly number[], n: number): number => {
  if (own[0] !== DECLARED[0] && own[0] !== (DECLARED[0] as number) + 1) return perfSlowdown(own, sum, n);
  const real = [REAL0, ...own.slice(1)];
  const s = sum.map((v, i) => v - (own[i] ?? 0) + (real[i] ?? 0));
  return perfSlowdown(real, s, n);
};

/** The learner's 8 observations reach the store, slower than declared on resource 0. */
async function expectEightObservations(keys: Keys): Promise<void> {
  for (let i = 0; i < 50 && (await readProfile(store, keys, 'learner'))?.observations !== 8; i++) await sleep(100);
  const stored = await readProfile(store, keys, 'learner');
  expect(stored?.observations).toBe(8);
  expect(stored?.learned[0]).toBeGreaterThan(DECLARED[0] as number);
}

/** A later one-task job of the learner class, and its job record as stored. */
async function submitLater(c: ReturnType<typeof schedulerClient>, keys: Keys) {
  const later = await submit(c, { specJson: JSON.stringify({ name: 'later', profile: learner, tasks: 1, durationMs: 300, maxQueueMs: 0 }) });
  return { later, rec: parseJson<LiveJobRecord>(await store.get(keys.job(later.jobId))) };
}

/**
 * A one-server cell with a scheduler that uses `use` profiles: three heavy neighbours hold three
 * RUs, then a job of the learner class (8 tasks) is submitted, its tasks taking the fourth RU one
 * by one while their monitor measures them.
 */
async function learnerCell(name: string, server: ServerSpec, use: 'learned' | 'declared', seed: number) {
  const keys = new Keys(`/${name}/`);
  const monitor = await startMonitor({
    store,
    keys,
    clock,
    log,
    server,
    executor: 'simulated',
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: 3,
    slowdown: truth,
  });
  const sched = await startScheduler({
    name,
    store,
    keys,
    catalog,
    clock,
    rng: new SeededRng(seed),
    log,
    agents: 1,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: 3,
    housekeeping: false,
    profiles: { use, minObservations: 5, flushMs: 300 },
  });
  const c = schedulerClient(`127.0.0.1:${sched.port}`);
  await submit(c, { specJson: JSON.stringify({ name: 'neighbours', profile: heavy, tasks: 3, durationMs: 60_000, maxQueueMs: 0 }) });
  for (let i = 0; i < 50 && (await store.range(keys.serverRus(server.id))).kvs.filter((kv) => kv.value.includes('"busy"')).length < 3; i++) await sleep(100);
  const first = await submit(c, { specJson: JSON.stringify({ name: 'first', profile: learner, tasks: 8, durationMs: 300, maxQueueMs: 0 }) });
  return { keys, monitor, sched, c, first };
}

describe('learned profiles in the store', () => {
  it('two front-ends writing the same class at once lose no observation', async () => {
    const keys = new Keys('/lp-race/');
    const spec = { profile: learner } as unknown as JobSpec;
    const books = [0, 1].map(() => new ProfileBook({ store, keys, clock, log }));
    const C = [70, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    for (let round = 0; round < 3; round++) {
      for (const b of books) for (let i = 0; i < 7; i++) b.observe(spec, { share: 0.8, pressure: C, ms: 1000 });
      await Promise.all(books.map((b) => b.flush()));
    }
    // A book whose write lost a race keeps its observations for its next flush: one more each.
    await Promise.all(books.map((b) => b.flush()));
    const stored = await readProfile(store, keys, 'learner');
    expect(stored?.observations).toBe(2 * 3 * 7);
    expect(books.reduce((n, b) => n + b.stats.written, 0)).toBe(2 * 3 * 7);
    expect(books.every((b) => b.pendingClasses === 0)).toBe(true);
    expect(stored?.declared).toEqual(DECLARED);
    // Slower than predicted on resource 0 only: the estimate rises there and nowhere else.
    expect(stored?.learned[0]).toBeGreaterThan(DECLARED[0] as number);
    expect(stored?.learned.slice(1)).toEqual(zero().slice(1));
  });

  it('observations that arrive while a flush is writing wait for the next one; a flush asked meanwhile joins the one running', async () => {
    const keys = new Keys('/lp-inflight/');
    const spec = { profile: learner } as unknown as JobSpec;
    // The store's transactions held until released: a write in flight for as long as the test wants.
    let release: () => void = () => undefined;
    let held = 0;
    const slow = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop !== 'txn') return Reflect.get(target, prop, receiver) as unknown;
        return async (req: Parameters<ClusterStore['txn']>[0]) => {
          held++;
          await new Promise<void>((r) => (release = r));
          return target.txn(req);
        };
      },
    });
    const book = new ProfileBook({ store: slow, keys, clock, log });
    const obs = { share: 0.8, pressure: [70, 0, 0, 0, 0, 0, 0, 0, 0, 0], ms: 1000 };
    for (let i = 0; i < 3; i++) book.observe(spec, obs);
    const first = book.flush();
    await until('the first write in flight', () => held === 1);
    for (let i = 0; i < 2; i++) book.observe(spec, obs);
    const second = book.flush();
    release();
    await Promise.all([first, second]);
    // One transaction so far: the second flush joined the first, which carried the first three.
    expect(held).toBe(1);
    expect((await readProfile(store, keys, 'learner'))?.observations).toBe(3);
    expect(book.pendingClasses).toBe(1);
    const third = book.flush();
    await until('the next write in flight', () => held === 2);
    release();
    await third;
    expect((await readProfile(store, keys, 'learner'))?.observations).toBe(5);
    expect(book.stats.written).toBe(5);
    expect(book.pendingClasses).toBe(0);
  });

  it('monitors measure, the owner learns, later jobs use the learned vector, and the CLI shows both', { timeout: 90_000 }, async () => {
    const startRev = await store.revision();
    const { keys, monitor, sched, c, first } = await learnerCell(
      'lp',
      { id: 'x0', platform, rack: 'r0', rus: 4, speed: 1, attributes: { zone: 'x' } },
      'learned',
      5,
    );
    try {
      expect((await waitFinal(c, first.jobId, 40_000)).state).toBe('succeeded');
      // What the node measured went with each outcome (in the freed RU): a share below 1 amid pressure 70 on resource 0.
      const t0 = (await freedOutcomes(store, keys, first.jobId, startRev)).find((t) => t.index === 0);
      expect(t0?.observed?.share).toBeLessThan(0.95);
      expect(t0?.observed?.pressure[0]).toBeCloseTo(70, 0);
      await expectEightObservations(keys);

      // A later job of the class is scheduled, and stored, with the learned vector.
      const { later, rec } = await submitLater(c, keys);
      expect(rec?.spec.learned?.observations).toBeGreaterThanOrEqual(5);
      expect(rec?.spec.learned?.declared).toEqual(DECLARED);
      expect(rec?.spec.profile.caused).toEqual((await readProfile(store, keys, 'learner'))?.learned.map((v) => Math.round(v)));
      await waitFinal(c, later.jobId, 20_000);

      const est = await new Promise<ProfileEstimate__Output>((resolve, reject) =>
        c.GetProfile({ name: 'learner' }, (err, res) => (err || !res ? reject(err ?? new Error('no answer')) : resolve(res))),
      );
      expect(est.declared).toEqual(DECLARED);
      expect(est.learned[0]).toBeGreaterThan(DECLARED[0] as number);
      expect(est.used).toBe(true);
      const missing = await new Promise<{ code?: number }>((resolve) => c.GetProfile({ name: 'no-such-class' }, (err) => resolve(err ?? {})));
      expect(missing.code).toBe(5); // NOT_FOUND

      const cli = await new Promise<{ code: number | null; out: string }>((resolve) => {
        const p = spawn(
          process.execPath,
          [join(import.meta.dirname, '../../src/cli/bin.js'), 'profile', 'learner', '--learned', '--server', `127.0.0.1:${sched.port}`],
          { env: { ...process.env, TARCIL_LOG: 'silent' } },
        );
        let out = '';
        p.stdout.on('data', (d: Buffer) => (out += d.toString()));
        p.on('close', (code) => resolve({ code, out }));
      });
      expect(cli.code).toBe(0);
      expect(cli.out).toMatch(/profile learner: \d+ observation\(s\)/);
      expect(cli.out).toContain('scheduled with the learned vector');
      expect(cli.out).toMatch(/declared.*learned/);
    } finally {
      c.close();
      await sched.close();
      await monitor.close();
    }
  });

  it('a front-end with declared profiles schedules with the declared vector even after observations, which it still writes', { timeout: 90_000 }, async () => {
    const { keys, monitor, sched, c, first } = await learnerCell(
      'lp-declared',
      { id: 'd0', platform, rack: 'r0', rus: 4, speed: 1, attributes: {} },
      'declared',
      6,
    );
    try {
      expect(sched.manager.profiles.usesLearned).toBe(false);
      expect((await waitFinal(c, first.jobId, 40_000)).state).toBe('succeeded');
      // The monitors measured and the book wrote every observation: a front-end that learns would use them.
      await expectEightObservations(keys);
      // A later job of the class is scheduled, and stored, with its declared vector.
      const { later, rec } = await submitLater(c, keys);
      expect(rec?.spec.learned).toBeUndefined();
      expect(rec?.spec.profile.caused).toEqual(DECLARED);
      await waitFinal(c, later.jobId, 20_000);
      const est = await new Promise<ProfileEstimate__Output>((resolve, reject) =>
        c.GetProfile({ name: 'learner' }, (err, res) => (err || !res ? reject(err ?? new Error('no answer')) : resolve(res))),
      );
      expect(est.used).toBe(false);
    } finally {
      c.close();
      await sched.close();
      await monitor.close();
    }
  });
});
