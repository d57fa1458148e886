/**
 * What one gRPC connection and one call may hold of a server, and for how long (every tarcil gRPC
 * server: front-ends and node monitors). grpc-js bounds none of it by default: a connection that
 * stops answering, a request whose message never ends, an answer the client never reads each
 * keep their stream, buffers and timers for as long as the process lives.
 *
 * - A connection carries at most `maxConcurrentStreams` calls at once (HTTP/2
 *   SETTINGS_MAX_CONCURRENT_STREAMS): a gRPC client queues the calls beyond it on its side; a
 *   client that opens more anyway gets those refused (REFUSED_STREAM, UNAVAILABLE to gRPC).
 * - The server pings every connection every `keepaliveTimeMs` and closes one whose answer has not
 *   come `keepaliveTimeoutMs` later: a half-open connection (a peer gone without a FIN) is closed
 *   within their sum.
 * - A connection with no call for `maxConnectionIdleMs` is closed (GOAWAY; clients reconnect).
 *   Connections are not closed by age: WatchJob streams last as long as their job.
 * - A request whose message has not arrived whole `requestTimeoutMs` after its headers is
 *   answered DEADLINE_EXCEEDED and its stream reset.
 * - A call whose answer is complete but still held by the server `unsentTimeoutMs` after it ended
 *   (the client took none of it, say a reader that never opens its HTTP/2 flow-control window)
 *   has its stream reset, which frees what it held.
 * - At most `callsPerTurn` new calls are handed to grpc-js per turn of the event loop; the others
 *   wait, each connection's in order and the connections in turn, and while that many wait the
 *   connections that brought them are not read (CallPacer, `paceCalls`). grpc-js sets a call up
 *   (its objects, the interceptors, the handler, the answer's headers) in the turn its HEADERS
 *   frame is read, and Node reads up to 2 MiB of a connection per turn: 10,000 calls opened at
 *   once (about 1 MB of frames) were set up in one or a few turns, which held the loop for half a
 *   second and more. A call not yet handed over costs its HTTP/2 stream and the frames read for it.
 *
 * A reset that stops a call because its client does not read uses HTTP/2's ENHANCE_YOUR_CALM,
 * which gRPC clients report as RESOURCE_EXHAUSTED (with the client library's own text, e.g.
 * grpc-js's "Bandwidth exhausted or memory limit exceeded"): a status in trailers cannot pass the
 * data the client has not read.
 *
 * Streams that bound their own queue (WatchJob, TaskLogs) reach their HTTP/2 stream through
 * `callTransport` to read what is still unsent and to reset it.
 */
import * as grpc from '@grpc/grpc-js';
import { constants as h2, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { EventEmitter } from 'node:events';
import { TarcilError } from '../util/errors.ts';
import { STREAM_LIMIT_DEFAULTS } from './options.ts';
import { endStreamWithError } from './status.ts';

export interface ConnectionLimits {
  maxConcurrentStreams: number;
  keepaliveTimeMs: number;
  keepaliveTimeoutMs: number;
  maxConnectionIdleMs: number;
  requestTimeoutMs: number;
  unsentTimeoutMs: number;
  /** New calls handed to grpc-js per turn of the event loop (0: every call in the turn it arrives). */
  callsPerTurn: number;
}

const D = STREAM_LIMIT_DEFAULTS;

/** The defaults (frontend/options.ts, where `tarcil server` and `up` read them for their flags). */
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  maxConcurrentStreams: D.maxConcurrentStreams,
  keepaliveTimeMs: D.keepaliveTimeMs,
  keepaliveTimeoutMs: D.keepaliveTimeoutMs,
  maxConnectionIdleMs: D.maxConnectionIdleMs,
  requestTimeoutMs: D.requestTimeoutMs,
  unsentTimeoutMs: D.unsentTimeoutMs,
  callsPerTurn: D.callsPerTurn,
};

