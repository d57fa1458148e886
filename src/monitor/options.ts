/**
 * The node monitor's options (a single monitor's and hollow nodes'), every default it applies, the
 * ranges an operator may set and their check, and what it shows of itself (snapshot and counters),
 * kept apart from the monitor so that the front-end's metrics and the command line can name them
 * without reading the monitor's workings.
 */
import { join } from 'node:path';
import type { ServerSpec } from '../model/types.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { invalid } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import type { Executor } from './executor.ts';
import type { SlowdownModel } from './load.ts';

/** How long a monitor keeps its tasks running without the store, past its lease's TTL. */
export const DEFAULT_DISCONNECT_GRACE_MS = 60_000;

/** A task running below this fraction of its expected rate is reported slow (the load monitor). */
export const DEFAULT_LOAD_THRESHOLD = 0.5;

/** How often running tasks' rates are looked at besides on RU changes. */
export const DEFAULT_LOAD_INTERVAL_MS = 1000;

/**
 * A task start the store failed (etcd slow or restarting) is retried after a pause shared by every
 * node of the process: it doubles from the first bound at each failure, up to the second, and the
 * first success resets it; each retry waits a random share of it between half and all.
 */
export const LAUNCH_BACKOFF_MIN_MS = 200;
export const LAUNCH_BACKOFF_MAX_MS = 2000;

/** How a node runs its tasks: the simulated executor (a timer per task) or real processes. */
export const EXECUTOR_KINDS = ['simulated', 'process'] as const;
export const DEFAULT_EXECUTOR = 'simulated';

/** The process executor's directory of per-task stdout/stderr (and of the journal, by default). */
export const DEFAULT_LOG_DIR = 'tarcil-logs';

/** Where a monitor journals outcomes when it writes task logs under `logDir`. */
export function journalDirFor(logDir: string): string {
  return join(logDir, 'journal');
}

/** `tarcil monitor`'s node when the flags do not say: its rack, and the NodeMonitor port (0: any free). */
export const DEFAULT_RACK = 'r000';
export const DEFAULT_MONITOR_PORT = 0;

/** Hollow nodes (hollow.ts, `tarcil hollow`). */
export const HOLLOW_DEFAULTS = {
  /** The cluster spec of profiles/clusters the nodes come from. */
  cluster: 'hollow-10k',
  /** Share of the live nodes one simulated death drops (SIGUSR2, `--kill-after`). */
  killFraction: 0.05,
  /** Seed of the choice of nodes to drop. */
  seed: 1,
  /** Nodes with something to reconcile registered one by one, this many at a time. */
  registerConcurrency: 32,
  /** Requests carrying the nodes' transactions (task starts, outcomes) in flight at once; what is written meanwhile leaves together. */
  maxWriteRequests: 4,
  // Task-start writes of all nodes in flight at once: by default what the requests can carry, see
  // hollowMaxWrites().
} as const;

/**
 * Task-start writes of all nodes let in flight at once (`--max-writes` overrides it): twice what
 * `maxWriteRequests` requests can carry when full. A start is one transaction with one compare and
 * one put, and a group of them shares the store's op budget (group-commit.ts), so a request holds
 * up to maxTxnOps − 1 of them: with etcd's default 128 and 4 requests, 508 in the requests and as
 * many queued to fill each request as soon as its slot frees up (1,016 in all). The bound keeps
 * the queue of built transactions short (what waits beyond it is a closure, in order); a fixed
 * 128 left each request a quarter full and capped starts at 128 per round trip of the store.
 */
export function hollowMaxWrites(maxWriteRequests: number, maxTxnOps: number): number {
  return 2 * Math.max(1, maxWriteRequests) * Math.max(1, maxTxnOps - 1);
}

/** What an operator may set, inclusive (the command line's flags check the same ranges). */
export const MONITOR_LIMITS = {
  leaseTtlSeconds: { min: 1, max: 600 },
  rus: { min: 1, max: 4096 },
  disconnectGraceMs: { min: 0, max: 86_400_000 },
  /** A share of the expected rate: (0, 1]. */
  loadThreshold: { min: 0, max: 1 },
  hollowServers: { min: 1, max: 1_000_000 },
  hollowMaxWrites: { min: 1, max: 1_000_000 },
} as const;

/**
 * Checks the options an operator sets on a monitor or a hollow process; a value out of range is
 * refused with the option and the rule (INVALID_ARGUMENT).
 */
