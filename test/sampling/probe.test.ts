import { describe, expect, it } from 'vitest';
import { AdmissionCounters } from '../../src/admission/index.ts';
import { admissionVerdict, DEFAULT_CORE_CONFIG, wireAdmission, type CoreContext } from '../../src/agent/core.ts';
import { contention, jobTarget, scoreRu, type JobTarget } from '../../src/quality/index.ts';
import { RuIndex } from '../../src/sampling/ru-index.ts';
import { probeAcceptable, wilsonLower } from '../../src/sampling/probe.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';

/**
 * A cell at about 80% load with random residents, built through the admission counters as an
 * agent's view is (three rounds of turnover give the buckets a history of frees).
 */
function loadedCell(seed: number, servers: number, rus = 8): { ctx: CoreContext; state: RuIndex } {
  const rng = new SeededRng(seed);
  const clock = new ManualClock(1_000_000);
  const state = new RuIndex();
  const admission = new AdmissionCounters({ clock, seed: 5 });
  wireAdmission(state, admission);
  state.batch(() => {
    for (let i = 0; i < servers; i++)
      state.upsertServer({ id: `s${String(i).padStart(3, '0')}`, platform: 'r3.2xlarge', rack: 'r0', rus, speed: 1, attributes: {} });
  });
  let k = 0;
  for (let round = 0; round < 3; round++) {
    for (const s of state.servers.values()) {
      for (let i = 0; i < rus; i++) {
        clock.advance(rng.int(50));
        const busy = rng.next() < 0.8;
        const p = TEST_PROFILES[rng.int(TEST_PROFILES.length)]!;
        state.setRu({ server: s.id, index: i }, busy ? { job: `r${k++}`, task: 0, caused: p.caused, priority: 10, state: 'busy' } : null, k);
      }
    }
  }
  return { ctx: { state, admission, rng: new SeededRng(7), clock }, state };
}

/** Free RUs that meet the target, scored one by one. */
function acceptableFree(state: RuIndex, target: JobTarget): number {
  const C: number[] = [];
  let n = 0;
  for (const id of state.available.values()) {
    const s = state.serverOfRu(id)!;
    contention(s.sum, s.ruCount, null, C);
    if (scoreRu(C, target).acceptable) n++;
  }
  return n;
}

const MEM = TEST_PROFILES.find((p) => p.name === 'mem-heavy')!;

/** The paper's one-sided Q, as `acceptableFree` counts: the verdicts are checked against its count. */
const CFG = { ...DEFAULT_CORE_CONFIG, twoSided: false };

