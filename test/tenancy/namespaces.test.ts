/**
 * Namespaces over gRPC, on the embedded store and on etcd: a namespace must exist before a job is
 * submitted to it; its jobs get ids `<ns>/<id>` and keys under it; Get/Cancel/Explain/Watch take
 * the namespace or the qualified id; ListJobs is scoped; request ids are per namespace;
 * ListNamespaces counts each one's jobs and RUs; a namespace with jobs cannot be deleted.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { Namespace__Output } from '../../src/rpc/gen/tarcil/v1/Namespace.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { SchedulerProcess } from '../../src/frontend/runtime.ts';
import type { MonitorProcess } from '../../src/node/runtime.ts';
import { Keys } from '../../src/state/keys.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { submit, waitFinal } from '../support/live.ts';
import { startSimNode, startTestScheduler } from '../support/live.ts';
import { failure, unary } from '../support/live.ts';

const clock = new SystemClock();
const log = createLogger('ns', 'silent');
const spec = (name: string, durationMs = 50, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ name, profile: 'spark-lr', tasks: 2, durationMs, ...extra });

describe.each(['memory', 'etcd'] as const)('namespaces (%s store)', (kind) => {
  let store: ClusterStore;
  let sched: SchedulerProcess;
  let monitor: MonitorProcess;
  let c: SchedulerClient;
  const keys = new Keys(`/ns-${kind}-${Date.now()}/`);

  beforeAll(async () => {
    store = await openStore(kind === 'memory' ? 'memory://' : inject('etcdEndpoint').replace('http://', 'etcd://'));
    monitor = await startSimNode({ store, keys, clock, log });
    sched = await startTestScheduler({ name: 'ns', store, keys, clock, log, agents: 2, seed: 5 });
    c = schedulerClient(`127.0.0.1:${sched.port}`);
  });
  afterAll(async () => {
    c?.close();
    await sched?.close();
    await monitor?.close();
    await store?.close();
  });

  it('refuses a job for a namespace that does not exist, or with a bad name, writing nothing', async () => {
    const before = (await store.range(keys.jobs())).kvs.length;
    const e1 = await failure(submit(c, { specJson: spec('a'), namespace: 'team-x' }));
    expect(e1.code).toBe(5);
    expect(e1.details).toBe('namespace team-x does not exist (create it: tarcil namespace create team-x)');
    const e2 = await failure(submit(c, { specJson: spec('a'), namespace: 'Team_X' }));
    expect(e2.code).toBe(3);
    expect(e2.details).toMatch(/^namespace: must be 1-63 lower-case letters/);
    const e3 = await failure(submit(c, { specJson: spec('a', 50, { namespace: 'team-y' }), namespace: 'team-x' }));
    expect(e3.code).toBe(3);
    expect(e3.details).toMatch(/^namespace: the request says team-x and the spec team-y/);
    const e4 = await failure(unary(c, 'PutNamespace', { name: 'j-abc' }));
    expect(e4.code).toBe(3);
    expect((await store.range(keys.jobs())).kvs.length).toBe(before);
    expect((await store.range(keys.namespaces())).kvs).toEqual([]);
  });

  it('runs a job in a namespace under its own keys, scoped reads, per-namespace request ids', async () => {
    const ns = await unary<object, Namespace__Output>(c, 'PutNamespace', { name: 'team-a', weight: 2, maxRus: 0 });
    expect(ns).toMatchObject({ name: 'team-a', weight: 2, maxRus: 0, maxWaitingJobs: 0 });

    const a = await submit(c, { specJson: spec('in-a'), namespace: 'team-a', requestId: 'r-1' });
    expect(a.jobId).toMatch(/^team-a\/j-/);
    // The spec may name the namespace instead of the request.
    const a2 = await submit(c, { specJson: spec('in-a-by-spec', 50, { namespace: 'team-a' }) });
    expect(a2.jobId).toMatch(/^team-a\/j-/);
    // The same request id in default is another request: a job of default.
    const d = await submit(c, { specJson: spec('in-default'), requestId: 'r-1' });
    expect(d.jobId).toMatch(/^j-/);
    // And a retry in team-a answers with team-a's job.
    expect((await submit(c, { specJson: spec('in-a'), namespace: 'team-a', requestId: 'r-1' })).jobId).toBe(a.jobId);

    expect((await store.get(keys.job(a.jobId)))?.key).toBe(`${keys.prefix}jobs/team-a/${a.jobId.slice('team-a/'.length)}`);
    await waitFinal(c, a.jobId);
    await waitFinal(c, d.jobId);
    expect((await store.range(`${keys.prefix}tasks/team-a/`)).kvs.length).toBeGreaterThanOrEqual(2);

    const short = a.jobId.slice('team-a/'.length);
    const byNs = await unary<object, { id: string; namespace: string; state: string }>(c, 'GetJob', { jobId: short, namespace: 'team-a' });
    expect(byNs).toMatchObject({ id: a.jobId, namespace: 'team-a', state: 'succeeded' });
    // The short id alone is a job of default: there is none.
    expect((await failure(unary(c, 'GetJob', { jobId: short }))).code).toBe(5);
    // A qualified id and another namespace disagree.
    const mismatch = await failure(unary(c, 'GetJob', { jobId: a.jobId, namespace: 'default' }));
    expect(mismatch.code).toBe(3);
    expect(mismatch.details).toMatch(/^namespace: job team-a\/j-.* is of namespace team-a, not default/);
    const ex = await unary<object, { jobId: string }>(c, 'ExplainJob', { jobId: short, namespace: 'team-a' });
    expect(ex.jobId).toBe(a.jobId);

    const listA = await unary<object, { jobs: { id: string }[] }>(c, 'ListJobs', { namespace: 'team-a' });
    expect(listA.jobs.map((j) => j.id).sort()).toEqual([a.jobId, a2.jobId].sort());
    const listD = await unary<object, { jobs: { id: string }[] }>(c, 'ListJobs', {});
    expect(listD.jobs.map((j) => j.id)).toContain(d.jobId);
    expect(listD.jobs.some((j) => j.id.startsWith('team-a/'))).toBe(false);
    const all = await unary<object, { jobs: { id: string }[] }>(c, 'ListJobs', { allNamespaces: true });
    expect(all.jobs.map((j) => j.id)).toEqual(expect.arrayContaining([a.jobId, a2.jobId, d.jobId]));
  });

  it('counts usage per namespace, cancels within one, and refuses to delete a namespace that holds jobs', async () => {
    await unary(c, 'PutNamespace', { name: 'team-b' });
    const long = await submit(c, { specJson: spec('long', 60_000), namespace: 'team-b' });
    let b: Namespace__Output | undefined;
    for (const t0 = Date.now(); Date.now() - t0 < 10_000; await new Promise((r) => setTimeout(r, 50))) {
      const list = await unary<object, { namespaces: Namespace__Output[] }>(c, 'ListNamespaces', {});
      b = list.namespaces.find((n) => n.name === 'team-b');
      // The job record follows its placement (at most every 250 ms, later on a loaded machine).
      if (b?.rusInUse === 2 && Object.keys(b.jobs).some((st) => st === 'placed' || st === 'running')) break;
    }
    expect(b?.rusInUse).toBe(2);
    // One job, not final (its record may still say placed while its tasks start).
    expect(Object.entries(b?.jobs ?? {})).toEqual([[expect.stringMatching(/^(admitted|placed|running)$/), 1]]);
    const list = await unary<object, { namespaces: Namespace__Output[] }>(c, 'ListNamespaces', {});
    expect(list.namespaces.map((n) => n.name)).toEqual(['default', 'team-a', 'team-b']);

    const before = await store.get(keys.namespace('team-b'));
    const del = await failure(unary(c, 'DeleteNamespace', { name: 'team-b' }));
    expect(del.code).toBe(9);
    expect(del.details).toMatch(/^namespace team-b holds 1 job\(s\)/);
    // Still there and usable after the refusal, and not written at all (a write would abort the
    // submissions that read it meanwhile).
    const after = await store.get(keys.namespace('team-b'));
    expect(after?.value).not.toContain('deleting');
    expect(after?.modRevision).toBe(before?.modRevision);

    const cancelled = await unary<object, { state: string; cancelRequested: boolean }>(c, 'CancelJob', {
      jobId: long.jobId.slice('team-b/'.length),
      namespace: 'team-b',
    });
    expect(cancelled.cancelRequested || cancelled.state === 'cancelled').toBe(true);
    await waitFinal(c, long.jobId);

    await unary(c, 'PutNamespace', { name: 'empty' });
    const gone = await unary<object, Namespace__Output>(c, 'DeleteNamespace', { name: 'empty' });
    expect(gone.name).toBe('empty');
    expect(await store.get(keys.namespace('empty'))).toBeUndefined();
    expect((await failure(submit(c, { specJson: spec('late'), namespace: 'empty' }))).code).toBe(5);
    expect((await failure(unary(c, 'DeleteNamespace', { name: 'default' }))).code).toBe(9);
  });
});
