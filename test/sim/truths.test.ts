import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMITTED_TRUTH, DEFAULT_PERF, makeTruth } from '../../src/model/perf.ts';
import { runSim } from '../../src/sim/run.ts';
import { w3 } from '../../src/sim/workloads.ts';
import type { World } from '../../src/sim/world.ts';
import { mergeSummary, onlyPolicies, ORACLE, parseSummary, runTruths, TRUTH_POLICIES, TRUTHS, type TruthSummaryRow } from '../../src/sim/experiments/truths.ts';
import { writeResultFile } from '../../src/cli/bench.ts';

const quiet = { quick: true, seed: 1, progress: () => undefined };

describe('the ground truth as a run parameter', () => {
  it('the committed truth is the default: a run without one and a run with it agree to the bit', () => {
    const a = runSim({ workload: w3({ jobs: 150, interArrivalMs: 300 }), policy: { name: 'tarcil' }, seed: 2 });
    const b = runSim({ workload: w3({ jobs: 150, interArrivalMs: 300 }), policy: { name: 'tarcil' }, seed: 2, truth: COMMITTED_TRUTH });
    expect(b.records.map((x) => x.response)).toEqual(a.records.map((x) => x.response));
    expect(COMMITTED_TRUTH.perf).toEqual(DEFAULT_PERF);
    expect(COMMITTED_TRUTH.profileErrorSd).toBe(0);
  });

  it('a milder gain gives the same jobs a higher W3 figure, a harsher one a lower', () => {
    const perf = (gain: number): number =>
      runSim({ workload: w3({ jobs: 300, interArrivalMs: 300 }), policy: { name: 'tarcil' }, seed: 1, truth: makeTruth(`gain ${gain}`, { gain }) }).summary
        .perfMean;
    const committed = runSim({ workload: w3({ jobs: 300, interArrivalMs: 300 }), policy: { name: 'tarcil' }, seed: 1 }).summary.perfMean;
    expect(perf(1)).toBeGreaterThan(committed);
    expect(perf(2.5)).toBeLessThan(committed);
  });

  it("the truth's profile error is drawn for each job by the workload, as the workload's own profileError draws it", () => {
    const truth = makeTruth('sd 5', { profileErrorSd: 5 });
    const r = runSim({ workload: w3({ jobs: 40, interArrivalMs: 300 }), policy: { name: 'oracle' }, seed: 3, truth, keepWorld: true });
    const jobs = (r.world as World).completed;
    expect(jobs.length).toBe(40);
    for (const j of jobs) expect(j.real).not.toEqual(j.declared);
    const own = runSim({ workload: w3({ jobs: 40, interArrivalMs: 300, profileError: 5 }), policy: { name: 'oracle' }, seed: 3 });
    expect(r.records.map((x) => x.response)).toEqual(own.records.map((x) => x.response));
    // The workload's own setting wins over the truth's.
    const none = runSim({ workload: w3({ jobs: 40, interArrivalMs: 300, profileError: 0 }), policy: { name: 'oracle' }, seed: 3, truth, keepWorld: true });
    for (const j of (none.world as World).completed) expect(j.real).toEqual(j.declared);
  });

  it('refuses a truth out of range, naming the field and the rule', () => {
    expect(() => makeTruth('x', { gain: -1 })).toThrow(/truth\.gain: must be a finite number ≥ 0/);
    expect(() => makeTruth('x', { power: 0 })).toThrow(/truth\.power: must be a finite number > 0/);
    expect(() => makeTruth('x', { maxSlowdown: 0.5 })).toThrow(/truth\.maxSlowdown: must be a finite number ≥ 1/);
    expect(() => makeTruth('x', { profileErrorSd: Number.NaN })).toThrow(/truth\.profileErrorSd/);
    expect(() => makeTruth(' ', {})).toThrow(/truth\.name: must be a non-empty string/);
  });
});