export function checkMonitorOptions(o: {
  leaseTtlSeconds?: number | undefined;
  disconnectGraceMs?: number | undefined;
  loadThreshold?: number | undefined;
}): void {
  const L = MONITOR_LIMITS;
  if (o.leaseTtlSeconds !== undefined && !inRange(o.leaseTtlSeconds, L.leaseTtlSeconds, true)) {
    throw invalid('leaseTtlSeconds', `must be an integer in [${L.leaseTtlSeconds.min}, ${L.leaseTtlSeconds.max}]`);
  }
  if (o.disconnectGraceMs !== undefined && !inRange(o.disconnectGraceMs, L.disconnectGraceMs, false)) {
    throw invalid('disconnectGraceMs', `must be a number of ms in [${L.disconnectGraceMs.min}, ${L.disconnectGraceMs.max}]`);
  }
  if (o.loadThreshold !== undefined && !(Number.isFinite(o.loadThreshold) && o.loadThreshold > L.loadThreshold.min && o.loadThreshold <= L.loadThreshold.max)) {
    throw invalid('loadThreshold', `must be a number in (${L.loadThreshold.min}, ${L.loadThreshold.max}]`);
  }
}

function inRange(x: number, r: { min: number; max: number }, integer: boolean): boolean {
  return Number.isFinite(x) && (!integer || Number.isInteger(x)) && x >= r.min && x <= r.max;
}

export interface MonitorOptions {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
  server: ServerSpec;
  executor: Executor;
  /** host:port of this node's NodeMonitor service, advertised in its server record. */
  endpoint?: string;
  leaseTtlSeconds?: number;
  /** A task whose rate falls below this share of its expected rate is reported (paper §5.2). */
  loadThreshold?: number;
  /**
   * Blocks: while a task runs below `loadThreshold`, the server takes no new placements (until it
   * recovers, or the block's time limit). Default DEFAULT_RUNTIME.block (runtime-loop.ts), as in
   * the simulator; `tarcil monitor --block` / `--no-block`. Slow tasks are reported either way.
   */
  block?: boolean;
  slowdown?: SlowdownModel;
  /**
   * How often running tasks' rates are looked at besides on RU changes (default
   * {@link DEFAULT_LOAD_INTERVAL_MS}): a measured rate (the process executor's CPU rate) changes without any event.
   */
  loadIntervalMs?: number;
  /**
   * When the store cannot be reached, tasks keep running until this long after the lease could
   * first have expired (the send time of the last confirmed keepalive + TTL); then they are
   * killed. Default {@link DEFAULT_DISCONNECT_GRACE_MS}. Written in the server record.
   */
  disconnectGraceMs?: number;
  /**
   * Directory of the outcome journal. Default: `<log dir>/journal` when the executor writes task
   * logs (the process executor), otherwise the journal is kept in memory (outcomes then survive
   * an outage of the store, not a restart of the monitor).
   */
  journalDir?: string;
}

/** Counters since the monitor started. */
export interface MonitorStats {
  /** Processes started. */
  started: number;
  /** Processes that exited 0, and otherwise. */
  completed: number;
  failed: number;
  /** Tasks this monitor stopped: cancelled, given to another, grace ran out, shut down. */
  killed: number;
  /** Tasks this monitor recorded lost. */
  lost: number;
  /** Tasks kept running under a new lease after the store let the old one expire. */
  adopted: number;
  /** Times the lease went unconfirmed or gone (the monitor then starts nothing new). */
  fenced: number;
  registrations: number;
  /** Tasks stopped here because the run-time loop moved them to another RU. */
  movedOut: number;
}

/** The counters that `tarcil_monitor_task_events_total` exports (registrations are not). */
export const MONITOR_EVENTS = ['started', 'completed', 'failed', 'killed', 'lost', 'adopted', 'fenced', 'movedOut'] as const;

export interface MonitorSnapshot {
  server: string;
  platform: string;
  executor: string;
  rus: number;
  busy: number;
  blocked: boolean;
  /** Registered, and the lease confirmed: new tasks start. */
  connected: boolean;
  /** Outcomes in the journal that the store does not have yet. */
  journalled: number;
  running: { job: string; task: number; ruIndex: number; startedAt: number; rate: number; pid?: number }[];
  stats: MonitorStats;
}
