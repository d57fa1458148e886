/**
 * EtcdStore: the ClusterStore on etcd 3.4+ through the etcd3 package — paged ranges at one
 * revision, transactions (nested for group commit), watches that resume after a broken stream,
 * and leases. Conversions live in etcd-convert.ts, watches in etcd-watch.ts, leases in
 * etcd-lease.ts.
 */
import { traceRequests, tracingOn } from '../util/trace.ts';
import { ConsecutiveBreaker, ExponentialBackoff, circuitBreaker, handleWhen, isBrokenCircuitError, noop } from 'cockatiel';
import { AdaptiveLimit, isOverload } from './adaptive-limit.ts';
import { Etcd3, GRPCDeadlineExceededError, isRecoverableError, type IOptions } from 'etcd3';
import { TarcilError, invalid, isTransient } from '../util/errors.ts';
import { DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MAX_TXN_OPS, checkKey, checkTxn, checkTxns, normalizeLease } from './common.ts';
import type {
  Campaign,
  ClusterStore,
  DirectStoreAccess,
  KeyValue,
  Lease,
  LeaseOptions,
  Op,
  RangeResult,
  TxnRequest,
  TxnResult,
  WatchHandle,
  WatchOptions,
} from './types.ts';
import {
  ALL_KEYS,
  branchResponses,
  fromKv,
  loadTls,
  neverSent,
  prefixRange,
  sleep,
  toCompare,
  toRequestOp,
  toTarcil,
  unlessSent,
  unsentAttempts,
  unsentStreamAttempts,
  BREAKER_FAILURES,
} from './etcd-convert.ts';
import { EtcdLeaseHandle } from './etcd-lease.ts';
import { installFastLongToString } from './etcd-long.ts';
import { DEFAULT_REQUEST_TIMEOUT_MS, WATCH_FLOW_WINDOW_BYTES, type EtcdStoreOptions } from './etcd-options.ts';
import { EtcdWatch, WatchEventCounts } from './etcd-watch.ts';
import { RequestCounts } from './request-counts.ts';
import { StoreCampaign, storeLeader } from './election.ts';
import { DEFAULT_WATCH_PROBE_MS, DEFAULT_WATCH_STALL_MS, WatchStreamGuard } from './etcd-watch-guard.ts';

export { toTarcil, type EtcdTlsOptions } from './etcd-convert.ts';
export { DEFAULT_REQUEST_TIMEOUT_MS, type EtcdStoreOptions } from './etcd-options.ts';

