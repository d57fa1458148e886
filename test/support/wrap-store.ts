import { TarcilError } from '../../src/util/errors.ts';
import { StoreCampaign, storeLeader } from '../../src/store/election.ts';
import type { ClusterStore } from '../../src/store/types.ts';

/**
 * A ClusterStore that forwards every call to `inner` (bound to it, so the inner store's state is
 * never shadowed), except those given in `over`: how tests inject faults on one process's path.
 */
export function wrapStore(
  inner: ClusterStore,
  over: Partial<Pick<ClusterStore, 'get' | 'range' | 'snapshot' | 'put' | 'delete' | 'txn' | 'txns' | 'watch' | 'grantLease'>>,
): ClusterStore {
  const wrapped: ClusterStore = {
    kind: inner.kind,
    maxTxnOps: inner.maxTxnOps,
    maxRequestBytes: inner.maxRequestBytes,
    get: over.get ?? ((key) => inner.get(key)),
    getAt: (key, revision) => inner.getAt(key, revision),
    range: over.range ?? ((prefix, opts) => inner.range(prefix, opts)),
    // By default one read-only transaction through the wrapper's txn, so that a fault injected
    // into txn reaches a list of several prefixes too.
    snapshot:
      over.snapshot ??
      (async (prefixes) => {
        const res = await wrapped.txn({ compare: [], success: prefixes.map((key) => ({ type: 'get' as const, key, prefix: true })) });
        return { revision: res.revision, byPrefix: res.responses.map((r) => r ?? []) };
      }),
    count: (prefix) => inner.count(prefix),
    put: over.put ?? ((key, value, opts) => inner.put(key, value, opts)),
    delete: over.delete ?? ((key, opts) => inner.delete(key, opts)),
    txn: over.txn ?? ((req) => inner.txn(req)),
    txns: over.txns ?? ((reqs) => inner.txns(reqs)),
    watch: over.watch ?? ((opts) => inner.watch(opts)),
    grantLease: over.grantLease ?? ((ttl, opts) => inner.grantLease(ttl, opts)),
    revision: () => inner.revision(),
    compact: (rev) => inner.compact(rev),
    // Over the wrapper itself, so that the faults reach the election's calls too.
    campaign: (name, value, ttl) => new StoreCampaign(wrapped, name, value, ttl),
    leader: (name) => storeLeader(wrapped, name),
    close: () => Promise.resolve(),
  };
  return wrapped;
}

/**
 * A store over `inner` that records the prefix of every list (range or snapshot) and every watch
 * opened, and can end any of those watches as etcd would end one resuming from a compacted
 * revision: how a test sees what a follower reads again when one of its watches ends.
 */
export function endableWatches(inner: ClusterStore): { store: ClusterStore; reads: string[]; watches: { prefix: string; end: () => void }[] } {
  const reads: string[] = [];
  const watches: { prefix: string; end: () => void }[] = [];
  const store = wrapStore(inner, {
    range: (prefix, opts) => {
      reads.push(prefix);
      return inner.range(prefix, opts);
    },
    snapshot: (prefixes) => {
      reads.push(...prefixes);
      return inner.snapshot(prefixes);
    },
    watch: async (opts) => {
      const h = await inner.watch(opts);
      watches.push({ prefix: opts.prefix, end: () => void h.close().then(() => opts.onError(new TarcilError('COMPACTED', 'history compacted'))) });
      return h;
    },
  });
  return { store, reads, watches };
}
