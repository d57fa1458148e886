/**
 * LaunchTask carrying the RU record its commit wrote (`ru_record`): a monitor on etcd starts the
 * task from it without reading the RU first; a record that does not name the launched task, or a
 * launch without one, is read from the store as before; a record older than what the monitor has
 * already seen on the RU starts nothing. A placement by a real front-end reaches the node this way.
 */
import { afterEach, describe, expect, inject, it } from 'vitest';
import { GrpcNodeLink } from '../../src/frontend/node.ts';
import { startMonitor, type MonitorProcess } from '../../src/frontend/runtime.ts';
import { JobManager } from '../../src/agent/lifecycle.ts';
import { loadCatalog, parseJobSpec } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { until } from '../support/until.ts';
import { wrapStore } from '../support/wrap-store.ts';

const clock = new SystemClock();
const log = createLogger('test', 'warn');
let seq = 0;

let closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of closers.reverse()) await c();
  closers = [];
});

/** A monitor of one server on etcd whose reads of RU keys are counted, and whose watch can be held back. */
async function monitorOnEtcd(): Promise<{ store: ClusterStore; keys: Keys; mon: MonitorProcess; ruGets: () => number; server: string; endpoint: string }> {
  const store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
  closers.push(() => store.close());
  const keys = new Keys(`/launch-record-${++seq}-${Date.now()}/`);
  let gets = 0;
  const counted = wrapStore(store, {
    get: (key) => {
      if (keys.parseRu(key)) gets++;
      return store.get(key);
    },
    // The monitor's watch delivers nothing: only the launch can tell it of a placement.
    watch: async (opts) => {
      if (opts.prefix.startsWith(keys.rus())) return { close: () => Promise.resolve() };
      return store.watch(opts);
    },
  });
  const server = 's0';
  const mon = await startMonitor({ store: counted, keys, clock, log, server: { id: server, platform: 'r3-xlarge', rack: 'r0', rus: 4, speed: 1, attributes: {} }, executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: 5 });
  closers.push(() => mon.close());
  return { store, keys, mon, ruGets: () => gets, server, endpoint: `127.0.0.1:${mon.port}` };
}

/** Writes a placement of `job#task` on RU `index` as a commit does; returns its JSON and revision. */
async function place(store: ClusterStore, keys: Keys, server: string, index: number, job: string, task: number): Promise<{ value: string; revision: number }> {
  const rec: PlacedRuRecord = { state: 'busy', job, task, caused: [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1], priority: 100, agent: 'test', since: Date.now(), attempt: 0, basedOn: 0, commitId: `test:${job}:${task}`, durationMs: 60_000 };
  const value = JSON.stringify(rec);
  const res = await store.txn({ compare: [], success: [{ type: 'put', key: keys.ru({ server, index }), value }] });
  return { value, revision: res.revision };
}

describe('LaunchTask with the RU record its commit wrote', () => {
  it('starts the task from the record, without reading the RU; without one (or with one of another task) it reads', async () => {
    const { store, keys, mon, ruGets, server, endpoint } = await monitorOnEtcd();
    const link = new GrpcNodeLink();
    closers.push(() => link.close());
    const gets0 = ruGets();

    const a = await place(store, keys, server, 0, 'ja', 0);
    await link.launch(endpoint, { server, job: 'ja', task: 0, ruIndex: 0, revision: a.revision, ruRecord: a.value });
    await until('ja#0 running', () => mon.monitor.snapshot().running.some((r) => r.job === 'ja' && r.task === 0), 10_000, 20);
    expect(ruGets() - gets0).toBe(0);

    // No record (an older caller): the monitor reads the RU.
    const b = await place(store, keys, server, 1, 'jb', 0);
    await link.launch(endpoint, { server, job: 'jb', task: 0, ruIndex: 1, revision: b.revision });
    await until('jb#0 running', () => mon.monitor.snapshot().running.some((r) => r.job === 'jb'), 10_000, 20);
    expect(ruGets() - gets0).toBe(1);

    // A record that names another task is not trusted: read, and the store's record is what starts.
    const c = await place(store, keys, server, 2, 'jc', 0);
    await link.launch(endpoint, { server, job: 'jc', task: 0, ruIndex: 2, revision: c.revision, ruRecord: c.value.replace('"job":"jc"', '"job":"forged"') });
    await until('jc#0 running', () => mon.monitor.snapshot().running.some((r) => r.job === 'jc'), 10_000, 20);
    expect(ruGets() - gets0).toBe(2);
    expect(mon.monitor.snapshot().running.some((r) => r.job === 'forged')).toBe(false);
  });

  it('a record older than what the monitor has seen on the RU starts nothing', async () => {
    const { store, keys, mon, server, endpoint } = await monitorOnEtcd();
    const link = new GrpcNodeLink();
    closers.push(() => link.close());
    const old = await place(store, keys, server, 3, 'jold', 0);
    const fresh = await place(store, keys, server, 3, 'jnew', 0);
    await link.launch(endpoint, { server, job: 'jnew', task: 0, ruIndex: 3, revision: fresh.revision, ruRecord: fresh.value });
    await until('jnew#0 running', () => mon.monitor.snapshot().running.some((r) => r.job === 'jnew'), 10_000, 20);
    // The placement the RU held before, launched late: older than what the node saw, ignored.
    await link.launch(endpoint, { server, job: 'jold', task: 0, ruIndex: 3, revision: old.revision, ruRecord: old.value });
    await new Promise((r) => setTimeout(r, 200));
    expect(mon.monitor.snapshot().running.map((r) => r.job)).toEqual(['jnew']);
  });

  it("a front-end's placement reaches a monitor whose watch is silent, and the task runs to its end", async () => {
    const { store, keys, mon, ruGets } = await monitorOnEtcd();
    const mgr = new JobManager({ process: 'fe', store, keys, clock, rng: new SeededRng(5), log, agents: 1, leaseTtlSeconds: 5, nodes: new GrpcNodeLink() });
    await mgr.start();
    closers.push(() => mgr.close());
    const gets0 = ruGets();
    const spec = parseJobSpec({ name: 'fast', profile: 'spark-lr', tasks: 3, durationMs: 200 }, loadCatalog(), { id: `job-launch-${seq}`, now: Date.now() });
    await mgr.submit(spec);
    await until('the job succeeded', async () => parseJson<{ state: string }>(await store.get(keys.job(spec.id)))?.state === 'succeeded', 20_000, 50);
    expect(ruGets() - gets0).toBe(0);
    expect(mon.monitor.snapshot().running).toHaveLength(0);
  });
});