/**
 * ClusterStore on etcd v3 through the `etcd3` package.
 *
 * Requests use the raw KV service (`client.kv.txn`, `range`, ...) rather than etcd3's builders,
 * so compares, range ends and the reads of a failure branch are exactly what the caller asked.
 *
 * Fault handling: every call carries a deadline (requestTimeoutMs, default 2 s), so a request
 * caught in a leader election fails DEADLINE_EXCEEDED rather than waiting for etcd's own 7 s
 * "request timed out" (also DEADLINE_EXCEEDED). An endpoint that cannot be reached fails
 * UNAVAILABLE. With several endpoints, each has a circuit breaker that opens for 1 s after 3
 * consecutive failures to reach it (a deadline does not count: a slow etcd is not an unreachable
 * one); with one endpoint there is none.
 * etcd3 retries every call three times by default, which could apply a write twice when a reply
 * is lost; here etcd3 retries nothing, and this store retries as follows.
 *
 * What may be retried after UNAVAILABLE or DEADLINE_EXCEEDED ({@link isTransient}). A write that
 * failed so may have been applied, or be applied shortly after the error (a proposal that
 * survives the election):
 * - Reads (get, range pages, revision, read-only transactions) are retried here: up to
 *   max(2, endpoints) attempts, 50 ms apart.
 * - A call etcd provably never received (circuit open, connection refused: {@link neverSent}) is
 *   sent again at once, writes and lease calls included, when there are other endpoints
 *   (etcd3 picks one at random and skips those whose circuit is open).
 * - Any other write is sent once; the caller decides, by what the write is:
 *   - a transaction guarded by compares (placements, releases, job summaries, adoption, gang
 *     reservations) is safe to retry: if the first attempt landed, the retry fails its compares,
 *     and the caller must take `succeeded: false` as "changed meanwhile, look again", never as
 *     proof that the first attempt did not land (the agent reads its commit back; a release that
 *     finds the RU moved on has nothing left to do);
 *   - an unguarded put is idempotent (the same value again: one more revision, one more watch
 *     event), and so are a delete (the retry deletes nothing), a compaction (already compacted is
 *     a no-op), a keepalive and a revoke;
 *   - a lease grant is not idempotent: a retried grant whose first attempt landed leaves an extra
 *     lease behind. It holds no keys and expires after its TTL, which is acceptable;
 *   - several transactions in one request (txns, group commit) are each like txn.
 *
 * Watches (etcd3's WatchManager): one gRPC stream carries every watcher. On a stream error it
 * emits `disconnected` on each watcher, reconnects with backoff and re-creates the watchers
 * silently, each from `start_revision` = last response header revision + 1. That revision is the
 * store's revision when the response was sent, which can be ahead of the events actually
 * delivered (a watcher catching up from the past receives at most 1000 revisions per response,
 * with the header at the current revision), so a plain resume could skip events. This store
 * rewinds `start_revision` to the next revision it has not delivered whenever `disconnected` is
 * emitted, so a resumed watch neither skips nor repeats a revision; if that revision was
 * compacted meanwhile, etcd cancels the watch and the caller gets COMPACTED.
 *
 * A watch cancelled by etcd reaches etcd3 as a response with `canceled` set; etcd3 drops the
 * watcher and emits `error` ("Watcher canceled: <cancel_reason>") without the response, so
 * `compact_revision` is not visible. etcd sets no cancel_reason for compaction (only for refused
 * creations such as permission denied), so an empty reason or one that mentions compaction
 * becomes COMPACTED, anything else CANCELLED. Either way onError is called once and the watch
 * is over: etcd3 does not re-create a cancelled watcher.
 *
 * etcd refuses a watch only when its start revision is *below* the compacted revision, while
 * the ClusterStore contract says "at or below" (the revision compacted to has lost its delete
 * events). A watch from r therefore first reads at revision r - 1, which etcd refuses exactly
 * when r is at or below the compacted revision.
 *
 * Leases: etcd3's keepalive (every ttl/3) reports `lost` when etcd answers that the lease has
 * expired or when nothing was heard for 2 x TTL. With keepAlive: false etcd3 never looks again,
 * so this store asks etcd for the lease's remaining TTL when it should have run out and reports
 * the loss itself.
 */

installFastLongToString();

export class EtcdStore implements ClusterStore {
  readonly kind = 'etcd' as const;
  readonly maxTxnOps: number;
  readonly maxRequestBytes: number;
  readonly endpoints: readonly string[];

  private readonly client: Etcd3;
  /**
   * Watches get a connection of their own: an agent's cache receives a burst of events for every
   * commit, and on a shared HTTP/2 connection that stream delays the commits themselves
   * (measured: bench/commit-etcd.ts).
   */
  private readonly watchClient: Etcd3;
  /** Leases (grant, keepalive, revoke, time-to-live) on a connection of their own. */
  private readonly leaseClient: Etcd3;
  private readonly dialTimeoutMs: number;
  private readonly pageSize: number;
  private readonly readAttempts: number;
  private readonly requestTimeoutMs: number;
  /** Runs of a call etcd never received (unsentAttempts). */
  private readonly unsentAttempts: number;
  private readonly watches = new Set<EtcdWatch>();
  private readonly leases = new Set<EtcdLeaseHandle>();
  /** Keeps the watch stream from stopping silently; see {@link WatchStreamGuard}. */
  readonly watchGuard: WatchStreamGuard;
  private closed = false;
  private readonly access: DirectStoreAccess;
  /** How many requests this process keeps in flight (undefined: no limit). */
  readonly inFlightLimit: AdaptiveLimit | undefined;
  /** Who is told the time of each request (see ClusterStore.onRequestTime). */
  private readonly timeListeners: ((kind: 'read' | 'write', seconds: number) => void)[] = [];

  directAccess(): DirectStoreAccess {
    return this.access;
  }

