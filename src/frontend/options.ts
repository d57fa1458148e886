/**
 * The front-end's options in one place: the defaults of `tarcil server`, `tarcil up` and the client
 * commands, the ranges an operator may set, and their check (a value out of range is refused with
 * the option and the rule). The command line's flags and startScheduler read them from here.
 * Defaults that belong to another component are named here from that component's module, never
 * copied: the agents' (agent/config.ts), the job owner's (owner/context.ts), leases
 * (state/lease.ts), retention and compaction (state/retention.ts, state/housekeeping.ts), the
 * monitors' (monitor/options.ts), the stores' (store/common.ts, store/etcd.ts) and the gRPC
 * connections' (rpc/connection-limits.ts).
 */
import { DEFAULT_AGENT_CONFIG } from '../agent/defaults.ts';
import { DEFAULT_DEPARTED_MEMORY_MS, DEFAULT_LAUNCH_AFTER_MS, DEFAULT_MAX_PENDING_TASKS, DEFAULT_UNPLACEABLE_TIMEOUT_MS } from '../owner/context.ts';
import { DEFAULT_EXECUTOR, DEFAULT_LOG_DIR } from '../monitor/options.ts';
import { DEFAULT_COMPACT_MARGIN_MS } from '../state/housekeeping.ts';
import { DEFAULT_PREFIX } from '../state/keys.ts';
import { DEFAULT_LEASE_TTL_S } from '../state/lease.ts';
import { DEFAULT_RETAIN_MS } from '../state/retention.ts';
import { DEFAULT_CONNECTION_LIMITS, DEFAULT_SLOW_CONSUMER_MS } from '../rpc/connection-limits.ts';
import { invalid } from '../util/errors.ts';

export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_PORT = 7070;
/** Where the client commands look for a front-end (`--server`, or $TARCIL_SERVER). */
export const DEFAULT_SERVER = `${DEFAULT_HOST}:${DEFAULT_PORT}`;

/** `tarcil server`: one front-end of a cell; several may share one etcd. */
export const SERVER_DEFAULTS = {
  store: 'memory://',
  prefix: DEFAULT_PREFIX,
  host: DEFAULT_HOST,
  port: DEFAULT_PORT,
  agents: 2,
  leaseTtlSeconds: DEFAULT_LEASE_TTL_S,
  conflictScope: DEFAULT_AGENT_CONFIG.conflictScope,
  groupCommit: DEFAULT_AGENT_CONFIG.groupCommit,
  retainMs: DEFAULT_RETAIN_MS,
  compactMarginMs: DEFAULT_COMPACT_MARGIN_MS,
  departedMemoryMs: DEFAULT_DEPARTED_MEMORY_MS,
  unplaceableTimeoutMs: DEFAULT_UNPLACEABLE_TIMEOUT_MS,
  maxPendingTasks: DEFAULT_MAX_PENDING_TASKS,
  launchAfterMs: DEFAULT_LAUNCH_AFTER_MS,
} as const;

/**
 * `tarcil up` (`npm start`): the demo cell's monitors, agents and the front-end in one process.
 * Its monitors and its owner hold 5 s leases: one process holds them all, so a shorter TTL costs
 * nothing, and a restarted `tarcil up` finds the previous one's nodes gone sooner.
 */
export const UP_DEFAULTS = {
  store: 'memory://',
  cluster: 'demo',
  host: DEFAULT_HOST,
  port: DEFAULT_PORT,
  agents: 3,
  metricsPort: 9464,
  /** The live dashboard (`--http-port`; see frontend/dashboard/server.ts). */
  httpPort: 7080,
  leaseTtlSeconds: 5,
  executor: DEFAULT_EXECUTOR,
  logDir: DEFAULT_LOG_DIR,
} as const;

/** The client commands (submit, status, jobs, cluster, explain, cancel). */
export const CLIENT_DEFAULTS = {
  server: DEFAULT_SERVER,
  /** Deadline of each call. */
  timeoutMs: 10_000,
  /**
   * The largest answer a client takes (gRPC's default is 4 MiB): GetCluster lists every server,
   * about 470 bytes each, so a 10,000-server cell's answer is about 4.7 MB.
   */
  maxResponseBytes: 256 * 2 ** 20,
  /** SubmitJob is tried again this many times on UNAVAILABLE or DEADLINE_EXCEEDED. */
  submitRetries: 5,
  /** The pause before the first retry, doubled each time up to retryMaxMs (jittered). */
  retryBaseMs: 200,
  retryMaxMs: 5000,
  /** `tarcil jobs` lists at most this many. */
  listLimit: 50,
} as const;

