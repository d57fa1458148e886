/**
 * The cached copy of the cluster state that the agents of one process share: servers, RUs and
 * epochs followed from the store (one list+watch) into a RuIndex.
 */
import type { ServerSpec } from '../model/types.ts';
import type { RuIndex, Occupant, ServerState } from '../sampling/ru-index.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, KeyValue } from '../store/types.ts';
import { Follower } from '../state/follow.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import type { LiveServerRecord } from '../state/live-records.ts';
import { isFreeRuValue, lastJsonOfFreedRu, occupantOf, parseJson } from '../state/records.ts';
import type { RuRecord, RuRef } from '../model/types.ts';

const FREE_RU: RuRecord = { state: 'free' };

/**
 * An RU record's change: its key-value (deleted or not), its record as parsed, the occupant the
 * view held before (null when it knew none, or no longer knows the server), and which RU.
 */
export type RuListener = (kv: KeyValue, deleted: boolean, rec: RuRecord | undefined, prev: Occupant | null, ref: RuRef) => void;

/**
 * The agent's copy of the cluster state: servers, RUs and epochs followed through the store's
 * Follower (listed at one revision, watched from the next, listed again when a watch ends).
 */
export class AgentCache {
  private readonly store: ClusterStore;
  private readonly keys: Keys;
  private readonly state: RuIndex;
  private readonly clock: Clock;
  private readonly log: Logger;
  private follower: Follower | undefined;
  private rev = 0;
  /** Lists of a prefix again after its watch broke, one per prefix listed (exposed for tests). */
  get relists(): number {
    return (this.follower?.relists ?? 0) + (this.follower?.prefixRelists ?? 0);
  }
  private readonly freedListeners = new Set<(server: ServerState, index: number) => void>();
  private readonly ruListeners = new Set<RuListener>();

  /** Follow server epochs after the initial list (only the `server` conflict scope compares them). */
  private readonly watchEpochs: boolean;

