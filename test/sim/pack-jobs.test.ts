/**
 * `packJobs` (the simulator's study of decisions grouped by server): every job's tasks asked for
 * packed server by server. On the same W3 jobs a job's tasks then share servers, where tarcil's
 * independent sampling spreads them, and every task still runs.
 */
import { describe, expect, it } from 'vitest';
import { runSim, type RunResult } from '../../src/sim/run.ts';
import { w3 } from '../../src/sim/workloads.ts';

const run = (packJobs: boolean): RunResult =>
  runSim({ workload: w3({ jobs: 300 }), policy: { name: 'tarcil', ...(packJobs ? { packJobs } : {}) }, seed: 1, keepWorld: true });

/** Distinct servers per task over every job of more than one task: 1 when each job sits on one server. */
function serversPerTask(r: RunResult): number {
  const world = r.world!;
  let servers = 0;
  let tasks = 0;
  for (const job of world.completed) {
    if (job.tasks.length < 2) continue;
    servers += new Set(job.tasks.map((t) => world.ruServer[t.ru])).size;
    tasks += job.tasks.length;
  }
  return servers / tasks;
}

describe('tarcil with every job packed', () => {
  it("puts a job's tasks on fewer servers than the default does, and runs every task of every job", () => {
    const spread = run(false);
    const packed = run(true);
    expect(packed.world!.completed.length).toBe(spread.world!.completed.length);
    expect(packed.stats.unfinished).toBe(0);
    expect(packed.world!.completed.every((j) => j.tasks.every((t) => t.state === 'done'))).toBe(true);
    expect(serversPerTask(packed)).toBeLessThan(0.6 * serversPerTask(spread));
  });
});