  constructor(opts: EtcdStoreOptions) {
    if (!Array.isArray(opts.endpoints) || opts.endpoints.length === 0) {
      throw invalid('store.endpoints', 'at least one etcd endpoint is needed');
    }
    const secure = opts.tls !== undefined;
    this.endpoints = opts.endpoints.map((e) => (/^https?:\/\//.test(e) ? e : `${secure ? 'https' : 'http'}://${e}`));
    this.access = { endpoints: [...this.endpoints], ...(opts.tls ? { tls: { ...opts.tls } } : {}), ...(opts.auth ? { auth: { ...opts.auth } } : {}) };
    this.maxTxnOps = opts.maxTxnOps ?? DEFAULT_MAX_TXN_OPS;
    this.maxRequestBytes = opts.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
    this.dialTimeoutMs = opts.dialTimeoutMs ?? 5000;
    this.pageSize = opts.rangePageSize ?? 5000;
    this.readAttempts = Math.max(2, this.endpoints.length);
    this.unsentAttempts = unsentAttempts(this.endpoints.length);
    const requestTimeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    if (!Number.isFinite(requestTimeoutMs) || requestTimeoutMs <= 0) throw invalid('store.requestTimeoutMs', 'must be a positive number of milliseconds');
    this.requestTimeoutMs = requestTimeoutMs;
    this.inFlightLimit =
      opts.inFlight === false
        ? undefined
        : new AdaptiveLimit({ slowMs: Math.min(1000, requestTimeoutMs / 2), ...opts.inFlight, overloaded: (e) => isOverload(toTarcil(e, 'etcd')) });

    const options: IOptions = {
      hosts: [...this.endpoints],
      dialTimeout: this.dialTimeoutMs,
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + requestTimeoutMs }),
      // Large prefix ranges are paged, but one page of big records can still exceed gRPC's 4 MiB.
      grpcOptions: { 'grpc.max_receive_message_length': 64 * 1024 * 1024 },
      faultHandling: {
        global: noop,
        // A breaker serves only to skip an endpoint that cannot be reached while others can, so
        // it opens on failures to reach it, not on slow answers: an overloaded etcd answers late
        // on every endpoint, and an open circuit would then fail every call at once, lease
        // keepalives included, turning a slow store into lost leases. With one endpoint there
        // is nowhere else to go: no breaker at all.
        host: () =>
          this.endpoints.length > 1
            ? circuitBreaker(
                handleWhen((e) => isRecoverableError(e) && !(e instanceof GRPCDeadlineExceededError)),
                { halfOpenAfter: 1000, breaker: new ConsecutiveBreaker(BREAKER_FAILURES) },
              )
            : noop,
        watchBackoff: new ExponentialBackoff({ initialDelay: 100, maxDelay: 2000 }).next(),
      },
    };
    if (opts.tls) options.credentials = loadTls(opts.tls);
    if (opts.auth) options.auth = { username: opts.auth.user, password: opts.auth.password };
    this.client = new Etcd3(options);
    // A local subchannel pool keeps grpc-js from folding both clients onto one connection.
    // Every watch shares one stream: with HTTP/2's default 64 KiB window, events reach this process
    // at no more than 64 KiB per round trip to etcd, however fast etcd sends them.
    this.watchClient = new Etcd3({
      ...options,
      grpcOptions: { ...options.grpcOptions, 'grpc.use_local_subchannel_pool': 1, 'grpc-node.flow_control_window': WATCH_FLOW_WINDOW_BYTES },
    });
    // Keepalives must not queue behind bulk traffic (a relist of a large cell, a burst of
    // transactions): a keepalive answered late costs the holder its lease and all its work.
    this.leaseClient = new Etcd3({ ...options, grpcOptions: { ...options.grpcOptions, 'grpc.use_local_subchannel_pool': 1 } });
    const probeMs = opts.watchProbeMs ?? DEFAULT_WATCH_PROBE_MS;
    const stallMs = opts.watchStallMs ?? DEFAULT_WATCH_STALL_MS;
    if (!Number.isFinite(probeMs) || probeMs < 0) throw invalid('store.watchProbeMs', 'must be 0 (off) or a positive number of milliseconds');
    if (!Number.isFinite(stallMs) || stallMs <= 0) throw invalid('store.watchStallMs', 'must be a positive number of milliseconds');
    this.watchGuard = new WatchStreamGuard(this.watchClient, { probeMs, stallMs, name: 'watches' });
  }

