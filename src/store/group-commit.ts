/**
 * Group commit: an agent's concurrent placement transactions sent together in one request, with a
 * bound on requests in flight.
 */
import { traceRequests, tracingOn } from '../util/trace.ts';
import { requestBytes } from './common.ts';
import type { ClusterStore, TxnRequest, TxnResult } from './types.ts';

export interface GroupCommitOptions {
  /**
   * Requests to the store this committer keeps in flight at once. A transaction that finds a free
   * slot is sent on its own at once; transactions that arrive while every slot is busy wait and
   * leave together, in one request, when a slot frees up. Default 1.
   */
  maxInFlight?: number;
  /**
   * Transactions asked for in the same tick (one pass of the event loop and its microtasks) leave
   * together, even when a slot is free: each waits for the microtasks queued before it, then the
   * group is sent. For a process whose transactions come in bursts from one event (hollow nodes:
   * one watch response places tasks on many nodes, and each starts its task with a write), so
   * the burst costs one request rather than one per free slot and a wait for the rest. Default
   * false: a transaction that finds a free slot is sent at once.
   */
  gather?: boolean;
}

export interface GroupCommitStats {
  /** Requests sent to the store. */
  requests: number;
  /** Transactions answered. */
  transactions: number;
  /** Largest number of transactions sent in one request. */
  largestGroup: number;
}

interface Pending {
  req: TxnRequest;
  resolve(res: TxnResult): void;
  reject(err: unknown): void;
  /** Keys the transaction puts or deletes; undefined when it deletes a prefix (sent alone). */
  writes: Set<string> | undefined;
  /** Keys its compares read. */
  reads: string[];
  bytes: number;
  /** Longest of its compare list and branches (the op budget it needs). */
  width: number;
}

/**
 * Group commit: independent optimistic transactions (one per scheduling decision) share a request
 * to the store when they are ready faster than the store answers. A group goes out through
 * {@link ClusterStore.txns}: in etcd one transaction nesting each of them, so each keeps its own
 * compares and its own outcome, exactly as if it had been sent alone, and a conflict in one does
 * not fail the others. A group is applied atomically, at one revision.
 *
 * A transaction joins a group only if no other member writes a key it writes or compares (etcd
 * refuses a key written twice, and a compare must not depend on a sibling's write), and the group
 * stays within the store's op budget (members share it: each may hold maxTxnOps − members ops per
 * list) and byte limit. One that cannot join waits for the next group, in order. An error (the
 * outcome is unknown) goes to every member: the group was applied entirely or not at all, and each
 * member resolves its own uncertainty as it would have alone.
 */
export class GroupCommit {
  private readonly store: ClusterStore;
  private readonly maxInFlight: number;
  private readonly gather: boolean;
  /** A pump is due once the microtasks queued so far have run (gather). */
  private flushDue = false;
  private readonly queue: Pending[] = [];
  private inFlight = 0;
  /** Callers waiting for their turn (see turn()). */
  private readonly turns: Array<() => void> = [];
  /** A slot is free and the callers whose turn came are preparing their transactions. */
  private gathering = false;
  readonly stats: GroupCommitStats = { requests: 0, transactions: 0, largestGroup: 0 };

  constructor(store: ClusterStore, opts: GroupCommitOptions = {}) {
    this.store = store;
    this.maxInFlight = Math.max(1, Math.floor(opts.maxInFlight ?? 1));
    this.gather = opts.gather === true;
  }

  /**
   * Resolves when a transaction built now would leave in the next request: at once when a slot is
   * free, else when one frees up. A caller that builds its transaction from a cache (an optimistic
   * decision) waits for its turn first, so the decision is made as late as possible and is as
   * fresh as the cache can make it when it reaches the store, rather than aging in the queue.
   * Every caller whose turn came, and that calls txn() without awaiting anything else, joins the
   * same request.
   */
  turn(): Promise<void> {
    if (this.gathering || (this.inFlight < this.maxInFlight && this.queue.length === 0)) return Promise.resolve();
    return new Promise<void>((resolve) => this.turns.push(resolve));
  }

