/**
 * The count of unplaced tasks a front-end reads for back-pressure (OwnedJobs.pending) is kept as
 * records change rather than counted over every owned job: after any sequence of task record
 * changes, record rewrites (a cancellation, a spec grown by scale-out) and jobs taken, replaced
 * and dropped, it equals the count taken the long way.
 */
import { describe, expect, it } from 'vitest';
import type { SchedulingAgent } from '../../src/agent/agent.ts';
import { forgetTask, mergeTask, newOwned, OwnedJobs, setRecord, unplacedTasks, type Owned } from '../../src/owner/job.ts';
import type { JobSpec, TaskState } from '../../src/model/types.ts';
import type { LiveJobRecord } from '../../src/state/live-records.ts';
import { SeededRng } from '../../src/util/rng.ts';

const STATES: TaskState[] = ['queued', 'placed', 'running', 'succeeded', 'failed', 'lost', 'cancelled'];

function job(id: string, tasks: number): Owned {
  const spec = { id, tasks } as JobSpec;
  return newOwned(spec, undefined as unknown as SchedulingAgent, { spec, state: 'queued', placed: 0, updatedAt: 0 } as LiveJobRecord, 1, new Map());
}

const counted = (jobs: OwnedJobs): number => [...jobs.values()].reduce((n, o) => n + unplacedTasks(o), 0);

describe('the unplaced-task count of the owned jobs', () => {
  it('a submitted job counts all its tasks; placing, queueing again, cancelling and dropping it move the count', () => {
    const jobs = new OwnedJobs();
    const o = job('j-1', 5);
    jobs.set(o.id, o);
    expect(jobs.pending).toBe(5);
    mergeTask(o, 0, { job: 'j-1', index: 0, state: 'placed', attempt: 0, ru: { server: 's', index: 0 } }, 10);
    mergeTask(o, 1, { job: 'j-1', index: 1, state: 'running', attempt: 0, ru: { server: 's', index: 1 } }, 11);
    expect(jobs.pending).toBe(3);
    mergeTask(o, 1, { job: 'j-1', index: 1, state: 'lost', attempt: 0, ru: { server: 's', index: 1 } }, 12);
    expect(jobs.pending).toBe(4);
    forgetTask(o, 0);
    expect(jobs.pending).toBe(5);
    setRecord(o, { ...o.rec, cancelRequested: true });
    expect(jobs.pending).toBe(0);
    setRecord(o, { ...o.rec, cancelRequested: false });
    expect(jobs.pending).toBe(5);
    // Scale-out grows the spec by one task, not yet placed.
    setRecord(o, o.rec, { ...o.spec, tasks: 6 });
    expect(jobs.pending).toBe(6);
    jobs.delete(o.id);
    expect(jobs.pending).toBe(0);
    // A job no longer owned moves the count no more.
    mergeTask(o, 2, { job: 'j-1', index: 2, state: 'queued', attempt: 1 }, 13);
    expect(jobs.pending).toBe(0);
  });

  it('equals the count over every job after random changes (seeds 1–20)', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const rng = new SeededRng(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng.next() * xs.length)] as T;
      const jobs = new OwnedJobs();
      const known: Owned[] = [];
      let rev = 1;
      for (let step = 0; step < 400; step++) {
        const r = rng.next();
        if (r < 0.1 || known.length === 0) {
          const o = job(`j-${known.length}`, 1 + Math.floor(rng.next() * 6));
          known.push(o);
          // Some jobs gain task records before they are owned (an adoption reads them first).
          if (rng.next() < 0.3) mergeTask(o, 0, { job: o.id, index: 0, state: 'running', attempt: 0 }, rev++);
          jobs.set(o.id, o);
        } else if (r < 0.15) {
          const o = pick(known);
          if (rng.next() < 0.5) jobs.delete(o.id);
          else {
            // Taken again under the same id (adopted anew): the old copy leaves the count.
            const again = job(o.id, o.spec.tasks);
            known.push(again);
            jobs.set(again.id, again);
          }
        } else if (r < 0.2) {
          const o = pick(known);
          // A cancellation requested or not; sometimes the spec grown by one task (scale-out).
          const grown = rng.next() < 0.3 ? { ...o.spec, tasks: o.spec.tasks + 1 } : o.spec;
          setRecord(o, { ...o.rec, cancelRequested: rng.next() < 0.5 }, grown);
        } else if (r < 0.3) {
          const o = pick(known);
          forgetTask(o, Math.floor(rng.next() * o.spec.tasks));
        } else if (r < 0.31) {
          jobs.clear();
        } else {
          const o = pick(known);
          const t = Math.floor(rng.next() * o.spec.tasks);
          mergeTask(o, t, { job: o.id, index: t, state: pick(STATES), attempt: 0, ru: { server: `s${t % 3}`, index: t } }, rev++);
        }
        expect(jobs.pending, `seed ${seed}, step ${step}`).toBe(counted(jobs));
      }
    }
  });
});