  /** Creates a store and waits (up to dialTimeoutMs) until etcd answers. */
  static async connect(opts: EtcdStoreOptions): Promise<EtcdStore> {
    const store = new EtcdStore(opts);
    const deadline = Date.now() + store.dialTimeoutMs;
    // The reason named in the error: etcd3's circuit breaker, once open, answers every later try
    // with "the circuit breaker is open", which says nothing of why (connection refused, DNS).
    let reason: TarcilError | undefined;
    for (;;) {
      try {
        await store.client.kv.range({ key: ALL_KEYS, count_only: true, limit: 1 }, { deadline });
        return store;
      } catch (err) {
        const e = toTarcil(err, 'connect');
        if (!reason || !/circuit breaker/i.test(e.message)) reason = e;
        if (!isTransient(e) || Date.now() + 200 >= deadline) {
          await store.close();
          throw new TarcilError(e.code, `cannot reach etcd at ${store.endpoints.join(',')}: ${reason.message}`, {
            cause: err,
            details: { endpoints: store.endpoints },
          });
        }
        await sleep(200);
      }
    }
  }

  async get(key: string): Promise<KeyValue | undefined> {
    this.checkOpen();
    checkKey(key, 'get.key');
    this.requests.count('read', [key]);
    const res = await this.read('get', () => this.client.kv.range({ key: Buffer.from(key) }));
    const kv = res.kvs[0];
    return kv ? fromKv(kv) : undefined;
  }

  async getAt(key: string, revision: number): Promise<KeyValue | undefined> {
    this.checkOpen();
    checkKey(key, 'getAt.key');
    this.requests.count('read', [key]);
    const res = await this.read('get', () => this.client.kv.range({ key: Buffer.from(key), revision: String(revision) }));
    const kv = res.kvs[0];
    return kv ? fromKv(kv) : undefined;
  }