  txn(req: TxnRequest): Promise<TxnResult> {
    return new Promise<TxnResult>((resolve, reject) => {
      this.queue.push({
        req,
        resolve,
        reject,
        writes: writtenKeys(req),
        reads: req.compare.map((c) => c.key),
        bytes: requestBytes(req),
        width: Math.max(req.compare.length, req.success.length, req.failure?.length ?? 0),
      });
      if (!this.gather) return this.pump();
      if (this.flushDue) return;
      this.flushDue = true;
      queueMicrotask(() => {
        this.flushDue = false;
        this.pump();
      });
    });
  }

  private pump(): void {
    if (this.gathering) return;
    if (this.inFlight < this.maxInFlight && this.turns.length > 0) {
      // Let every caller whose turn comes now build its transaction (in the microtasks that
      // follow), then send them together.
      this.gathering = true;
      for (const resolve of this.turns.splice(0)) resolve();
      setImmediate(() => {
        this.gathering = false;
        this.pump();
      });
      return;
    }
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const group = this.take();
      this.inFlight++;
      this.stats.requests++;
      this.stats.transactions += group.length;
      this.stats.largestGroup = Math.max(this.stats.largestGroup, group.length);
      void this.send(group).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  /** The next group: queued transactions in order, each joining if it fits (see the class note). */
  private take(): Pending[] {
    const first = this.queue.shift() as Pending;
    if (first.writes === undefined) return [first];
    const group = [first];
    const writes = new Set(first.writes);
    const reads = new Set(first.reads);
    const maxOps = this.store.maxTxnOps;
    // Leave room for the framing of the nested transactions.
    const maxBytes = this.store.maxRequestBytes * 0.9;
    let width = first.width;
    let bytes = first.bytes;
    for (let i = 0; i < this.queue.length;) {
      const p = this.queue[i] as Pending;
      const joins =
        p.writes !== undefined &&
        Math.max(width, p.width) <= maxOps - (group.length + 1) &&
        bytes + p.bytes <= maxBytes &&
        !p.reads.some((k) => writes.has(k)) &&
        ![...p.writes].some((k) => writes.has(k) || reads.has(k));
      if (!joins) {
        i++;
        continue;
      }
      for (const k of p.writes as Set<string>) writes.add(k);
      for (const k of p.reads) reads.add(k);
      width = Math.max(width, p.width);
      bytes += p.bytes;
      group.push(p);
      this.queue.splice(i, 1);
    }
    return group;
  }

  private async send(group: Pending[]): Promise<void> {
    if (tracingOn())
      traceRequests(
        'group.sent',
        group.map((p) => p.req),
      );
    try {
      if (group.length === 1) {
        const p = group[0] as Pending;
        p.resolve(await this.store.txn(p.req));
        return;
      }
      const results = await this.store.txns(group.map((p) => p.req));
      group.forEach((p, i) => p.resolve(results[i] as TxnResult));
    } catch (err) {
      for (const p of group) p.reject(err);
    }
  }
}

/** Keys a transaction writes; undefined when it deletes a prefix (its extent is not a key set). */
function writtenKeys(req: TxnRequest): Set<string> | undefined {
  const keys = new Set<string>();
  for (const op of [...req.success, ...(req.failure ?? [])]) {
    if (op.type === 'get') continue;
    if (op.type === 'delete' && op.prefix === true) return undefined;
    keys.add(op.key);
  }
  return keys;
}

/**
 * The store with its single transactions sent through a GroupCommit: every other call goes to the
 * store as it is. For a process that writes on behalf of many independent parties (hollow nodes:
 * each node's task starts and outcomes are its own transactions), so that what they write at the
 * same moment leaves in one request.
 */
export function groupCommitted(store: ClusterStore, gc: GroupCommit): ClusterStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'txn') return (req: TxnRequest) => gc.txn(req);
      const v: unknown = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
