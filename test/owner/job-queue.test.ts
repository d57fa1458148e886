/**
 * The owner's job queue (owner/job-queue.ts): the first evaluations of jobs submitted during one
 * turn of the event loop start together in the next one; other evaluations take one turn each, as
 * long passes do; a job's adds before its evaluation starts are looked at once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { JobQueue, type QueuedJob } from '../../src/owner/job-queue.ts';
import { SharedBackoff } from '../../src/util/backoff.ts';
import { createLogger } from '../../src/util/log.ts';

function job(id: string): QueuedJob & { id: string } {
  return { id, dropped: false, evalQueued: false, chain: Promise.resolve(), full: false };
}

/** A queue whose evaluations note the event loop's turn they start in. */
function harness() {
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
  const settle = async () => {
    await Promise.all(tracked);
    ticking = false;
  };
  stops.push(() => (ticking = false));
  return { q, started, settle };
}

const stops: (() => void)[] = [];
afterEach(() => {
  for (const s of stops.splice(0)) s();
});

describe('the job queue', () => {
  it('starts the first evaluation of every job submitted in one turn in the next turn, once per job', async () => {
    const { q, started, settle } = harness();
    // Fifty submissions answered by one response, some jobs woken again before they start.
    const jobs = Array.from({ length: 50 }, (_, i) => job(`j${i}`));
    for (const o of jobs) q.add(o, true);
    for (const o of jobs.slice(0, 10)) q.add(o);
    await settle();
    expect(started.map((s) => s.id)).toEqual(jobs.map((o) => o.id));
    expect(new Set(started.map((s) => s.turn)).size).toBe(1);
  });

  it('gives other evaluations one turn each, in the order they were asked for', async () => {
    const { q, started, settle } = harness();
    const jobs = Array.from({ length: 5 }, (_, i) => job(`k${i}`));
    for (const o of jobs) q.add(o);
    await settle();
    expect(started.map((s) => s.id)).toEqual(jobs.map((o) => o.id));
    expect(new Set(started.map((s) => s.turn)).size).toBe(jobs.length);
  });

  it('lets a submission started in a turn go before evaluations already waiting for later turns', async () => {
    const { q, started, settle } = harness();
    const waiting = Array.from({ length: 20 }, (_, i) => job(`w${i}`));
    for (const o of waiting) q.add(o);
    const fresh = job('fresh');
    q.add(fresh, true);
    await settle();
    const at = (id: string) => started.find((s) => s.id === id)?.turn ?? -1;
    expect(at('fresh')).toBeLessThanOrEqual(at('w1'));
    expect(at('fresh')).toBeLessThan(at('w19'));
  });
});
