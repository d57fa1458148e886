/**
 * What a client that does not read, does not finish its request or stops answering can hold of a
 * front-end: every such stream and connection ends after a bound (connection-limits.ts,
 * job-watch.ts), and WatchJob streams are counted against their limits. The limits are small here
 * so that the bounds pass quickly; each test waits for the behaviour with a generous deadline,
 * never for a time.
 */
import * as grpc from '@grpc/grpc-js';
import { EventEmitter } from 'node:events';
import http2 from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import type { JobManager } from '../../src/owner/manager.ts';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import { dropUnread, type ConnectionLimits } from '../../src/rpc/connection-limits.ts';
import type { JobEvent__Output } from '../../src/rpc/gen/tarcil/v1/JobEvent.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startGrpcServer, type GrpcServerHandle } from '../../src/rpc/grpc.ts';
import type { JobWatchLimits } from '../../src/frontend/job-watch.ts';
import { taskLogs, type NodeServiceDeps } from '../../src/frontend/node-service.ts';
import { loadProtos } from '../../src/rpc/proto.ts';
import { protoRoot } from '../../src/rpc/proto-root.ts';
import { SchedulerService } from '../../src/frontend/scheduler-service.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveJobRecord } from '../../src/state/live-records.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { tcpProxy, type TcpProxy } from '../support/proxy.ts';

const TASKS = 3000;

/** Resolves once `check` holds, polling; rejects after a deadline far beyond the bounds tested. */
async function eventually(check: () => boolean, what: string, deadlineMs = 15_000): Promise<void> {
  const t0 = Date.now();
  while (!check()) {
    if (Date.now() - t0 > deadlineMs) throw new Error(`${what}: not within ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** A Scheduler front-end on a MemoryStore holding job `big` (TASKS task records, running) and `small` (one). */
async function frontEnd(
  watchLimits: Partial<JobWatchLimits>,
  limits: Partial<ConnectionLimits> = {},
): Promise<{ port: number; store: MemoryStore; keys: Keys }> {
  const store = new MemoryStore({ maxTxnOps: 1000 });
  const keys = new Keys('/s/');
  for (const [id, n] of [
    ['big', TASKS],
    ['small', 1],
  ] as const) {
    const spec = { ...makeJob(id, TEST_PROFILES[0]!, n), id };
    await store.put(keys.job(id), JSON.stringify({ spec, state: 'running', placed: n, updatedAt: 0, submittedAt: 0 } satisfies LiveJobRecord));
    for (let i = 0; i < n; i += 1000) {
      const ops = [];
      for (let j = i; j < Math.min(n, i + 1000); j++) {
        ops.push({
          type: 'put' as const,
          key: keys.task(id, j),
          value: JSON.stringify({ job: id, index: j, state: 'running', attempt: 0, server: `server-${j % 50}`, message: 'x'.repeat(40) }),
        });
      }
      await store.txn({ compare: [], success: ops });
    }
  }
  const manager = { inflightDecision: () => undefined } as unknown as JobManager;
  const service = new SchedulerService({
    manager,
    store,
    keys,
    catalog: loadCatalog(),
    clock: new SystemClock(),
    log: createLogger('test', 'silent'),
    watchLimits,
  });
  const server = await startGrpcServer({
    host: '127.0.0.1',
    port: 0,
    limits,
    register: (s) => {
      s.addService(loadProtos().proto.tarcil.v1.Scheduler.service, service.handlers());
      return ['tarcil.v1.Scheduler'];
    },
  });
  cleanup.push(async () => {
    await server.close(100);
    await store.close();
  });
  return { port: server.port, store, keys };
}

/** WatchJob's request as a gRPC message on the wire: flag, length, protobuf. */
function grpcFrame(type: string, value: object): Buffer {
  const t = protoRoot().lookupType(type);
  const body = t.encode(t.fromObject(value)).finish();
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  Buffer.from(body).copy(frame, 5);
  return frame;
}

interface RawCall {
  session: http2.ClientHttp2Session;
  req: http2.ClientHttp2Stream;
  closed: boolean;
  rstCode: number | undefined;
  grpcStatus: string | undefined;
}

/** A raw HTTP/2 call of `path`: with window0, the client never opens its flow-control window. */
function rawCall(port: number, path: string, body: Buffer, o: { window0?: boolean; end?: boolean } = {}): RawCall {
  const session = http2.connect(`http://127.0.0.1:${port}`, o.window0 ? { settings: { initialWindowSize: 0 } } : {});
  session.on('error', () => undefined);
  const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' }, { endStream: false });
  const r: RawCall = { session, req, closed: false, rstCode: undefined, grpcStatus: undefined };
  req.on('error', () => undefined);
  req.on('response', (h) => {
    if (h['grpc-status'] !== undefined) r.grpcStatus = String(h['grpc-status']);
  });
  req.on('trailers', (t: http2.IncomingHttpHeaders) => (r.grpcStatus = String(t['grpc-status'])));
  req.on('close', () => {
    r.closed = true;
    r.rstCode = req.rstCode;
  });
  if (o.end === false) req.write(body);
  else req.end(body);
  cleanup.push(() => void session.destroy());
  return r;
}

function watch(
  c: SchedulerClient,
  jobId: string,
): { events: JobEvent__Output[]; error: grpc.ServiceError | undefined; ended: boolean; call: grpc.ClientReadableStream<JobEvent__Output> } {
  const call = c.WatchJob({ jobId });
  const w = { events: [] as JobEvent__Output[], error: undefined as grpc.ServiceError | undefined, ended: false, call };
  call.on('data', (e: JobEvent__Output) => w.events.push(e));
  call.on('error', (e: grpc.ServiceError) => (w.error = e));
  call.on('end', () => (w.ended = true));
  cleanup.push(() => call.cancel());
  return w;
}

function client(port: number): SchedulerClient {
  const c = schedulerClient(`127.0.0.1:${port}`);
  cleanup.push(() => c.close());
  return c;
}

/** A client on a connection of its own (grpc-js shares one among equal channels otherwise). */
function ownConnection(port: number): SchedulerClient {
  const Ctor = grpc.makeClientConstructor(loadProtos().proto.tarcil.v1.Scheduler.service, 'Scheduler');
  const c = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }) as unknown as SchedulerClient;
  cleanup.push(() => c.close());
  return c;
}