/**
 * What a connection, a call and the WatchJob streams may hold of a front-end, and for how long
 * (`tarcil server` and `up`): the connections' and calls' defaults are rpc/connection-limits.ts's
 * (every tarcil gRPC server); the WatchJob streams' are set here, and frontend/job-watch-events.ts
 * takes them from here.
 */
export const STREAM_LIMIT_DEFAULTS = {
  /** Calls one connection carries at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: DEFAULT_CONNECTION_LIMITS.maxConcurrentStreams,
  keepaliveTimeMs: DEFAULT_CONNECTION_LIMITS.keepaliveTimeMs,
  keepaliveTimeoutMs: DEFAULT_CONNECTION_LIMITS.keepaliveTimeoutMs,
  maxConnectionIdleMs: DEFAULT_CONNECTION_LIMITS.maxConnectionIdleMs,
  requestTimeoutMs: DEFAULT_CONNECTION_LIMITS.requestTimeoutMs,
  unsentTimeoutMs: DEFAULT_CONNECTION_LIMITS.unsentTimeoutMs,
  /** New calls handed to grpc-js per turn of the event loop (0: all in the turn they arrive). */
  callsPerTurn: DEFAULT_CONNECTION_LIMITS.callsPerTurn,
  maxWatches: 20_000,
  maxWatchesPerJob: 10_000,
  maxWatchesPerConnection: 1000,
  /** Bytes one WatchJob stream may hold unsent, and all of them together. */
  streamQueueBytes: 256 * 1024,
  totalQueueBytes: 64 * 2 ** 20,
  /** A stream (WatchJob, TaskLogs) whose client takes nothing this long is dropped. */
  slowConsumerMs: DEFAULT_SLOW_CONSUMER_MS,
  /** A WatchJob stream this many bytes behind its job starts over with a fresh snapshot. */
  maxBehindBytes: 8 * 2 ** 20,
} as const;

export type StreamLimits = { -readonly [K in keyof typeof STREAM_LIMIT_DEFAULTS]: number };

/** What an operator may set of the stream limits, inclusive; the durations may also be 0 (off) where `off`. */
export const STREAM_LIMIT_RANGES: { readonly [K in keyof StreamLimits]: { readonly min: number; readonly max: number; readonly off?: boolean } } = {
  maxConcurrentStreams: { min: 1, max: 1_000_000 },
  keepaliveTimeMs: { min: 1000, max: 3_600_000 },
  keepaliveTimeoutMs: { min: 1000, max: 600_000 },
  maxConnectionIdleMs: { min: 1000, max: 7 * 86_400_000 },
  requestTimeoutMs: { min: 100, max: 600_000, off: true },
  unsentTimeoutMs: { min: 1000, max: 3_600_000, off: true },
  callsPerTurn: { min: 0, max: 1_000_000 },
  maxWatches: { min: 1, max: 1_000_000 },
  maxWatchesPerJob: { min: 1, max: 1_000_000 },
  maxWatchesPerConnection: { min: 1, max: 1_000_000 },
  streamQueueBytes: { min: 16 * 1024, max: 2 ** 30 },
  totalQueueBytes: { min: 2 ** 20, max: 16 * 2 ** 30 },
  slowConsumerMs: { min: 1000, max: 3_600_000 },
  maxBehindBytes: { min: 64 * 1024, max: 16 * 2 ** 30 },
};

/**
 * Checks stream limits an operator set (startScheduler checks them before anything starts): a
 * value out of range is refused with INVALID_ARGUMENT, naming the option and the rule.
 */
export function checkStreamLimits(o: Partial<StreamLimits>): void {
  for (const [name, r] of Object.entries(STREAM_LIMIT_RANGES) as [keyof StreamLimits, (typeof STREAM_LIMIT_RANGES)[keyof StreamLimits]][]) {
    const x = o[name];
    if (x === undefined || (r.off && x === 0)) continue;
    if (!isIntIn(x, r)) throw invalid(name, `must be ${r.off ? '0 (off) or ' : ''}an integer in [${r.min}, ${r.max}]`);
  }
  const q = { ...STREAM_LIMIT_DEFAULTS, ...o };
  if (q.totalQueueBytes < q.streamQueueBytes) throw invalid('totalQueueBytes', `must be at least streamQueueBytes (${q.streamQueueBytes})`);
}

