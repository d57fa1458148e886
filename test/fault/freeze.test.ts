/**
 * A frozen monitor never lets a task run twice (the short run; bench/nemesis.ts is the long one):
 * a 3-member etcd, two front-ends and four process-executor monitors with a 3 s lease and a 2 s
 * disconnect grace, under a stream of jobs whose tasks outlast the faults. The nemesis SIGSTOPs a
 * monitor for twice its lease + grace (its tasks are placed elsewhere while it is frozen: only
 * their supervisors, on their own clock, stop the first copies in time), then SIGKILLs a monitor
 * and its tasks' supervisors but not the tasks (they must die with their supervisors). The
 * checker reads the tasks' own execution records: no two runs of a task overlap, no succeeded
 * task runs again, with the rest of its invariants. The tasks run longer than the time from the
 * workload's start to the end of the freeze, so none ends while its monitor is frozen (a task
 * that ends then has its success written by its supervisor: test/monitor/frozen-success.test.ts,
 * and the long run in bench/nemesis.ts).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { summarize } from '../support/fault-checker.ts';
import type { FaultCell } from './cell.ts';
import { runScenario } from './run.ts';

const SEED = Number(process.env.FAULT_SEED ?? 1);
const TTL_S = 3;
const GRACE_MS = 2000;

let cell: FaultCell | undefined;
afterAll(async () => {
  await cell?.stop();
});

describe('a monitor frozen past its lease and grace (short run)', () => {
  it('never lets a task run twice at once, in the tasks own records', async () => {
    const say = (l: string): void => void process.stdout.write(`${l}\n`);
    const r = await runScenario({
      seed: SEED,
      leaseTtlS: TTL_S,
      graceMs: GRACE_MS,
      taskSeconds: [24, 28],
      longShare: 0,
      meanGapMs: 3500,
      plan: { sequence: ['monitor-freeze-long', 'monitor-supervisor-kill'], firstGapMs: 4000, gapMs: [2000, 3000] },
      tailMs: 2000,
      drainMs: 60_000,
      say,
      onCell: (c) => {
        cell = c;
      },
    });
    const summary = summarize(r.report);
    say(`[freeze] seed ${SEED}, ${r.ms.total} ms (setup ${r.ms.setup}, faults ${r.ms.faults}, drain ${r.ms.drain}, check ${r.ms.check})\n${summary}`);
    const why = `seed ${SEED}\n${summary}${r.outputs ? `\n${r.outputs}` : ''}`;

    expect(r.faults.map((f) => f.kind)).toEqual(['monitor-freeze-long', 'monitor-supervisor-kill']);
    expect(
      r.faults.filter((f) => f.error).map((f) => f.error),
      why,
    ).toEqual([]);
    // The freeze outlasted the lease, the grace and the front-ends' margin, and its node had tasks
    // that were placed again meanwhile: the case the supervisors are for.
    const freeze = r.faults[0];
    expect(freeze!.healed - freeze!.start).toBeGreaterThanOrEqual(2 * (TTL_S * 1000 + GRACE_MS));
    expect(r.report.faults[0]?.reruns, `no task of the frozen node was placed again\n${why}`).toBeGreaterThan(0);
    expect(r.report.totals.acked, why).toBeGreaterThan(3);

    // The invariants, from the tasks' own records and from etcd.
    expect(r.pending, why).toEqual([]);
    expect(
      r.report.violations.filter((v) => v.kind === 'runs-overlap'),
      why,
    ).toEqual([]);
    expect(r.report.totals.rerunsAfterSuccess, why).toBe(0);
    expect(r.report.counts, why).toEqual({});
    expect(r.report.violations, why).toEqual([]);
  }, 160_000);
});