/** The HTTP/2 side of one call, for the streams that bound what they queue. */
export interface CallTransport {
  /** The connection the call came on: the same object for every call of that connection. */
  readonly connection: object;
  /** Bytes written to the call's HTTP/2 stream that the client has not taken yet. */
  unsentBytes(): number;
  /**
   * Resets the stream (RST_STREAM) with `code` (ENHANCE_YOUR_CALM by default: the client sees
   * RESOURCE_EXHAUSTED): what the stream holds is freed at once.
   */
  reset(code?: number): void;
}

/** A server stream whose client takes nothing for this long is dropped (WatchJob, TaskLogs). */
export const DEFAULT_SLOW_CONSUMER_MS: number = D.slowConsumerMs;

/** The transport of each call, by its request metadata (the object a handler gets as `call.metadata`). */
const transports = new WeakMap<grpc.Metadata, CallTransport>();

/**
 * The HTTP/2 side of a call of a server made with `grpcServerOptions`, or undefined (a call of
 * another server, a test's stand-in).
 */
export function callTransport(call: { metadata?: grpc.Metadata }): CallTransport | undefined {
  return call.metadata ? transports.get(call.metadata) : undefined;
}

/**
 * Ends a server stream whose client does not take what it is sent. With data still held for it
 * (`unsent`, or bytes its HTTP/2 stream has not sent) the stream is reset (ENHANCE_YOUR_CALM, which
 * frees them; the client sees RESOURCE_EXHAUSTED); otherwise, or without a transport to reset,
 * the stream ends with RESOURCE_EXHAUSTED and `message`.
 */
export function dropUnread(call: { metadata?: grpc.Metadata; emit(event: 'error', err: Error): boolean }, message: string, unsent: boolean): void {
  const t = callTransport(call);
  if (t && (unsent || t.unsentBytes() > 0)) {
    t.reset();
    return;
  }
  endStreamWithError(call, new TarcilError('RESOURCE_EXHAUSTED', message));
}

/**
 * The HTTP/2 stream under grpc-js's innermost call object. grpc-js does not expose it; the field
 * has this name in every 1.10+ release, and a test (slow-readers.test.ts) fails if that changes.
 */
function http2StreamOf(call: grpc.ServerInterceptingCallInterface): ServerHttp2Stream | undefined {
  const s = (call as unknown as { stream?: unknown }).stream;
  if (s === null || typeof s !== 'object') return undefined;
  const st = s as Partial<ServerHttp2Stream>;
  return typeof st.close === 'function' && typeof st.respond === 'function' && 'session' in st ? (s as ServerHttp2Stream) : undefined;
}

function transportOf(stream: ServerHttp2Stream): CallTransport {
  return {
    connection: stream.session ?? stream,
    unsentBytes: () => stream.writableLength,
    reset: (code = h2.NGHTTP2_ENHANCE_YOUR_CALM) => {
      if (!stream.closed && !stream.destroyed) stream.close(code);
    },
  };
}

/** A call that has not received its whole request in time: answered, and its stream reset. */
function requestTimedOut(c: CallLimits): void {
  c.requestTimer = undefined;
  c.next.sendStatus({ code: grpc.status.DEADLINE_EXCEEDED, details: `the request did not arrive whole within ${c.limits.requestTimeoutMs} ms of its headers (requestTimeoutMs)`, metadata: null });
  // The client may still be sending: the answer is complete, the rest of the request is not wanted.
  setImmediate(() => c.transport?.reset(h2.NGHTTP2_NO_ERROR));
}

/** The per-call limits (requestTimeoutMs, unsentTimeoutMs) of one call, and its transport. */
class CallLimits {
  requestTimer: NodeJS.Timeout | undefined;
  private unsentArmed = false;
  readonly transport: CallTransport | undefined;

  constructor(
    readonly limits: ConnectionLimits,
    readonly next: grpc.ServerInterceptingCallInterface,
    readonly unary: boolean,
    private readonly stream: ServerHttp2Stream | undefined,
  ) {
    this.transport = stream ? transportOf(stream) : undefined;
  }

  clearRequestTimer(): void {
    if (this.requestTimer !== undefined) clearTimeout(this.requestTimer);
    this.requestTimer = undefined;
  }

