import { afterEach, describe, expect, it, vi } from 'vitest';
import type { JobManager } from '../../src/agent/lifecycle.ts';
import type { Explanation } from '../../src/frontend/gen/tarcil/v1/Explanation.ts';
import type { SchedulerHandlers } from '../../src/frontend/gen/tarcil/v1/Scheduler.ts';
import { SchedulerService } from '../../src/frontend/scheduler-service.ts';
import { SNAPSHOT_BLOCK } from '../../src/frontend/job-watch.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveJobRecord } from '../../src/state/live-records.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';

/**
 * GetJob and ExplainJob on a job with tens of thousands of task records: they read them block by
 * block, on several turns of the event loop, and answer as if they had read them at once.
 */
let store: MemoryStore | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

async function bigJob(n: number, record: (i: number) => Record<string, unknown> | undefined): Promise<{ service: SchedulerService; keys: Keys }> {
  store = new MemoryStore({ maxTxnOps: 1000 });
  const keys = new Keys('/r/');
  const spec = { ...makeJob('big', TEST_PROFILES[0]!, n), id: 'big' };
  await store.put(keys.job('big'), JSON.stringify({ spec, state: 'running', placed: n, updatedAt: 0, submittedAt: 0, rescheduled: 1 } satisfies LiveJobRecord));
  for (let i = 0; i < n; i += 1000) {
    const ops = [];
    for (let j = i; j < Math.min(n, i + 1000); j++) {
      const r = record(j);
      if (r) ops.push({ type: 'put' as const, key: keys.task('big', j), value: JSON.stringify({ job: 'big', index: j, state: 'succeeded', attempt: 0, ...r }) });
    }
    if (ops.length) await store.txn({ compare: [], success: ops });
  }
  const manager = { inflightDecision: () => undefined } as unknown as JobManager;
  const service = new SchedulerService({ manager, store, keys, catalog: loadCatalog(), clock: new SystemClock(), log: createLogger('test', 'silent') });
  return { service, keys };
}

/** Counts the turns of the event loop while `p` is pending. */
async function turnsWhile<T>(p: Promise<T>): Promise<{ value: T; turns: number }> {
  let turns = 0;
  let done = false;
  const spin = (): void => {
    if (done) return;
    turns++;
    setImmediate(spin);
  };
  setImmediate(spin);
  const value = await p;
  done = true;
  return { value, turns };
}

describe('reads of a job with many task records', () => {
  it('GetJob lists the lowest 5,000 indexes that have a record over several turns, and counts the rest without reading them', async () => {
    const n = 5 * SNAPSHOT_BLOCK;
    // Two tasks in three have no record (never placed): the 5,000 listed span two blocks.
    const { service } = await bigJob(n, (i) => (i % 3 === 0 ? {} : undefined));
    const ranges = vi.spyOn(store!, 'range');
    const counts = vi.spyOn(store!, 'count');
    const { value: job, turns } = await turnsWhile(service.getJob('big', true));
    const withRecord = Array.from({ length: n }, (_, i) => i).filter((i) => i % 3 === 0);
    expect(job.taskList?.map((t) => t.index)).toEqual(withRecord.slice(0, 5000));
    expect(job.tasksOmitted).toBe(withRecord.length - 5000);
    expect(turns).toBeGreaterThanOrEqual(1);
    // The first block comes with the job; only the second is read on its own; the rest counted.
    expect(ranges).toHaveBeenCalledTimes(1);
    expect(counts).toHaveBeenCalledTimes(1);
  });

  it('ExplainJob finds the tasks placed more than once in any block', async () => {
    const n = 3 * SNAPSHOT_BLOCK;
    const again = new Set([7, SNAPSHOT_BLOCK + 3, n - 1]);
    const { service } = await bigJob(n, (i) => (again.has(i) ? { attempt: 1, previous: [{ attempt: 0, state: 'lost' }] } : {}));
    const explain = new Promise<Explanation>((resolve, reject) => {
      const call = { request: { jobId: 'big' } } as unknown as Parameters<SchedulerHandlers['ExplainJob']>[0];
      service.handlers().ExplainJob(call, (err, res) => (err || !res ? reject(new Error(err ? String(err.details ?? err.code) : 'no answer')) : resolve(res)));
    });
    const { value: e, turns } = await turnsWhile(explain);
    expect(e.replaced?.map((t) => t.index)).toEqual([...again]);
    expect(turns).toBeGreaterThanOrEqual(2);
  });
});