  constructor(opts: { store: ClusterStore; keys: Keys; state: RuIndex; clock: Clock; log: Logger; watchEpochs?: boolean }) {
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

  /**
   * Called for every change of an RU record applied (watched, listed again, or written by this
   * process's commits), with the occupant the view held before it: the job owner learns its
   * tasks' outcomes and changes from here (owner/ru-events.ts).
   */
  onRu(cb: RuListener): () => void {
    this.ruListeners.add(cb);
    return () => this.ruListeners.delete(cb);
  }

  /** Called for every RU that becomes available (waiting jobs that can use it wake). */
  onFreed(cb: (server: ServerState, index: number) => void): () => void {
    this.freedListeners.add(cb);
    return () => this.freedListeners.delete(cb);
  }

  async start(): Promise<void> {
    await this.listAndWatch();
  }

  async close(): Promise<void> {
    await this.follower?.close();
  }

  /** Applies a key read elsewhere (commit result, failure-branch reads) if it is newer. */
  applyKv(kv: KeyValue, deleted = false): void {
    const k = this.keys;
    const ru = k.parseRu(kv.key);
    if (ru) {
      // Most RUs of a large cell are free: their one stored value needs no parsing. A freed RU's
      // value may also carry its last task's outcome: the job owner reads it, and the next
      // placement copies its text (PlacedRuRecord.prev).
      const free = !deleted && isFreeRuValue(kv.value);
      const rec = deleted ? undefined : free ? FREE_RU : parseJson<RuRecord>(kv);
      const s = this.state.server(ru.server);
      const prev = this.state.storedOccupant(ru);
      if (s) {
        const before = s.available(ru.index);
        this.state.setRu(ru, occupantOf(rec), kv.modRevision, rec?.state === 'down', free ? lastJsonOfFreedRu(kv.value) : undefined);
        if (!before && s.available(ru.index)) this.emitFreed(s, ru.index);
      }
      for (const cb of this.ruListeners) cb(kv, deleted, rec, prev, ru);
      return;
    }
    const cordon = k.tail(k.cordons(), kv.key);
    if (cordon !== undefined) {
      // An operator's cordon or drain (`tarcil node`): no new placements there until uncordoned.
      const s = this.state.server(cordon);
      const before = s ? Array.from({ length: s.ruCount }, (_, i) => s.available(i)) : [];
      this.state.setCordoned(cordon, !deleted);
      // Uncordoned: its free RUs may be what a waiting job needs.
      if (s && this.freedListeners.size > 0) for (let i = 0; i < s.ruCount; i++) if (!before[i] && s.available(i)) this.emitFreed(s, i);
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
      const rec = parseJson<LiveServerRecord>(kv);
      if (!rec) return;
      const spec: ServerSpec = {
        id: rec.id,
        platform: rec.platform,
        rack: rec.rack,
        rus: rec.rus,
        speed: rec.speed,
        attributes: rec.attributes ?? {},
      };
      const old = this.state.server(spec.id);
      // Which RUs took placements before this record: a server that (re)joins, or whose load
      // monitor lifts its block, frees every RU that takes placements now and did not before.
      const before = old && this.freedListeners.size > 0 ? Array.from({ length: old.ruCount }, (_, i) => old.available(i)) : undefined;
      const s = this.state.upsertServer(spec);
      s.disconnectGraceMs = typeof rec.disconnectGraceMs === 'number' ? rec.disconnectGraceMs : undefined;
      this.state.setServerDown(s.id, rec.state === 'down');
      // A node whose tasks run well below their expected rate takes no new task (paper §5.2).
      this.state.setBlocked(s.id, rec.blocked === true);
      if (this.freedListeners.size > 0) for (let i = 0; i < s.ruCount; i++) if (!before?.[i] && s.available(i)) this.emitFreed(s, i);
    }
  }

  private emitFreed(s: ServerState, index: number): void {
    for (const cb of this.freedListeners) cb(s, index);
  }

  /** Servers listed: those the view holds and the list does not are gone. */
  private listedServers(servers: readonly KeyValue[]): void {
    const k = this.keys;
    const seen = new Set(servers.map((kv) => k.tail(k.servers(), kv.key)));
    for (const id of [...this.state.servers.keys()]) if (!seen.has(id)) this.state.removeServer(id);
  }

  /** Cordons listed: a server the view holds cordoned and the list does not is uncordoned. */
  private listedCordons(cordons: readonly KeyValue[]): void {
    const k = this.keys;
    const cordoned = new Set(cordons.map((kv) => k.tail(k.cordons(), kv.key)));
    for (const id of [...this.state.cordoned()]) if (!cordoned.has(id)) this.state.setCordoned(id, false);
  }

  /** RUs listed alone: one the view holds occupied and the list does not have was deleted. */
  private listedRus(rus: readonly KeyValue[], revision: number): void {
    const listed = new Set(rus.map((kv) => kv.key));
    for (const [id, s] of this.state.servers) {
      for (let index = 0; index < s.ruCount; index++) {
        const key = this.keys.ru({ server: id, index });
        if (!listed.has(key) && this.state.storedOccupant({ server: id, index })) {
          this.applyKv({ key, value: '', createRevision: 0, modRevision: revision, version: 0, lease: '0' }, true);
        }
      }
    }
  }

  /** Servers, RUs and (for the `server` scope) epochs, listed at one revision and watched. */
  private async listAndWatch(): Promise<void> {
    const k = this.keys;
    this.follower = new Follower({
      store: this.store,
      clock: this.clock,
      log: this.log,
      prefix: this.watchEpochs ? [k.servers(), k.rus(), k.cordons(), k.epochs()] : [k.servers(), k.rus(), k.cordons()],
      onSnapshot: (_kvs, revision, [servers = [], rus = [], cordons = [], epochs = []]) => {
        this.state.batch(() => {
          this.listedServers(servers);
          this.listedCordons(cordons);
          for (const kv of cordons) this.applyKv(kv);
          for (const kv of servers) this.applyKv(kv);
          for (const kv of rus) this.applyKv(kv);
          for (const kv of epochs) this.applyKv(kv);
        });
        this.rev = revision;
      },
      // A watch that ended (its start compacted away: a quiet prefix after etcd restarted) lists
      // its own prefix again; the RUs' watch goes on, and the owners miss none of their changes.
      onRelistPrefix: (index, kvs, revision) => {
        this.state.batch(() => {
          if (index === 0) this.listedServers(kvs);
          if (index === 1) this.listedRus(kvs, revision);
          if (index === 2) this.listedCordons(kvs);
          for (const kv of kvs) this.applyKv(kv);
        });
        if (revision > this.rev) this.rev = revision;
      },
      onBatch: (batch) => {
        this.state.batch(() => {
          for (const ev of batch.events) this.applyKv(ev.kv, ev.type === 'delete');
        });
        if (batch.revision > this.rev) this.rev = batch.revision;
      },
    });
    await this.follower.start();
  }
}