  async range(prefix: string, opts: { limit?: number } = {}): Promise<RangeResult> {
    this.checkOpen();
    const limit = opts.limit ?? 0;
    const [key, end] = prefixRange(prefix);
    // A compaction between two pages makes the second page fail: start over at a newer revision.
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.rangePaged(key, end, limit);
      } catch (err) {
        if (attempt < 2 && err instanceof TarcilError && err.code === 'COMPACTED') continue;
        throw err;
      }
    }
  }

  async snapshot(prefixes: readonly string[]): Promise<{ revision: number; byPrefix: KeyValue[][] }> {
    this.checkOpen();
    for (let attempt = 0; ; attempt++) {
      try {
        let revision = 0;
        const byPrefix: KeyValue[][] = [];
        for (const prefix of prefixes) {
          const [key, end] = prefixRange(prefix);
          const res = await this.rangePaged(key, end, 0, revision);
          revision = res.revision;
          byPrefix.push(res.kvs);
        }
        return { revision: revision || (await this.revision()), byPrefix };
      } catch (err) {
        if (attempt < 2 && err instanceof TarcilError && err.code === 'COMPACTED') continue;
        throw err;
      }
    }
  }

  async count(prefix: string): Promise<{ revision: number; count: number }> {
    this.checkOpen();
    const [key, end] = prefixRange(prefix);
    this.requests.count('read', [prefix]);
    const res = await this.read('count', () => this.client.kv.range({ key, range_end: end, count_only: true }));
    return { revision: Number(res.header.revision), count: Number(res.count) };
  }

  /** Pages of `pageSize` keys, all read at `at` (0: the revision of the first page). */
  private async rangePaged(key: Buffer, end: Buffer, limit: number, at = 0): Promise<RangeResult> {
    let revision = at;
    let start = key;
    const kvs: KeyValue[] = [];
    for (;;) {
      const want = limit > 0 ? Math.min(this.pageSize, limit - kvs.length) : this.pageSize;
      const page = start;
      if (this.requests.on) this.requests.count('read', [key.toString()]);
      const res = await this.read('range', () => this.client.kv.range({ key: page, range_end: end, limit: want, ...(revision > 0 ? { revision } : {}) }));
      if (revision === 0) revision = Number(res.header.revision);
      for (const kv of res.kvs) kvs.push(fromKv(kv));
      const last = res.kvs[res.kvs.length - 1];
      if (!res.more || !last || (limit > 0 && kvs.length >= limit)) break;
      start = Buffer.concat([last.key, ALL_KEYS]);
    }
    return { revision, kvs };
  }

  async put(key: string, value: string, opts: { lease?: string } = {}): Promise<number> {
    this.checkOpen();
    const op: Op = opts.lease === undefined ? { type: 'put', key, value } : { type: 'put', key, value, lease: opts.lease };
    checkTxn({ compare: [], success: [op] }, this.maxTxnOps, this.maxRequestBytes);
    const lease = normalizeLease(opts.lease, 'put.lease');
    this.requests.count('write', [key]);
    if (lease !== '0') {
      // A put bound to a lease goes as a one-op transaction. etcd before 3.4.27 and 3.5.10
      // (etcd-io/etcd#15993) checks a plain Put against every key already attached to its lease,
      // even with auth off: a hollow cell's lease holds every node's RUs (160,000 keys on
      // 10,000 nodes), and its load reports then cost etcd more than all the placements. A
      // transaction's puts skip that check; the result is the same.
      const res = await this.call('put', () => this.client.kv.txn({ compare: [], success: [toRequestOp(op)], failure: [] }));
      return Number(res.header.revision);
    }
    const res = await this.call('put', () => this.client.kv.put({ key: Buffer.from(key), value: Buffer.from(value) }));
    return Number(res.header.revision);
  }

  async delete(key: string, opts: { prefix?: boolean } = {}): Promise<number> {
    this.checkOpen();
    const prefix = opts.prefix === true;
    if (!prefix) checkKey(key, 'delete.key');
    const [start, end] = prefix ? prefixRange(key) : [Buffer.from(key), undefined];
    this.requests.count('write', [key]);
    const res = await this.call('delete', () => this.client.kv.deleteRange({ key: start, ...(end ? { range_end: end } : {}) }));
    return Number(res.deleted);
  }

  async txn(req: TxnRequest): Promise<TxnResult> {
    this.checkOpen();
    checkTxn(req, this.maxTxnOps, this.maxRequestBytes);
    const failure = req.failure ?? [];
    const body = { compare: req.compare.map(toCompare), success: req.success.map(toRequestOp), failure: failure.map(toRequestOp) };
    const readOnly = [...req.success, ...failure].every((op) => op.type === 'get');
    if (this.requests.on) this.requests.count(readOnly ? 'read' : 'write', keysOf([req]));
    const res = readOnly
      ? await this.read('txn', () => this.client.kv.txn(body))
      : await this.call(
          'txn',
          () => {
            if (tracingOn()) traceRequests('store.sent', [req]);
            return this.client.kv.txn(body);
          },
          req.urgent === true,
        );
    if (tracingOn()) traceRequests('store.answered', [req]);
    const responses = branchResponses(res.succeeded ? req.success : failure, res.responses);
    return { succeeded: res.succeeded, revision: Number(res.header.revision), responses };
  }

  async txns(reqs: TxnRequest[]): Promise<TxnResult[]> {
    this.checkOpen();
    checkTxns(reqs, this.maxTxnOps, this.maxRequestBytes);
    const body = {
      compare: [],
      success: reqs.map((r) => ({
        request_txn: { compare: r.compare.map(toCompare), success: r.success.map(toRequestOp), failure: (r.failure ?? []).map(toRequestOp) },
      })),
      failure: [],
    };
    const readOnly = reqs.every((r) => [...r.success, ...(r.failure ?? [])].every((op) => op.type === 'get'));
    if (this.requests.on) this.requests.count(readOnly ? 'read' : 'write', keysOf(reqs));
    const res = readOnly
      ? await this.read('txns', () => this.client.kv.txn(body))
      : await this.call(
          'txns',
          () => {
            traceRequests('store.sent', reqs);
            return this.client.kv.txn(body);
          },
          reqs.some((r) => r.urgent === true),
        );
    traceRequests('store.answered', reqs);
    const revision = Number(res.header.revision);
    return reqs.map((r, i) => {
      const sub = res.responses[i]?.response_txn;
      if (!sub) throw new TarcilError('INTERNAL', `txns: etcd returned no result for nested transaction ${i}`);
      return { succeeded: sub.succeeded, revision, responses: branchResponses(sub.succeeded ? r.success : (r.failure ?? []), sub.responses) };
    });
  }

  async watch(opts: WatchOptions): Promise<WatchHandle> {
    this.checkOpen();
    if (typeof opts.prefix !== 'string') throw invalid('watch.prefix', 'must be a string');
    const w = new EtcdWatch(this.watchClient, opts, () => this.watches.delete(w), this.watchEvents.counter(opts.prefix));
    if (opts.fromRevision >= 2 && (await this.isCompacted(Math.floor(opts.fromRevision) - 1))) {
      w.failSoon(
        new TarcilError('COMPACTED', `watch from revision ${opts.fromRevision}: that history is compacted`, {
          details: { fromRevision: opts.fromRevision },
        }),
      );
      return w.handle();
    }
    this.watches.add(w);
    await w.start(this.dialTimeoutMs);
    return w.handle();
  }

  async grantLease(ttlSeconds: number, opts: LeaseOptions = {}): Promise<Lease> {
    this.checkOpen();
    if (!Number.isFinite(ttlSeconds) || ttlSeconds < 1) throw invalid('ttlSeconds', 'a lease lives at least 1 second');
    const ttl = Math.ceil(ttlSeconds);
    const keepAlive = opts.keepAlive !== false;
    const calls = { requestTimeoutMs: this.requestTimeoutMs, attempts: this.unsentAttempts, streamAttempts: unsentStreamAttempts(this.endpoints.length) };
    // A grant is not idempotent: it is sent again only if etcd never received it (see the class
    // comment); after a deadline the caller may grant again, and a lease granted twice expires.
    for (let attempt = 1; ; attempt++) {
      const inner = this.leaseClient.lease(ttl, { autoKeepAlive: keepAlive });
      const handle = new EtcdLeaseHandle(this.leaseClient, inner, ttl, keepAlive, calls, () => this.leases.delete(handle));
      let id: string;
      try {
        id = await inner.grant();
      } catch (err) {
        inner.release();
        if (neverSent(err) && attempt < this.unsentAttempts && !this.closed) continue;
        throw toTarcil(err, 'grant lease');
      }
      handle.granted(id);
      this.leases.add(handle);
      return handle;
    }
  }

  async revision(): Promise<number> {
    this.checkOpen();
    const res = await this.read('revision', () => this.client.kv.range({ key: ALL_KEYS, count_only: true, limit: 1 }));
    return Number(res.header.revision);
  }

  async compact(revision: number): Promise<void> {
    this.checkOpen();
    if (!Number.isSafeInteger(revision) || revision < 1) throw invalid('compact.revision', `cannot compact to ${revision}`);
    try {
      await this.call('compact', () => this.client.kv.compact({ revision }));
    } catch (err) {
      // Compacting to a revision already compacted is a no-op, as in the MemoryStore.
      if (err instanceof TarcilError && err.code === 'COMPACTED') return;
      throw err;
    }
  }

  /**
   * The concurrency election over this store's own leases, transactions and watches
   * ({@link StoreCampaign}), not etcd3's Campaign: a candidate of etcd3's that is waiting when its
   * watch resumes into compacted history (etcd restarted after the housekeeper compacted) hangs
   * for good in the watcher's cancel, neither elected nor failed, and its key, kept alive, holds up
   * every later candidate. A StoreCampaign's watch reports that as COMPACTED and the candidate
   * looks again. The keys are laid out as etcd's election clients lay them out.
   */
  campaign(name: string, value: string, ttlSeconds: number): Campaign {
    this.checkOpen();
    if (!Number.isFinite(ttlSeconds) || ttlSeconds < 1) throw invalid('ttlSeconds', 'a lease lives at least 1 second');
    return new StoreCampaign(this, name, value, Math.ceil(ttlSeconds));
  }

  /** The oldest candidate's value, read as the election itself reads it ({@link storeLeader}). */
  async leader(name: string): Promise<string | undefined> {
    this.checkOpen();
    return storeLeader(this, name);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Watchers must be detached before the client closes, or etcd3 keeps trying to reconnect them.
    await Promise.all([...this.watches].map((w) => w.close()));
    for (const l of [...this.leases]) l.release();
    this.watchGuard.close();
    this.client.close();
    this.watchClient.close();
    this.leaseClient.close();
  }

  private checkOpen(): void {
    if (this.closed) throw new TarcilError('CLOSED', 'the etcd store is closed');
  }

  /** True when etcd no longer has revision `rev` (it is below the compacted revision). */
  private async isCompacted(rev: number): Promise<boolean> {
    try {
      await this.read('watch', () => this.client.kv.range({ key: ALL_KEYS, count_only: true, limit: 1, revision: rev }));
      return false;
    } catch (err) {
      if (err instanceof TarcilError && err.code === 'COMPACTED') return true;
      // A future revision: nothing to catch up, etcd will wait for it.
      if (err instanceof TarcilError && err.code === 'INVALID_ARGUMENT') return false;
      throw err;
    }
  }

  /** Events delivered to this process's watches, by the watch's prefix (countWatchEvents). */
  private readonly watchEvents = new WatchEventCounts();

  /** See ClusterStore.countWatchEvents. */
  countWatchEvents(label: (prefix: string) => string): () => ReadonlyMap<string, number> {
    return () => this.watchEvents.byLabel(label);
  }

  /** Requests sent, by kind and the records they touch (countRequests). */
  private readonly requests = new RequestCounts();

  /** See ClusterStore.countRequests. */
  countRequests(label: (key: string) => string): () => ReadonlyMap<string, number> {
    return this.requests.enable(label);
  }

  /** See ClusterStore.onRequestTime. */
  onRequestTime(fn: (kind: 'read' | 'write', seconds: number) => void): void {
    this.timeListeners.push(fn);
  }

  /** fn, timed for the listeners from its start (once it holds a slot) to its answer, failed or not. */
  private timed<T>(kind: 'read' | 'write', fn: () => Promise<T>): () => Promise<T> {
    if (this.timeListeners.length === 0) return fn;
    return () => {
      const t0 = performance.now();
      return fn().finally(() => {
        const s = (performance.now() - t0) / 1000;
        for (const l of this.timeListeners) l(kind, s);
      });
    };
  }

  /**
   * A write: sent again only when etcd never received it (to the next endpoint); after any other
   * failure the outcome is unknown and the caller decides (see the class comment).
   */
  private async call<T>(what: string, fn: () => Promise<T>, urgent = false): Promise<T> {
    try {
      return await unlessSent(
        this.unsentAttempts,
        () => this.limited(this.timed('write', fn), urgent),
        () => this.closed,
      );
    } catch (err) {
      throw toTarcil(err, what);
    }
  }

  /** fn under the limit on requests in flight, when there is one (`urgent`: in its lane served first). */
  private limited<T>(fn: () => Promise<T>, urgent = false): Promise<T> {
    return this.inFlightLimit ? this.inFlightLimit.run(fn, urgent) : fn();
  }

  /**
   * An idempotent read: tried again (another endpoint, or a leader elected meanwhile) after
   * UNAVAILABLE or DEADLINE_EXCEEDED, max(2, endpoints) attempts in all.
   */
  private async read<T>(what: string, fn: () => Promise<T>): Promise<T> {
    let first: TarcilError | undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.limited(this.timed('read', fn));
      } catch (err) {
        // A retry refused by a circuit the first failure opened says less than that failure.
        const e = first && isBrokenCircuitError(err) ? first : toTarcil(err, what);
        first ??= e;
        if (!isTransient(e) || attempt >= this.readAttempts || this.closed) throw e;
        await sleep(50);
      }
    }
  }
}

/** Every key the transactions compare, read or write. */
function* keysOf(reqs: readonly TxnRequest[]): Iterable<string> {
  for (const r of reqs) {
    for (const c of r.compare) yield c.key;
    for (const op of r.success) yield op.key;
    for (const op of r.failure ?? []) yield op.key;
  }
}
