/**
 * The short fault-injection run (the long one is bench/faults.ts): a 3-member etcd, two front-ends
 * and four process-executor monitors under a steady stream of jobs, while the nemesis kills the
 * etcd leader, takes quorum away for a few seconds and SIGKILLs a front-end in the middle of it
 * (started again once etcd has a leader), and SIGSTOPs a monitor past its lease TTL. Each
 * submission keeps to one front-end, retried by its deadline as `tarcil submit` does: the killed
 * front-end's clients must get their submissions in once it is back.
 * The assertions are the checker's invariants (test/support/fault-checker.ts): any violation
 * fails the test, with examples. FAULT_SEED picks another seed; FAULT_KEEP=1 keeps the run
 * directory (process logs, task logs, execution records) of a failed run.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { summarize } from '../support/fault-checker.ts';
import type { FaultCell } from './cell.ts';
import { runScenario } from './run.ts';

const SEED = Number(process.env.FAULT_SEED ?? 1);
const TTL_S = 5;

let cell: FaultCell | undefined;
afterAll(async () => {
  await cell?.stop();
});

describe('fault injection on a 3-member etcd (short run)', () => {
  it('keeps every invariant through a leader kill, a short quorum loss with a front-end killed in it, and a monitor stopped past its TTL', async () => {
    const say = (l: string): void => void process.stdout.write(`${l}\n`);
    const r = await runScenario({
      seed: SEED,
      leaseTtlS: TTL_S,
      plan: {
        sequence: ['leader-kill', 'quorum-loss-fe-kill', 'monitor-stop'],
        firstGapMs: 8000,
        gapMs: [4000, 6000],
        memberDownMs: [2000, 3000],
        // Longer than a lease TTL, far shorter than a minute.
        quorumDownMs: [5000, 6000],
      },
      tailMs: 4000,
      drainMs: 30_000,
      sticky: true,
      say,
      onCell: (c) => {
        cell = c;
      },
    });
    const summary = summarize(r.report);
    say(`[faults] seed ${SEED}, ${r.ms.total} ms (setup ${r.ms.setup}, faults ${r.ms.faults}, drain ${r.ms.drain}, check ${r.ms.check})\n${summary}`);
    const why = `seed ${SEED}\n${summary}${r.outputs ? `\n${r.outputs}` : ''}`;

    // The run did what it is for: every fault was injected and repaired, and work kept flowing.
    expect(r.faults.map((f) => f.kind)).toEqual(['leader-kill', 'quorum-loss-fe-kill', 'monitor-stop']);
    expect(
      r.faults.filter((f) => f.error).map((f) => f.error),
      why,
    ).toEqual([]);
    expect(r.report.totals.acked, why).toBeGreaterThan(30);
    expect(r.report.totals.runs, why).toBeGreaterThan(50);
    for (const f of r.report.faults) expect(f.stallMs, `${f.kind}: no task started after it\n${why}`).toBeDefined();

    // The invariants.
    expect(r.pending, why).toEqual([]);
    expect(r.report.counts, why).toEqual({});
    expect(r.report.violations, why).toEqual([]);
  }, 200_000);
});
