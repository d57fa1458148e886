/**
 * The ClusterStore: the small part of etcd's v3 API the scheduler relies on. Two
 * implementations, EtcdStore (etcd3 package) and MemoryStore (embedded), share one contract test
 * suite (test/store/contract.ts); a behaviour only one of them has is a bug.
 *
 * Semantics follow etcd v3:
 * - one global revision, incremented once per successful write transaction (a txn with several
 *   puts bumps it once; a txn or delete that changes nothing does not bump it);
 * - each key carries createRevision, modRevision and version (number of writes since creation);
 *   a missing key compares as createRevision = modRevision = version = 0 and lease '0', but a
 *   value compare on a missing key is false for == and != alike (etcd cannot tell a missing
 *   value from ''; guard with `version > 0` or `create == 0` instead);
 * - a watch from revision r delivers, in order, every event with revision >= r, grouped by
 *   revision; if r is at or below the compacted revision the watch fails with code COMPACTED;
 * - a key attached to a lease is deleted when the lease expires or is revoked.
 */

export interface KeyValue {
  key: string;
  value: string;
  createRevision: number;
  modRevision: number;
  version: number;
  /** Lease id, '0' when none (etcd's convention). */
  lease: string;
}

export interface RangeResult {
  /** The store revision at which the range was read. */
  revision: number;
  kvs: KeyValue[];
}

export type CompareOp = '==' | '!=' | '<' | '>';

export type Compare =
  | { key: string; target: 'mod' | 'create' | 'version'; op: CompareOp; value: number }
  | { key: string; target: 'value'; op: '==' | '!='; value: string }
  | { key: string; target: 'lease'; op: '==' | '!='; value: string };

export type Op =
  | { type: 'put'; key: string; value: string; lease?: string }
  | { type: 'delete'; key: string; prefix?: boolean }
  | { type: 'get'; key: string; prefix?: boolean };

export interface TxnRequest {
  compare: Compare[];
  success: Op[];
  failure?: Op[];
  /**
   * Send ahead of this process's other requests waiting for the store (EtcdStore's limit on
   * requests in flight): a placement commit, whose compares go stale while it waits. A hint; the
   * embedded store, which queues nothing, ignores it.
   */
  urgent?: boolean;
}

export interface TxnResult {
  succeeded: boolean;
  /** Store revision after the transaction (unchanged if it wrote nothing). */
  revision: number;
  /** One entry per op of the branch taken: the keys read for 'get', null for put/delete. */
  responses: Array<KeyValue[] | null>;
}

export interface WatchEvent {
  type: 'put' | 'delete';
  /** For a delete: key, modRevision = the delete's revision, value ''. */
  kv: KeyValue;
}

export interface WatchBatch {
  revision: number;
  events: WatchEvent[];
}

export interface WatchOptions {
  /** Every key starting with this string. */
  prefix: string;
  /** First revision to deliver (inclusive), normally range revision + 1. */
  fromRevision: number;
  onEvents(batch: WatchBatch): void;
  /**
   * The watch has ended and will deliver nothing more: code COMPACTED (history gone, re-list),
   * CANCELLED (the server cancelled it) or UNAVAILABLE. The caller re-lists and re-watches.
   */
  onError(err: import('../util/errors.ts').TarcilError): void;
}

export interface WatchHandle {
  close(): Promise<void>;
}

export interface Lease {
  /** Decimal string: etcd lease ids are int64. */
  readonly id: string;
  readonly ttlSeconds: number;
  /**
   * Registers a callback run once if the lease is lost (expired or keepalive failed), also when
   * registered after the loss. Not run after revoke() or release(): the holder gave it up.
   */
  onLost(cb: (err: Error) => void): void;
  /** Refreshes the TTL once (tests; live leases keep themselves alive). */
  keepAliveOnce(): Promise<void>;
  /** Revokes the lease, deleting its keys. Idempotent. */
  revoke(): Promise<void>;
  /** Stops the keepalive without revoking (the keys live until the TTL runs out). */
  release(): void;
}

/**
 * One candidacy in an election (etcd's concurrency election): the candidate whose key under
 * `election/<name>/` was created first leads; each key is bound to its candidate's own lease, so a
 * leader that dies (its lease expires) or resigns (its lease is revoked) hands over to the next.
 */
export interface Campaign {
  /**
   * Resolves once this candidate leads. Never resolves if it resigns first; rejects if the
   * campaign fails first (the same error onLost gets).
   */
  elected(): Promise<void>;
  /**
   * Registers a callback run once when the campaign fails (its lease lost, or the store refused
   * it), before or after election, also when registered after the failure. Not after resign().
   * A leader told so must stop what it does as leader.
   */
  onLost(cb: (err: Error) => void): void;
  /** Gives up: the key and its lease are deleted, the next candidate leads. Idempotent. */
  resign(): Promise<void>;
  /** This candidate's key (`election/<name>/<lease id>`), once its lease is granted. */
  key(): string | undefined;
}

