/**
 * Hollow nodes: many node monitors in one process with the simulated executor, for large cells on
 * one machine (as Kubernetes' kubemark and Nomad's node simulator do). Each node is a
 * MonitoredNode (node.ts), so it registers, runs tasks and records outcomes exactly as a real
 * monitor does; what the nodes share is the process's hold on the store: one lease, one list+watch
 * of the RU keys, registration in batches, one group commit for the nodes' own transactions. A
 * node's death is simulated by dropping it: its tasks stop, and its server record and free RUs
 * leave as a lease expiry would take them.
 */
import { trace, tracingOn } from '../util/trace.ts';
import { Follower } from '../state/follow.ts';
import { DEFAULT_LEASE_TTL_S, type HeldLease } from '../state/lease.ts';
import type { CordonRecord, LiveJobRecord } from '../state/live-records.ts';
import { isFreeRuValue, parseJson, type PlacedRuRecord } from '../state/records.ts';
import type { Keys } from '../state/keys.ts';
import type { JobSpec, ServerSpec } from '../model/types.ts';
import type { ClusterStore, Compare, KeyValue, Op } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { errorMessage, isTransient } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import type { Rng } from '../util/rng.ts';
import { NodeConnection } from './connection.ts';
import { SimulatedExecutor } from './executor.ts';
import { MemoryJournal } from './journal.ts';
import type { SlowdownModel } from './load.ts';
import { MonitoredNode } from './node.ts';
import type { NodeHost } from './node-host.ts';
import {
  DEFAULT_DISCONNECT_GRACE_MS,
  DEFAULT_LOAD_THRESHOLD,
  HOLLOW_DEFAULTS,
  hollowMaxWrites,
  LAUNCH_BACKOFF_MAX_MS,
  LAUNCH_BACKOFF_MIN_MS,
  type MonitorStats,
} from './options.ts';
import { registerIdle, type IdleNode } from './register.ts';
import { SharedBackoff } from '../util/backoff.ts';
import { GroupCommit, groupCommitted, type GroupCommitStats } from '../store/group-commit.ts';

export interface HollowOptions {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
  servers: readonly ServerSpec[];
  /** host:port of the process's one NodeMonitor service, advertised by every node. */
  endpoint?: string;
  leaseTtlSeconds?: number;
  disconnectGraceMs?: number;
  loadThreshold?: number;
  /** Blocks of slow servers (MonitorOptions.block; default DEFAULT_RUNTIME.block), for every node. */
  block?: boolean;
  slowdown?: SlowdownModel;
  /** Chooses the nodes a kill drops (default Math.random). */
  rng?: Pick<Rng, 'int'>;
  /** Nodes with something to reconcile registered one by one, this many at a time (default {@link HOLLOW_DEFAULTS}). */
  registerConcurrency?: number;
  /** Task-start writes of all nodes in flight at once (default {@link hollowMaxWrites}: what the write requests carry, twice). */
  maxWrites?: number;
  /** Requests carrying the nodes' transactions in flight at once (default {@link HOLLOW_DEFAULTS}). */
  maxWriteRequests?: number;
}

export interface HollowSnapshot {
  nodes: number;
  live: number;
  dead: number;
  rus: number;
  busy: number;
  running: number;
  blocked: number;
  connected: boolean;
  /** How long the last registration of every node took, ms. */
  registrationMs: number | undefined;
  /** Summed over every node, the dead ones' up to their death. */
  stats: MonitorStats;
  /** The nodes' transactions and the requests that carried them. */
  writes: GroupCommitStats;
  /**
   * Task-start writes (a node records its task running, then starts it): in flight, waiting for
   * a slot, how long the oldest waiting one has waited (ms, 0 when none waits), and in all how
   * many were written and how long they took from their node's asking to the store's answer.
   */
  startWrites: { inFlight: number; waiting: number; oldestWaitMs: number; done: number; totalMs: number };
}

const ZERO_STATS: MonitorStats = { started: 0, completed: 0, failed: 0, killed: 0, lost: 0, adopted: 0, fenced: 0, registrations: 0, movedOut: 0 };

