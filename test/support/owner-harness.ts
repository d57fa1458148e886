/**
 * A harness for the job owner (JobManager) that needs no wall clock: the embedded store driven by
 * a manual clock (leases expire when the test moves time), a fake node link that records what an
 * owner asks of the nodes, stores that let one process die or pause at a chosen transaction, and
 * a stand-in for the node monitors that ends placed tasks through the real release transaction.
 */
import { JobManager, type JobManagerOptions, type NodeLink } from '../../src/owner/manager.ts';
import { Keys } from '../../src/state/keys.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { releaseRu } from '../../src/state/release.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { StoreCampaign, storeLeader } from '../../src/store/election.ts';
import type { ClusterStore, Lease, TxnRequest, WatchOptions } from '../../src/store/types.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';

export /**
 * A store as one process sees it, which can die at a chosen transaction: from then on nothing it
 * sends arrives and nothing comes back (that transaction included), as when the process is
 * SIGKILLed. Its lease stops being kept alive, so the store expires it after the TTL.
 */
class DyingStore implements ClusterStore {
  readonly kind: ClusterStore['kind'];
  readonly maxTxnOps: number;
  readonly maxRequestBytes: number;
  private deadFlag = false;
  /** Leases the store keeps alive by itself (a campaign's): they stop being kept alive at death. */
  private readonly selfKept: Lease[] = [];
  constructor(
    private readonly inner: ClusterStore,
    private readonly dieAt: (req: TxnRequest) => boolean,
  ) {
    this.kind = inner.kind;
    this.maxTxnOps = inner.maxTxnOps;
    this.maxRequestBytes = inner.maxRequestBytes;
  }
  get dead(): boolean {
    return this.deadFlag;
  }
  set dead(v: boolean) {
    this.deadFlag = v;
    if (v) for (const l of this.selfKept.splice(0)) l.release();
  }
  private gate<T>(f: () => Promise<T>): Promise<T> {
    return this.dead ? new Promise<T>(() => undefined) : f();
  }
  campaign: ClusterStore['campaign'] = (name, value, ttl) => new StoreCampaign(this, name, value, ttl);
  leader: ClusterStore['leader'] = (name) => storeLeader(this, name);
  get: ClusterStore['get'] = (key) => this.gate(() => this.inner.get(key));
  getAt: ClusterStore['getAt'] = (key, revision) => this.gate(() => this.inner.getAt(key, revision));
  range: ClusterStore['range'] = (prefix, opts) => this.gate(() => this.inner.range(prefix, opts));
  snapshot: ClusterStore['snapshot'] = (prefixes) => this.gate(() => this.inner.snapshot(prefixes));
  count: ClusterStore['count'] = (prefix) => this.gate(() => this.inner.count(prefix));
  put: ClusterStore['put'] = (key, value, opts) => this.gate(() => this.inner.put(key, value, opts));
  delete: ClusterStore['delete'] = (key, opts) => this.gate(() => this.inner.delete(key, opts));
  revision: ClusterStore['revision'] = () => this.gate(() => this.inner.revision());
  compact: ClusterStore['compact'] = (rev) => this.gate(() => this.inner.compact(rev));
  close: ClusterStore['close'] = () => Promise.resolve();
  txn: ClusterStore['txn'] = (req) => {
    if (!this.dead && this.dieAt(req)) this.dead = true;
    return this.gate(() => this.inner.txn(req));
  };
  txns: ClusterStore['txns'] = (reqs) => {
    if (!this.dead && reqs.some((r) => this.dieAt(r))) this.dead = true;
    return this.gate(() => this.inner.txns(reqs));
  };
  watch = (opts: WatchOptions): ReturnType<ClusterStore['watch']> =>
    this.gate(() =>
      this.inner.watch({ ...opts, onEvents: (b) => (this.dead ? undefined : opts.onEvents(b)), onError: (e) => (this.dead ? undefined : opts.onError(e)) }),
    );
  grantLease = async (ttl: number, opts?: Parameters<ClusterStore['grantLease']>[1]): Promise<Lease> => {
    const l = await this.gate(() => this.inner.grantLease(ttl, opts));
    if (opts?.keepAlive !== false) this.selfKept.push(l);
    return gatedLease(l, (f) => this.gate(f));
  };
}

/**
 * A store as one process sees it that can be paused: while paused, calls are held (neither sent
 * nor answered) and watch events are held back; on resume the held calls go out, late, as those
 * of a process stopped past its lease TTL (SIGSTOP, a long GC pause) and then continued.
 */
