/**
 * One watch over etcd3's Watcher, with the EtcdStore's reconnect and cancel rules.
 */
import { Etcd3, Range, type IWatchResponse, type Watcher } from 'etcd3';
import { TarcilError } from '../util/errors.ts';
import type { WatchBatch, WatchEvent, WatchHandle, WatchOptions } from './types.ts';
import { fromKv, log, prefixRange, WATCH_CANCEL_WAIT_MS } from './etcd-convert.ts';

/** One watch over etcd3's Watcher; see the EtcdStore comment for the reconnect and cancel rules. */
export class EtcdWatch {
  private watcher: Watcher | undefined;
  /** Next revision to deliver; 0 until known when the watch started from "now". */
  private next: number;
  private ended = false;
  /** etcd3 has forgotten the watcher (cancelled by etcd): cancelling it again would hang. */
  private detached = false;
  private onFirst: (() => void) | undefined;

  constructor(
    private readonly client: Etcd3,
    private readonly opts: WatchOptions,
    private readonly forget: () => void,
    /** Told how many events each response from etcd brought (EtcdStore.countWatchEvents). */
    private readonly delivered?: (n: number) => void,
  ) {
    this.next = opts.fromRevision > 0 ? Math.floor(opts.fromRevision) : 0;
  }

  handle(): WatchHandle {
    return { close: () => this.close() };
  }

  /** Registers the watch; resolves once etcd has created it (or already cancelled it). */
  start(timeoutMs: number): Promise<void> {
    const [key, end] = prefixRange(this.opts.prefix);
    const builder = this.client.watch().inRange(new Range(key, end));
    if (this.next > 0) builder.startRevision(String(this.next));
    // watcher() rather than create(): every listener is attached before any event can fire, so
    // an 'error' arriving right after 'connected' is never emitted without a listener.
    const watcher = builder.watcher();
    this.watcher = watcher;
    watcher.on('connected', (res: IWatchResponse) => {
      if (this.next === 0) this.next = Number(res.header.revision) + 1;
      this.onFirst?.();
    });
    watcher.on('data', (res: IWatchResponse) => this.onData(res));
    watcher.on('disconnected', () => {
      if (!this.ended && this.next > 0) watcher.request.start_revision = String(this.next);
    });
    watcher.on('error', (err: Error) => {
      this.detached = true;
      this.onFirst?.();
      this.onCancelled(err);
    });
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.onFirst = undefined;
        void this.close();
        // A bounded wait that ran out (etcd paused, or too busy to answer): safe to retry.
        reject(new TarcilError('DEADLINE_EXCEEDED', `etcd did not register the watch on ${this.opts.prefix} within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      this.onFirst = () => {
        this.onFirst = undefined;
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /** Reports an error on a later tick, for a watch refused before it reached etcd. */
  failSoon(err: TarcilError): void {
    this.detached = true;
    setImmediate(() => this.finish(err));
  }

  async close(): Promise<void> {
    this.ended = true;
    this.forget();
    const watcher = this.watcher;
    if (!watcher || this.detached) return;
    this.detached = true;
    let timer: NodeJS.Timeout | undefined;
    const giveUp = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, WATCH_CANCEL_WAIT_MS);
      timer.unref();
    });
    try {
      await Promise.race([watcher.cancel(), giveUp]);
    } catch (err) {
      log.debug({ err, prefix: this.opts.prefix }, 'watch cancel failed');
    } finally {
      clearTimeout(timer);
    }
  }

  private onData(res: IWatchResponse): void {
    if (this.ended) return;
    this.delivered?.(res.events.length);
    const batches: WatchBatch[] = [];
    for (const ev of res.events) {
      const rev = Number(ev.kv.mod_revision);
      // After a resume etcd may send again what was delivered before the disconnect.
      if (rev < this.next) continue;
      const event: WatchEvent =
        ev.type === 'Delete'
          ? { type: 'delete', kv: { key: ev.kv.key.toString(), value: '', createRevision: 0, modRevision: rev, version: 0, lease: '0' } }
          : { type: 'put', kv: fromKv(ev.kv) };
      const last = batches[batches.length - 1];
      if (last && last.revision === rev) last.events.push(event);
      else batches.push({ revision: rev, events: [event] });
    }
    for (const batch of batches) {
      if (this.ended) return;
      this.next = batch.revision + 1;
      try {
        this.opts.onEvents(batch);
      } catch (err) {
        log.error({ err, revision: batch.revision, prefix: this.opts.prefix }, 'watch callback threw');
      }
    }
  }

  private onCancelled(err: Error): void {
    const reason = err.message.replace(/^.*?Watcher canceled:\s*/s, '').trim();
    const compacted = reason === '' || /compact/i.test(reason);
    this.finish(
      new TarcilError(
        compacted ? 'COMPACTED' : 'CANCELLED',
        compacted
          ? `watch on ${this.opts.prefix} from revision ${this.next}: that history is compacted`
          : `etcd cancelled the watch on ${this.opts.prefix}: ${reason}`,
        { cause: err, details: { nextRevision: this.next } },
      ),
    );
  }

  private finish(err: TarcilError): void {
    if (this.ended) return;
    this.ended = true;
    this.forget();
    try {
      this.opts.onError(err);
    } catch (e) {
      log.error({ err: e, prefix: this.opts.prefix }, 'watch error callback threw');
    }
  }
}

/** Watch prefixes counted apart (a hollow process watches one per node); later ones are counted together. */
const MAX_COUNTED_PREFIXES = 20_000;

/** Events etcd delivered to a process's watches, by each watch's prefix (ClusterStore.countWatchEvents). */
export class WatchEventCounts {
  private readonly byPrefix = new Map<string, number>();
  private other = 0;

  /** What a new watch of `prefix` calls with the number of events of each response. */
  counter(prefix: string): (n: number) => void {
    if (!this.byPrefix.has(prefix) && this.byPrefix.size >= MAX_COUNTED_PREFIXES) {
      return (n) => {
        this.other += n;
      };
    }
    if (!this.byPrefix.has(prefix)) this.byPrefix.set(prefix, 0);
    return (n) => this.byPrefix.set(prefix, (this.byPrefix.get(prefix) ?? 0) + n);
  }

  /** The counts summed by `label(prefix)`; those past MAX_COUNTED_PREFIXES as `other`. */
  byLabel(label: (prefix: string) => string): Map<string, number> {
    const out = new Map<string, number>();
    for (const [prefix, n] of this.byPrefix) {
      const l = label(prefix);
      out.set(l, (out.get(l) ?? 0) + n);
    }
    if (this.other > 0) out.set('other', (out.get('other') ?? 0) + this.other);
    return out;
  }
}
