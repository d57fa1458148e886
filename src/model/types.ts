/**
 * Plain types shared by every layer. No behaviour lives here; validation schemas for the data
 * files and job specs are in ./schema.ts.
 */

/** Number of shared resources whose interference is profiled (paper §3.2: N = 10). */
export const N_RESOURCES = 10;

/** A shared resource on which jobs cause and suffer interference (profiles/resources.json). */
export interface Resource {
  id: string;
  name: string;
  description: string;
}

/** A server type: cores become resource units (one RU per core). */
export interface Platform {
  name: string;
  description: string;
  cores: number;
  /** Relative single-core speed, 1.0 = the reference platform. */
  speed: number;
  memoryGiB: number;
  storageGiB: number;
  networkGbps: number;
}

/**
 * A workload's interference profile. `caused[i]` ∈ [0, 99] is the pressure the job puts on shared
 * resource i (in the order of profiles/resources.json); the paper assumes tolerance t_i = 99 − c_i.
 * `platformPerf[p]` is the job's speed on platform p relative to the reference platform.
 */
export interface WorkloadProfile {
  name: string;
  description: string;
  /** Workload family, used by the simulator's generators (spark, hadoop, memcached, ...). */
  family: string;
  caused: number[];
  platformPerf: Record<string, number>;
  /** Typical ideal task duration on the reference platform, ms (used by generators and demos). */
  typicalDurationMs: number;
  /** Latency-critical services (memcached, Cassandra) are long-running and sensitive. */
  latencyCritical: boolean;
}

export interface ServerGroup {
  platform: string;
  count: number;
  attributes?: Record<string, string>;
}

/** A cluster as written in profiles/clusters/*.json, before expansion into servers. */
export interface ClusterSpec {
  name: string;
  description: string;
  serversPerRack: number;
  groups: ServerGroup[];
}

/** One server after expansion: ids are stable ("s0000", ...), racks assigned in order. */
export interface ServerSpec {
  id: string;
  platform: string;
  rack: string;
  rus: number;
  speed: number;
  attributes: Record<string, string>;
}

export type LocalityMode = 'any' | 'pack' | 'spread';
export type TopologyScope = 'server' | 'rack';
export type CommitMode = 'incremental' | 'gang';

export interface Constraints {
  /** If set, only these platforms are eligible (a hard constraint). */
  platforms?: string[];
  /** Every attribute listed must match the server's attribute exactly. */
  attributes?: Record<string, string>;
  /** Servers that hold the job's input data; with locality 'pack' they are preferred. */
  dataServers?: string[];
}

/** A job as the scheduling core sees it: validated, profile resolved. */
export interface JobSpec {
  id: string;
  name: string;
  profile: WorkloadProfile;
  tasks: number;
  /** Higher is more important. Jobs above the default bypass the admission queue and may preempt. */
  priority: number;
  mode: CommitMode;
  /**
   * With mode 'spread', `required` (the default) means no two live tasks of the job share a
   * server (or rack): a task waits rather than break it. `required: false` makes it a preference.
   * With mode 'pack', `required: true` (with mode 'gang') puts every task on one server (or rack),
   * all or nothing (sampling/one-group.ts); otherwise pack is a preference.
   */
  locality: { mode: LocalityMode; scope: TopologyScope; required?: boolean };
  constraints: Constraints;
  /** Upper bound on admission queueing, ms. */
  maxQueueMs: number;
  /** Per-task ideal duration for the simulated executor, ms (optional for command tasks). */
  durationMs?: number;
  /** Per-task command for the process executor. */
  command?: { argv: string[]; env?: Record<string, string> };
  /**
   * The run-time loop may move a task that runs well below its expected rate to a better RU (it
   * restarts there). Off unless the spec says so.
   */
  migratable?: boolean;
  /**
   * A scale-out job (its work spreads over however many tasks it has, e.g. a service's replicas):
   * while one of its tasks runs well below its expected rate, the run-time loop adds a task, up to
   * `maxTasks` in all.
   */
  scaleOut?: { maxTasks: number };
  /**
   * Set when the job is scheduled with its class's learned vector (`profile.caused`) rather than
   * the declared one (kept here), and how many observations the estimate rested on.
   */
  learned?: { observations: number; declared: number[] };
  /** The namespace the job belongs to (tenancy/namespace.ts); absent means `default`. */
  namespace?: string;
  submittedAt: number;
}

export const DEFAULT_PRIORITY = 100;

/** An RU is addressed by its server and index: key `rus/<server>/<index>`. */
export interface RuRef {
  server: string;
  index: number;
}

export type RuState = 'free' | 'busy' | 'reserved' | 'down';

/** The value stored at `rus/<server>/<index>`. */
export interface RuRecord {
  state: RuState;
  job?: string;
  task?: number;
  /** The occupant's caused-interference vector: neighbours' contention is derived from it. */
  caused?: number[];
  priority?: number;
  /** Agent that committed the placement (for audit and explanation). */
  agent?: string;
  since?: number;
  /**
   * The occupant's quality Q when it was placed (4 decimals), so that every front-end's view of
   * the cell knows it, not only the one that placed it; absent in records written without it.
   */
  q?: number;
}

export type TaskState = 'queued' | 'placed' | 'running' | 'succeeded' | 'failed' | 'cancelled' | 'lost';

/** The value stored at `tasks/<job>/<index>`. */
export interface TaskRecord {
  job: string;
  index: number;
  state: TaskState;
  ru?: RuRef;
  /** Incremented every time the task is placed again (preemption, loss): fences stale launches. */
  attempt: number;
  placedAt?: number;
  endedAt?: number;
  exitCode?: number;
  message?: string;
}

export type JobState = 'queued' | 'admitted' | 'placed' | 'running' | 'succeeded' | 'failed' | 'cancelled';
