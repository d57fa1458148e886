/**
 * MemoryStore: the embedded ClusterStore (`memory://`, the default) — etcd's revisions, compare
 * semantics, watches with history and compaction, and lease expiry, in one process. Its leases and
 * watches live in memory-handles.ts.
 */
import { SystemClock, type Clock } from '../util/clock.ts';
import { TarcilError, invalid } from '../util/errors.ts';
import { DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MAX_TXN_OPS, checkKey, checkTxn, checkTxns, compareKeys, evaluateCompare, normalizeLease } from './common.ts';
import { SortedKeys } from './sorted-keys.ts';
import { StoreCampaign, storeLeader } from './election.ts';
import type {
  Campaign,
  ClusterStore,
  Compare,
  KeyValue,
  Lease,
  LeaseOptions,
  Op,
  RangeResult,
  TxnRequest,
  TxnResult,
  WatchBatch,
  WatchEvent,
  WatchHandle,
  WatchOptions,
} from './types.ts';
import { leaseGone, MemoryLease, MemoryWatch, positiveInt, runLost, settle, stopTimers, toKv, type Entry, type LeaseState } from './memory-handles.ts';

export interface MemoryStoreOptions {
  /** Drives lease expiry and keepalive. Default: SystemClock. */
  clock?: Clock;
  /** Most compares, or ops in one branch, per transaction. Default 128 (etcd's default). */
  maxTxnOps?: number;
  /** Largest request accepted, estimated as etcd would count it. Default 1.5 MiB. */
  maxRequestBytes?: number;
  /**
   * Revisions of history kept for watches. When the history grows past it (by a tenth, so
   * compaction is amortised) the oldest revisions are compacted and a watch from them fails
   * with COMPACTED, as it would after an etcd auto-compaction. Default 100 000.
   */
  historyLimit?: number;
}

export const DEFAULT_HISTORY_LIMIT = 100_000;

/**
 * The embedded ClusterStore: etcd's revision, compare, watch and lease semantics in one process.
 * It is the default for single-machine runs and the simulator, so it is written for the scale of
 * a large simulated cluster rather than as a test double.
 *
 * Key index: a Map for point reads and writes plus a {@link SortedKeys} (sorted chunks of at
 * most 512 keys) for prefix ranges: a range is a binary search and a walk, an insert or delete
 * moves at most one chunk. Rewriting an existing key, the common case (RU records), only touches
 * the Map.
 *
 * History: one frozen batch per revision, shared by every watcher, so a watch from the past
 * replays from the same objects live watchers received.
 */
export class MemoryStore implements ClusterStore {
  readonly kind = 'memory' as const;
  readonly maxTxnOps: number;
  readonly maxRequestBytes: number;
  readonly historyLimit: number;

  private readonly clock: Clock;
  private readonly data = new Map<string, Entry>();
  private readonly sorted = new SortedKeys();
  // etcd starts at revision 1 with an empty key space; the first write is revision 2.
  private rev = 1;
  private compacted = 0;
  private history: WatchBatch[] = [];
  /** The entry each event in the history replaced (getAt); gone with the events once compacted. */
  private readonly before = new WeakMap<WatchEvent, Entry>();
  private readonly watches = new Set<MemoryWatch>();
  private readonly leases = new Map<string, LeaseState>();
  // Large, etcd-like ids keep callers honest about int64 lease ids (never Number them).
  private nextLeaseId = 0x694d_7a1c_0000_0001n;
  private closed = false;

  constructor(opts: MemoryStoreOptions = {}) {
    this.clock = opts.clock ?? new SystemClock();
    this.maxTxnOps = positiveInt(opts.maxTxnOps ?? DEFAULT_MAX_TXN_OPS, 'maxTxnOps');
    this.maxRequestBytes = positiveInt(opts.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES, 'maxRequestBytes');
    this.historyLimit = positiveInt(opts.historyLimit ?? DEFAULT_HISTORY_LIMIT, 'historyLimit');
  }

  /** The revision up to which history has been compacted (0: none). */
  get compactRevision(): number {
    return this.compacted;
  }

  /** Number of keys stored. */
  get size(): number {
    return this.data.size;
  }

  get(key: string): Promise<KeyValue | undefined> {
    return settle(() => {
      this.checkOpen();
      checkKey(key, 'get.key');
      const e = this.data.get(key);
      return e ? toKv(key, e) : undefined;
    });
  }

