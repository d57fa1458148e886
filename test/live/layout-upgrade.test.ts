/**
 * A cell written by the store layout before members/ (owner records bound to their front-end's
 * lease, no `layout` key), taken over by a front-end of this one, on etcd: the job whose owner
 * record went with its lease and the job whose older front-end still holds its lease both run to
 * the end, once; the older front-end is fenced out of its job; the layout's version is written. A
 * cell of a newer layout is refused, naming it, and so is a cell where a front-end of the release
 * before still runs (its member record names no layout).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LAYOUT_VERSION } from '../../src/owner/layout.ts';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import { Keys } from '../../src/state/keys.ts';
import { ownerLeaseOf, type LiveJobRecord } from '../../src/state/live-records.ts';
import { parseJson } from '../../src/state/records.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { startEtcd, type EtcdProcess } from '../support/etcd.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { startSimNode, startTestScheduler, waitFinal } from '../support/live.ts';
import { taskRecords } from '../support/task-records.ts';

const clock = new SystemClock();
const log = createLogger('test');

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

function scheduler(keys: Keys) {
  return startTestScheduler({ name: 'new', store, keys, clock, log, agents: 1, seed: 3 }, { housekeeping: false });
}

/** A job record as the older front-ends wrote it at submission. */
function queuedRecord(id: string, tasks: number): LiveJobRecord {
  const now = Date.now();
  const spec = makeJob(id, TEST_PROFILES[0]!, tasks, { maxQueueMs: 0, durationMs: 300, submittedAt: now });
  return { spec, state: 'queued', placed: 0, updatedAt: now, submittedAt: now, owner: 'old/a0', rescheduled: 0, taskStates: { queued: tasks } };
}

describe('the store layout', () => {
  it('a cell of the older layout is taken over: every acknowledged job runs once, the older owner is fenced out', { timeout: 60_000 }, async () => {
    const keys = new Keys('/upgrade/');
    const monitor = await startSimNode({ store, keys, clock, log, id: 'n0' });
    // Job `orphan`: its owner's lease ended, and its owner record with it.
    const gone = await store.grantLease(5);
    await store.put(keys.job('orphan'), JSON.stringify(queuedRecord('orphan', 2)));
    await store.put(keys.owner('orphan'), JSON.stringify({ agent: 'old/a0', process: 'old', since: Date.now() }), { lease: gone.id });
    await gone.revoke();
    expect(await store.get(keys.owner('orphan'))).toBeUndefined();
    // Job `held`: an older front-end still runs and holds the lease its owner record is bound to.
    const old = await store.grantLease(30);
    await store.put(keys.job('held'), JSON.stringify(queuedRecord('held', 2)));
    await store.put(keys.owner('held'), JSON.stringify({ agent: 'old/a0', process: 'old', since: Date.now() }), { lease: old.id });
    expect(await store.get(keys.layout())).toBeUndefined();

    const sched = await scheduler(keys);
    const c = schedulerClient(`127.0.0.1:${sched.port}`);
    try {
      for (const id of ['orphan', 'held']) expect((await waitFinal(c, id, 30_000)).state).toBe('succeeded');
      for (const id of ['orphan', 'held']) {
        const tasks = await taskRecords(store, keys, id);
        expect(tasks.map((t) => [t?.state, t?.attempt])).toEqual([
          ['succeeded', 0],
          ['succeeded', 0],
        ]);
      }
      for (let i = 0; i < 50 && !(await store.get(keys.layout())); i++) await sleep(100);
      expect((await store.get(keys.layout()))?.value).toBe(String(LAYOUT_VERSION));
      // The older front-end's writes compared its owner key's lease: that key is gone now.
      const res = await store.txn({
        compare: [{ key: keys.owner('held'), target: 'lease', op: '==', value: old.id }],
        success: [{ type: 'put', key: keys.job('held'), value: '{}' }],
      });
      expect(res.succeeded).toBe(false);
      expect(parseJson<LiveJobRecord>(await store.get(keys.job('held')))?.state).toBe('succeeded');
    } finally {
      c.close();
      await sched.close();
      await monitor.close();
      await old.revoke();
    }
  });

  it('a job submitted to the new front-end names its lease in the owner record, which is bound to none', { timeout: 30_000 }, async () => {
    const keys = new Keys('/fresh/');
    const sched = await scheduler(keys);
    try {
      for (let i = 0; i < 50 && !(await store.get(keys.layout())); i++) await sleep(100);
      expect((await store.get(keys.layout()))?.value).toBe(String(LAYOUT_VERSION));
      const members = (await store.range(keys.members())).kvs;
      expect(members).toHaveLength(1);
      expect(members[0]?.lease).not.toBe('0');
      await sched.manager.accept(makeJob('waits', TEST_PROFILES[0]!, 1, { maxQueueMs: 60_000 }));
      const owner = await store.get(keys.owner('waits'));
      expect(owner?.lease).toBe('0');
      expect(ownerLeaseOf(owner)).toBe(members[0]?.lease);
    } finally {
      await sched.close();
    }
  });

  it(
    'a front-end of the release before (layout 2: its member record names no layout) running in the cell: a new one refuses to start, naming it; once it is gone the new one starts and writes layout 4',
    { timeout: 30_000 },
    async () => {
      const keys = new Keys('/mixed/');
      await store.put(keys.layout(), '2');
      const old = await store.grantLease(30);
      await store.put(keys.member(old.id), JSON.stringify({ process: 'old-frontend', since: Date.now(), placing: false }), { lease: old.id });
      await expect(scheduler(keys)).rejects.toThrow(/front-ends of an older release run in this cell \(old-frontend\)/);
      // Nothing of the refused front-end stays: its member record went with its lease.
      expect((await store.range(keys.members())).kvs.map((kv) => kv.key)).toEqual([keys.member(old.id)]);
      await old.revoke();
      const sched = await scheduler(keys);
      try {
        for (let i = 0; i < 50 && (await store.get(keys.layout()))?.value !== String(LAYOUT_VERSION); i++) await sleep(100);
        expect((await store.get(keys.layout()))?.value).toBe(String(LAYOUT_VERSION));
        expect(LAYOUT_VERSION).toBe(4);
      } finally {
        await sched.close();
      }
    },
  );

  it('a cell of a newer layout is refused, naming the layout', { timeout: 30_000 }, async () => {
    const keys = new Keys('/newer/');
    await store.put(keys.layout(), String(LAYOUT_VERSION + 1));
    await expect(scheduler(keys)).rejects.toThrow(new RegExp(`store layout ${LAYOUT_VERSION + 1}, newer than this tarcil's \\(${LAYOUT_VERSION}\\)`));
    expect((await store.range(keys.members())).kvs).toHaveLength(0);
  });
});
