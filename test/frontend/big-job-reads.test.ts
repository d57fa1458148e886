import { afterEach, describe, expect, it, vi } from 'vitest';
import type { JobManager } from '../../src/owner/manager.ts';
import type { Explanation } from '../../src/rpc/gen/tarcil/v1/Explanation.ts';
import type { SchedulerHandlers } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { MAX_TASKS_LISTED, SchedulerService } from '../../src/frontend/scheduler-service.ts';
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
      if (r)
        ops.push({ type: 'put' as const, key: keys.task('big', j), value: JSON.stringify({ job: 'big', index: j, state: 'succeeded', attempt: 0, ...r }) });
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
  it('GetJob lists a page of 1,000, says where the next begins, and counts the rest without reading them', async () => {
    const n = 5 * SNAPSHOT_BLOCK;
    // Two tasks in three have no record (never placed).
    const { service } = await bigJob(n, (i) => (i % 3 === 0 ? {} : undefined));
    const withRecord = Array.from({ length: n }, (_, i) => i).filter((i) => i % 3 === 0);
    const ranges = vi.spyOn(store!, 'range');
    const counts = vi.spyOn(store!, 'count');
    const job = await service.getJob('big', true);
    expect(job.taskList?.map((t) => t.index)).toEqual(withRecord.slice(0, MAX_TASKS_LISTED));
    expect(job.tasksOmitted).toBe(withRecord.length - MAX_TASKS_LISTED);
    expect(job.nextTaskFrom).toBe(withRecord[MAX_TASKS_LISTED - 1]! + 1);
    // The first block comes with the job; the rest is counted, not read.
    expect(ranges).toHaveBeenCalledTimes(0);
    expect(counts).toHaveBeenCalledTimes(1);

    // A page that starts late in one block and ends in the next: one more read.
    ranges.mockClear();
    const from = SNAPSHOT_BLOCK - 1500;
    const page = await service.getJob('big', true, { from, limit: MAX_TASKS_LISTED });
    const want = withRecord.filter((i) => i >= from).slice(0, MAX_TASKS_LISTED);
    expect(want[want.length - 1]).toBeGreaterThanOrEqual(SNAPSHOT_BLOCK);
    expect(page.taskList?.map((t) => t.index)).toEqual(want);
    expect(ranges).toHaveBeenCalledTimes(1);
    expect(page.tasksOmitted).toBe(withRecord.length - MAX_TASKS_LISTED);
  });

  it('following next_task_from lists every task that has a record exactly once, and the last page says it is the last', async () => {
    const n = 3 * SNAPSHOT_BLOCK + 17;
    const { service } = await bigJob(n, (i) => (i % 7 !== 2 ? {} : undefined));
    const seen: number[] = [];
    let from = 0;
    let pages = 0;
    for (;;) {
      const page = await service.getJob('big', true, { from, limit: 700 });
      pages++;
      seen.push(...(page.taskList ?? []).map((t) => t.index ?? -1));
      if (!page.nextTaskFrom) break;
      expect(page.nextTaskFrom).toBeGreaterThan(from);
      from = page.nextTaskFrom;
    }
    const withRecord = Array.from({ length: n }, (_, i) => i).filter((i) => i % 7 !== 2);
    expect(seen).toEqual(withRecord);
    expect(pages).toBe(Math.ceil(withRecord.length / 700));
  });

  it('a page that ends with a block when no later task has a record is the last one', async () => {
    const n = 2 * SNAPSHOT_BLOCK;
    const { service } = await bigJob(n, (i) => (i >= SNAPSHOT_BLOCK - 1000 && i < SNAPSHOT_BLOCK ? {} : undefined));
    const job = await service.getJob('big', true);
    expect(job.taskList?.length).toBe(1000);
    expect(job.nextTaskFrom ?? 0).toBe(0);
    expect(job.tasksOmitted ?? 0).toBe(0);
  });

  it('GetJob refuses a page larger than the maximum, naming task_limit', async () => {
    const { service } = await bigJob(10, () => ({}));
    const err = await new Promise<{ code?: number; details?: string }>((resolve) => {
      const call = { request: { jobId: 'big', taskFrom: 0, taskLimit: MAX_TASKS_LISTED + 1 } } as unknown as Parameters<SchedulerHandlers['GetJob']>[0];
      service.handlers().GetJob(call, (e) => resolve(e ?? {}));
    });
    expect(err.code).toBe(3);
    expect(err.details).toMatch(/task_limit: must be at most 1000/);
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