describe('slow readers of WatchJob', () => {
  it('a reader that never opens its flow-control window is reset with ENHANCE_YOUR_CALM (RESOURCE_EXHAUSTED) once it has taken nothing for slowConsumerMs', async () => {
    const { port } = await frontEnd({ slowConsumerMs: 300, streamQueueBytes: 16 * 1024 });
    const streams = Array.from({ length: 3 }, () =>
      rawCall(port, '/tarcil.v1.Scheduler/WatchJob', grpcFrame('tarcil.v1.WatchJobRequest', { jobId: 'big' }), { window0: true }),
    );
    await eventually(() => streams.every((s) => s.closed), 'the window-0 streams ended');
    for (const s of streams) expect(s.rstCode).toBe(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    // The front-end goes on serving watchers that read.
    const w = watch(client(port), 'big');
    await eventually(() => w.events.some((e) => !e.more), 'a reader got the job');
    expect(w.events.flatMap((e) => e.tasks.map((t) => t.index))).toEqual(Array.from({ length: TASKS }, (_, i) => i));
  });

  it('a reader that never reads a job that ends is reset all the same (its status could not pass the unread data)', async () => {
    const { port, store, keys } = await frontEnd({ slowConsumerMs: 1000 });
    const r = rawCall(port, '/tarcil.v1.Scheduler/WatchJob', grpcFrame('tarcil.v1.WatchJobRequest', { jobId: 'small' }), { window0: true });
    let answered = false;
    r.req.on('response', () => (answered = true));
    // The headers come with the first event (they are not flow-controlled; the event is).
    await eventually(() => answered, 'the first event was written');
    const spec = { ...makeJob('small', TEST_PROFILES[0]!, 1), id: 'small' };
    await store.put(keys.job('small'), JSON.stringify({ spec, state: 'succeeded', placed: 1, updatedAt: 0, submittedAt: 0 } satisfies LiveJobRecord));
    await eventually(() => r.closed, 'the ended stream was reset');
    expect(r.rstCode).toBe(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
  });

  it('a reader that takes the first events and then stops reading is reset too', async () => {
    const { port, store, keys } = await frontEnd({ slowConsumerMs: 300, streamQueueBytes: 16 * 1024 });
    const r = rawCall(port, '/tarcil.v1.Scheduler/WatchJob', grpcFrame('tarcil.v1.WatchJobRequest', { jobId: 'big' }));
    let got = 0;
    r.req.on('data', (b: Buffer) => {
      got += b.length;
      // Enough to hold the snapshot's first event; then the client reads nothing more.
      if (got > 1000) r.req.pause();
    });
    // The job keeps changing, an event at a time, far more than HTTP/2 lets through unread (64 KiB).
    for (let i = 0; i < 100 && !r.closed; i++) {
      await store.put(keys.task('big', i), JSON.stringify({ job: 'big', index: i, state: 'succeeded', attempt: 0, message: 'y'.repeat(20_000) }));
      await new Promise((res) => setTimeout(res, 10));
    }
    await eventually(() => r.closed, 'the stalled reader was reset');
    expect(r.rstCode).toBe(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    expect(got).toBeGreaterThan(0);
  });

  it('the watch caps refuse one stream more with RESOURCE_EXHAUSTED naming the limit: per job, per connection and per front-end', async () => {
    const { port } = await frontEnd({ maxWatchesPerJob: 3, maxWatchesPerConnection: 4, maxWatches: 6 });
    const a = ownConnection(port);
    const onJob = [watch(a, 'small'), watch(a, 'small'), watch(a, 'small')];
    await eventually(() => onJob.every((w) => w.events.length > 0), 'three watches of small');
    const fourth = watch(a, 'small');
    await eventually(() => fourth.error !== undefined, 'the fourth watch of one job refused');
    expect(fourth.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(fourth.error?.details).toMatch(/maxWatchesPerJob 3/);
    // Another job on the same connection: the connection's fourth.
    const other = watch(a, 'big');
    await eventually(() => other.events.length > 0, 'a watch of big');
    const fifth = watch(a, 'big');
    await eventually(() => fifth.error !== undefined, 'the connection fifth refused');
    expect(fifth.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(fifth.error?.details).toMatch(/maxWatchesPerConnection 4/);
    // Another connection may, up to the front-end's limit.
    const b = ownConnection(port);
    const more = [watch(b, 'big'), watch(b, 'big')];
    await eventually(() => more.every((w) => w.events.length > 0), 'two watches on another connection');
    const seventh = watch(b, 'big');
    await eventually(() => seventh.error !== undefined, 'the front-end seventh refused');
    expect(seventh.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(seventh.error?.details).toMatch(/maxWatches 6/);
    // A place given back is taken again (once the server has seen the cancel).
    onJob[0]?.call.cancel();
    let again = watch(b, 'small');
    await eventually(() => {
      if (again.error?.code === grpc.status.RESOURCE_EXHAUSTED) again = watch(b, 'small');
      return again.events.length > 0;
    }, 'a watch after one ended');
  });

  it('watchers opened together get the same events, encoded once and passed through the serializer whole', async () => {
    const { port, store, keys } = await frontEnd({});
    const c = client(port);
    const ws = Array.from({ length: 50 }, () => watch(c, 'big'));
    await eventually(() => ws.every((w) => w.events.some((e) => !e.more)), 'every watcher got the job');
    for (const w of ws) expect(w.events.flatMap((e) => e.tasks.map((t) => t.index))).toEqual(Array.from({ length: TASKS }, (_, i) => i));
    await store.put(keys.task('big', 7), JSON.stringify({ job: 'big', index: 7, state: 'succeeded', attempt: 0 }));
    await eventually(() => ws.every((w) => w.events.at(-1)?.tasks.some((t) => t.index === 7 && t.state === 'succeeded')), 'every watcher got the change');
    for (const w of ws) expect(w.events.at(-1)?.job?.id).toBe('big');
  });
});

/** A service of one server stream that never ends and one unary answer of 1 MiB, to hold calls open. */
const HOLD: grpc.ServiceDefinition = {
  Hold: {
    path: '/test.Hold/Hold',
    requestStream: false,
    responseStream: true,
    requestSerialize: (b: Buffer) => b,
    requestDeserialize: (b: Buffer) => b,
    responseSerialize: (b: Buffer) => b,
    responseDeserialize: (b: Buffer) => b,
  },
  Big: {
    path: '/test.Hold/Big',
    requestStream: false,
    responseStream: false,
    requestSerialize: (b: Buffer) => b,
    requestDeserialize: (b: Buffer) => b,
    responseSerialize: (b: Buffer) => b,
    responseDeserialize: (b: Buffer) => b,
  },
};

async function holdServer(
  limits: Partial<ConnectionLimits>,
  onHold?: (call: grpc.ServerWritableStream<Buffer, Buffer>) => void,
): Promise<{ port: number; held: { cancelled: boolean }[]; server: GrpcServerHandle }> {
  const held: { cancelled: boolean }[] = [];
  const server = await startGrpcServer({
    host: '127.0.0.1',
    port: 0,
    limits,
    register: (s) => {
      s.addService(HOLD, {
        Hold: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
          const h = { cancelled: false };
          held.push(h);
          call.on('cancelled', () => (h.cancelled = true));
          call.write(Buffer.from('hello'));
          onHold?.(call);
        },
        Big: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.alloc(1 << 20)),
      });
      return [];
    },
  });
  cleanup.push(() => server.close(100));
  return { port: server.port, held, server };
}

describe('connections and calls that hold a server', () => {
  it('a gRPC client sees a stream dropped for not reading as RESOURCE_EXHAUSTED', async () => {
    const { port } = await holdServer({}, (call) => setTimeout(() => dropUnread(call, 'not reading', true), 50));
    const Ctor = grpc.makeGenericClientConstructor(HOLD, 'Hold');
    const c = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    cleanup.push(() => c.close());
    const call = (c as unknown as { Hold(req: Buffer): grpc.ClientReadableStream<Buffer> }).Hold(Buffer.from('x'));
    let error: grpc.ServiceError | undefined;
    call.on('error', (e: grpc.ServiceError) => (error = e));
    call.on('data', () => undefined);
    await eventually(() => error !== undefined, 'the dropped stream ended');
    expect(error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
  });

  it('a request whose message never ends is answered DEADLINE_EXCEEDED after requestTimeoutMs, and its stream reset', async () => {
    const { port, held } = await holdServer({ requestTimeoutMs: 300 });
    const r = rawCall(port, '/test.Hold/Hold', Buffer.from([0, 0, 0]), { end: false });
    await eventually(() => r.closed, 'the unfinished request ended');
    expect(r.grpcStatus).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    expect(held).toHaveLength(0);
  });

  it('a connection that opens no call is closed after maxConnectionIdleMs', async () => {
    const { port } = await holdServer({ maxConnectionIdleMs: 300 });
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', () => undefined);
    cleanup.push(() => void session.destroy());
    let goaway = false;
    let closed = false;
    session.on('goaway', () => (goaway = true));
    session.on('close', () => (closed = true));
    await eventually(() => closed, 'the idle connection closed');
    expect(goaway).toBe(true);
  });

  it('a connection whose peer stops answering (half-open) is closed by the keepalive ping, and its calls cancelled', async () => {
    const { port, held } = await holdServer({ keepaliveTimeMs: 200, keepaliveTimeoutMs: 200 });
    const proxy: TcpProxy = await tcpProxy(port);
    cleanup.push(() => proxy.close());
    const Ctor = grpc.makeGenericClientConstructor(HOLD, 'Hold');
    const c = new Ctor(`127.0.0.1:${proxy.port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
    cleanup.push(() => c.close());
    const call = (c as unknown as { Hold(req: Buffer): grpc.ClientReadableStream<Buffer> }).Hold(Buffer.from('x'));
    call.on('error', () => undefined);
    let got = false;
    call.on('data', () => (got = true));
    await eventually(() => got && held.length === 1, 'the call is open');
    // The peer goes silent: no FIN, no answer to anything.
    proxy.partition();
    await eventually(() => held[0]?.cancelled === true, 'the server gave up the call');
  });

  // This one also fails if grpc-js moves the HTTP/2 stream under its call object, where
  // connection-limits.ts reads it: without it nothing could be reset.
  it('an answer its client takes none of is reset unsentTimeoutMs after the call ended', async () => {
    const { port } = await holdServer({ unsentTimeoutMs: 300 });
    const r = rawCall(port, '/test.Hold/Big', Buffer.from([0, 0, 0, 0, 0]), { window0: true });
    await eventually(() => r.closed, 'the unread answer was reset');
    expect(r.rstCode).toBe(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
  });
});

describe('slow readers of TaskLogs', () => {
  it('a client that takes nothing of a log for slowConsumerMs is dropped with RESOURCE_EXHAUSTED, and the node stream cancelled', async () => {
    const store = new MemoryStore();
    cleanup.push(() => store.close());
    const keys = new Keys('/l/');
    const spec = { ...makeJob('j', TEST_PROFILES[0]!, 1), id: 'j' };
    await store.put(keys.job('j'), JSON.stringify({ spec, state: 'running', placed: 1, updatedAt: 0, submittedAt: 0 } satisfies LiveJobRecord));
    await store.put(keys.task('j', 0), JSON.stringify({ job: 'j', index: 0, state: 'running', attempt: 0, server: 'n1' }));
    await store.put(keys.server('n1'), JSON.stringify({ id: 'n1', endpoint: '127.0.0.1:1' }));
    const up = Object.assign(new EventEmitter(), {
      paused: false,
      cancelled: false,
      pause: () => (up.paused = true),
      resume: () => (up.paused = false),
      cancel: () => (up.cancelled = true),
    });
    // A call whose client reads nothing: every write says "wait".
    const call = Object.assign(new EventEmitter(), {
      request: { jobId: 'j', task: 0, follow: true, namespace: '' },
      cancelled: false,
      writes: 0,
      write: () => {
        call.writes++;
        return false;
      },
      end: () => undefined,
    });
    let status: { code?: number } | undefined;
    call.on('error', (e: { code?: number }) => (status = e));
    const d = { store, keys, slowConsumerMs: 200, readLog: () => up, notFound: () => new Error('nf') } as unknown as NodeServiceDeps;
    taskLogs(d, call as unknown as Parameters<typeof taskLogs>[1]);
    await eventually(() => up.listenerCount('data') > 0, 'the relay started');
    up.emit('data', { data: Buffer.from('line\n') });
    expect(up.paused).toBe(true);
    await eventually(() => status !== undefined, 'the log stream was dropped');
    expect(status?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(up.cancelled).toBe(true);
  });
});
