/**
 * The call pacer of every tarcil gRPC server (`paceCalls`): at most `callsPerTurn` new calls are
 * handed to grpc-js per turn of the event loop, and while that many wait no connection but the
 * light ones is read. Why, and the other limits of a connection and a call: connection-limits.ts.
 */
import type * as grpc from '@grpc/grpc-js';
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import type { EventEmitter } from 'node:events';
import { openSync, readSync } from 'node:fs';
import { DEFAULT_CONNECTION_LIMITS, type ConnectionLimits } from './connection-limits.ts';

type StreamArgs = [stream: ServerHttp2Stream, headers: IncomingHttpHeaders, ...rest: unknown[]];
type StreamListener = (...args: StreamArgs) => void;
const ignore = (): void => {};

/** The reading of a connection's socket, stopped and started (libuv's read_stop and read_start). */
interface Reading {
  readStop(): number;
  readStart(): number;
}

/** An HTTP/2 session as the pacer sees it. */
interface Session {
  readonly destroyed: boolean;
  readonly socket?: unknown;
  settings?(settings: { maxConcurrentStreams: number }, cb?: (err: Error | null) => void): void;
  once?(event: 'close', l: () => void): unknown;
}

/**
 * The socket handle under an HTTP/2 session: Node's http2 reads the session's frames from it, so
 * while its reading is stopped no new frame of the connection is read (what the client sends
 * waits in the kernel's buffers and its own, under TCP's flow control). Undefined where there is
 * none to stop.
 */
function readingOf(session: Session): Reading | undefined {
  try {
    const socket = session.socket as { _handle?: unknown } | undefined;
    const handle = socket?._handle as Partial<Reading> | null | undefined;
    return handle && typeof handle.readStop === 'function' && typeof handle.readStart === 'function' ? (handle as Reading) : undefined;
  } catch {
    // A session whose socket is gone (Node throws ERR_HTTP2_SOCKET_UNBOUND) has nothing to read.
    return undefined;
  }
}

/**
 * A connection that has brought at most this many calls in one turn and never had more waiting
 * is light: it is read on while the pacer holds a burst (a health check, a client's unary calls).
 */
const LIGHT_CONNECTION = 4;

/**
 * A turn of the event loop (from one pacer turn to the next, the time its thread ran) longer than
 * this halves the calls handed over per turn; while the recent ones are shorter than half of it,
 * each gives back an eighth of `callsPerTurn`.
 */
export const PACER_TARGET_TURN_MS = 30;

/**
 * Milliseconds the event loop's own thread has run on a core (Linux's schedstat of the main
 * thread: what it waited for a core does not count), or undefined where that cannot be read.
 */
export function loopThreadRunMs(): number | undefined {
  if (schedFd === null) return undefined;
  try {
    schedFd ??= openSync(`/proc/${process.pid}/task/${process.pid}/schedstat`, 'r');
    const n = readSync(schedFd, schedBuf, 0, schedBuf.length, 0);
    const ns = Number(schedBuf.toString('latin1', 0, n).split(' ')[0]);
    return Number.isFinite(ns) ? ns / 1e6 : undefined;
  } catch {
    schedFd = null;
    return undefined;
  }
}
let schedFd: number | null | undefined;
const schedBuf = Buffer.alloc(128);

/** The calls of one turn are handed over for at most this long (the rest wait for the next turn). */
const HANDOVER_MS = PACER_TARGET_TURN_MS / 3;

/** One connection as the pacer sees it: its calls not yet handed over, and what it may send. */
class Connection {
  queue: (StreamArgs | undefined)[] = [];
  head = 0;
  /** Has brought a call (one never seen is not light); brought more than LIGHT_CONNECTION in one turn, or had more waiting. */
  known = false;
  heavy = false;
  /** The pacer's turn in which it last brought a call, and how many it brought in that turn. */
  turn = -1;
  inTurn = 0;
  /** Its calls handed over and not closed. */
  open = 0;
  /** The SETTINGS_MAX_CONCURRENT_STREAMS last sent to it (`limit`); a new value waits for the ACK of the last. */
  settingsInFlight = false;
  /** Its reading, while the pacer has it stopped. */
  stoppedReading: Reading | undefined;

  constructor(
    readonly session: Session,
    public limit: number,
  ) {}

  get size(): number {
    return this.queue.length - this.head;
  }

  get light(): boolean {
    return this.known && !this.heavy;
  }

  /** The next stream still open (the ones reset meanwhile are dropped: nobody had seen them). */
  take(): StreamArgs | undefined {
    while (this.head < this.queue.length) {
      const args = this.queue[this.head]!;
      this.queue[this.head++] = undefined;
      if (this.head === this.queue.length) {
        this.queue = [];
        this.head = 0;
      } else if (this.head >= 1024 && this.head * 2 >= this.queue.length) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      if (!args[0].destroyed && !args[0].closed) return args;
    }
    return undefined;
  }
}

