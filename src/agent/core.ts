/**
 * The scheduling decision without the commit (paper §3–4): admission verdict, sample size R and
 * batch sampling and selection, pure over its inputs.
 */
import type { AdmissionCounters, AdmissionVerdict, PreparedContention } from '../admission/index.ts';
import type { JobSpec } from '../model/types.ts';
import { contention, type JobTarget } from '../quality/index.ts';
import { selectPlacements, type PlacementRequest, type SelectionResult } from '../sampling/batch.ts';
import type { RuIndex, ServerState } from '../sampling/ru-index.ts';
import { probeAcceptable } from '../sampling/probe.ts';
import { sampleSize } from '../sampling/size.ts';
import type { Clock } from '../util/clock.ts';
import type { Rng } from '../util/rng.ts';
import type { CoreConfig } from './defaults.ts';

export { DEFAULT_CORE_CONFIG, type AdmissionRule, type CoreConfig } from './defaults.ts';

export interface CoreContext {
  state: RuIndex;
  admission: AdmissionCounters;
  rng: Rng;
  clock: Clock;
}

export interface Decision {
  verdict: AdmissionVerdict | undefined;
  R: number;
  f: number;
  selection: SelectionResult;
  /** Microseconds spent in each stage of this decision. */
  stageUs: { admission: number; size: number; select: number };
}

/** What an admission verdict is asked about. */
export interface VerdictAsk {
  job: JobSpec;
  target: JobTarget;
  /** Tasks to hold at once. */
  needed: number;
  cfg: CoreConfig;
  /** RUs the job's constraints allow: a margin that could never be met is not asked for. */
  capacity?: number | undefined;
  /** What is left of the job's queue bound (see VerdictOptions.leftMs). */
  leftMs?: number | undefined;
  /** How long admission has held the job so far (see VerdictOptions.queuedMs). */
  queuedMs?: number | undefined;
}

export function admissionVerdict(ctx: CoreContext, ask: VerdictAsk): AdmissionVerdict {
  const { job, target, needed, cfg, capacity, leftMs, queuedMs } = ask;
  const v = ctx.admission.verdict(target, needed, {
    priority: job.priority,
    bypassAbove: cfg.bypassAbove,
    ...(capacity !== undefined ? { capacity } : {}),
    ...(leftMs !== undefined && cfg.admissionRule !== 'paper' ? { leftMs } : {}),
    ...(queuedMs !== undefined && cfg.admissionRule !== 'paper' ? { queuedMs } : {}),
  });
  // Attribute constraints are checked RU by RU, so the free RUs they allow are not counted
  // anywhere: the sample's fraction could not be scaled to them, and the buckets decide alone.
  if (v.action !== 'queue' || cfg.arbiterSample <= 0 || job.constraints.attributes) return v;
  const p = probeAcceptable(
    ctx.state,
    {
      jobId: job.id,
      target,
      caused: job.profile.caused,
      priority: job.priority,
      platformPerf: job.profile.platformPerf,
      locality: job.locality,
      constraints: job.constraints,
      form: cfg.qualityForm,
      twoSided: cfg.twoSided,
    },
    cfg.arbiterSample,
    ctx.rng,
  );
  // The margin applies only where it can be met (as in the buckets' verdict).
  const margin = Math.ceil(needed * ctx.admission.margin - 1e-9);
  const want = capacity !== undefined && capacity < margin ? Math.max(needed, capacity) : margin;
  const low = Math.floor(p.acceptableLow);
  if (low < want) return v;
  return {
    ...v,
    action: 'admit',
    reason: `the buckets' mean contention finds ${v.acceptableFree} of ${v.totalFree} free RUs acceptable, but a sample finds ${p.acceptable} of ${p.drawn} drawn acceptable: at least ${low} of ${p.freeInPools} (95% bound) cover the ${want} wanted for ${needed} needed`,
    sampled: { drawn: p.drawn, acceptable: p.acceptable, acceptableLow: low },
  };
}

/** Chooses R for this job from the share of available RUs that are acceptable to it. */
export function chooseSampleSize(ctx: CoreContext, target: JobTarget, cfg: CoreConfig): { R: number; f: number } {
  const est = ctx.admission.estimateF(target);
  if (cfg.fixedR !== undefined) return { R: cfg.fixedR, f: est.f };
  const s = sampleSize(est.f, { failProb: cfg.failProb, min: cfg.minR, cap: cfg.capR });
  return { R: s.R, f: est.f };
}

