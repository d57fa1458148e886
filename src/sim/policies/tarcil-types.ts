/**
 * The simulated tarcil's options, and what each of its agents and requests holds (tarcil.ts).
 */
import type { AttemptPolicy } from '../../agent/attempt.ts';
import type { AttemptSteps, Outcome, Step } from '../../agent/attempt-steps.ts';
import type { OrderedWaiter } from '../../agent/wait-order.ts';
import type { Pick } from '../../sampling/batch.ts';
import type { CoreConfig, CoreContext } from '../../agent/core.ts';
import type { JobSpec } from '../../model/types.ts';
import type { JobTarget } from '../../quality/index.ts';
import type { SimJob, SimTask } from '../world.ts';
import type { SimRuntimeOptions } from './runtime.ts';
import type { AgentOverlay } from './tarcil-overlay.ts';

export interface TarcilOptions {
  agents: number;
  /** Fixed sample size; adaptive (x^R) when undefined. */
  fixedR?: number;
  /** Longest admission wait before placing anyway. */
  maxQueueMs?: number;
  core?: Partial<CoreConfig>;
  /** Retries, backoff and recheck of the attempt loop (default: the live agent's). */
  attempt?: Partial<AttemptPolicy>;
  /** The run-time loop: block slow servers, move slow tasks, autoscale, learn (off when not given). */
  runtime?: SimRuntimeOptions;
  /** Namespaces' weights for fair share (`core.fairShare`, on by default); absent: 1 each. */
  weights?: Record<string, number>;
  /** A request above the bypass priority that loses a commit race waits for a freed RU (Attempt's `untilFreed`; default); false: it backs off as any other (ablation). */
  priorityWaits?: boolean;
  /** Replicas forming a named set only preferred, never required (ablation of W2's rule that scan tasks run on their replicas). */
  preferReplicas?: boolean;
  /**
   * Every job without a locality of its own asks for its tasks packed server by server (soft
   * `pack` locality at server scope): the placement quality of decisions grouped by server, which a
   * record per server with several tasks to a write would need (a design study; off by default).
   */
  packJobs?: boolean;
  /** Commits applied and seen by every agent at once (no round trip, no watch delay): an ablation of the agents' stale views. */
  freshViews?: boolean;
  /** RU quotas by namespace (as a namespace's maxRus): a commit over one is refused and the job waits with the quota's reason. None by default. */
  quotas?: Record<string, number>;
  /** Hears each step of each request's attempt loop (agent/attempt-steps.ts), by job id. */
  onStep?: (jobId: string, step: Step, after: Outcome | undefined) => void;
}

export interface Request {
  job: SimJob;
  spec: JobSpec;
  target: JobTarget;
  pending: SimTask[];
  /** Set when first processed: its step sequence (and Attempt, with the agent's Rng for its backoff). */
  steps?: AttemptSteps;
  /** A step to take when it is next processed (else: what follows the wait it was in). */
  next?: Step;
  /** The chunk decided last, and its picks (kept ones first). */
  chunk?: SimTask[];
  picks?: Pick[];
  /** A gang's picks the store found unchanged after a conflict: chosen again with the resampled ones. */
  keep?: Pick[];
  /** A gang's reservations: each task and the RU held for it. */
  held?: { task: SimTask; ru: number; Q: number; acceptable: boolean }[];
  /** RUs its constraints allow (admission's capacity), computed once. */
  capacity: number;
  agent?: Agent;
  /** A move (run-time loop): place a new copy of this running task, then stop the old one. */
  move?: SimTask;
  /** Autoscale (run-time loop): the one pending task is a new task of a running scale-out job. */
  scaleOut?: boolean;
  /** Its job's namespace. */
  ns: string;
  /** What the wait order reads of it (agent/wait-order.ts), set at its job's first wait for a freed RU: arrival number, when, workload class. */
  wait?: OrderedWaiter;
  /** Woken by a freed RU in the waiters' (fair) order: its next decision does not yield. */
  woken?: boolean;
}

export interface Agent {
  id: number;
  busy: boolean;
  queue: Request[];
  ov: AgentOverlay;
  ctx: CoreContext;
}
