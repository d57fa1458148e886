/** The cases of `bench sim-speed` and what each reports. */
export interface SpeedCase {
  name: string;
  policy: string;
  seed: number;
  workload:
    { kind: 'w4'; workers: number; jobs: number; load: number } | { kind: 'w3'; jobs: number } | { kind: 'cell'; servers: number; load: number; tasks: number };
}

export interface CaseResult {
  name: string;
  policy: string;
  workload: string;
  servers: number;
  rus: number;
  wallS: number;
  events: number;
  tasks: number;
  simS: number;
  /** The case's own process: peak resident set, MiB. */
  peakRssMb: number;
  /** RSS every 50,000 events, against virtual time; every 2 M events also the live heap after a full collection. */
  memory: { t: number; rssMb: number; liveMb?: number }[];
  meanResponseMs: number;
  jobs: number;
  /** Scheduling decisions (policies that count them) and their rate. */
  decisions: number;
  decisionsPerS: number;
  /** Wall time of one decide() (sample, score, select) and of one admission verdict, µs: flat in the cell's size when the decision is O(R). */
  decideUs: number;
  verdictUs: number;
  /** The decision's wall time per candidate RU it scored (R per task placed), µs: the O(R) cost per unit. */
  candidateUs: number;
  candidatesPerDecision: number;
  /** Mean sample size R. */
  meanR: number;
}