export class PausingStore implements ClusterStore {
  readonly kind: ClusterStore['kind'];
  readonly maxTxnOps: number;
  readonly maxRequestBytes: number;
  private paused = false;
  private held: (() => void)[] = [];
  /** Transactions held by the current pause. */
  readonly heldTxns: TxnRequest[] = [];
  /** Results of the transactions that were held by a pause, in the order they went out. */
  readonly lateResults: { req: TxnRequest; succeeded: boolean }[] = [];
  constructor(
    private readonly inner: ClusterStore,
    private readonly pauseAt: (req: TxnRequest) => boolean = () => false,
  ) {
    this.kind = inner.kind;
    this.maxTxnOps = inner.maxTxnOps;
    this.maxRequestBytes = inner.maxRequestBytes;
  }
  get isPaused(): boolean {
    return this.paused;
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
    const held = this.held;
    this.held = [];
    for (const go of held) go();
  }
  private gate<T>(f: () => Promise<T>): Promise<T> {
    if (!this.paused) return f();
    return new Promise<T>((resolve, reject) => {
      this.held.push(() => {
        f().then(resolve, reject);
      });
    });
  }
  campaign: ClusterStore['campaign'] = (name, value, ttl) => new StoreCampaign(this, name, value, ttl);
  leader: ClusterStore['leader'] = (name) => storeLeader(this, name);
  get: ClusterStore['get'] = (key) => this.gate(() => this.inner.get(key));
  getAt: ClusterStore['getAt'] = (key, revision) => this.gate(() => this.inner.getAt(key, revision));
  range: ClusterStore['range'] = (prefix, opts) => this.gate(() => this.inner.range(prefix, opts));
  snapshot: ClusterStore['snapshot'] = (prefixes) => this.gate(() => this.inner.snapshot(prefixes));
  count: ClusterStore['count'] = (prefix) => this.gate(() => this.inner.count(prefix));
  put: ClusterStore['put'] = (key, value, opts) => this.gate(() => this.inner.put(key, value, opts));
  delete: ClusterStore['delete'] = (key, opts) => this.gate(() => this.inner.delete(key, opts));
  revision: ClusterStore['revision'] = () => this.gate(() => this.inner.revision());
  compact: ClusterStore['compact'] = (rev) => this.gate(() => this.inner.compact(rev));
  close: ClusterStore['close'] = () => Promise.resolve();
  txn: ClusterStore['txn'] = (req) => {
    if (!this.paused && this.pauseAt(req)) this.paused = true;
    if (!this.paused) return this.inner.txn(req);
    this.heldTxns.push(req);
    return this.gate(async () => {
      const res = await this.inner.txn(req);
      this.lateResults.push({ req, succeeded: res.succeeded });
      return res;
    });
  };
  txns: ClusterStore['txns'] = (reqs) => this.gate(() => this.inner.txns(reqs));
  watch = (opts: WatchOptions): ReturnType<ClusterStore['watch']> =>
    this.inner.watch({
      ...opts,
      onEvents: (b) => (this.paused ? this.held.push(() => opts.onEvents(b)) : opts.onEvents(b)),
      onError: (e) => (this.paused ? this.held.push(() => opts.onError(e)) : opts.onError(e)),
    });
  grantLease = async (ttl: number, opts?: Parameters<ClusterStore['grantLease']>[1]): Promise<Lease> =>
    gatedLease(await this.gate(() => this.inner.grantLease(ttl, opts)), (f) => this.gate(f));
}

/** A lease whose calls to the store pass through `gate` (a process that dies or pauses). */
function gatedLease(l: Lease, gate: <T>(f: () => Promise<T>) => Promise<T>): Lease {
  return {
    id: l.id,
    ttlSeconds: l.ttlSeconds,
    onLost: (cb) => l.onLost(cb),
    keepAliveOnce: () => gate(() => l.keepAliveOnce()),
    revoke: () => gate(() => l.revoke()),
    release: () => l.release(),
  };
}

/** What owners asked of the nodes. `kill` answers false (the node does not answer) by default. */
export class FakeNodes implements NodeLink {
  readonly launches: { endpoint: string; job: string; task: number }[] = [];
  readonly kills: { endpoint: string; job: string; task: number; reason: string }[] = [];
  killAnswer = false;
  launch(endpoint: string, req: { job: string; task: number }): Promise<void> {
    this.launches.push({ endpoint, job: req.job, task: req.task });
    return Promise.resolve();
  }
  kill(endpoint: string, req: { job: string; task: number; reason: string }): Promise<boolean> {
    this.kills.push({ endpoint, ...req });
    return Promise.resolve(this.killAnswer);
  }
}