/** A drain's deadline when none is given (as `nomad node drain`'s). */
export const DEFAULT_DRAIN_DEADLINE_MS = 60 * 60_000;
/** The longest drain deadline accepted. */
export const MAX_DRAIN_DEADLINE_MS = 7 * 24 * 60 * 60_000;

/** What an operator may set, inclusive. */
export const FRONTEND_LIMITS = {
  agents: { min: 1, max: 64 },
  port: { min: 0, max: 65535 },
  leaseTtlSeconds: { min: 1, max: 600 },
  groupCommit: { min: 0, max: 64 },
  /** `--retain`: from 1 s to 30 days. */
  retainMs: { min: 1000, max: 30 * 86_400_000 },
  /** `--compact-margin`: from 10 s to a day, or 0 (tarcil does not compact). */
  compactMarginMs: { min: 10_000, max: 86_400_000 },
  /** How long a server that left counts as part of the cell: up to a day. */
  departedMemoryMs: { min: 0, max: 86_400_000 },
  /** How long a job waits for servers that are down: from 1 s to 7 days. */
  unplaceableTimeoutMs: { min: 1000, max: 7 * 86_400_000 },
  /** Tasks not yet placed above which submissions are refused: 0 (no limit) to 100 million. */
  maxPendingTasks: { min: 0, max: 100_000_000 },
  /** When a task not yet running is sent to its node's monitor: 0 (with the commit) to a minute. */
  launchAfterMs: { min: 0, max: 60_000 },
  timeoutMs: { min: 1, max: 3_600_000 },
  submitRetries: { min: 0, max: 100 },
  listLimit: { min: 0, max: 1_000_000 },
} as const;

export type LimitName = keyof typeof FRONTEND_LIMITS;

/**
 * Checks what an operator sets on a front-end (startScheduler checks it before anything starts):
 * a value out of range is refused with INVALID_ARGUMENT, naming the option and the rule.
 */
export function checkSchedulerOptions(o: {
  agents: number;
  port: number;
  metricsPort?: number | undefined;
  httpPort?: number | undefined;
  leaseTtlSeconds?: number | undefined;
  retainMs?: number | undefined;
  compactMarginMs?: number | undefined;
  departedMemoryMs?: number | undefined;
  unplaceableTimeoutMs?: number | undefined;
  maxPendingTasks?: number | undefined;
  launchAfterMs?: number | undefined;
  streamLimits?: Partial<StreamLimits> | undefined;
}): void {
  checkInt('agents', o.agents, FRONTEND_LIMITS.agents);
  checkInt('port', o.port, FRONTEND_LIMITS.port);
  if (o.metricsPort !== undefined) checkInt('metricsPort', o.metricsPort, FRONTEND_LIMITS.port);
  if (o.httpPort !== undefined) checkInt('httpPort', o.httpPort, FRONTEND_LIMITS.port);
  if (o.leaseTtlSeconds !== undefined) checkInt('leaseTtlSeconds', o.leaseTtlSeconds, FRONTEND_LIMITS.leaseTtlSeconds);
  if (o.retainMs !== undefined) checkInt('retainMs', o.retainMs, FRONTEND_LIMITS.retainMs);
  if (o.departedMemoryMs !== undefined) checkInt('departedMemoryMs', o.departedMemoryMs, FRONTEND_LIMITS.departedMemoryMs);
  if (o.unplaceableTimeoutMs !== undefined) checkInt('unplaceableTimeoutMs', o.unplaceableTimeoutMs, FRONTEND_LIMITS.unplaceableTimeoutMs);
  if (o.maxPendingTasks !== undefined) checkInt('maxPendingTasks', o.maxPendingTasks, FRONTEND_LIMITS.maxPendingTasks);
  if (o.launchAfterMs !== undefined) checkInt('launchAfterMs', o.launchAfterMs, FRONTEND_LIMITS.launchAfterMs);
  if (o.streamLimits) checkStreamLimits(o.streamLimits);
  if (o.compactMarginMs !== undefined && o.compactMarginMs !== 0) {
    const r = FRONTEND_LIMITS.compactMarginMs;
    if (!isIntIn(o.compactMarginMs, r)) throw invalid('compactMarginMs', `must be 0 (off) or an integer in [${r.min}, ${r.max}]`);
  }
}

function checkInt(name: string, x: number, r: { min: number; max: number }): void {
  if (!isIntIn(x, r)) throw invalid(name, `must be an integer in [${r.min}, ${r.max}]`);
}

function isIntIn(x: number, r: { min: number; max: number }): boolean {
  return Number.isInteger(x) && x >= r.min && x <= r.max;
}
