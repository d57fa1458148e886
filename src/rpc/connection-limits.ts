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
 * - At most `callsPerTurn` new calls are handed to grpc-js per turn of the event loop, fewer
 *   while turns run longer than PACER_TARGET_TURN_MS; the others wait, each connection's in
 *   order and the connections in turn, and while that many wait no connection but the light ones
 *   (a few calls at a time) is read (CallPacer, `paceCalls`). A connection may send at most twice
 *   `callsPerTurn` calls beyond those handed over and still open (its SETTINGS_MAX_CONCURRENT_STREAMS,
 *   raised as its calls are handed over, up to `maxConcurrentStreams`); its client holds the
 *   others. grpc-js sets a call up (its objects, the interceptors, the handler, the answer's
 *   headers) in the turn its HEADERS frame is read, and Node reads 64 KiB of a connection at a
 *   time (some 1,600 calls' frames), up to 2 MiB per turn: 10,000 calls opened at once (about
 *   1 MB of frames) were set up in one or a few turns, which held the loop for half a second and
 *   more, and a single read of a connection held back cost 50 ms or more of parsing alone. A call
 *   not yet handed over costs its HTTP/2 stream and the frames read for it.
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
import { constants as h2, type ServerHttp2Stream } from 'node:http2';
import { TarcilError } from '../util/errors.ts';
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

/**
 * The defaults. `tarcil server` and `up` take them from here for their flags, with the WatchJob
 * streams' (frontend/options.ts STREAM_LIMIT_DEFAULTS).
 */
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  /** Calls one connection carries at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: 2000,
  keepaliveTimeMs: 30_000,
  keepaliveTimeoutMs: 20_000,
  maxConnectionIdleMs: 60_000,
  requestTimeoutMs: 10_000,
  unsentTimeoutMs: 30_000,
  /** New calls handed to grpc-js per turn of the event loop (0: all in the turn they arrive). */
  callsPerTurn: 100,
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
export const DEFAULT_SLOW_CONSUMER_MS: number = 30_000;

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
  c.next.sendStatus({
    code: grpc.status.DEADLINE_EXCEEDED,
    details: `the request did not arrive whole within ${c.limits.requestTimeoutMs} ms of its headers (requestTimeoutMs)`,
    metadata: null,
  });
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
