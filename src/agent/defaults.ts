/**
 * The agent's defaults and the names of its options, with no validation attached: what the
 * command line reads for its flags' defaults and help, loaded without zod or the scheduling core.
 * Their rules are in config.ts (agentConfig), the decision that reads them in core.ts.
 */
import { DEFAULT_BUCKETS } from '../admission/lsh.ts';
import { DEFAULT_PRIORITY } from '../model/types.ts';
import { NEIGHBOUR_WEIGHT, type QualityForm } from '../quality/index.ts';
import type { WaitOrder } from './wait-order.ts';

/**
 * The scheduling decision without the commit: admission → size → sample/score/select. Pure over
 * its inputs (cluster view, admission counters, Rng), so the live agents and the simulator run
 * exactly this code.
 */
export interface CoreConfig {
  /** Acceptable probability that no acceptable RU is among the R samples (§3.3). */
  failProb: number;
  minR: number;
  capR: number;
  /** Fixed sample size (benchmarks of R); adaptive sizing when undefined. */
  fixedR?: number;
  qualityForm: QualityForm;
  platformWeight: number;
  /**
   * Admission control on: hold a job while acceptable RUs are scarce and their wait is predictable
   * (paper §4). Off by default: `tarcil bench truths` found the holds below placing at once in the
   * mean and the 5th-percentile job under every truth and seed, and `bench/admission-holds.ts` at
   * every load from 54% to 90% and every queue bound (bench/README, truths). The buckets size the
   * sample either way.
   */
  admission: boolean;
  /** Jobs with priority above this bypass the admission queue and may preempt. */
  bypassAbove: number;
  preemption: boolean;
  /**
   * Free RUs sampled and scored when the buckets would hold a job (0: the buckets decide alone).
   * The buckets judge by mean contention, and a bucket that mixes good and bad RUs can fail a
   * job that a sample places well at once; the sample admits it when a 95% lower bound on the
   * acceptable free RUs covers what the buckets wanted (see sampling/probe.ts).
   */
  arbiterSample: number;
  /**
   * What ends an admission wait early. 'own-bound': a job whose median wait for acceptable RUs is
   * longer than what is left of its own queue bound (`maxQueueMs`) is placed at once at best effort,
   * since it would most likely reach the bound and be placed at best effort then anyway; and so is
   * a job that has already waited longer than the bound of its current estimate (the frees the
   * history foretold came without making acceptable RUs free). 'paper':
   * the paper's rule alone (§4): queue while the estimate is under the statistical bound kμ + 2√k·σ,
   * until the job's bound runs out.
   */
  admissionRule: AdmissionRule;
  /**
   * Two-sided quality: an RU is also judged by what the newcomer's caused pressure does to the
   * tasks already on its server, each against its own tolerance (src/quality twoSided): among
   * equally fast acceptable RUs, and to rank RUs when none is acceptable. On by default: of the
   * rules `tarcil bench truths` compared, the best in its worst truth (bench/README, truths).
   * Off: the paper's one-sided Q.
   */
  twoSided: boolean;
  /**
   * Two-sided: the power of the worst resident's Q that multiplies the newcomer's own where no RU
   * is acceptable to it (src/quality NEIGHBOUR_WEIGHT): 1 counts a resident's fall as much as the
   * newcomer's own, 0 not at all. Of the weights at or above 1 in the mean and the 5th-percentile
   * job under every truth and seed of `tarcil bench truths`, 0.5 has the best mean rank
   * (`bench/neighbour-weight.ts`; bench/README, truths).
   */
  neighbourWeight: number;
  /**
   * Fair share among namespaces (agent/fair-share.ts): waiting jobs are served namespace with the
   * lowest RUs held / weight first, and preemption across namespaces only goes from one below its
   * share to one above. A cell with one namespace is served as without it.
   */
  fairShare: boolean;
  /**
   * The order among jobs of one priority (and namespace) waiting for a freed RU
   * (agent/wait-order.ts): 'arrival', the job's first wait; 'ratio', the highest response ratio
   * (time waited plus the expected run time of its class's tasks, over that run time), which
   * serves short tasks before long ones that waited about as long.
   */
  waitOrder: WaitOrder;
  /**
   * The short-task reserve (short-reserve.ts): while the free RUs are at or below this share of
   * the cell's, jobs of long workload classes wait and the free RUs go to jobs of short ones.
   * 0: no reserve.
   */
  shortReserve: number;
  /** The reserve: a workload class is long when its tasks' expected run time is above this many times the mean over every task. */
  longFactor: number;
}

export type AdmissionRule = 'own-bound' | 'paper';

/**
 * The short-task reserve's default share: of the shares swept under every ground truth and seed
 * of `tarcil bench truths`, those at or above no reserve in every cell, in the mean and the
 * 5th-percentile job, then the best mean rank (bench/README, truths).
 */
export const SHORT_RESERVE = 0.1;