export class HollowNodes {
  readonly disconnectGraceMs: number;
  private readonly o: HollowOptions;
  /** The live nodes by server id. */
  private readonly nodes = new Map<string, MonitoredNode>();
  private readonly deadIds = new Set<string>();
  private readonly deadStats: MonitorStats = { ...ZERO_STATS };
  private readonly conn: NodeConnection;
  private readonly commits: GroupCommit;
  private follower: Follower | undefined;
  private readonly specs = new Map<string, JobSpec | null>();
  private readonly background = new Set<Promise<unknown>>();
  /** The nodes registered so far under a lease whose registration has not finished. */
  private registeredUnder: { lease: string; nodes: Set<MonitoredNode> } | undefined;
  /** Writes that may put server records (registrations, record updates): a kill waits for them. */
  private readonly serverWrites = new Set<Promise<unknown>>();
  /** Nodes whose server record changed since it was last put. */
  private readonly dirty = new Set<MonitoredNode>();
  private closed = false;
  /** Task-start writes let in flight at once (HollowOptions.maxWrites). */
  readonly maxWrites: number;
  private writesInFlight = 0;
  /** Task-start writes waiting for a slot, in order, each with the time it asked. */
  private readonly waiting: { at: number; go: () => void }[] = [];
  private startsDone = 0;
  private startsTotalMs = 0;
  private lastRegistrationMs: number | undefined;

  constructor(opts: HollowOptions) {
    this.o = opts;
    this.disconnectGraceMs = opts.disconnectGraceMs ?? DEFAULT_DISCONNECT_GRACE_MS;
    // The nodes' own transactions (task started, outcome recorded) leave together: a request to
    // the store per task start and per outcome made the process's gRPC calls most of its work.
    const maxWriteRequests = opts.maxWriteRequests ?? HOLLOW_DEFAULTS.maxWriteRequests;
    this.commits = new GroupCommit(opts.store, { maxInFlight: maxWriteRequests, gather: true });
    this.maxWrites = Math.max(1, Math.floor(opts.maxWrites ?? hollowMaxWrites(maxWriteRequests, opts.store.maxTxnOps)));
    const host: NodeHost<MonitoredNode> = {
      store: groupCommitted(opts.store, this.commits),
      keys: opts.keys,
      clock: opts.clock,
      log: opts.log,
      executor: new SimulatedExecutor(opts.clock),
      loadThreshold: opts.loadThreshold ?? DEFAULT_LOAD_THRESHOLD,
      ...(opts.block !== undefined ? { block: opts.block } : {}),
      slowdown: opts.slowdown,
      disconnectGraceMs: this.disconnectGraceMs,
      lease: () => this.conn.lease,
      usableLeaseId: () => this.conn.usableLeaseId(),
      connected: () => !this.closed && this.conn.connected,
      registered: () => this.conn.registered,
      jobSpec: (job) => this.jobSpec(job),
      serverChanged: (node) => {
        this.dirty.add(node);
        this.conn.syncServer();
      },
      track: (p) => this.track(p),
      launchBackoff: new SharedBackoff(LAUNCH_BACKOFF_MIN_MS, LAUNCH_BACKOFF_MAX_MS),
      gate: (write) => this.gate(write),
    };
    for (const s of opts.servers) {
      if (this.nodes.has(s.id)) throw new Error(`hollow nodes: server id ${s.id} appears twice`);
      this.nodes.set(s.id, new MonitoredNode(host, s, new MemoryJournal(), opts.endpoint));
    }
    this.conn = new NodeConnection({
      store: opts.store,
      clock: opts.clock,
      log: opts.log,
      server: `hollow(${opts.servers.length})`,
      ttlSeconds: opts.leaseTtlSeconds ?? DEFAULT_LEASE_TTL_S,
      graceMs: this.disconnectGraceMs,
      writeServer: (lease) => this.writeDirty(lease),
      register: (lease) => this.registerAll(lease),
      resume: () => {
        this.conn.syncServer();
        this.track(this.relist().catch((err: unknown) => this.o.log.warn({ err: errorMessage(err) }, 'relist failed; the watch will catch up')));
        for (const n of this.nodes.values()) n.resumed();
      },
      onDisconnected: (why) => {
        let running = 0;
        for (const n of this.nodes.values()) {
          running += n.runningCount;
          n.disconnected(why, true);
        }
        this.o.log.warn(
          { nodes: this.nodes.size, why, running, graceMs: this.disconnectGraceMs },
          'no contact with the store: hollow nodes start nothing new; running tasks keep going through the grace',
        );
      },
      onGraceOut: (why) => {
        for (const n of this.nodes.values()) n.graceOut(why);
      },
    });
  }