  /** The answer is complete: a client that has not taken it whole this long after loses it. */
  armUnsent(): void {
    const stream = this.stream;
    if (!stream || stream.closed || this.unsentArmed || this.limits.unsentTimeoutMs <= 0) return;
    this.unsentArmed = true;
    const transport = this.transport;
    const t = setTimeout(() => transport?.reset(), this.limits.unsentTimeoutMs);
    t.unref();
    stream.once('close', () => clearTimeout(t));
  }
}

/**
 * The interceptor that applies the per-call limits and records each call's transport. It must
 * come first: it reads the HTTP/2 stream from the call grpc-js makes, which only the first
 * interceptor receives.
 */
function callLimits(l: ConnectionLimits): grpc.ServerInterceptor {
  return (method, call) => {
    const c = new CallLimits(l, call, !method.responseStream, http2StreamOf(call));
    if (!method.requestStream && l.requestTimeoutMs > 0) {
      c.requestTimer = setTimeout(requestTimedOut, l.requestTimeoutMs, c);
      c.requestTimer.unref();
    }
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, nextMd) => {
            if (c.transport) transports.set(metadata, c.transport);
            nextMd(metadata);
          },
          onReceiveHalfClose: (nextHc) => {
            c.clearRequestTimer();
            nextHc();
          },
          onCancel: () => c.clearRequestTimer(),
        }),
      sendMessage: (message, next) => {
        next(message);
        // A unary answer is complete with its message (grpc-js sends the status once the client took it).
        if (c.unary) c.armUnsent();
      },
      sendStatus: (status, next) => {
        c.clearRequestTimer();
        next(status);
        c.armUnsent();
      },
    });
  };
}