export interface LeaseOptions {
  /** Keep the lease alive in the background until revoked or released (default true). */
  keepAlive?: boolean;
}

/**
 * Failures: a call to a store that cannot be reached fails UNAVAILABLE, one that gets no answer
 * before its deadline DEADLINE_EXCEEDED (EtcdStore; both are `isTransient`). A write that failed
 * either way may have been applied: see EtcdStore for what is safe to retry.
 */
/**
 * How a process other than this one reaches the same etcd (a task's supervisor writing a success
 * its monitor could not): its client URLs, TLS files and user. The embedded store has none.
 */
export interface DirectStoreAccess {
  /** `http://host:port` or `https://host:port`. */
  endpoints: string[];
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
  auth?: { user: string; password: string };
}

export interface ClusterStore {
  readonly kind: 'memory' | 'etcd';
  /** Most operations one transaction branch or compare list may hold (etcd --max-txn-ops). */
  readonly maxTxnOps: number;
  /** Largest transaction request in bytes the store accepts (etcd --max-request-bytes). */
  readonly maxRequestBytes: number;
  /** The limit on this process's requests in flight, when the store has one (EtcdStore). */
  readonly inFlightLimit?: { stats(): { limit: number; inFlight: number; queued: number; decreases: number; shed: number } } | undefined;
  /**
   * Calls `fn` with the time of each request this process sent the store and had answered, from
   * sending to the answer (a wait for a slot under the in-flight limit is not counted): `write`
   * for transactions, puts, deletes and compactions, `read` for gets, ranges and read-only
   * transactions. The etcd store has it; the
   * embedded one has no requests to time.
   */
  onRequestTime?(fn: (kind: 'read' | 'write', seconds: number) => void): void;
  /**
   * Reads the events etcd delivered to this process's watches since it opened the store, summed
   * by `label(prefix)` of each watch's prefix (a record kind: what a process pays to follow each
   * part of the store). The etcd store has it.
   */
  countWatchEvents?(label: (prefix: string) => string): () => ReadonlyMap<string, number>;
  /**
   * Counts every request this process sends the store from now on, by `kind|records`: read or
   * write, and the labels (`label(key)`, a record kind) of the keys it touches, joined by `+`.
   * Returns the reader of the counts. The etcd store has it.
   */
  countRequests?(label: (key: string) => string): () => ReadonlyMap<string, number>;

  /** How another process on a node reaches this store (EtcdStore), if it can. */
  directAccess?(): DirectStoreAccess | undefined;

  get(key: string): Promise<KeyValue | undefined>;
  /**
   * The key as it was at `revision` (etcd's range at a revision): undefined if it did not exist
   * then. Fails with COMPACTED if that revision is compacted.
   */
  getAt(key: string, revision: number): Promise<KeyValue | undefined>;
  /** All keys with this prefix, sorted by key, read at one revision. */
  range(prefix: string, opts?: { limit?: number }): Promise<RangeResult>;
  /**
   * All keys of each prefix, every prefix read at the same revision (`byPrefix` in the order
   * given). EtcdStore reads each prefix in pages at that revision, so a large cell is not one
   * response under one deadline; a compaction meanwhile starts it over at a newer revision.
   */
  snapshot(prefixes: readonly string[]): Promise<{ revision: number; byPrefix: KeyValue[][] }>;
  /** How many keys have this prefix, and the revision it was counted at (no values are read). */
  count(prefix: string): Promise<{ revision: number; count: number }>;
  put(key: string, value: string, opts?: { lease?: string }): Promise<number>;
  /** Returns the number of keys deleted. */
  delete(key: string, opts?: { prefix?: boolean }): Promise<number>;
  txn(req: TxnRequest): Promise<TxnResult>;
  /**
   * Several independent transactions in one request, applied atomically at one revision. Each
   * evaluates its own compares, all on the state before the request, and runs its own branch; the
   * results come back in order, each with the revision after the request. In etcd this is one
   * transaction whose success branch nests each of them. No two of them may write the same key
   * (INVALID_ARGUMENT, as etcd's "duplicate key"), and each may hold at most
   * maxTxnOps − reqs.length compares and ops per branch (etcd shares the op budget along a path).
   */
  txns(reqs: TxnRequest[]): Promise<TxnResult[]>;
  watch(opts: WatchOptions): Promise<WatchHandle>;
  grantLease(ttlSeconds: number, opts?: LeaseOptions): Promise<Lease>;
  /** Current revision (a cheap read). */
  revision(): Promise<number>;
  compact(revision: number): Promise<void>;
  /**
   * Stands for `name` with `value` under a new lease of `ttlSeconds` kept alive in the background
   * (see {@link Campaign}). The keys live outside any tarcil prefix, at `election/<name>/<lease>`,
   * as etcd's own election client puts them, so put the cluster's prefix in `name`.
   */
  campaign(name: string, value: string, ttlSeconds: number): Campaign;
  /** The value of the current leader of `name` (the oldest candidate), undefined when none. */
  leader(name: string): Promise<string | undefined>;
  close(): Promise<void>;
}