  /** The key at `revision`: the value before its first change after it (kept with each event), or now if none. */
  getAt(key: string, revision: number): Promise<KeyValue | undefined> {
    return settle(() => {
      this.checkOpen();
      checkKey(key, 'getAt.key');
      if (!Number.isSafeInteger(revision) || revision < 1 || revision > this.rev) {
        throw invalid('getAt.revision', `cannot read at ${revision}: the current revision is ${this.rev}`);
      }
      if (revision < this.compacted) {
        throw new TarcilError('COMPACTED', `read at revision ${revision}: history is compacted up to ${this.compacted}`, {
          details: { revision, compactRevision: this.compacted },
        });
      }
      for (let i = this.historyIndex(revision + 1); i < this.history.length; i++) {
        for (const ev of this.history[i]?.events ?? []) {
          if (ev.kv.key !== key) continue;
          const before = this.before.get(ev);
          return before ? toKv(key, before) : undefined;
        }
      }
      const e = this.data.get(key);
      return e ? toKv(key, e) : undefined;
    });
  }

  range(prefix: string, opts: { limit?: number } = {}): Promise<RangeResult> {
    return settle(() => {
      this.checkOpen();
      return { revision: this.rev, kvs: this.read(prefix, true, opts.limit ?? 0) };
    });
  }

  snapshot(prefixes: readonly string[]): Promise<{ revision: number; byPrefix: KeyValue[][] }> {
    return settle(() => {
      this.checkOpen();
      return { revision: this.rev, byPrefix: prefixes.map((prefix) => this.read(prefix, true, 0)) };
    });
  }

  count(prefix: string): Promise<{ revision: number; count: number }> {
    return settle(() => {
      this.checkOpen();
      return { revision: this.rev, count: this.sorted.countPrefix(prefix) };
    });
  }

  put(key: string, value: string, opts: { lease?: string } = {}): Promise<number> {
    return settle(() => {
      this.checkOpen();
      const op: Op = opts.lease === undefined ? { type: 'put', key, value } : { type: 'put', key, value, lease: opts.lease };
      checkTxn({ compare: [], success: [op] }, this.maxTxnOps, this.maxRequestBytes);
      this.apply([op]);
      return this.rev;
    });
  }

  delete(key: string, opts: { prefix?: boolean } = {}): Promise<number> {
    return settle(() => {
      this.checkOpen();
      const prefix = opts.prefix === true;
      if (!prefix) checkKey(key, 'delete.key');
      const rev = this.rev + 1;
      const events: WatchEvent[] = [];
      this.removeRange(key, prefix, rev, events);
      if (events.length > 0) this.commit(rev, events);
      return events.length;
    });
  }

  txn(req: TxnRequest): Promise<TxnResult> {
    return settle(() => {
      this.checkOpen();
      checkTxn(req, this.maxTxnOps, this.maxRequestBytes);
      const succeeded = req.compare.every((c) => this.evaluate(c));
      const ops = succeeded ? req.success : (req.failure ?? []);
      const responses = this.apply(ops);
      return { succeeded, revision: this.rev, responses };
    });
  }

  txns(reqs: TxnRequest[]): Promise<TxnResult[]> {
    return settle(() => {
      this.checkOpen();
      checkTxns(reqs, this.maxTxnOps, this.maxRequestBytes);
      // Every compare first, on the state before the request; then every chosen branch, in
      // order, as one revision (etcd evaluates nested compares before applying any of them).
      const outcomes = reqs.map((r) => r.compare.every((c) => this.evaluate(c)));
      const branches = reqs.map((r, i) => (outcomes[i] ? r.success : (r.failure ?? [])));
      const responses = this.apply(branches.flat());
      let at = 0;
      return branches.map((ops, i) => {
        const mine = responses.slice(at, at + ops.length);
        at += ops.length;
        return { succeeded: outcomes[i] as boolean, revision: this.rev, responses: mine };
      });
    });
  }

  watch(opts: WatchOptions): Promise<WatchHandle> {
    return settle(() => {
      this.checkOpen();
      if (typeof opts.prefix !== 'string') throw invalid('watch.prefix', 'must be a string');
      const from = opts.fromRevision > 0 ? Math.floor(opts.fromRevision) : this.rev + 1;
      const w = new MemoryWatch(opts, () => this.watches.delete(w));
      if (from <= this.compacted) {
        w.fail(
          new TarcilError('COMPACTED', `watch from revision ${from}: history is compacted up to ${this.compacted}`, {
            details: { fromRevision: from, compactRevision: this.compacted },
          }),
        );
        return w.handle();
      }
      this.watches.add(w);
      for (let i = this.historyIndex(from); i < this.history.length; i++) {
        const batch = this.history[i];
        if (batch) w.push(batch);
      }
      return w.handle();
    });
  }