/** The options of `new grpc.Server(...)` for these limits. */
export function grpcServerOptions(limits: Partial<ConnectionLimits> = {}, base: grpc.ServerOptions = {}): grpc.ServerOptions {
  const l = { ...DEFAULT_CONNECTION_LIMITS, ...limits };
  return {
    ...base,
    'grpc.max_concurrent_streams': l.maxConcurrentStreams,
    'grpc.keepalive_time_ms': l.keepaliveTimeMs,
    'grpc.keepalive_timeout_ms': l.keepaliveTimeoutMs,
    'grpc.max_connection_idle_ms': l.maxConnectionIdleMs,
    // Channelz (grpc-js's per-call and per-connection counters) is not served by tarcil: off, it
    // costs nothing per call.
    'grpc.enable_channelz': 0,
    interceptors: [callLimits(l), ...(base.interceptors ?? [])],
  };
}

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
 * A connection with at most this many calls waiting is read on while others are stopped: one that
 * sends a call at a time (a health check, a client's unary calls) is not held up by another's burst.
 */
const LIGHT_CONNECTION = 4;

/** The streams of one connection not yet handed over, in their order of arrival. */
class Waiting {
  queue: (StreamArgs | undefined)[] = [];
  head = 0;

  get size(): number {
    return this.queue.length - this.head;
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
 * Hands an HTTP/2 server's new streams to its 'stream' listeners (grpc-js's) at most `perTurn` per
 * turn of the event loop. The others wait, each connection's in their order of arrival, and the
 * connections take turns (a health check on a connection of its own is not held behind another's
 * thousands of calls). While `perTurn` or more wait, the connections that have more than a few
 * streams waiting are not read (libuv skips a stopped socket even within the turn in which it was
 * readable); once fewer than `perTurn` wait they are read again one per turn. Once a burst's
 * connections are stopped, a turn costs the calls handed over and about one read of one of them
 * (up to 64 KiB of frames, hundreds of calls), besides what connections with few calls bring: a
 * connection with few or none waiting is still read. A stream reset while it waited is dropped:
 * nobody had seen it.
 */
export class CallPacer {
  private readonly waiting = new Map<Session, Waiting>();
  /** The connections whose reading this stopped. */
  private readonly stopped = new Map<Session, Reading>();
  private total = 0;
  /** Streams handed over since the last turn began. */
  private used = 0;
  private armed = false;

  constructor(
    private readonly perTurn: number,
    private readonly deliver: StreamListener,
  ) {}

  /** Streams waiting for a later turn. */
  get queued(): number {
    return this.total;
  }

  /** Connections whose reading is stopped. */
  get stoppedConnections(): number {
    return this.stopped.size;
  }

  readonly onStream = (...args: StreamArgs): void => {
    // grpc-js listens for a stream's errors once it has it; until then one must not end the process.
    args[0].on('error', ignore);
    this.arm();
    if (this.used < this.perTurn && this.total === 0) {
      this.used++;
      this.deliver(...args);
      return;
    }
    const session = (args[0].session ?? args[0]) as unknown as Session;
    let w = this.waiting.get(session);
    if (!w) this.waiting.set(session, (w = new Waiting()));
    w.queue.push(args);
    this.total++;
    if (this.total < this.perTurn) return;
    if (this.total === this.perTurn) {
      for (const [s, sw] of this.waiting) if (sw.size > LIGHT_CONNECTION) this.stop(s);
    } else if (w.size > LIGHT_CONNECTION) this.stop(session);
  };

  private stop(session: Session): void {
    if (this.stopped.has(session) || session.destroyed) return;
    const r = readingOf(session);
    if (r && r.readStop() === 0) this.stopped.set(session, r);
  }

  private arm(): void {
    if (this.armed) return;
    this.armed = true;
    setImmediate(this.turn);
  }

  /** A new turn: each connection's head in turn, up to the turn's budget. */
  private readonly turn = (): void => {
    this.armed = false;
    this.used = 0;
    while (this.used < this.perTurn && this.total > 0) {
      for (const [session, w] of this.waiting) {
        if (this.used >= this.perTurn) break;
        const before = w.size;
        const args = w.take();
        this.total -= before - w.size;
        // The connection goes to the back of the line.
        this.waiting.delete(session);
        if (w.size > 0) this.waiting.set(session, w);
        if (args) {
          this.used++;
          this.deliver(...args);
        }
      }
    }
    // One connection read again per turn, the longest stopped first: read all at once, each would
    // bring up to a read's worth of calls (64 KiB, hundreds) in the same turn.
    if (this.total < this.perTurn) {
      for (const [session, r] of this.stopped) {
        this.stopped.delete(session);
        // A connection closed meanwhile has nothing left to read.
        if (session.destroyed) continue;
        r.readStart();
        break;
      }
    }
    // Armed again while streams wait or connections are stopped, or to reset this turn's count at the next.
    if (this.used > 0 || this.total > 0 || this.stopped.size > 0) this.arm();
  };
}

/**
 * Puts a CallPacer (callsPerTurn) in front of the 'stream' listeners of every HTTP/2 server of a
 * bound grpc-js server, before any connection came. grpc-js does not expose its HTTP/2 servers:
 * the field read has this name in every 1.10+ release, and a test (job-watch-burst.test.ts) fails if
 * that changes. Returns the pacers (none with callsPerTurn 0).
 */
export function paceCalls(server: grpc.Server, limits: Partial<ConnectionLimits> = {}): CallPacer[] {
  const perTurn = limits.callsPerTurn ?? DEFAULT_CONNECTION_LIMITS.callsPerTurn;
  if (perTurn <= 0) return [];
  const servers = (server as unknown as { http2Servers?: Map<EventEmitter, unknown> }).http2Servers;
  if (!(servers instanceof Map)) throw new Error('grpc-js: the server has no http2Servers map; calls cannot be paced');
  const pacers: CallPacer[] = [];
  for (const h of servers.keys()) {
    const listeners = h.listeners('stream') as StreamListener[];
    h.removeAllListeners('stream');
    const pacer = new CallPacer(perTurn, (...args) => {
      for (const l of listeners) l.apply(h, args);
    });
    h.on('stream', pacer.onStream);
    pacers.push(pacer);
  }
  return pacers;
}
