/**
 * Namespace quotas on etcd, over gRPC: a job over its namespace's RU quota waits, with the reason
 * in its message and in explain, and runs once RUs are given back; an incremental job larger than
 * the quota runs a quota's worth at a time; a gang larger than the quota is refused at submit;
 * lowering a quota below the usage kills nothing; max_waiting_jobs refuses the next submission
 * (also when submissions race); a namespace without quota writes no usage record.
 */
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { SchedulerProcess } from '../../src/frontend/runtime.ts';
import type { MonitorProcess } from '../../src/node/runtime.ts';
import { Keys } from '../../src/state/keys.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { parseUsage } from '../../src/tenancy/quota.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { getJob, submit, waitFinal } from '../support/live.ts';
import { startSimNode, startTestScheduler } from '../support/live.ts';
import { failure, unary } from '../support/live.ts';

const clock = new SystemClock();
const log = createLogger('quota', 'silent');
const spec = (name: string, tasks: number, durationMs: number, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ name, profile: 'spark-lr', tasks, durationMs, ...extra });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, f: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('namespace quotas (etcd)', () => {
  let store: ClusterStore;
  let sched: SchedulerProcess;
  let monitors: MonitorProcess[];
  let c: SchedulerClient;
  const keys = new Keys(`/quota-${Date.now()}/`);

  /** RUs held (busy or reserved) by the namespace's jobs now. */
  const held = async (ns: string): Promise<number> =>
    (await store.range(keys.rus())).kvs.filter((kv) => {
      const r = JSON.parse(kv.value) as { state?: string; job?: string };
      return (r.state === 'busy' || r.state === 'reserved') && r.job?.startsWith(`${ns}/`);
    }).length;
  const usage = async (ns: string) => parseUsage(await store.get(keys.usage(ns)));

  beforeAll(async () => {
    store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
    monitors = await Promise.all([0, 1].map((i) => startSimNode({ store, keys, clock, log, id: `s${i}` })));
    sched = await startTestScheduler({ name: 'quota', store, keys, clock, log, agents: 2, seed: 7 }, { agentConfig: { recheckMs: 200 } });
    c = schedulerClient(`127.0.0.1:${sched.port}`);
  });
  afterAll(async () => {
    c?.close();
    await sched?.close();
    for (const m of monitors ?? []) await m.close();
    await store?.close();
  });

  it('a job over the quota waits with the reason in its message and explain, then runs once RUs are given back', async () => {
    await unary(c, 'PutNamespace', { name: 'q2', maxRus: 2 });
    const a = await submit(c, { specJson: spec('holder', 2, 2500), namespace: 'q2' });
    await until('the holder running', async () => ((await held('q2')) === 2 ? true : undefined));
    const b = await submit(c, { specJson: spec('waiter', 1, 50), namespace: 'q2' });
    const waiting = await until('the waiter to say why it waits', async () => {
      const j = await getJob(c, b.jobId);
      return j.message.includes('quota') ? j : undefined;
    });
    expect(waiting.message).toBe('namespace q2 is at its quota: 2 of 2 RUs in use');
    const ex = await unary<object, { waitingFor: string; text: string; decisions: { quota: string }[] }>(c, 'ExplainJob', { jobId: b.jobId });
    expect(ex.waitingFor).toBe('namespace q2 is at its quota: 2 of 2 RUs in use');
    expect(ex.decisions.at(-1)?.quota).toBe('namespace q2 is at its quota: 2 of 2 RUs in use');
    expect((await usage('q2')).total).toBe(2);
    expect(await held('q2')).toBe(2);
    expect((await waitFinal(c, a.jobId)).state).toBe('succeeded');
    expect((await waitFinal(c, b.jobId)).state).toBe('succeeded');
    // The stored decision record keeps why it waited.
    const after = await unary<object, { decisions: { quota: string }[]; text: string }>(c, 'ExplainJob', { jobId: b.jobId });
    expect(after.decisions.some((d) => d.quota === 'namespace q2 is at its quota: 2 of 2 RUs in use')).toBe(true);
    expect(after.text).toContain('quota: waited because namespace q2 is at its quota');
    // Every allotment was given back.
    expect(await until('the usage back to 0', async () => ((await usage('q2')).total === 0 ? usage('q2') : undefined))).toEqual({ total: 0, jobs: {} });
  });

  it('an incremental job larger than the quota runs a quota at a time; a gang larger than the quota is refused at submit', async () => {
    await unary(c, 'PutNamespace', { name: 'q3', maxRus: 3 });
    const gang = await failure(submit(c, { specJson: spec('big-gang', 4, 50, { mode: 'gang' }), namespace: 'q3' }));
    expect(gang.code).toBe(9);
    expect(gang.details).toBe('tasks: a gang of 4 tasks can never run in namespace q3, whose quota is 3 RUs (max_rus)');
    expect((await store.range(keys.namespaceJobs('q3'))).kvs).toEqual([]);
    const fits = await submit(c, { specJson: spec('gang-of-3', 3, 50, { mode: 'gang' }), namespace: 'q3' });
    const inc = await submit(c, { specJson: spec('seven', 7, 300), namespace: 'q3' });
    let most = 0;
    for (const t0 = Date.now(); Date.now() - t0 < 20_000; await sleep(20)) {
      most = Math.max(most, await held('q3'));
      if ((await getJob(c, inc.jobId)).state === 'succeeded') break;
    }
    expect(most).toBe(3);
    expect((await waitFinal(c, inc.jobId)).state).toBe('succeeded');
    expect((await waitFinal(c, fits.jobId)).state).toBe('succeeded');
  });

  it('lowering a quota below the usage kills nothing; new placements wait until the usage is below it', async () => {
    await unary(c, 'PutNamespace', { name: 'qlow', maxRus: 4 });
    const a = await submit(c, { specJson: spec('four', 4, 2500), namespace: 'qlow' });
    await until('four running', async () => ((await held('qlow')) === 4 ? true : undefined));
    const lowered = await unary<object, { maxRus: number }>(c, 'PutNamespace', { name: 'qlow', maxRus: 1 });
    expect(lowered.maxRus).toBe(1);
    const b = await submit(c, { specJson: spec('one', 1, 50), namespace: 'qlow' });
    const j = await until('the new job to wait', async () => {
      const r = await getJob(c, b.jobId);
      return r.message.includes('quota') ? r : undefined;
    });
    expect(j.message).toBe('namespace qlow is at its quota: 4 of 1 RUs in use');
    // Nothing was stopped: the four tasks still run.
    expect(await held('qlow')).toBe(4);
    const ja = await waitFinal(c, a.jobId);
    expect(ja.state).toBe('succeeded');
    expect((await waitFinal(c, b.jobId)).state).toBe('succeeded');
  });

  it('a quota set on a namespace that already runs tasks counts them', async () => {
    await unary(c, 'PutNamespace', { name: 'qlate' });
    const a = await submit(c, { specJson: spec('early', 2, 2500), namespace: 'qlate' });
    await until('two running', async () => ((await held('qlate')) === 2 ? true : undefined));
    expect(await store.get(keys.usage('qlate'))).toBeUndefined();
    await unary(c, 'PutNamespace', { name: 'qlate', maxRus: 2 });
    expect((await usage('qlate')).total).toBe(2);
    const b = await submit(c, { specJson: spec('late', 1, 50), namespace: 'qlate' });
    const j = await until('the new job to wait', async () => {
      const r = await getJob(c, b.jobId);
      return r.message.includes('quota') ? r : undefined;
    });
    expect(j.message).toBe('namespace qlate is at its quota: 2 of 2 RUs in use');
    expect((await waitFinal(c, a.jobId)).state).toBe('succeeded');
    expect((await waitFinal(c, b.jobId)).state).toBe('succeeded');
    expect(await usage('qlate')).toEqual({ total: 0, jobs: {} });
  });

  it('max_waiting_jobs refuses the next submission, also when submissions race', async () => {
    await unary(c, 'PutNamespace', { name: 'qw', maxWaitingJobs: 2 });
    const first = await Promise.all([
      submit(c, { specJson: spec('w1', 1, 1500), namespace: 'qw' }),
      submit(c, { specJson: spec('w2', 1, 1500), namespace: 'qw' }),
    ]);
    const e = await failure(submit(c, { specJson: spec('w3', 1, 50), namespace: 'qw' }));
    expect(e.code).toBe(8);
    expect(e.details).toBe('namespace qw has 2 jobs not yet final, its limit (max_waiting_jobs 2): retry once some have finished');
    for (const j of first) expect((await waitFinal(c, j.jobId)).state).toBe('succeeded');
    // Racing submissions: exactly the limit gets in.
    await unary(c, 'PutNamespace', { name: 'qr', maxWaitingJobs: 3 });
    const raced = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => submit(c, { specJson: spec(`r${i}`, 1, 1000), namespace: 'qr' })));
    const ok = raced.filter((r) => r.status === 'fulfilled');
    expect(ok.length).toBe(3);
    for (const r of raced) if (r.status === 'rejected') expect((r.reason as grpc.ServiceError).code).toBe(8);
    expect((await store.range(keys.namespaceJobs('qr'))).kvs.length).toBe(3);
    for (const r of ok) expect((await waitFinal(c, (r as PromiseFulfilledResult<{ jobId: string }>).value.jobId)).state).toBe('succeeded');
  });

  it('a namespace without quota (and default) writes no usage record; default cannot have a quota', async () => {
    await unary(c, 'PutNamespace', { name: 'free' });
    const a = await submit(c, { specJson: spec('free-job', 3, 50), namespace: 'free' });
    const d = await submit(c, { specJson: spec('default-job', 3, 50) });
    expect((await waitFinal(c, a.jobId)).state).toBe('succeeded');
    expect((await waitFinal(c, d.jobId)).state).toBe('succeeded');
    expect(await store.get(keys.usage('free'))).toBeUndefined();
    expect(await store.get(keys.usage('default'))).toBeUndefined();
    const e = await failure(unary(c, 'PutNamespace', { name: 'default', maxRus: 4 }));
    expect(e.code).toBe(3);
    expect(e.details).toBe('max_rus: namespace default cannot have an RU quota (0 only): create a namespace for the jobs to limit');
  });
});
