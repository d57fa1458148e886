import { describe, expect, it } from 'vitest';
import { makeTruth, type Truth, COMMITTED_TRUTH } from '../../src/model/perf.ts';
import { runSim } from '../../src/sim/run.ts';
import { w3 } from '../../src/sim/workloads.ts';
import type { World } from '../../src/sim/world.ts';
import { simCell } from '../support/sim-cell.ts';
import { TRUTH_POLICIES } from '../../src/sim/experiments/truths.ts';

const PRACTICAL = TRUTH_POLICIES.filter((p) => p.name !== 'oracle');

describe('the oracle', () => {
  for (const truth of [COMMITTED_TRUTH, makeTruth('gain 2.5', { gain: 2.5 })] as Truth[]) {
    it(`is at or above every practical policy's mean on a small W3 run (${truth.name})`, () => {
      const wl = (): ReturnType<typeof w3> => w3({ jobs: 250, interArrivalMs: 250 });
      const oracle = runSim({ workload: wl(), policy: { name: 'oracle' }, seed: 1, truth });
      expect(oracle.stats.unfinished).toBe(0);
      expect(oracle.summary.jobs).toBe(250);
      for (const p of PRACTICAL) {
        const r = runSim({ workload: wl(), policy: p.spec, seed: 1, truth });
        expect(r.summary.jobs, p.name).toBe(250);
        expect(oracle.summary.perfMean, p.name).toBeGreaterThanOrEqual(r.summary.perfMean);
      }
    });
  }

  it('waits only for capacity: every task starts the moment an RU is free for it', () => {
    // 400 W3 jobs all at once, more tasks than the cell's RUs: the first fill it at 0, the rest start as RUs free.
    const r = runSim({ workload: w3({ jobs: 400, interArrivalMs: 0 }), policy: { name: 'oracle' }, seed: 5, keepWorld: true });
    const w = r.world as World;
    const starts = w.completed.flatMap((j) => j.tasks.map((t) => ({ start: t.start, end: t.end, ru: t.ru })));
    // Each start is at time 0 or the end of an earlier task (a freed RU), never in between.
    const ends = new Set(starts.map((s) => s.end));
    for (const s of starts) expect(s.start === 0 || ends.has(s.start)).toBe(true);
    expect(starts.filter((s) => s.start > 0).length).toBeGreaterThan(0);
    expect(r.counters.capacityWaits).toBeGreaterThan(0);
  });

  it('serves the shortest waiting job first, whatever their arrival order', () => {
    // One RU, held by a 3-s task; a 4-s job arrives at 100 ms, then a 0.5-s one at 200 ms.
    const wl = simCell('one RU', 1, 1, [
      { id: 1, arrival: 0, work: [3000] },
      { id: 2, arrival: 100, work: [4000] },
      { id: 3, arrival: 200, work: [500] },
    ]);
    const r = runSim({ workload: wl, policy: { name: 'oracle' }, seed: 1, keepWorld: true });
    const start = new Map((r.world as World).completed.map((j) => [j.id, j.tasks[0]?.start]));
    expect(start.get(3)).toBe(3000);
    expect(start.get(2)).toBe(3500);
  });

  it('places on the truth it is given: the same jobs finish sooner with a milder gain', () => {
    const wl = (): ReturnType<typeof w3> => w3({ jobs: 200, interArrivalMs: 250 });
    const mild = runSim({ workload: wl(), policy: { name: 'oracle' }, seed: 2, truth: makeTruth('gain 1.0', { gain: 1 }) });
    const harsh = runSim({ workload: wl(), policy: { name: 'oracle' }, seed: 2, truth: makeTruth('gain 2.5', { gain: 2.5 }) });
    expect(mild.summary.perfMean).toBeGreaterThan(harsh.summary.perfMean);
  });

  describe('with less to know (the ladder of bench/oracle-ladder.ts)', () => {
    const wl = (): ReturnType<typeof w3> => w3({ jobs: 250, interArrivalMs: 250 });

    it('scores the same from declared vectors and believed constants when they are the truth', () => {
      const plain = runSim({ workload: wl(), policy: { name: 'oracle' }, seed: 2 });
      const believing = runSim({ workload: wl(), policy: { name: 'oracle', oracle: { declared: true, believes: COMMITTED_TRUTH.perf } }, seed: 2 });
      expect(believing.summary.perfMean).toBe(plain.summary.perfMean);
    });

    it('places differently when the declared vectors are not the real ones', () => {
      const truth = makeTruth('profile error sd 10', { profileErrorSd: 10 });
      const plain = runSim({ workload: wl(), policy: { name: 'oracle' }, seed: 2, truth });
      const declared = runSim({ workload: wl(), policy: { name: 'oracle', oracle: { declared: true } }, seed: 2, truth });
      expect(declared.summary.jobs).toBe(250);
      expect(declared.summary.perfMean).not.toBe(plain.summary.perfMean);
    });

    it("scoring the newcomer's own speed only places differently from weighing the residents too", () => {
      const plain = runSim({ workload: wl(), policy: { name: 'oracle' }, seed: 2 });
      const own = runSim({ workload: wl(), policy: { name: 'oracle', oracle: { ownOnly: true } }, seed: 2 });
      expect(own.summary.jobs).toBe(250);
      expect(own.summary.perfMean).not.toBe(plain.summary.perfMean);
    });

    it('looks at the servers of R·m drawn RUs only, and still places every task', () => {
      const all = runSim({ workload: wl(), policy: { name: 'oracle' }, seed: 3 });
      const sampled = runSim({ workload: wl(), policy: { name: 'oracle', oracle: { sampleR: 2 } }, seed: 3 });
      expect(sampled.stats.unfinished).toBe(0);
      expect(sampled.counters.placements).toBe(all.counters.placements);
      expect(sampled.counters.serversScored).toBeLessThan((all.counters.serversScored as number) / 4);
    });

    it('refuses a sample size that is not a positive integer', () => {
      expect(() => runSim({ workload: wl(), policy: { name: 'oracle', oracle: { sampleR: 0 } }, seed: 1 })).toThrow(/sampleR/);
    });
  });
});
