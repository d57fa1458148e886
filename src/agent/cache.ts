import type { ServerSpec } from '../model/types.ts';
import type { ClusterState } from '../sampling/cluster-state.ts';
import type { Keys } from '../store/keys.ts';
import type { ClusterStore, KeyValue, WatchBatch, WatchHandle } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { TarcilError } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import { occupantOf, parseJson, type ServerRecord } from './records.ts';
import type { RuRecord } from '../model/types.ts';

/**
 * The agent's copy of the cluster state: list servers, RUs and epochs at one revision, then watch
 * from revision + 1. When a watch ends (history compacted, cancelled by the server, connection
 * lost) the cache lists again and re-watches; etcd3 does not do this for us.
 */
export class AgentCache {
  private readonly store: ClusterStore;
  private readonly keys: Keys;
  private readonly state: ClusterState;
  private readonly clock: Clock;
  private readonly log: Logger;
  private watches: WatchHandle[] = [];
  private closed = false;
  private resyncing = false;
  private rev = 0;
  /** Number of full re-lists after a broken watch (exposed for tests and metrics). */
  relists = 0;
  private readonly freedListeners = new Set<() => void>();

  /** Follow server epochs after the initial list (only the `server` conflict scope compares them). */
  private readonly watchEpochs: boolean;

  constructor(opts: { store: ClusterStore; keys: Keys; state: ClusterState; clock: Clock; log: Logger; watchEpochs?: boolean }) {
    this.watchEpochs = opts.watchEpochs ?? true;
    this.store = opts.store;
    this.keys = opts.keys;
    this.state = opts.state;
    this.clock = opts.clock;
    this.log = opts.log;
  }

  get revision(): number {
    return this.rev;
  }

  /** Called whenever an RU becomes available (queued jobs re-check admission). */
  onFreed(cb: () => void): () => void {
    this.freedListeners.add(cb);
    return () => this.freedListeners.delete(cb);
  }

  async start(): Promise<void> {
    await this.listAndWatch();
  }

  async close(): Promise<void> {
    this.closed = true;
    const ws = this.watches;
    this.watches = [];
    await Promise.all(ws.map((w) => w.close()));
  }

  /** Applies a key read elsewhere (commit result, failure-branch reads) if it is newer. */
  applyKv(kv: KeyValue, deleted = false): void {
    const k = this.keys;
    const ru = k.parseRu(kv.key);
    if (ru) {
      const rec = deleted ? undefined : parseJson<RuRecord>(kv);
      const before = this.state.server(ru.server)?.available(ru.index) ?? false;
      this.state.setRu(ru, occupantOf(rec), kv.modRevision, rec?.state === 'down');
      const after = this.state.server(ru.server)?.available(ru.index) ?? false;
      if (!before && after) this.emitFreed();
      return;
    }
    const epoch = k.tail(k.epochs(), kv.key);
    if (epoch !== undefined) {
      this.state.setEpoch(epoch, kv.modRevision);
      return;
    }
    const server = k.tail(k.servers(), kv.key);
    if (server !== undefined) {
      if (deleted) {
        this.state.removeServer(server);
        return;
      }
      const rec = parseJson<ServerRecord>(kv);
      if (!rec) return;
      const spec: ServerSpec = {
        id: rec.id,
        platform: rec.platform,
        rack: rec.rack,
        rus: rec.rus,
        speed: rec.speed,
        attributes: rec.attributes ?? {},
      };
      const s = this.state.upsertServer(spec);
      this.state.setServerDown(s.id, rec.state === 'down');
      this.emitFreed();
    }
  }

  private emitFreed(): void {
    for (const cb of this.freedListeners) cb();
  }

  private async listAndWatch(): Promise<void> {
    const k = this.keys;
    // One transaction of three reads: servers, RUs and epochs at the same revision.
    const res = await this.store.txn({
      compare: [],
      success: [
        { type: 'get', key: k.servers(), prefix: true },
        { type: 'get', key: k.rus(), prefix: true },
        { type: 'get', key: k.epochs(), prefix: true },
      ],
    });
    const [servers, rus, epochs] = res.responses.map((r) => r ?? []) as [KeyValue[], KeyValue[], KeyValue[]];
    this.state.batch(() => {
      const seen = new Set(servers.map((kv) => k.tail(k.servers(), kv.key)));
      for (const id of [...this.state.servers.keys()]) if (!seen.has(id)) this.state.removeServer(id);
      for (const kv of servers) this.applyKv(kv);
      for (const kv of rus) this.applyKv(kv);
      for (const kv of epochs) this.applyKv(kv);
    });
    this.rev = res.revision;
    if (this.closed) return;
    const from = res.revision + 1;
    const onEvents = (batch: WatchBatch): void => {
      this.state.batch(() => {
        for (const ev of batch.events) this.applyKv(ev.kv, ev.type === 'delete');
      });
      if (batch.revision > this.rev) this.rev = batch.revision;
    };
    const onError = (err: TarcilError): void => {
      this.log.warn({ code: err.code, err: err.message }, 'cache watch ended; re-listing');
      void this.resync();
    };
    this.watches = await Promise.all(
      (this.watchEpochs ? [k.servers(), k.rus(), k.epochs()] : [k.servers(), k.rus()]).map((prefix) =>
        this.store.watch({ prefix, fromRevision: from, onEvents, onError }),
      ),
    );
  }

  private async resync(): Promise<void> {
    if (this.closed || this.resyncing) return;
    this.resyncing = true;
    try {
      const old = this.watches;
      this.watches = [];
      await Promise.allSettled(old.map((w) => w.close()));
      let delay = 50;
      for (;;) {
        if (this.closed) return;
        try {
          await this.listAndWatch();
          this.relists++;
          return;
        } catch (err) {
          this.log.warn({ err: (err as Error).message, delay }, 'cache re-list failed; retrying');
          await this.clock.sleep(delay);
          delay = Math.min(delay * 2, 2000);
        }
      }
    } finally {
      this.resyncing = false;
    }
  }
}
