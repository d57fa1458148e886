/**
 * A guard on the etcd3 package's watch stream. etcd3 carries every watch of a client on one gRPC
 * stream (its WatchManager), and that stream can stop delivering without any error, which would
 * leave every Follower on it answering from stale state:
 *
 * 1. A response for a watch id etcd3 no longer tracks makes it throw inside the stream's data
 *    handler; gRPC then delivers nothing more on the stream, for any watch, and reports nothing.
 *    etcd sends such responses in ordinary operation: when it cancels a lagging watch because its
 *    history was compacted while the client is cancelling the same watch, it answers both; and a
 *    progress notification carries the id -1. The guard drops them (a create answer with no watch
 *    waiting for it is cancelled at etcd).
 * 2. Any other stall: while watches are open the guard asks etcd for a progress notification every
 *    `probeMs`; when nothing at all has arrived on the stream for `stallMs` after a probe, it tears
 *    the stream down the way a broken connection does. etcd3 then opens a new one and re-creates
 *    every watch from the next revision it has not delivered (EtcdWatch keeps that revision), so
 *    nothing is skipped or repeated.
 */
import type { Etcd3 } from 'etcd3';
import { log } from './etcd-convert.ts';

/** etcd3 1.x WatchManager states. */
const CONNECTED = 2;
/** The watch id etcd puts on a progress notification that answers a progress request. */
const PROGRESS_ID = '-1';

interface WatchResponseLike {
  watch_id: string;
  created?: boolean;
  canceled?: boolean;
}

/** What the guard uses of etcd3's (internal) WatchManager. */
interface WatchManagerLike {
  state: number;
  watchers: Array<{ id: string | null }>;
  stream?: { write(req: unknown): boolean };
  queue?: { queue: unknown[] };
  handleResponse(res: WatchResponseLike): void;
  handleCreatedResponse(res: WatchResponseLike): void;
  handleError(err: Error): void;
}

export interface WatchGuardOptions {
  /** How often a progress notification is asked for while watches are open. 0: never (drop only). */
  probeMs: number;
  /** Silence on the stream after a probe that counts as a stall. */
  stallMs: number;
  /** Names the stream in logs. */
  name: string;
}

export const DEFAULT_WATCH_PROBE_MS = 5000;
export const DEFAULT_WATCH_STALL_MS = 15_000;

/** Reaches the WatchManager of an etcd3 client or namespace, checking the shape the guard relies on. */
function managerOf(client: Etcd3): WatchManagerLike {
  const m = (client as unknown as { watchManager?: WatchManagerLike }).watchManager;
  if (
    !m ||
    typeof m.handleResponse !== 'function' ||
    typeof m.handleCreatedResponse !== 'function' ||
    typeof m.handleError !== 'function' ||
    !Array.isArray(m.watchers)
  ) {
    throw new Error(
      'the etcd3 package no longer has the WatchManager this store guards (handleResponse, handleCreatedResponse, handleError, watchers): check src/store/etcd-watch-guard.ts against its version',
    );
  }
  return m;
}

export class WatchStreamGuard {
  private readonly m: WatchManagerLike;
  private timer: NodeJS.Timeout | undefined;
  private lastHeard = Date.now();
  private probeSentAt: number | undefined;
  private probedStream: unknown;
  /** What the guard did: responses dropped, stalls it ended, probes it sent. */
  readonly stats = { dropped: 0, progress: 0, stalls: 0, probes: 0 };

  constructor(
    client: Etcd3,
    private readonly o: WatchGuardOptions,
  ) {
    const m = managerOf(client);
    this.m = m;
    const handleResponse = m.handleResponse.bind(m);
    const handleCreated = m.handleCreatedResponse.bind(m);
    m.handleResponse = (res) => {
      this.lastHeard = Date.now();
      const id = String(res.watch_id);
      if (id === PROGRESS_ID) {
        this.stats.progress++;
        return;
      }
      if (!m.watchers.some((w) => w.id !== null && String(w.id) === id)) {
        this.stats.dropped++;
        log.debug({ stream: o.name, watchId: id, canceled: res.canceled === true }, 'dropped a watch response for a watch no longer tracked');
        return;
      }
      handleResponse(res);
    };
    m.handleCreatedResponse = (res) => {
      this.lastHeard = Date.now();
      if (!res.canceled && (m.queue?.queue.length ?? 0) === 0) {
        // A watch created with nobody waiting for it: cancel it rather than leave it at etcd.
        this.stats.dropped++;
        log.debug({ stream: o.name, watchId: String(res.watch_id) }, 'cancelled a watch created with no watcher waiting for it');
        m.stream?.write({ cancel_request: { watch_id: res.watch_id } });
        return;
      }
      if (res.canceled && !m.watchers.some((w) => w.id === null)) {
        this.stats.dropped++;
        return;
      }
      handleCreated(res);
    };
    if (o.probeMs > 0) {
      this.timer = setInterval(() => this.tick(), o.probeMs);
      this.timer.unref();
    }
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One watchdog turn: probe, or end a stream that has not answered the last probe in time. */
  tick(): void {
    const m = this.m;
    if (m.state !== CONNECTED || m.watchers.length === 0 || !m.stream) {
      this.probeSentAt = undefined;
      return;
    }
    const now = Date.now();
    if (m.stream !== this.probedStream) {
      // A new stream since the last probe: start over.
      this.probedStream = m.stream;
      this.probeSentAt = undefined;
    }
    if (this.probeSentAt !== undefined && this.lastHeard < this.probeSentAt) {
      if (now - this.probeSentAt < this.o.stallMs) return;
      this.stats.stalls++;
      this.probeSentAt = undefined;
      log.warn(
        { stream: this.o.name, silentMs: now - this.lastHeard, watches: m.watchers.length },
        'etcd watch stream stalled: nothing arrived after a progress request; reconnecting and resuming every watch',
      );
      m.handleError(new Error(`the etcd watch stream answered nothing for ${now - this.lastHeard} ms`));
      return;
    }
    this.probeSentAt = now;
    this.stats.probes++;
    m.stream.write({ progress_request: {} });
  }
}
