/**
 * A gang larger than one transaction under a namespace quota (embedded store with a small
 * operation limit, so the gang is reserved chunk by chunk): a chunk the quota refuses gives back
 * the reservations already made, the gang waits with the quota's reason, and it runs whole once
 * the namespace's other job has ended; the namespace never holds more than its quota.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { SchedulerProcess } from '../../src/frontend/runtime.ts';
import type { MonitorProcess } from '../../src/node/runtime.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { putNamespace } from '../../src/tenancy/namespaces.ts';
import { parseUsage } from '../../src/tenancy/quota.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { getJob, submit, waitFinal } from '../support/live.ts';
import { startSimNode, startTestScheduler } from '../support/live.ts';

const clock = new SystemClock();
const log = createLogger('quota-gang', 'silent');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('a gang reserved in chunks under a namespace quota', () => {
  const store = new MemoryStore({ maxTxnOps: 32 });
  const keys = new Keys('/quota-gang/');
  let sched: SchedulerProcess;
  let monitors: MonitorProcess[];
  let c: SchedulerClient;

  beforeAll(async () => {
    monitors = await Promise.all([0, 1, 2, 3].map((i) => startSimNode({ store, keys, clock, log, id: `s${i}` })));
    sched = await startTestScheduler({ name: 'qg', store, keys, clock, log, agents: 1, seed: 3 }, { agentConfig: { recheckMs: 200 } });
    c = schedulerClient(`127.0.0.1:${sched.port}`);
  });
  afterAll(async () => {
    c?.close();
    await sched?.close();
    for (const m of monitors ?? []) await m.close();
    await store.close();
  });

  it('waits whole for the quota and never holds more than it', async () => {
    expect(sched.manager.agents[0]?.picksPerTxn).toBe(10);
    await putNamespace(store, keys, 'g', { maxRus: 14 }, Date.now());
    const held = async (): Promise<number> =>
      (await store.range(keys.rus())).kvs.filter((kv) => {
        const r = JSON.parse(kv.value) as { state?: string; job?: string };
        return (r.state === 'busy' || r.state === 'reserved') && r.job?.startsWith('g/');
      }).length;
    const holder = await submit(c, { specJson: JSON.stringify({ name: 'holder', profile: 'spark-lr', tasks: 3, durationMs: 2500 }), namespace: 'g' });
    for (const t0 = Date.now(); (await held()) < 3; await sleep(20)) if (Date.now() - t0 > 10_000) throw new Error('the holder did not start');
    const gang = await submit(c, { specJson: JSON.stringify({ name: 'gang', profile: 'spark-lr', tasks: 13, durationMs: 200, mode: 'gang' }), namespace: 'g' });
    let most = 0;
    let message = '';
    for (const t0 = Date.now(); Date.now() - t0 < 20_000; await sleep(20)) {
      most = Math.max(most, await held());
      const j = await getJob(c, gang.jobId);
      if (j.message.includes('quota')) message = j.message;
      if (j.state === 'succeeded') break;
    }
    expect(message).toMatch(/^namespace g is at its quota: \d+ of 14 RUs in use$/);
    expect(most).toBeLessThanOrEqual(14);
    expect((await waitFinal(c, holder.jobId)).state).toBe('succeeded');
    expect((await waitFinal(c, gang.jobId)).state).toBe('succeeded');
    expect(parseUsage(await store.get(keys.usage('g')))).toEqual({ total: 0, jobs: {} });
  }, 40_000);
});