  get leaseId(): string | undefined {
    return this.conn.lease?.id;
  }

  /** A live node by server id (what the NodeMonitor service routes to). */
  node(server: string): MonitoredNode | undefined {
    return this.nodes.get(server);
  }

  /** The node was dropped by a kill. */
  killed(server: string): boolean {
    return this.deadIds.has(server);
  }

  liveIds(): string[] {
    return [...this.nodes.keys()];
  }

  /** Sets the endpoint every node advertises (known once the gRPC server has bound its port). */
  async setEndpoint(endpoint: string): Promise<void> {
    for (const n of this.nodes.values()) {
      n.endpoint = endpoint;
      this.dirty.add(n);
    }
    if (this.conn.registered) await this.conn.putServer();
  }

  /** Registers every node under one lease, then follows every RU of the cell with one watch. */
  async start(): Promise<void> {
    // A store that times out (a loaded etcd) costs the start a pause, not the process; what was
    // registered under the lease stays registered across the retries.
    for (let delay = 500; ; delay = Math.min(delay * 2, 5000)) {
      try {
        await this.conn.registerOnce();
        break;
      } catch (err) {
        if (this.closed || !isTransient(err)) throw err;
        this.o.log.warn({ err: errorMessage(err), delay }, 'hollow nodes: registration failed; retrying');
        await this.o.clock.sleep(delay);
      }
    }
    this.follower = new Follower({
      store: this.o.store,
      clock: this.o.clock,
      log: this.o.log,
      // The RUs, and the operators' cordons (a drain stops a node's tasks at its deadline).
      prefix: [this.o.keys.rus(), this.o.keys.cordons()],
      onSnapshot: (_kvs, _rev, [rus = [], cordons = []]) => {
        this.applySnapshot(rus);
        this.applyCordons(cordons);
      },
      // One watch ended (the cordons' start compacted away, after etcd restarted): its prefix alone
      // is listed again, and the RUs' watch resumes where it was.
      onRelistPrefix: (index, kvs) => (index === 0 ? this.applySnapshot(kvs) : this.applyCordons(kvs)),
      onEvent: (kv, deleted) => {
        const cordoned = this.o.keys.tail(this.o.keys.cordons(), kv.key);
        if (cordoned !== undefined) return this.nodes.get(cordoned)?.setCordon(deleted ? undefined : parseJson<CordonRecord>(kv));
        const ref = this.o.keys.parseRu(kv.key);
        const node = ref ? this.nodes.get(ref.server) : undefined;
        if (!node) return;
        if (tracingOn() && !deleted) traceTaken(kv.value);
        node.onRu(kv, deleted);
        node.recomputeLoad();
      },
    });
    // No periodic look at the rates, unlike a real monitor's: a simulated task's rate changes only
    // with its server's occupancy, and every change of that (an RU event, a task started or ended)
    // makes the node look at once. A tick over every busy node was 2,000 looks a second on a
    // 2,000-node cell that found nothing new.
    await this.follower.start();
  }

  private applyCordons(cordons: readonly KeyValue[]): void {
    const byServer = new Map(cordons.map((kv) => [this.o.keys.tail(this.o.keys.cordons(), kv.key), kv] as const));
    for (const n of this.nodes.values()) {
      const kv = byServer.get(n.server.id);
      // Most nodes are never cordoned: only those that are, or were, hear of it.
      if (kv || n.cordonState) n.setCordon(parseJson<CordonRecord>(kv));
    }
  }