/** Does the transaction put an RU record in this state? */
export const putsRu = (req: TxnRequest, state: string): boolean =>
  req.success.some((op) => op.type === 'put' && op.key.includes('/rus/') && op.value.includes(`"state":"${state}"`));

/** A predicate true for the n-th request that satisfies `pred`. */
export function nth(pred: (req: TxnRequest) => boolean, n: number): (req: TxnRequest) => boolean {
  let seen = 0;
  return (req) => pred(req) && ++seen === n;
}

/** A cell on the embedded store with a manual clock: servers seeded, owners started on demand. */
export class OwnerCell {
  readonly clock = new ManualClock(1_700_000_000_000);
  readonly store: MemoryStore;
  readonly keys = new Keys('/h/');
  readonly nodes = new FakeNodes();
  readonly log = createLogger('owner-harness', 'silent');
  private readonly managers: JobManager[] = [];

  constructor(opts: { maxTxnOps?: number } = {}) {
    this.store = new MemoryStore({ clock: this.clock, ...(opts.maxTxnOps ? { maxTxnOps: opts.maxTxnOps } : {}) });
  }

  async seed(servers: number, rus: number): Promise<void> {
    await seedCluster(this.store, this.keys, uniformServers(servers, rus));
  }

  /** Starts a job owner (process `name`) on `store` (default: the cell's store itself). */
  async owner(name: string, store: ClusterStore = this.store, over: Partial<JobManagerOptions> = {}): Promise<JobManager> {
    const m = new JobManager({
      process: name,
      store,
      keys: this.keys,
      clock: this.clock,
      rng: new SeededRng(name.charCodeAt(0)),
      log: this.log,
      agents: 1,
      leaseTtlSeconds: 2,
      nodes: this.nodes,
      ...over,
    });
    const started = m.start();
    await this.until(() => m.started, 5000);
    await started;
    this.managers.push(m);
    return m;
  }

  /** Lets promises, watch deliveries and immediates run (no time passes). */
  async flush(rounds = 8): Promise<void> {
    for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
  }

  /** Moves time forward in steps, letting everything that became due run after each step. */
  async advance(ms: number, step = 50): Promise<void> {
    for (let t = 0; t < ms; t += step) {
      this.clock.advance(Math.min(step, ms - t));
      await this.flush();
    }
  }

  /** Advances time until `cond` holds; throws after `maxMs` of virtual time. */
  async until(cond: () => boolean | Promise<boolean>, maxMs: number, step = 50): Promise<void> {
    for (let t = 0; t <= maxMs; t += step) {
      await this.flush();
      if (await cond()) return;
      this.clock.advance(step);
    }
    throw new Error(`condition not met within ${maxMs} ms of virtual time`);
  }

  /** The busy RUs of a job, as the node monitors would see them. */
  async busy(job: string): Promise<{ key: string; rev: number; rec: PlacedRuRecord }[]> {
    const out: { key: string; rev: number; rec: PlacedRuRecord }[] = [];
    for (const kv of (await this.store.range(this.keys.rus())).kvs) {
      const rec = parseJson<PlacedRuRecord>(kv);
      if (rec?.state === 'busy' && rec.job === job) out.push({ key: kv.key, rev: kv.modRevision, rec });
    }
    return out;
  }

  /** Ends every busy task of the job as its monitor would: the real, fenced release transaction. */
  async finishTasks(job: string, state: 'succeeded' | 'failed' = 'succeeded'): Promise<number> {
    let n = 0;
    for (const b of await this.busy(job)) {
      const ref = this.keys.parseRu(b.key);
      if (!ref) continue;
      const ok = await releaseRu(this.store, this.keys, ref, b.rev, b.rec, {
        state,
        endedAt: this.clock.now(),
        ...(state === 'succeeded' ? { exitCode: 0 } : { exitCode: 1 }),
      });
      if (ok) n++;
    }
    return n;
  }

  async jobState(job: string): Promise<string | undefined> {
    return parseJson<{ state: string }>(await this.store.get(this.keys.job(job)))?.state;
  }

  async close(): Promise<void> {
    for (const m of this.managers) {
      const closing = m.close();
      // Leases revoke and loops end on the clock: keep it moving until the owner has stopped.
      let done = false;
      void closing.finally(() => (done = true));
      for (let i = 0; i < 200 && !done; i++) await this.advance(50);
      // An owner whose store died never hears back from it: leave its close() pending.
      if (done) await closing.catch(() => undefined);
    }
    await this.store.close();
  }
}