/**
 * Hands an HTTP/2 server's new streams to its 'stream' listeners (grpc-js's) a bounded number per
 * turn of the event loop, and bounds what a connection may send ahead of them.
 *
 * - At most `perTurn` calls are handed over per turn, those handed over at once when they arrive
 *   counted with the ones handed over by the pacer's own turn (a setImmediate); fewer when turns
 *   run long: a turn longer than PACER_TARGET_TURN_MS halves the number; once the last turns
 *   have all been short (under half of it, the longest fading by a quarter a turn) each turn gives
 *   back an eighth of `perTurn` (what a call costs after it is handed over, its request's end, the
 *   handler and its first answer, runs in later callbacks and is known only from the turns'
 *   lengths). A turn hands over for HANDOVER_MS at most.
 * - The others wait, each connection's in their order of arrival, and the connections take
 *   turns (a health check on a connection of its own is not held behind another's thousands).
 * - A connection may have at most `credit` calls beyond those handed over and still open
 *   (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS, raised as its calls are handed over, never above
 *   `maxStreams`): its client holds the others (a gRPC client queues them), so that one read of
 *   a connection (Node reads 64 KiB at a time, some 1,600 calls' frames) brings at most `credit`
 *   new calls to parse.
 * - While `perTurn` or more calls wait, or more than that arrived in this turn, every connection
 *   but the light ones is not read (libuv skips a stopped socket even within the turn in which
 *   it was readable; a connection never seen is not light); once fewer wait they are read again
 *   one per turn, the longest stopped first.
 * A stream reset while it waited is dropped: nobody had seen it.
 */
export class CallPacer {
  private readonly connections = new Map<Session, Connection>();
  /** The connections with calls waiting, in the order they are served. */
  private readonly waiting = new Map<Session, Connection>();
  /** The connections whose reading this stopped, the longest stopped first. */
  private readonly stopped = new Map<Session, Connection>();
  private total = 0;
  /** Calls handed over, and calls arrived, since the pacer's last turn. */
  private used = 0;
  private arrived = 0;
  private turnNo = 0;
  /** Calls handed over per turn now (at most perTurn). */
  private batch: number;
  private armed = false;
  /** Every connection but the light ones was stopped, and enough calls still wait. */
  private holding = false;
  /** When the last turn ran (loopThreadRunMs, or the clock), if it armed the next one. */
  private lastTurnAt: number | undefined;
  private recentTurnMs = 0;
  private readonly minBatch: number;
  private readonly step: number;

  constructor(
    private readonly perTurn: number,
    private readonly deliver: StreamListener,
    /** New calls a connection may send beyond those handed over (0: no limit is set). */
    private readonly credit = 0,
    /** The most streams a connection may have at once (maxConcurrentStreams). */
    private readonly maxStreams = Infinity,
  ) {
    this.batch = perTurn;
    this.minBatch = Math.max(1, Math.ceil(perTurn / 16));
    this.step = Math.max(1, Math.ceil(perTurn / 8));
  }

  /** Streams waiting for a later turn. */
  get queued(): number {
    return this.total;
  }

  /** Connections whose reading is stopped. */
  get stoppedConnections(): number {
    return this.stopped.size;
  }

  /** Calls handed over per turn now. */
  get callsPerTurn(): number {
    return this.batch;
  }

  /** A new connection (the HTTP/2 server's 'session'): it starts at `credit` streams at once. */
  readonly onSession = (session: Session): void => void this.connection(session);

  private connection(session: Session): Connection {
    let c = this.connections.get(session);
    if (c) return c;
    c = new Connection(session, this.credit > 0 ? Math.min(this.credit, this.maxStreams) : this.maxStreams);
    this.connections.set(session, c);
    const conn = c;
    session.once?.('close', () => this.closed(conn));
    return c;
  }

  private closed(c: Connection): void {
    this.connections.delete(c.session);
    this.stopped.delete(c.session);
    if (this.waiting.delete(c.session)) this.total -= c.size;
    c.queue = [];
    c.head = 0;
  }

  readonly onStream = (...args: StreamArgs): void => {
    // grpc-js listens for a stream's errors once it has it; until then one must not end the process.
    args[0].on('error', ignore);
    this.arm();
    const c = this.connection(args[0].session ?? args[0]);
    c.known = true;
    if (c.turn !== this.turnNo) {
      c.turn = this.turnNo;
      c.inTurn = 0;
    }
    if (++c.inTurn > LIGHT_CONNECTION) c.heavy = true;
    this.arrived++;
    if (this.used < this.batch && this.total === 0) {
      this.handOver(c, args);
      return;
    }
    c.queue.push(args);
    if (c.size === 1) this.waiting.set(c.session, c);
    this.total++;
    if (c.size > LIGHT_CONNECTION) c.heavy = true;
    if (this.total < this.batch && this.arrived <= this.batch) return;
    if (!this.holding) {
      this.holding = true;
      for (const o of this.connections.values()) if (!o.light) this.stop(o);
    } else if (!c.light) this.stop(c);
  };

  private handOver(c: Connection, args: StreamArgs): void {
    this.used++;
    if (this.credit > 0) {
      c.open++;
      args[0].once('close', () => c.open--);
      this.raise(c);
    }
    this.deliver(...args);
  }

