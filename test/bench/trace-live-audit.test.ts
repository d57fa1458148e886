/**
 * The live trace replay's placement audit (bench/lib/trace-live-run.ts, auditPlacements): from
 * the servers the task and RU records put each task on, and each server's platform from its
 * server record, it counts pods split over servers and tasks on a platform the job did not allow.
 */
import { describe, expect, it } from 'vitest';
import { auditPlacements, type LiveJob } from '../../bench/lib/trace-live-run.ts';

const job = (id: string, tasks: number): LiveJob => ({ id, qos: 'LS', tasks, neverScheduled: false, servers: 0, liveWaitMs: 5 });
const on = (...servers: string[][]): Map<number, Set<string>> => new Map(servers.map((s, i) => [i, new Set(s)]));

describe('the live replay placement audit', () => {
  const platformOf = new Map([
    ['a', 'cpu-96c'],
    ['b', 'cpu-96c'],
    ['g', 't4-104c'],
  ]);
  const one = { mode: 'pack', scope: 'server', required: true };
  const specs = [
    { locality: one, constraints: { platforms: ['t4-104c'] } },
    { locality: one },
    { locality: one },
    { locality: { mode: 'any', scope: 'server' } },
  ];
  const jobs = [job('held', 2), job('free', 3), job('one', 1), job('spread', 2)];
  const jobOf = new Map([
    ['held', 0],
    ['free', 1],
    ['one', 2],
    ['spread', 3],
  ]);

  it('finds nothing when each pod ran on one server of its platforms (a job not required on one server may spread)', () => {
    const placedOn = new Map([
      ['held', on(['g'], ['g'])],
      ['free', on(['a'], ['a'], ['a'])],
      ['one', on(['b'])],
      ['spread', on(['a'], ['b'])],
    ]);
    expect(auditPlacements(jobOf, placedOn, specs, platformOf, jobs)).toEqual({
      tasksSeen: 8,
      multiCorePlaced: 2,
      splitPods: 0,
      offPlatformTasks: 0,
      unknownServerTasks: 0,
      examples: [],
    });
  });

  it('counts a pod split over servers, a task off its platforms and a server without a record', () => {
    const placedOn = new Map([
      ['held', on(['g'], ['a'])],
      ['free', on(['a'], ['b'], ['zz'])],
      ['one', on(['b'])],
      ['spread', on(['a'], ['b'])],
    ]);
    const a = auditPlacements(jobOf, placedOn, specs, platformOf, jobs);
    expect(a).toMatchObject({ tasksSeen: 8, splitPods: 2, offPlatformTasks: 1, unknownServerTasks: 1 });
    expect(a.examples).toContain('held: task 1 on a (cpu-96c), not one of t4-104c');
  });
});