export const DEFAULT_CORE_CONFIG: CoreConfig = {
  failProb: 0.01,
  minR: 8,
  capR: 32,
  qualityForm: 'monotone',
  platformWeight: 1,
  admission: false,
  bypassAbove: DEFAULT_PRIORITY,
  preemption: true,
  arbiterSample: 64,
  admissionRule: 'own-bound',
  twoSided: true,
  neighbourWeight: NEIGHBOUR_WEIGHT,
  fairShare: true,
  waitOrder: 'ratio',
  shortReserve: SHORT_RESERVE,
  longFactor: 1,
};

/** The run-time loop's default parts, kept with the loop (src/monitor/runtime-loop.ts): node monitors read them without the agents. */
export { DEFAULT_RUNTIME, type RuntimeDefaults } from '../monitor/runtime-loop.ts';

export type ConflictScope = 'ru' | 'server';

export interface AgentConfig extends CoreConfig {
  conflictScope: ConflictScope;
  /** Commit attempts for one chunk before the job goes back to admission. */
  maxRetries: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** Admission buckets and history (paper: 20 buckets, 2 h). */
  buckets: number;
  historyWindowMs: number;
  /** Upper bound on one wait for capacity when nothing is free, before re-checking. */
  recheckMs: number;
  /**
   * What that bound grows to: a wait for capacity that its timer ended (no freed RU woke it)
   * doubles the next, up to this; a freed RU that wakes the job, or a placement, starts it again
   * from recheckMs. Freed RUs wake the waiting jobs that can use them; the timer only catches what
   * none announced, and on a full cell thousands of jobs rechecking every recheckMs found nothing
   * each time. At or below recheckMs, the waits do not grow.
   */
  recheckMaxMs: number;
  /** Claim and reschedule preempted tasks from the durable queue. */
  consumeQueue: boolean;
  /**
   * Write the job record (state 'placed') with the last placement. Off when a job owner
   * (owner/manager.ts) keeps the job record itself, so the two never overwrite each other.
   */
  recordJob: boolean;
  /**
   * Group commit: the most commit requests this agent keeps in flight. Jobs that become ready
   * while every slot is busy are decided when a slot frees up and leave together, in one request
   * of nested transactions (see store/group-commit.ts). 0 sends one transaction per decision, at
   * once, however many are in flight.
   */
  groupCommit: number;
  /**
   * Commit-ahead: of a job larger than one transaction, the most chunks whose commits are in
   * flight at once (full chunks bypass group commit, whose requests they would not share). The
   * next chunk is decided and sent while the earlier ones are committing;
   * their RUs are claimed in the view meanwhile, so it chooses what it would have chosen after
   * them. Off for a standalone agent that writes the job record with its last chunk, and for a
   * job of a namespace other than default (with an RU quota, its chunks would conflict on the
   * namespace's usage record). 1 commits chunk after chunk.
   */
  commitAhead: number;
  /**
   * Freed RUs among front-ends (handoff.ts): for this long after an RU is freed, only the
   * front-end that is its server's home samples it and wakes a waiting job for it; the others
   * take it once this has passed if it is still free. 0: every front-end takes every freed RU at
   * once. Only front-ends with tasks to place count (`tarcil up`, a single front-end, never waits).
   */
  handoffMs: number;
  /**
   * Below this share of the cell's RUs free, while several front-ends have tasks to place, each
   * front-end samples only the servers it is the home of (handoff.ts), the homes turning every
   * 2 s: on a nearly full cell the front-ends would otherwise all draw from the same few free RUs
   * and conflict. 0: never. Needs handoffMs > 0. A fifth: at a twentieth, the minute in which an
   * overload filled the cell had 5% of its commits conflict, unsplit, with thousands of RUs still
   * free in each view; at a fifth, 0.1% (bench/results/soak/s80-overload/).
   */
  partitionBelow: number;
}

export const DEFAULT_AGENT_CONFIG: AgentConfig = {
  ...DEFAULT_CORE_CONFIG,
  conflictScope: 'ru',
  maxRetries: 6,
  backoffBaseMs: 1,
  backoffMaxMs: 100,
  buckets: DEFAULT_BUCKETS,
  historyWindowMs: 2 * 3600_000,
  recheckMs: 1000,
  recheckMaxMs: 8000,
  consumeQueue: true,
  recordJob: true,
  groupCommit: 2,
  commitAhead: 4,
  handoffMs: 250,
  partitionBelow: 0.2,
};

/**
 * The options a user may set (help texts, `--agent`): all but recordJob and consumeQueue, which a
 * job owner sets itself (it keeps the job record and claims its own preempted tasks).
 */
export const AGENT_OPTION_NAMES = Object.keys(DEFAULT_AGENT_CONFIG)
  .concat('fixedR')
  .filter((k) => k !== 'recordJob' && k !== 'consumeQueue')
  .sort();
