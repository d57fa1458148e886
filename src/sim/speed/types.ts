/** The cases of `bench sim-speed` and what each reports. */
export interface SpeedCase {
  name: string;
  policy: string;
  seed: number;
  workload: { kind: 'w4'; workers: number; jobs: number; load: number } | { kind: 'w3'; jobs: number } | { kind: 'cell'; servers: number; load: number; tasks: number };
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
  /** RSS every 50,000 events, against virtual time. */
  memory: { t: number; rssMb: number }[];
  meanResponseMs: number;
  jobs: number;
  /** Scheduling decisions (policies that count them) and their rate. */
  decisions: number;
  decisionsPerS: number;
}