describe('bench truths', () => {
  it('has one summary row per truth, policy and seed, with the fields the summary promises', () => {
    const truths = [TRUTHS[0], TRUTHS[2]].filter((t) => t !== undefined);
    const policies = TRUTH_POLICIES.filter((p) => ['tarcil', 'sparrow', ORACLE].includes(p.name));
    const res = runTruths({ ...quiet, workers: 1 }, { jobs: 120, seeds: [1, 2], truths, policies });
    const file = res.files?.find((f) => f.name === 'truths-summary.json');
    expect(file).toBeDefined();
    const rows = JSON.parse(file?.text ?? '[]') as TruthSummaryRow[];
    expect(rows).toHaveLength(truths.length * policies.length * 2);
    const keys = new Set(rows.map((x) => `${x.truth}|${x.policy}|${x.seed}`));
    expect(keys.size).toBe(rows.length);
    for (const t of truths) for (const p of policies) for (const seed of [1, 2]) expect(keys.has(`${t.name}|${p.name}|${seed}`)).toBe(true);
    for (const x of rows) {
      expect(Object.keys(x).sort()).toEqual(['p5PctOracle', 'pctIdeal', 'pctOracle', 'policy', 'seed', 'truth']);
      for (const k of ['pctIdeal', 'pctOracle', 'p5PctOracle'] as const) expect(Number.isFinite(x[k])).toBe(true);
      expect(x.pctIdeal).toBeGreaterThan(0);
      expect(x.pctIdeal).toBeLessThanOrEqual(100);
      if (x.policy === ORACLE) expect(x.pctOracle).toBeCloseTo(100, 9);
    }
    // The default configuration is reported under the name `tarcil`.
    expect(rows.some((x) => x.policy === 'tarcil')).toBe(true);
  });

  it('refuses a run without the oracle to read the others against', () => {
    expect(() => runTruths({ ...quiet, workers: 1 }, { jobs: 10, seeds: [1], truths: TRUTHS.slice(0, 1), policies: TRUTH_POLICIES.slice(0, 1) })).toThrow(
      /must include 'oracle'/,
    );
  });

  it('a run at another seed adds its rows to the summary the folder holds; a rerun of a seed replaces only what it ran', () => {
    const truths = TRUTHS.slice(0, 1);
    const policies = TRUTH_POLICIES.filter((p) => ['tarcil', ORACLE].includes(p.name));
    const dir = mkdtempSync(join(tmpdir(), 'truths-summary-'));
    try {
      const write = (seed: number, ps = policies): TruthSummaryRow[] => {
        const res = runTruths({ ...quiet, seed, workers: 1 }, { jobs: 40, seeds: [seed], truths, policies: ps });
        const file = res.files?.find((f) => f.name === 'truths-summary.json');
        if (!file) throw new Error('no summary file');
        writeResultFile(dir, file);
        return parseSummary(file.text);
      };
      const read = (): TruthSummaryRow[] => parseSummary(readFileSync(join(dir, 'truths-summary.json'), 'utf8'));
      const one = write(1);
      expect(read()).toEqual(one);
      const two = write(2);
      expect(two.every((x) => x.seed === 2)).toBe(true);
      // Seed 1's rows stay, seed 2's follow them.
      expect(read()).toEqual([...one, ...two]);
      // Seed 1 again with the oracle only: its oracle row is replaced, its tarcil row and seed 2 kept.
      const again = write(
        1,
        policies.filter((p) => p.name === ORACLE),
      );
      const after = read();
      expect(after).toHaveLength(one.length + two.length);
      expect(after.find((x) => x.seed === 1 && x.policy === ORACLE)).toEqual(again[0]);
      expect(after.find((x) => x.seed === 1 && x.policy === 'tarcil')).toEqual(one.find((x) => x.policy === 'tarcil'));
      expect(after.filter((x) => x.seed === 2)).toEqual(two);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('merges in seed, truth and policy order, and refuses a summary that is not one', () => {
    const row = (seed: number, truth: string, policy: string, pctOracle = 90): TruthSummaryRow => ({
      truth,
      policy,
      seed,
      pctIdeal: 70,
      pctOracle,
      p5PctOracle: 50,
    });
    const merged = mergeSummary(
      [row(2, 'committed', 'tarcil'), row(1, 'gain 2.5', ORACLE), row(1, 'committed', 'centralized')],
      [row(1, 'committed', 'tarcil', 91), row(2, 'committed', 'tarcil', 92)],
    );
    expect(merged.map((x) => `${x.seed}|${x.truth}|${x.policy}|${x.pctOracle}`)).toEqual([
      '1|committed|tarcil|91',
      '1|committed|centralized|90',
      '1|gain 2.5|oracle|90',
      '2|committed|tarcil|92',
    ]);
    expect(() => parseSummary('{}')).toThrow(/must be an array/);
    expect(() => parseSummary('[{"truth":"committed","policy":"tarcil","seed":1,"pctIdeal":1}]')).toThrow(/row 0 must have/);
  });

  it('a reduced run names its policies with commas, or with semicolons when a name has a comma of its own; the oracle is always run', () => {
    const names = (x: string): string[] => onlyPolicies(TRUTH_POLICIES, x).map((p) => p.name);
    expect(names('tarcil,centralized')).toEqual(['tarcil', 'centralized', ORACLE]);
    expect(names("tarcil;tarcil, paper's Q, no loop;sparrow")).toEqual(['tarcil', "tarcil, paper's Q, no loop", 'sparrow', ORACLE]);
    expect(() => names("tarcil,tarcil, paper's Q, no loop")).toThrow(/no policy 'paper's Q'/);
    expect(onlyPolicies(TRUTH_POLICIES, undefined)).toBe(TRUTH_POLICIES);
  });
});
