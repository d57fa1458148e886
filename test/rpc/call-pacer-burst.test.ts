/**
 * A burst of calls (as 10,000 WatchJob streams opened at once) is handed to grpc-js a bounded
 * number per turn of the event loop (connection-limits.ts, CallPacer): the rest wait, each
 * connection's in order and the connections in turn, while enough wait no connection but the
 * light ones is read, a connection sends at most its credit of calls ahead of those handed over,
 * and turns that run long make the number handed over per turn smaller.
 */
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { grpcServerOptions } from '../../src/rpc/connection-limits.ts';
import { loopThreadRunMs, PACER_TARGET_TURN_MS, paceCalls, type CallPacer } from '../../src/rpc/call-pacer.ts';

const raw = {
  requestSerialize: (b: Buffer) => b,
  requestDeserialize: (b: Buffer) => b,
  responseSerialize: (b: Buffer) => b,
  responseDeserialize: (b: Buffer) => b,
};
const SERVICE: grpc.ServiceDefinition = {
  Watch: { path: '/test.Burst/Watch', requestStream: false, responseStream: true, ...raw },
};
type WatchClient = grpc.Client & { Watch(req: Buffer): grpc.ClientReadableStream<Buffer> };
const Client = grpc.makeGenericClientConstructor(SERVICE, 'Burst') as unknown as new (
  address: string,
  creds: grpc.ChannelCredentials,
  options?: object,
) => WatchClient;

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

interface Seen {
  req: string;
  turn: number;
  queued: number;
  reading: boolean;
  perTurn: number;
}

/**
 * A server whose handler records each call (its request, the turn it came in, what waited, the
 * pacer's calls per turn then), spends `handlerMs` of CPU and answers one message.
 */