/** What one decision is asked for: `m` placements of `job`, and how. */
export interface DecideAsk {
  job: JobSpec;
  target: JobTarget;
  m: number;
  cfg: CoreConfig;
  skipAdmission?: boolean;
  exclude?: ReadonlySet<number>;
  only?: ReadonlySet<number>;
  /** The only servers that may be chosen (the front-end's share of a nearly full cell, handoff.ts). */
  allow?: (server: ServerState) => boolean;
  mayDisplace?: (victimJob: string) => boolean;
}

export function decide(ctx: CoreContext, ask: DecideAsk): Decision {
  const { job, target, m, cfg } = ask;
  const t0 = ctx.clock.monotonic();
  const verdict = cfg.admission && !ask.skipAdmission ? admissionVerdict(ctx, { job, target, needed: m, cfg }) : undefined;
  const t1 = ctx.clock.monotonic();
  const { R, f } = chooseSampleSize(ctx, target, cfg);
  const t2 = ctx.clock.monotonic();
  const selection = selectPlacements(
    ctx.state,
    {
      ...placementRequestOf(job, target, m, R, cfg),
      preempt: cfg.preemption && job.priority > cfg.bypassAbove,
      ...(ask.exclude ? { exclude: ask.exclude } : {}),
      ...(ask.only ? { only: ask.only } : {}),
      ...(ask.allow ? { allow: ask.allow } : {}),
      ...(ask.mayDisplace ? { mayDisplace: ask.mayDisplace } : {}),
    },
    ctx.rng,
  );
  const t3 = ctx.clock.monotonic();
  return {
    verdict,
    R,
    f,
    selection,
    stageUs: { admission: (t1 - t0) * 1000, size: (t2 - t1) * 1000, select: (t3 - t2) * 1000 },
  };
}

/** What a selection of m picks among R sampled RUs asks for a job, from the job and the policy. */
export function placementRequestOf(job: JobSpec, target: JobTarget, m: number, R: number, cfg: CoreConfig): PlacementRequest {
  return {
    jobId: job.id,
    target,
    caused: job.profile.caused,
    priority: job.priority,
    platformPerf: job.profile.platformPerf,
    locality: job.locality,
    constraints: job.constraints,
    m,
    R,
    form: cfg.qualityForm,
    twoSided: cfg.twoSided,
    neighbourWeight: cfg.neighbourWeight,
    platformWeight: cfg.platformWeight,
  };
}

/**
 * Keeps the admission counters in step with the cluster view: when a server's occupancy changes,
 * every RU on it sees a new neighbourhood, so each is re-hashed (off the scheduling path).
 */
const EMPTY: readonly number[] = [];

export function wireAdmission(state: RuIndex, admission: AdmissionCounters): void {
  const C: number[] = [];
  // Every free RU of a server sees the same contention (no occupant of its own to leave out): it
  // is computed and prepared (fixed point, LSH bucket) once per server change.
  const freeC: number[] = [];
  let freeP: PreparedContention | undefined;
  // Occupants with the same caused vector (tasks of one job) see the same contention too: within
  // one server change each distinct vector is computed and prepared once (by reference: the same
  // array is the same vector). The prepared entries are reused from change to change.
  const seenCaused: (readonly number[])[] = [];
  const seenP: PreparedContention[] = [];
  state.onServerChanged((s) => {
    // A server replaced (re-registered with another spec) is a new ServerState with new RU ids:
    // the old one is gone even though its id is known again.
    const gone = state.servers.get(s.id) !== s;
    let freePrepared = false;
    let distinct = 0;
    for (let i = 0; i < s.ruCount; i++) {
      const ru = s.base + i;
      if (gone || s.down || s.ruDown[i]) {
        admission.updateRu(ru, null, false);
        continue;
      }
      const occ = s.occupants[i];
      if (occ) {
        let j = 0;
        while (j < distinct && seenCaused[j] !== occ.caused) j++;
        if (j === distinct) {
          seenCaused[j] = occ.caused;
          seenP[j] = admission.prepare(contention(s.sum, s.ruCount, occ.caused, C), seenP[j]);
          distinct++;
        }
        admission.updateRuPrepared(ru, seenP[j] as PreparedContention, s.available(i));
        continue;
      }
      if (!freePrepared || !freeP) {
        freeP = admission.prepare(contention(s.sum, s.ruCount, null, freeC), freeP);
        freePrepared = true;
      }
      admission.updateRuPrepared(ru, freeP, s.available(i));
    }
    // Let go of the occupants' vectors (the prepared entries stay, to be reused).
    for (let j = 0; j < distinct; j++) seenCaused[j] = EMPTY;
  });
}