  snapshot(): HollowSnapshot {
    const stats: MonitorStats = { ...this.deadStats };
    let rus = 0;
    let busy = 0;
    let running = 0;
    let blocked = 0;
    for (const n of this.nodes.values()) {
      for (const k of Object.keys(stats) as (keyof MonitorStats)[]) stats[k] += n.stats[k];
      rus += n.server.rus;
      busy += n.busyCount();
      running += n.runningCount;
      if (n.isBlocked) blocked++;
    }
    return {
      nodes: this.nodes.size + this.deadIds.size,
      live: this.nodes.size,
      dead: this.deadIds.size,
      rus,
      busy,
      running,
      blocked,
      connected: !this.closed && this.conn.connected,
      registrationMs: this.lastRegistrationMs,
      stats,
      writes: { ...this.commits.stats },
      startWrites: {
        inFlight: this.writesInFlight,
        waiting: this.waiting.length,
        oldestWaitMs: this.waiting.length > 0 ? Math.max(0, this.o.clock.now() - (this.waiting[0] as { at: number }).at) : 0,
        done: this.startsDone,
        totalMs: this.startsTotalMs,
      },
    };
  }

  /**
   * Drops nodes as if their machines died: `count` (or `fraction` of the live nodes) chosen at
   * random, or the given ids. Their tasks stop without an outcome; then, once every write that
   * may put their server records has settled, their server records and the RU records bound to
   * the lease (the free ones) are deleted, as etcd deletes a dead monitor's when its lease
   * expires. Busy RUs stay: their owners record the tasks lost once the node's grace has passed.
   * Returns the ids dropped.
   */
  async kill(what: { fraction?: number; count?: number; ids?: readonly string[] }): Promise<string[]> {
    let victims: string[];
    if (what.ids) {
      victims = what.ids.filter((id) => this.nodes.has(id));
    } else {
      const live = [...this.nodes.keys()];
      const want = Math.min(live.length, what.count ?? Math.round(live.length * (what.fraction ?? 0)));
      const pick = this.o.rng ? (n: number) => this.o.rng?.int(n) ?? 0 : (n: number) => Math.floor(Math.random() * n);
      for (let i = 0; i < want; i++) {
        const j = i + pick(live.length - i);
        [live[i], live[j]] = [live[j] as string, live[i] as string];
      }
      victims = live.slice(0, want);
    }
    for (const id of victims) {
      const node = this.nodes.get(id);
      if (!node) continue;
      node.die();
      for (const k of Object.keys(this.deadStats) as (keyof MonitorStats)[]) this.deadStats[k] += node.stats[k];
      this.nodes.delete(id);
      this.dirty.delete(node);
      this.deadIds.add(id);
    }
    await Promise.allSettled([...this.serverWrites]);
    await eachLimited(victims, 16, (id) => this.remove(id));
    this.o.log.warn({ killed: victims.length, live: this.nodes.size }, 'hollow nodes dropped: their server records and free RUs are gone, their tasks stopped');
    return victims;
  }