  grantLease(ttlSeconds: number, opts: LeaseOptions = {}): Promise<Lease> {
    return settle(() => {
      this.checkOpen();
      if (!Number.isFinite(ttlSeconds) || ttlSeconds < 1) throw invalid('ttlSeconds', 'a lease lives at least 1 second');
      const ttl = Math.ceil(ttlSeconds);
      const state: LeaseState = {
        id: (this.nextLeaseId++).toString(),
        ttlSeconds: ttl,
        deadline: this.clock.now() + ttl * 1000,
        keys: new Set(),
        status: 'alive',
        released: false,
        expiryTimer: undefined,
        keepAliveTimer: undefined,
        lostCallbacks: [],
        lostError: undefined,
      };
      this.leases.set(state.id, state);
      this.armExpiry(state);
      if (opts.keepAlive !== false) this.scheduleKeepAlive(state);
      return new MemoryLease(state, {
        keepAliveOnce: () => {
          this.checkOpen();
          if (state.status !== 'alive') throw leaseGone(state);
          state.deadline = this.clock.now() + state.ttlSeconds * 1000;
        },
        revoke: () => {
          if (state.status !== 'alive') return;
          this.checkOpen();
          state.status = 'revoked';
          this.dropLease(state);
        },
        release: () => {
          state.released = true;
          state.keepAliveTimer?.cancel();
          state.keepAliveTimer = undefined;
        },
        onLost: (cb) => {
          if (state.lostError) runLost(cb, state.lostError);
          else state.lostCallbacks.push(cb);
        },
      });
    });
  }

  revision(): Promise<number> {
    return settle(() => {
      this.checkOpen();
      return this.rev;
    });
  }

  compact(revision: number): Promise<void> {
    return settle(() => {
      this.checkOpen();
      if (!Number.isSafeInteger(revision) || revision < 1 || revision > this.rev) {
        throw invalid('compact.revision', `cannot compact to ${revision}: the current revision is ${this.rev}`);
      }
      this.compactTo(revision);
    });
  }

  campaign(name: string, value: string, ttlSeconds: number): Campaign {
    return new StoreCampaign(this, name, value, ttlSeconds);
  }

  leader(name: string): Promise<string | undefined> {
    return storeLeader(this, name);
  }

  close(): Promise<void> {
    return settle(() => {
      if (this.closed) return;
      this.closed = true;
      for (const w of [...this.watches]) w.close();
      for (const s of this.leases.values()) stopTimers(s);
    });
  }

  // ---- key space ----

  private checkOpen(): void {
    if (this.closed) throw new TarcilError('CLOSED', 'the memory store is closed');
  }

  private read(key: string, prefix: boolean, limit: number): KeyValue[] {
    if (!prefix) {
      const e = this.data.get(key);
      return e ? [toKv(key, e)] : [];
    }
    const out: KeyValue[] = [];
    for (const k of this.sorted.withPrefix(key, limit)) {
      const e = this.data.get(k);
      if (e) out.push(toKv(k, e));
    }
    return out;
  }

  /** Runs one branch as a single revision: reads see the branch's earlier writes, as in etcd. */
  private apply(ops: Op[]): Array<KeyValue[] | null> {
    for (const op of ops) {
      if (op.type !== 'put') continue;
      const lease = normalizeLease(op.lease, 'put.lease');
      if (lease !== '0' && !this.leases.has(lease)) {
        throw new TarcilError('LEASE_NOT_FOUND', `requested lease not found: ${lease}`, { details: { lease } });
      }
    }
    const rev = this.rev + 1;
    const events: WatchEvent[] = [];
    const responses: Array<KeyValue[] | null> = [];
    for (const op of ops) {
      switch (op.type) {
        case 'get':
          responses.push(this.read(op.key, op.prefix === true, 0));
          break;
        case 'put':
          this.writeKey(op.key, op.value, normalizeLease(op.lease, 'put.lease'), rev, events);
          responses.push(null);
          break;
        case 'delete':
          this.removeRange(op.key, op.prefix === true, rev, events);
          responses.push(null);
          break;
      }
    }
    if (events.length > 0) this.commit(rev, events);
    return responses;
  }

