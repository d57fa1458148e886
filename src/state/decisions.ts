/**
 * Decision records: everything an agent decided about one job and why (what `tarcil explain`
 * shows), stored under `decisions/<job>`. A stored or explained record keeps every field but at
 * most MAX_PLACEMENTS placements (the first ones), with the number left out: a 100,000-task job's
 * full list would exceed etcd's request size and gRPC's message size; its tasks carry their RUs.
 */
import type { AdmissionVerdict } from '../admission/index.ts';
import type { RuRef } from '../model/types.ts';

/** One placed task, as reported to the caller and recorded for explanation. */
export interface Placement {
  task: number;
  ru: RuRef;
  Q: number;
  acceptable: boolean;
  score: number;
  commitRevision: number;
  /** The commit that placed it (the task's record names it too). */
  commitId?: string;
  /** The task's attempt: 0 for its first placement, one more for each placement after that. */
  attempt?: number;
  preempted?: { job: string; task: number; priority: number };
  /**
   * With two-sided quality: the newcomer's own Q, its worst-off neighbour's Q once placed, and
   * whether every neighbour stayed within its tolerance (absent in records written before it was kept).
   */
  sides?: { selfQ: number; neighboursQ: number; neighbours: number; neighboursAcceptable?: boolean };
  /** A move of the run-time loop: where the task ran (which placement), and its share of the expected rate there. */
  movedFrom?: { server: string; index: number; rate: number; commitId: string };
  /** The placement wrote the task's record `running` (state/placement.ts placementRecordsStart). */
  startRecorded?: true;
}

/** Everything the agent decided about one job and why: what `tarcil explain` shows. */
export interface DecisionRecord {
  job: string;
  agent: string;
  target: number;
  admission: AdmissionVerdict[];
  samples: { R: number; f: number; candidates: number }[];
  placements: Placement[];
  /** Why the job waits right now (admission queue, no free RU it may use); unset when it does not. */
  waiting?: string;
  /** The last time the job waited for its namespace's RU quota: why (tenancy/quota.ts). */
  quota?: string;
  /** Placements left out of `placements` when the record was stored (see decisions.ts). */
  omittedPlacements?: number;
  conflicts: number;
  retries: number;
  /** Times the job went back to admission after exhausting retries or finding too few RUs. */
  readmissions: number;
  queuedMs: number;
  /** Milliseconds in each stage, summed over attempts. */
  stageMs: { admission: number; size: number; select: number; commit: number; queue: number };
  startedAt: number;
  finishedAt?: number;
  /**
   * Set when the agent's view of the cell cannot take the job at all (a gang larger than the RUs
   * it may use): nothing was placed, and the caller decides whether to wait or fail.
   */
  unplaceable?: { field: string; reason: string };
}

/** Placements kept in a stored or explained record (and in memory by a scheduling call). */
export const KEPT_PLACEMENTS = 200;

/** The record as stored and explained: at most `max` placements, the rest counted. */
export function trimDecision(r: DecisionRecord, max = KEPT_PLACEMENTS): DecisionRecord {
  if (r.placements.length <= max) return r;
  return { ...r, placements: r.placements.slice(0, max), omittedPlacements: (r.omittedPlacements ?? 0) + r.placements.length - max };
}
