/**
 * Every modelled constant of the simulator, in one place. Times are milliseconds of virtual time.
 *
 * Where a value comes from a paper it says which; the rest are engineering estimates for a
 * 2015-era EC2 deployment, chosen once before any comparison was run and not tuned afterwards.
 */

/** The ground-truth interference model's constants live with the model (src/model/perf.ts). */
export { PERF } from '../model/perf.ts';

/** Shared-state scheduling (Tarcil agents on etcd). */
export const TARCIL = {
  /** Agent CPU per decision: fixed part (admission, sizing, bookkeeping). bench/decision-cost: ~10–20 µs real; ×5 for the JVM-era agent plus RPC handling. */
  DECISION_BASE_MS: 0.1,
  /** Agent CPU per candidate RU scored. */
  DECISION_PER_CANDIDATE_MS: 0.002,
  /** Agent CPU to build and send one commit transaction. */
  COMMIT_ISSUE_MS: 0.05,
  /** Round trip of an etcd transaction (agent → leader → quorum → agent). */
  COMMIT_RTT_MS: 2,
  /** Time from a commit being applied to every other agent's cache seeing it (watch fan-out). */
  WATCH_DELAY_MS: 1,
  /** Launch RPC from agent to the node's monitor, one way. */
  LAUNCH_MS: 0.5,
  // Retries, backoff and rechecks are the live agent's (DEFAULT_AGENT_CONFIG, agent/attempt.ts).
} as const;

/** Probe-based schedulers (Sparrow §3, Pigeon §3). */
export const NETWORK = {
  /** One-way network delay (Sparrow §5 simulation: 1 ms RTT; Pigeon §3: 0.5 ms). */
  ONE_WAY_MS: 0.5,
} as const;

/** Centralized greedy scheduler (Quasar-like, Tarcil §6.2). */
export const CENTRAL = {
  /** Decision time grows with cluster size: this much per RU scanned per job (stage). */
  SCAN_PER_RU_MS: 0.2,
  /** Fixed part of one decision. */
  BASE_MS: 1,
  /** Tarcil §6.2: "a timeout of 2 seconds"; the scan stops there with the best found so far. */
  TIMEOUT_MS: 2000,
} as const;

/** Delay scheduling (Zaharia et al.; Schatzlein et al. DCC'16). */
export const DELAY = {
  /** Fixed delay interval (the Hadoop/Spark default, 3 s). */
  FIXED_MS: 3000,
  /** Dynamic delay starts here and moves to the running mean of remote-read overheads. */
  DYNAMIC_INITIAL_MS: 3000,
} as const;

/** Pigeon (Wang et al. 2019, §2 and §4.1). */
export const PIGEON = {
  /** Workers per group (§4.1: 100). */
  GROUP_SIZE: 100,
  /** Out of every W tasks served at least one comes from the long queue if non-empty (§4.1: 20). */
  WEIGHT: 20,
  /** Share of each group's workers reserved for short jobs (§4.1: 2%, 8%, 9% for Yahoo, Cloudera, Google). */
  RESERVED: { yahoo: 0.02, cloudera: 0.08, google: 0.09 },
} as const;

/** Utilisation is sampled this often (Tarcil Fig. 15b samples every 2 s). */
export const UTIL_SAMPLE_MS = 2000;

/** Server attribute naming the replica triplet (copyset) a server belongs to (W2's input data). */
export const COPYSET_ATTR = 'copyset';