  /**
   * Graceful stop: every node says down, its tasks are killed and recorded lost (their owners
   * place them again), journalled outcomes are reported, and the lease is revoked.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.conn.close();
    for (const n of this.nodes.values()) {
      n.stopReporting();
      n.draining = true;
      this.dirty.add(n);
    }
    await this.conn.putServer().catch(() => undefined);
    await this.follower?.close();
    const nodes = [...this.nodes.values()];
    await Promise.all(nodes.map((n) => n.stopAll('hollow node shut down')));
    await Promise.allSettled([...this.background, this.conn.pending]);
    await eachLimited(nodes, 64, (n) => n.flushJournal());
    await this.conn.revoke();
  }

  // ---------------------------------------------------------------------------------------------
  // Registration and server records

  /**
   * Registers every live node under `lease`: the ones that hold nothing in batches (register.ts,
   * registerIdle), the others (tasks running here or journalled, an RU that holds a task) one by
   * one with the single monitor's reconciliation. Throws if any node could not be registered (the
   * connection then tries again, under the same lease if it is still good).
   */
  private async registerAll(lease: HeldLease): Promise<void> {
    const t0 = this.o.clock.now();
    // What an earlier attempt under this lease registered stays registered: the nodes' records are
    // bound to the lease, so only the others are looked at again (at 10,000 nodes, starting over
    // put 170,000 keys again each time and could take longer than a loaded store kept the lease).
    if (this.registeredUnder?.lease !== lease.id) this.registeredUnder = { lease: lease.id, nodes: new Set() };
    const done = this.registeredUnder.nodes;
    const todo = [...this.nodes.values()].filter((n) => !done.has(n));
    const byServer = await this.ruKvsOf(todo);
    const idle: IdleNode[] = [];
    const rest: MonitoredNode[] = [];
    for (const n of todo) {
      const kvs = byServer.get(n.server.id) ?? [];
      if (n.holdsNothing() && !kvs.some(holdsTask)) idle.push({ server: n.server, serverJson: n.serverJson(), ruKvs: kvs });
      else rest.push(n);
    }
    byServer.clear();
    const batch = await this.serverWrite(registerIdle(this.o.store, this.o.keys, lease.id, idle));
    for (const id of batch.registered) {
      const n = this.nodes.get(id);
      n?.registeredInBatch();
      if (n) {
        this.dirty.delete(n);
        done.add(n);
      }
    }
    if (batch.failed !== undefined) {
      this.o.log.warn(
        { registered: done.size, left: this.nodes.size - done.size, lease: lease.id, err: errorMessage(batch.failed) },
        'hollow nodes partly registered; the rest are tried again under the same lease',
      );
      throw batch.failed instanceof Error ? batch.failed : new Error(errorMessage(batch.failed));
    }
    for (const id of batch.left) {
      const n = this.nodes.get(id);
      if (n) rest.push(n);
    }
    const failed: string[] = [];
    await eachLimited(rest, this.o.registerConcurrency ?? HOLLOW_DEFAULTS.registerConcurrency, async (n) => {
      if (this.nodes.get(n.server.id) !== n || this.closed) return;
      try {
        await this.serverWrite(n.register(lease));
        this.dirty.delete(n);
        done.add(n);
      } catch (err) {
        failed.push(n.server.id);
        this.o.log.warn({ server: n.server.id, err: errorMessage(err) }, 'hollow node registration failed');
      }
    });
    if (failed.length > 0) {
      this.o.log.warn(
        { registered: done.size, left: failed.length, lease: lease.id },
        'hollow nodes partly registered; the rest are tried again under the same lease',
      );
      throw new Error(`${failed.length} hollow node(s) could not register (first: ${failed[0]})`);
    }
    this.registeredUnder = undefined;
    this.lastRegistrationMs = this.o.clock.now() - t0;
    this.o.log.info(
      { nodes: this.nodes.size, batched: batch.registered.length, oneByOne: rest.length, lease: lease.id, ms: this.lastRegistrationMs },
      'hollow nodes registered',
    );
  }

  /**
   * The RU records of these nodes, by server: one paged range of the whole cell when they are
   * most of it, else a range per node (a retry that has a few nodes left reads only theirs).
   */
  private async ruKvsOf(nodes: readonly MonitoredNode[]): Promise<Map<string, KeyValue[]>> {
    if (nodes.length * 4 >= this.nodes.size) return groupByServer(this.o.keys, (await this.o.store.range(this.o.keys.rus())).kvs);
    const out = new Map<string, KeyValue[]>();
    await eachLimited(nodes, 16, async (n) => {
      out.set(n.server.id, (await this.o.store.range(this.o.keys.serverRus(n.server.id))).kvs);
    });
    return out;
  }

  /** Puts the server records of the nodes that changed, as many per transaction as the store takes. */
  private writeDirty(lease: string): Promise<void> {
    const nodes = [...this.dirty].filter((n) => this.nodes.get(n.server.id) === n);
    this.dirty.clear();
    return this.serverWrite(
      (async () => {
        const per = Math.max(1, this.o.store.maxTxnOps);
        for (let i = 0; i < nodes.length; i += per) {
          const chunk = nodes.slice(i, i + per);
          const ops: Op[] = chunk.map((n) => ({ type: 'put', key: this.o.keys.server(n.server.id), value: n.serverJson(), lease }));
          try {
            await this.o.store.txn({ compare: [], success: ops });
          } catch (err) {
            for (const n of nodes.slice(i)) this.dirty.add(n);
            throw err;
          }
        }
      })(),
    );
  }

  /** Deletes a dropped node's server record and the RU records bound to the lease (the free ones). */
  private async remove(id: string): Promise<void> {
    const k = this.o.keys;
    for (let attempt = 0; attempt < 10; attempt++) {
      try {
        const kvs = (await this.o.store.range(k.serverRus(id))).kvs.filter((kv) => kv.lease !== '0');
        const compare: Compare[] = kvs.map((kv) => ({ key: kv.key, target: 'mod', op: '==', value: kv.modRevision }));
        const success: Op[] = [...kvs.map((kv): Op => ({ type: 'delete', key: kv.key })), { type: 'delete', key: k.server(id) }];
        if ((await this.o.store.txn({ compare, success })).succeeded) return;
      } catch (err) {
        this.o.log.warn({ server: id, err: errorMessage(err) }, 'removing a dropped hollow node failed; retrying');
        await this.o.clock.sleep(Math.min(100 * 2 ** attempt, 2000));
      }
    }
    this.o.log.error({ server: id }, 'could not remove a dropped hollow node: its records stay until the lease expires');
  }

