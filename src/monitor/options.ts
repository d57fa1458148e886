/**
 * The node monitor's options, the defaults it applies, and what it shows of itself (snapshot and
 * counters), kept apart from the monitor so that the front-end's metrics and the command line can
 * name them without reading the monitor's workings.
 */
import type { ServerSpec } from '../model/types.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import type { Executor } from './executor.ts';
import type { SlowdownModel } from './load.ts';

/** How long a monitor keeps its tasks running without the store, past its lease's TTL. */
export const DEFAULT_DISCONNECT_GRACE_MS = 60_000;

/** A task running below this fraction of its expected rate is reported slow (the load monitor). */
export const DEFAULT_LOAD_THRESHOLD = 0.5;

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
  slowdown?: SlowdownModel;
  /**
   * How often running tasks' rates are looked at besides on RU changes (default 1000 ms): a
   * measured rate (the process executor's CPU rate) changes without any event.
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
}

/** The counters that `tarcil_monitor_task_events_total` exports (registrations are not). */
export const MONITOR_EVENTS = ['started', 'completed', 'failed', 'killed', 'lost', 'adopted', 'fenced'] as const;

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

