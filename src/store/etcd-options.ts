/**
 * The options of the etcd store (EtcdStore) and the defaults they share with its callers.
 */
import type { AdaptiveLimitOptions } from './adaptive-limit.ts';
import type { EtcdTlsOptions } from './etcd-convert.ts';

/**
 * Default deadline of each call to etcd: 2 s. A request caught in a leader election (its proposal
 * went to the leader that died) is otherwise answered only by etcd's own timeout, 5 s + 2 election
 * timeouts (7 s with the defaults); a new leader exists about 1-2.5 s after the old one died, so
 * a request retried after 2 s lands soon after the election. 2 s is 5x less than the default lease
 * TTL (10 s; a holder fences itself after TTL - 1 s without a confirmed keepalive), which leaves
 * room for several attempts, and some 40x the slowest commit measured on etcd (bench/).
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 2000;

/**
 * HTTP/2 flow-control window of the watch connection (its stream and the connection), bytes: what
 * etcd may send the watches before this process acknowledges it. The default 64 KiB capped the
 * events received at 64 KiB per round trip (about 150 RU records a second at 1 s).
 */
export const WATCH_FLOW_WINDOW_BYTES = 16 * 2 ** 20;

export interface EtcdStoreOptions {
  /** `http://host:port`, `https://host:port` or `host:port` (scheme from `tls`). */
  endpoints: string[];
  tls?: EtcdTlsOptions;
  auth?: { user: string; password: string };
  /** How long {@link EtcdStore.connect} and a new watch wait for etcd to answer. Default 5 s. */
  dialTimeoutMs?: number;
  /**
   * Deadline of each call to etcd: reads, writes, transactions, compaction, lease grant, keepalive,
   * revoke and time-to-live (not the long-lived watch and automatic keepalive streams). A call past
   * it fails DEADLINE_EXCEEDED. Keep it well below the lease TTL. Default
   * {@link DEFAULT_REQUEST_TIMEOUT_MS} (2 s).
   */
  requestTimeoutMs?: number;
  /**
   * The server's `--max-txn-ops` (default 128). etcd enforces its own setting; this copy lets
   * callers size transactions and refuses oversized ones before they are sent.
   */
  maxTxnOps?: number;
  /** The server's `--max-request-bytes` (default 1.5 MiB), mirrored like maxTxnOps. */
  maxRequestBytes?: number;
  /** Keys per range call; larger ranges are read in pages at one revision. Default 5000. */
  rangePageSize?: number;
  /**
   * How often the watch stream is asked for a progress notification while watches are open
   * (default 5 s; 0 turns the probe off), and how long it may stay silent after one before it is
   * taken for stalled and re-opened, every watch resuming where it was (default 15 s). See
   * {@link WatchStreamGuard}.
   */
  watchProbeMs?: number;
  watchStallMs?: number;
  /**
   * Requests of this process in flight to etcd (reads, writes, transactions; not keepalives or
   * watches), adapted to how etcd answers ({@link AdaptiveLimit}); `false` turns the limit off.
   */
  inFlight?: Omit<AdaptiveLimitOptions, 'overloaded' | 'now'> | false;
}