  private serverWrite<T>(p: Promise<T>): Promise<T> {
    this.serverWrites.add(p);
    void p.then(
      () => this.serverWrites.delete(p),
      () => this.serverWrites.delete(p),
    );
    return p;
  }

  // ---------------------------------------------------------------------------------------------
  // Following the RUs

  private applySnapshot(kvs: readonly KeyValue[]): void {
    const byServer = groupByServer(this.o.keys, kvs);
    for (const n of this.nodes.values()) n.onSnapshot(byServer.get(n.server.id) ?? []);
  }

  private async relist(): Promise<void> {
    const rus = await this.o.store.range(this.o.keys.rus());
    const byServer = groupByServer(this.o.keys, rus.kvs);
    for (const [id, kvs] of byServer) {
      const n = this.nodes.get(id);
      if (!n) continue;
      for (const kv of kvs) n.onRu(kv, false);
      n.recomputeLoad();
    }
  }

  private async jobSpec(job: string): Promise<JobSpec | undefined> {
    if (this.specs.has(job)) return this.specs.get(job) ?? undefined;
    const rec = parseJson<LiveJobRecord>(await this.o.store.get(this.o.keys.job(job)));
    const spec = rec?.spec ?? null;
    this.specs.set(job, spec);
    if (this.specs.size > 10_000) this.specs.delete(this.specs.keys().next().value as string);
    return spec ?? undefined;
  }

  /**
   * At most `maxWrites` task-start writes in flight; the rest wait their turn, in order. The
   * group commit is the real bound (its requests in flight, each as full as the store takes): this
   * one only keeps the transactions queued there few enough to fill its next requests.
   */
  private gate<T>(write: () => Promise<T>): Promise<T> {
    const askedAt = this.o.clock.now();
    // Behind the ones already waiting even when a slot is free: a freed slot passes to the oldest.
    if (this.writesInFlight >= this.maxWrites || this.waiting.length > 0) {
      return new Promise<void>((go) => this.waiting.push({ at: askedAt, go })).then(() => this.admitted(write, askedAt));
    }
    this.writesInFlight++;
    return this.admitted(write, askedAt);
  }

  /** A start write holding a slot: once answered, the slot passes to the oldest waiting one. */
  private admitted<T>(write: () => Promise<T>, askedAt: number): Promise<T> {
    return write().finally(() => {
      this.startsDone++;
      this.startsTotalMs += Math.max(0, this.o.clock.now() - askedAt);
      const next = this.waiting.shift();
      if (next) next.go();
      else this.writesInFlight--;
    });
  }

  private track(p: Promise<unknown>): void {
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }
}

function groupByServer(k: Keys, kvs: readonly KeyValue[]): Map<string, KeyValue[]> {
  const out = new Map<string, KeyValue[]>();
  for (const kv of kvs) {
    const ref = k.parseRu(kv.key);
    if (!ref) continue;
    let list = out.get(ref.server);
    if (!list) out.set(ref.server, (list = []));
    list.push(kv);
  }
  return out;
}

function holdsTask(kv: KeyValue): boolean {
  if (isFreeRuValue(kv.value)) return false;
  const rec = parseJson<PlacedRuRecord>(kv);
  return !!rec && (rec.state === 'busy' || rec.state === 'reserved');
}

/** Runs fn over items, at most `limit` at a time. */
async function eachLimited<T>(items: readonly T[], limit: number, fn: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** A placement reaching its hollow node, for the trace (util/trace.ts). */
function traceTaken(value: string): void {
  if (!value.includes('"state":"busy"')) return;
  const rec = JSON.parse(value) as Partial<PlacedRuRecord>;
  if (rec.job !== undefined) trace('node.seen', `${rec.job}#${rec.task ?? 0}`);
}
