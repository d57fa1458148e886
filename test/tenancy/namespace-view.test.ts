/**
 * A front-end's copy of the namespace records (NamespaceView) and a submission's reading of its
 * namespace through it, on the embedded store and on etcd: the copy follows creations, changes
 * and deletions; a namespace it holds costs the submission no read of the store; what it cannot
 * vouch for (not listed yet, a namespace it does not hold, one being deleted) is read from the
 * store; and a stale copy cannot let a job in, since the compare carries the revision it read.
 */
import { afterEach, describe, expect, inject, it } from 'vitest';
import { Keys } from '../../src/state/keys.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore, KeyValue } from '../../src/store/types.ts';
import { NamespaceView } from '../../src/tenancy/namespace-view.ts';
import { deleteNamespace, namespaceForSubmit, putNamespace, type NamespaceCopy } from '../../src/tenancy/namespaces.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { wrapStore } from '../support/wrap-store.ts';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import { failure, startSimNode, startTestScheduler, submit, waitFinal } from '../support/live.ts';

const clock = new SystemClock();
const log = createLogger('ns-view', 'silent');

async function until(what: string, ok: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe.each(['memory', 'etcd'] as const)('namespace view (%s store)', (kind) => {
  const open: ClusterStore[] = [];
  const views: NamespaceView[] = [];
  afterEach(async () => {
    for (const v of views.splice(0)) await v.close();
    for (const s of open.splice(0)) await s.close();
  });

  async function setup(): Promise<{ store: ClusterStore; keys: Keys; reads: string[]; counted: ClusterStore }> {
    const store = await openStore(kind === 'memory' ? 'memory://' : inject('etcdEndpoint').replace('http://', 'etcd://'));
    open.push(store);
    const keys = new Keys(`/nsv-${kind}-${Date.now()}-${Math.random().toString(36).slice(2)}/`);
    const reads: string[] = [];
    const counted = wrapStore(store, {
      get: (key) => {
        reads.push(key);
        return store.get(key);
      },
    });
    return { store, keys, reads, counted };
  }

  it('follows namespaces created, changed and deleted, and cannot say anything before its first list', async () => {
    const { store, keys } = await setup();
    await putNamespace(store, keys, 'team-a', { weight: 2 }, 1);
    const view = new NamespaceView({ store, keys, clock, log });
    views.push(view);
    expect(view.get(keys.namespace('team-a'))).toBeUndefined();
    await view.start();
    expect(JSON.parse(view.get(keys.namespace('team-a'))?.value ?? '{}')).toMatchObject({ name: 'team-a', weight: 2 });
    expect(view.get(keys.namespace('team-b'))).toBeNull();
    await putNamespace(store, keys, 'team-b', {}, 2);
    await until('team-b in the copy', () => !!view.get(keys.namespace('team-b')));
    await putNamespace(store, keys, 'team-a', { weight: 5 }, 3);
    await until('team-a changed in the copy', () => (JSON.parse(view.get(keys.namespace('team-a'))?.value ?? '{}') as { weight?: number }).weight === 5);
    await deleteNamespace(store, keys, 'team-b');
    await until('team-b gone from the copy', () => view.get(keys.namespace('team-b')) === null);
  });

  it('a submission reads a namespace the copy holds from the copy, and the rest from the store', async () => {
    const { store, keys, reads, counted } = await setup();
    await putNamespace(store, keys, 'team-a', { maxWaitingJobs: 3 }, 1);
    const view = new NamespaceView({ store, keys, clock, log });
    views.push(view);
    await view.start();
    const held = view.get(keys.namespace('team-a')) as KeyValue;

    const a = await namespaceForSubmit(counted, keys, 'team-a', view);
    expect(reads).toEqual([]);
    expect(a.rec.maxWaitingJobs).toBe(3);
    expect(a.compare).toEqual([{ key: keys.namespace('team-a'), target: 'mod', op: '==', value: held.modRevision }]);
    // default has no record: the copy says so, and nothing is read.
    const d = await namespaceForSubmit(counted, keys, 'default', view);
    expect(reads).toEqual([]);
    expect(d.rec.name).toBe('default');
    expect(d.compare).toEqual([]);

    // A namespace created after the copy's list, before its event: read from the store.
    const notYet: NamespaceCopy = { get: (key) => (key === keys.namespace('team-new') ? null : view.get(key)) };
    await putNamespace(store, keys, 'team-new', {}, 2);
    const n = await namespaceForSubmit(counted, keys, 'team-new', notYet);
    expect(reads).toEqual([keys.namespace('team-new')]);
    expect(n.rec.name).toBe('team-new');
    // A copy that has not listed yet: every namespace from the store.
    await namespaceForSubmit(counted, keys, 'team-a', { get: () => undefined });
    expect(reads).toHaveLength(2);
    // Without a copy, as before: the store.
    await namespaceForSubmit(counted, keys, 'team-a');
    expect(reads).toHaveLength(3);
    // A namespace that does not exist, copy or not.
    await expect(namespaceForSubmit(counted, keys, 'team-none', view)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('a stale copy cannot let a job into a namespace that changed or went: the compare fails, and the store says why', async () => {
    const { store, keys, counted } = await setup();
    await putNamespace(store, keys, 'team-a', {}, 1);
    const stale = await store.get(keys.namespace('team-a'));
    const frozen: NamespaceCopy = { get: (key) => (key === keys.namespace('team-a') ? (stale ?? null) : null) };
    await putNamespace(store, keys, 'team-a', { weight: 4 }, 2);
    const { compare } = await namespaceForSubmit(counted, keys, 'team-a', frozen);
    const probe = `${keys.prefix}probe`;
    const changed = await store.txn({ compare, success: [{ type: 'put', key: probe, value: 'x' }] });
    expect(changed.succeeded).toBe(false);
    expect(await store.get(probe)).toBeUndefined();
    // Deleted since: the copy's record still compares against a key that is gone.
    await deleteNamespace(store, keys, 'team-a');
    const again = await namespaceForSubmit(counted, keys, 'team-a', frozen);
    expect((await store.txn({ compare: again.compare, success: [{ type: 'put', key: probe, value: 'x' }] })).succeeded).toBe(false);
    // The retry reads the store: the namespace is gone.
    await expect(namespaceForSubmit(counted, keys, 'team-a')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    // A copy that holds the namespace as being deleted is not trusted either.
    await putNamespace(store, keys, 'team-c', {}, 3);
    const kv = (await store.get(keys.namespace('team-c'))) as KeyValue;
    const marked: NamespaceCopy = { get: () => ({ ...kv, value: JSON.stringify({ ...JSON.parse(kv.value), deleting: true }) }) };
    const c = await namespaceForSubmit(counted, keys, 'team-c', marked);
    expect(c.rec.deleting).toBeUndefined();
  });

  it('a front-end submits jobs without reading their namespace from the store, and still refuses one whose namespace went', async () => {
    const { store, keys, reads, counted } = await setup();
    await putNamespace(store, keys, 'team-a', {}, 1);
    const monitor = await startSimNode({ store, keys, clock, log });
    const sched = await startTestScheduler({ name: 'nsv', store: counted, keys, clock, log, agents: 1, seed: 3 });
    const c = schedulerClient(`127.0.0.1:${sched.port}`);
    try {
      const nsReads = (): string[] => reads.filter((k) => k.startsWith(keys.namespaces()));
      const spec = JSON.stringify({ name: 'j', profile: 'spark-lr', tasks: 1, durationMs: 20 });
      const a = await submit(c, { specJson: spec, namespace: 'team-a' });
      const d = await submit(c, { specJson: spec });
      expect((await waitFinal(c, a.jobId)).state).toBe('succeeded');
      expect((await waitFinal(c, d.jobId)).state).toBe('succeeded');
      expect(nsReads()).toEqual([]);
      // A namespace the copy has seen, deleted just before the submission (whether the copy has
      // seen the deletion yet or not, the job is refused; a frozen copy is the test above).
      await putNamespace(store, keys, 'team-gone', {}, 2);
      await new Promise((r) => setTimeout(r, 200));
      await deleteNamespace(store, keys, 'team-gone');
      const e = await failure(submit(c, { specJson: spec, namespace: 'team-gone' }));
      expect(e.code).toBe(5); // NOT_FOUND
    } finally {
      c.close();
      await sched.close();
      await monitor.close();
    }
  });
});