async function pacedServer(callsPerTurn: number, handlerMs = 0): Promise<{ port: number; pacer: CallPacer; seen: Seen[] }> {
  const seen: Seen[] = [];
  let turn = 0;
  let ticking = true;
  const tick = (): void => {
    turn++;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  cleanup.push(() => (ticking = false));
  const ref: { pacer?: CallPacer } = {};
  const server = new grpc.Server(grpcServerOptions({ callsPerTurn }));
  server.addService(SERVICE, {
    Watch: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      seen.push({
        req: call.request.toString(),
        turn,
        queued: ref.pacer?.queued ?? -1,
        reading: (ref.pacer?.stoppedConnections ?? 0) === 0,
        perTurn: ref.pacer?.callsPerTurn ?? -1,
      });
      // The handler's own work, in the time the pacer measures a turn by (the loop thread's run time,
      // not the clock: on a busy machine the clock runs on while the thread waits for a core).
      const runMs = (): number => loopThreadRunMs() ?? performance.now();
      const until = runMs() + handlerMs;
      while (runMs() < until) {
        // The turns it runs in grow long.
      }
      call.write(Buffer.from('event'));
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  const pacers = paceCalls(server, { callsPerTurn });
  // One HTTP/2 server per address bound: read from grpc-js's private field, which this checks.
  expect(pacers).toHaveLength(1);
  ref.pacer = pacers[0]!;
  cleanup.push(() => server.forceShutdown());
  return { port, pacer: ref.pacer, seen };
}

function connect(port: number): WatchClient {
  const c = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
  cleanup.push(() => c.close());
  return c;
}

/** Opens a Watch call; resolves with its first message. */
function watch(c: WatchClient, req: string): Promise<string> {
  const call = c.Watch(Buffer.from(req));
  cleanup.push(() => call.cancel());
  return new Promise((resolve, reject) => {
    call.once('data', (b: Buffer) => resolve(b.toString()));
    call.once('error', reject);
  });
}

async function ready(c: WatchClient): Promise<void> {
  await new Promise<void>((resolve, reject) => c.waitForReady(Date.now() + 10_000, (e) => (e ? reject(e) : resolve())));
}

describe('a burst of calls', () => {
  it('is handed over a bounded number per turn, each connection in its order, with its connection not read while many wait', async () => {
    const perTurn = 20;
    const { port, seen } = await pacedServer(perTurn);
    const a = connect(port);
    await ready(a);
    const n = 600;
    const answers = await Promise.all(Array.from({ length: n }, (_, i) => watch(a, `a${i}`)));
    expect(answers).toEqual(Array.from({ length: n }, () => 'event'));
    expect(seen.map((s) => s.req)).toEqual(Array.from({ length: n }, (_, i) => `a${i}`));
    const perTick = new Map<number, number>();
    for (const s of seen) perTick.set(s.turn, (perTick.get(s.turn) ?? 0) + 1);
    // Between two ticks of the test's own setImmediate chain the pacer runs at most one turn of its own and the reads before it.
    expect(Math.max(...perTick.values())).toBeLessThanOrEqual(2 * perTurn);
    expect(perTick.size).toBeGreaterThanOrEqual(n / (2 * perTurn));
    // Some calls were handed over while many more waited and no connection was read.
    expect(seen.some((s) => s.queued >= perTurn && !s.reading)).toBe(true);
  });

  it('a call on another connection does not wait behind the burst', async () => {
    const perTurn = 10;
    const { port, pacer, seen } = await pacedServer(perTurn);
    const a = connect(port);
    const b = connect(port);
    await Promise.all([ready(a), ready(b)]);
    const n = 1000;
    const burst = Promise.all(Array.from({ length: n }, (_, i) => watch(a, `a${i}`)));
    // Sent once the burst waits in the server and its connection is not read.
    await new Promise<void>((resolve) => {
      const check = (): void => (pacer.queued > 0 && pacer.stoppedConnections > 0 ? resolve() : void setImmediate(check));
      check();
    });
    await watch(b, 'b');
    const at = seen.findIndex((s) => s.req === 'b');
    await burst;
    expect(seen).toHaveLength(n + 1);
    // Handed over within a few turns of its arrival, long before the burst's end.
    expect(at).toBeGreaterThan(0);
    expect(at).toBeLessThan(n - 200);
    expect(seen.some((s) => s.req !== 'b' && s.queued > 0 && !s.reading)).toBe(true);
    expect(pacer.queued).toBe(0);
    expect(pacer.stoppedConnections).toBe(0);
  });

  it('a connection sends at most its credit of calls ahead of those handed over; its client holds the rest', async () => {
    const perTurn = 10;
    const { port, seen } = await pacedServer(perTurn);
    const a = connect(port);
    await ready(a);
    const n = 1000;
    const answers = await Promise.all(Array.from({ length: n }, (_, i) => watch(a, `a${i}`)));
    // Every call answered, none refused: the client queued the calls past the connection's limit.
    expect(answers).toEqual(Array.from({ length: n }, () => 'event'));
    expect(seen.map((s) => s.req)).toEqual(Array.from({ length: n }, (_, i) => `a${i}`));
    // The credit is twice the calls per turn: never more waited in the server.
    expect(Math.max(...seen.map((s) => s.queued))).toBeLessThanOrEqual(2 * perTurn);
    expect(Math.max(...seen.map((s) => s.queued))).toBeGreaterThan(0);
  });

  it('turns that run long hand over fewer calls per turn', async () => {
    const perTurn = 32;
    // 32 calls of 6 ms each make a turn of 192 ms, far past the pacer's target (PACER_TARGET_TURN_MS).
    expect(32 * 6).toBeGreaterThan(4 * PACER_TARGET_TURN_MS);
    const { port, pacer, seen } = await pacedServer(perTurn, 6);
    const a = connect(port);
    await ready(a);
    const n = 200;
    await Promise.all(Array.from({ length: n }, (_, i) => watch(a, `a${i}`)));
    expect(seen).toHaveLength(n);
    const perTurns = seen.map((s) => s.perTurn);
    expect(Math.min(...perTurns)).toBeGreaterThan(0);
    expect(Math.min(...perTurns)).toBeLessThanOrEqual(perTurn / 4);
    // It halves at each long turn (32, 16, 8, ...): the last calls are handed over a few at a time,
    // and the number does not grow back while the turns stay long.
    expect(Math.max(...perTurns.slice(-n / 5))).toBeLessThan(perTurn / 4);
    expect(pacer.queued).toBe(0);
  });

  it('with callsPerTurn 0 nothing is paced', async () => {
    const server = new grpc.Server(grpcServerOptions({ callsPerTurn: 0 }));
    cleanup.push(() => server.forceShutdown());
    await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    expect(paceCalls(server, { callsPerTurn: 0 })).toEqual([]);
  });
});