  private writeKey(key: string, value: string, lease: string, rev: number, events: WatchEvent[]): void {
    const prev = this.data.get(key);
    if (prev) {
      if (prev.lease !== '0' && prev.lease !== lease) this.leases.get(prev.lease)?.keys.delete(key);
    } else {
      this.sorted.insert(key);
    }
    const e: Entry = {
      value,
      createRevision: prev ? prev.createRevision : rev,
      modRevision: rev,
      version: (prev ? prev.version : 0) + 1,
      lease,
    };
    this.data.set(key, e);
    if (lease !== '0') this.leases.get(lease)?.keys.add(key);
    const ev: WatchEvent = Object.freeze({ type: 'put', kv: Object.freeze(toKv(key, e)) });
    if (prev) this.before.set(ev, prev);
    events.push(ev);
  }

  private removeRange(key: string, prefix: boolean, rev: number, events: WatchEvent[]): void {
    const keys = prefix ? this.sorted.withPrefix(key) : this.data.has(key) ? [key] : [];
    for (const k of keys) this.removeKey(k, rev, events);
  }

  private removeKey(key: string, rev: number, events: WatchEvent[]): void {
    const e = this.data.get(key);
    if (!e) return;
    this.data.delete(key);
    this.sorted.delete(key);
    if (e.lease !== '0') this.leases.get(e.lease)?.keys.delete(key);
    const ev: WatchEvent = Object.freeze({
      type: 'delete',
      kv: Object.freeze({ key, value: '', createRevision: 0, modRevision: rev, version: 0, lease: '0' }),
    });
    this.before.set(ev, e);
    events.push(ev);
  }

  private evaluate(c: Compare): boolean {
    return evaluateCompare(c, this.data.get(c.key));
  }

  // ---- history and watches ----

  private commit(rev: number, events: WatchEvent[]): void {
    this.rev = rev;
    const batch: WatchBatch = Object.freeze({ revision: rev, events: Object.freeze(events) as WatchEvent[] });
    this.history.push(batch);
    for (const w of this.watches) w.push(batch);
    const slack = Math.max(1, Math.floor(this.historyLimit / 10));
    if (this.history.length > this.historyLimit + slack) this.compactTo(this.rev - this.historyLimit);
  }

  private compactTo(revision: number): void {
    if (revision <= this.compacted) return;
    this.history = this.history.slice(this.historyIndex(revision + 1));
    this.compacted = revision;
  }

  /** Index of the first history batch with revision >= rev. */
  private historyIndex(rev: number): number {
    let lo = 0;
    let hi = this.history.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.history[mid]?.revision ?? 0) < rev) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  // ---- leases ----

  private armExpiry(s: LeaseState): void {
    s.expiryTimer?.cancel();
    s.expiryTimer = this.clock.setTimer(s.deadline - this.clock.now(), () => {
      s.expiryTimer = undefined;
      if (s.status !== 'alive' || this.closed) return;
      // Keepalives move the deadline without touching the timer; re-arm until it is reached.
      if (this.clock.now() < s.deadline) this.armExpiry(s);
      else this.expire(s);
    });
  }

  private scheduleKeepAlive(s: LeaseState): void {
    s.keepAliveTimer = this.clock.setTimer((s.ttlSeconds * 1000) / 3, () => {
      s.keepAliveTimer = undefined;
      if (s.status !== 'alive' || s.released || this.closed) return;
      s.deadline = this.clock.now() + s.ttlSeconds * 1000;
      this.scheduleKeepAlive(s);
    });
  }

  private expire(s: LeaseState): void {
    s.status = 'expired';
    this.dropLease(s);
    if (s.released) return;
    const err = new TarcilError('LEASE_NOT_FOUND', `lease ${s.id} expired`, { details: { lease: s.id } });
    s.lostError = err;
    const callbacks = s.lostCallbacks;
    s.lostCallbacks = [];
    for (const cb of callbacks) runLost(cb, err);
  }

  /** Deletes the lease and its keys in one revision (none if it holds no keys). */
  private dropLease(s: LeaseState): void {
    stopTimers(s);
    this.leases.delete(s.id);
    const keys = [...s.keys].sort(compareKeys);
    s.keys.clear();
    if (keys.length === 0) return;
    const rev = this.rev + 1;
    const events: WatchEvent[] = [];
    for (const k of keys) this.removeKey(k, rev, events);
    if (events.length > 0) this.commit(rev, events);
  }
}