  /** Lets `c` send more calls once half its credit has been handed over. */
  private raise(c: Connection): void {
    const want = Math.min(this.maxStreams, c.open + this.credit);
    if (c.settingsInFlight || want - c.limit < this.credit / 2 || c.session.destroyed || !c.session.settings) return;
    c.settingsInFlight = true;
    c.limit = want;
    try {
      c.session.settings({ maxConcurrentStreams: want }, () => {
        c.settingsInFlight = false;
        this.raise(c);
      });
    } catch {
      c.settingsInFlight = false; // a session closing meanwhile takes no settings
    }
  }

  private stop(c: Connection): void {
    if (c.stoppedReading || c.session.destroyed) return;
    const r = readingOf(c.session);
    if (r && r.readStop() === 0) {
      c.stoppedReading = r;
      this.stopped.set(c.session, c);
    }
  }

  private arm(): void {
    if (this.armed) return;
    this.armed = true;
    setImmediate(this.turn);
  }

  /** A new turn: each connection's head in turn, up to the turn's budget. */
  private readonly turn = (): void => {
    this.armed = false;
    const now = performance.now();
    // A turn's length is what the loop's thread ran in it, where that can be read: on a machine
    // short of cores, its waits for one would otherwise shrink the number for nothing.
    const ran = loopThreadRunMs() ?? now;
    if (this.lastTurnAt !== undefined) {
      const took = ran - this.lastTurnAt;
      // The longest of the last turns, fading: a call's work often comes a turn after it is handed
      // over (its request's message in a later read), so one short turn says little.
      this.recentTurnMs = Math.max(took, this.recentTurnMs * 0.75);
      if (took > PACER_TARGET_TURN_MS) this.batch = Math.max(this.minBatch, Math.floor(this.batch / 2));
      else if (this.recentTurnMs < PACER_TARGET_TURN_MS / 2) this.batch = Math.min(this.perTurn, this.batch + this.step);
    }
    const until = now + HANDOVER_MS;
    while (this.used < this.batch && this.total > 0) {
      for (const c of this.waiting.values()) {
        if (this.used >= this.batch) break;
        const before = c.size;
        const args = c.take();
        this.total -= before - c.size;
        // The connection goes to the back of the line.
        this.waiting.delete(c.session);
        if (c.size > 0) this.waiting.set(c.session, c);
        if (args) this.handOver(c, args);
      }
      if (performance.now() >= until) break;
    }
    // One connection read again per turn, the longest stopped first: read all at once, each would
    // bring up to a read's worth of calls in the same turn.
    if (this.total < this.batch) {
      for (const c of this.stopped.values()) {
        this.stopped.delete(c.session);
        const r = c.stoppedReading;
        c.stoppedReading = undefined;
        // A connection closed meanwhile has nothing left to read.
        if (c.session.destroyed || !r) continue;
        r.readStart();
        break;
      }
    }
    if (this.total < this.batch) this.holding = false;
    const busy = this.used > 0 || this.total > 0 || this.stopped.size > 0;
    this.used = 0;
    this.arrived = 0;
    this.turnNo++;
    // Armed again while streams wait or connections are stopped, or to measure this turn's length at the next.
    this.lastTurnAt = busy ? ran : undefined;
    if (busy) this.arm();
  };
}

/**
 * Puts a CallPacer (callsPerTurn) in front of the 'stream' listeners of every HTTP/2 server of a
 * bound grpc-js server, before any connection came, and has its connections start at a credit
 * of twice callsPerTurn streams at once. grpc-js does not expose its HTTP/2 servers: the field
 * read has this name in every 1.10+ release, and a test (test/rpc/call-pacer-burst.test.ts) fails if that
 * changes. Returns the pacers (none with callsPerTurn 0).
 */
export function paceCalls(server: grpc.Server, limits: Partial<ConnectionLimits> = {}): CallPacer[] {
  const l = { ...DEFAULT_CONNECTION_LIMITS, ...limits };
  const perTurn = l.callsPerTurn;
  if (perTurn <= 0) return [];
  const servers = (server as unknown as { http2Servers?: Map<EventEmitter, unknown> }).http2Servers;
  if (!(servers instanceof Map)) throw new Error('grpc-js: the server has no http2Servers map; calls cannot be paced');
  const credit = Math.max(2 * LIGHT_CONNECTION, 2 * perTurn);
  const pacers: CallPacer[] = [];
  for (const h of servers.keys()) {
    const listeners = h.listeners('stream') as StreamListener[];
    h.removeAllListeners('stream');
    const pacer = new CallPacer(
      perTurn,
      (...args) => {
        for (const l of listeners) l.apply(h, args);
      },
      credit,
      l.maxConcurrentStreams,
    );
    // New connections start with the credit as their limit of streams at once.
    const h2 = h as EventEmitter & { updateSettings?(s: { maxConcurrentStreams: number }): void };
    h2.updateSettings?.({ maxConcurrentStreams: Math.min(credit, l.maxConcurrentStreams) });
    h.on('session', pacer.onSession);
    h.on('stream', pacer.onStream);
    pacers.push(pacer);
  }
  return pacers;
}
