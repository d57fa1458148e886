/**
 * The owner's job queue (owner/job-queue.ts): evaluations asked for during one turn of the event
 * loop start together in the next one, and a job's adds before its evaluation starts are looked
 * at once.
 */
import { describe, expect, it } from 'vitest';
import { JobQueue, type QueuedJob } from '../../src/owner/job-queue.ts';
import { SharedBackoff } from '../../src/util/backoff.ts';
import { createLogger } from '../../src/util/log.ts';

function job(id: string): QueuedJob & { id: string } {
  return { id, dropped: false, evalQueued: false, chain: Promise.resolve(), full: false };
}

describe('the job queue', () => {
  it('starts every evaluation asked for in one turn in the next turn, once per job', async () => {
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const started: { id: string; turn: number }[] = [];
    const tracked: Promise<unknown>[] = [];
    const q = new JobQueue({
      run: (o) => {
        started.push({ id: o.id, turn });
        return Promise.resolve();
      },
      log: createLogger('test', 'silent'),
      retries: new SharedBackoff(500, 10_000),
      later: () => {},
      track: (p) => tracked.push(p),
      closed: () => false,
      hold: () => undefined,
    });
    // A watch response that wakes fifty jobs, some of them twice.
    const jobs = Array.from({ length: 50 }, (_, i) => job(`j${i}`));
    for (const o of jobs) q.add(o);
    for (const o of jobs.slice(0, 10)) q.add(o);
    await Promise.all(tracked);
    ticking = false;
    expect(started.map((s) => s.id)).toEqual(jobs.map((o) => o.id));
    expect(new Set(started.map((s) => s.turn)).size).toBe(1);
  });
});