describe('a sample as the arbiter of admission', () => {
  it('admits a job the buckets would hold when the free RUs it would accept cover what they want', () => {
    // In this cell the buckets' means count 4 acceptable free RUs where 8 are.
    const { ctx, state } = loadedCell(24, 40);
    const job = makeJob('j', MEM, 4);
    const target = jobTarget(MEM.caused);
    expect(acceptableFree(state, target)).toBe(8);
    const off = admissionVerdict(ctx, { job, target, needed: 4, cfg: { ...CFG, arbiterSample: 0 } });
    expect(off).toMatchObject({ action: 'queue', acceptableFree: 4 });
    const on = admissionVerdict(ctx, { job, target, needed: 4, cfg: CFG });
    expect(on.action).toBe('admit');
    // Fewer than 4·64 RUs are free: all were scored, so the count is exact.
    expect(on.sampled).toEqual({ drawn: state.available.size, acceptable: 8, acceptableLow: 8 });
    expect(on.reason).toContain('a sample finds 8 of');
    expect(on.reason).toContain('cover the 5 wanted for 4 needed');
  });

  it('leaves the job queued when the sample does not find enough, and stays out of attribute-constrained jobs', () => {
    // Here 3 RUs are acceptable: fewer than the 5 wanted.
    const { ctx, state } = loadedCell(9, 40);
    const target = jobTarget(MEM.caused);
    expect(acceptableFree(state, target)).toBe(3);
    const v = admissionVerdict(ctx, { job: makeJob('j', MEM, 4), target, needed: 4, cfg: CFG });
    expect(v.action).toBe('queue');
    expect(v.sampled).toBeUndefined();
    // Seed 24 admits without attributes (above); with an attribute constraint the buckets decide.
    const other = loadedCell(24, 40);
    const constrained = makeJob('j', MEM, 4, { constraints: { attributes: {} } });
    expect(admissionVerdict(other.ctx, { job: constrained, target, needed: 4, cfg: CFG }).action).toBe('queue');
  });

  it("ends a wait early against the job's own bound by default, and keeps the paper's rule as an option", () => {
    const { ctx, state } = loadedCell(9, 40);
    const target = jobTarget(MEM.caused);
    const job = makeJob('j', MEM, 4);
    // Plenty of the job's bound left: both rules queue it.
    expect(admissionVerdict(ctx, { job, target, needed: 4, cfg: CFG, leftMs: 3_600_000 }).action).toBe('queue');
    expect(admissionVerdict(ctx, { job, target, needed: 4, cfg: { ...CFG, admissionRule: 'paper' }, leftMs: 3_600_000 }).action).toBe('queue');
    // Nothing left: the default places at once at best effort; the paper's rule still holds it
    // (its wait then ends at the bound, in the attempt loop).
    const own = admissionVerdict(ctx, { job, target, needed: 4, cfg: CFG, leftMs: 0 });
    expect(own.action).toBe('best-effort');
    expect(own.reason).toContain('but the job may wait only');
    expect(admissionVerdict(ctx, { job, target, needed: 4, cfg: { ...CFG, admissionRule: 'paper' }, leftMs: 0 }).action).toBe('queue');
    expect(state.available.size).toBeGreaterThan(0);
  });

  it('on a large cell draws k RUs and bounds the acceptable ones from below at about 95%', () => {
    const { state } = loadedCell(3, 2000);
    const free = state.available.size;
    // A job that accepts between a fifth and four fifths of the free RUs.
    const p = TEST_PROFILES.find((x) => {
      const share = acceptableFree(state, jobTarget(x.caused)) / free;
      return share > 0.2 && share < 0.8;
    })!;
    expect(p).toBeDefined();
    const target = jobTarget(p.caused);
    const truth = acceptableFree(state, target);
    expect(free).toBeGreaterThan(4 * 64);
    expect(truth).toBeGreaterThan(0);
    const req = {
      jobId: 'j',
      target,
      caused: p.caused,
      priority: 10,
      platformPerf: p.platformPerf,
      locality: { mode: 'any' as const, scope: 'server' as const },
      constraints: {},
    };
    let above = 0;
    const lows: number[] = [];
    for (let s = 0; s < 300; s++) {
      const r = probeAcceptable(state, req, 64, new SeededRng(1000 + s));
      expect(r.drawn).toBe(64);
      expect(r.freeInPools).toBe(free);
      if (r.acceptableLow > truth) above++;
      lows.push(r.acceptableLow);
    }
    // A one-sided 95% bound: above the truth in about 5% of draws (binomial sd ≈ 1.3% over 300).
    expect(above / 300).toBeLessThan(0.1);
    // And not uselessly low: the median bound is within 30% of the truth.
    lows.sort((a, b) => a - b);
    expect(lows[150]!).toBeGreaterThan(0.7 * truth);
  });

  it('computes the Wilson lower bound', () => {
    expect(wilsonLower(0, 0, 1.645)).toBe(0);
    expect(wilsonLower(0, 64, 1.645)).toBe(0);
    // 32 of 64 at z = 1.645: 0.5 − 0.0988… ≈ 0.3996.
    expect(wilsonLower(32, 64, 1.645)).toBeCloseTo(0.3996, 3);
    expect(wilsonLower(64, 64, 1.645)).toBeCloseTo(0.9595, 3);
  });
});
