import * as grpc from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import { guardServer } from '../../src/rpc/guard.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { loadProtos } from '../../src/rpc/proto.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';

/**
 * No handler's fault may take a server down: every service a tarcil server adds (Scheduler with
 * its namespace and ACL calls, NodeMonitor, health, reflection) runs through guard.ts, so a
 * handler that throws, synchronously or through a rejected promise, answers a status and the
 * process sees no unhandled rejection.
 */
const log = createLogger('test', 'silent');

/** The services a tarcil server adds, as their definitions (health and reflection taken from their own addToServer). */
function services(): { name: string; def: grpc.ServiceDefinition }[] {
  const { proto, def } = loadProtos();
  const out: { name: string; def: grpc.ServiceDefinition }[] = [
    { name: 'tarcil.v1.Scheduler', def: proto.tarcil.v1.Scheduler.service },
    { name: 'tarcil.v1.NodeMonitor', def: proto.tarcil.v1.NodeMonitor.service },
  ];
  const capture = { addService: (d: grpc.ServiceDefinition): void => void out.push({ name: Object.values(d)[0]?.path.split('/')[1] ?? '?', def: d }) };
  new HealthImplementation({ '': 'SERVING' }).addToServer(capture);
  new ReflectionService(def).addToServer(capture);
  return out;
}

type Fault = 'sync' | 'async' | 'refusal';
function faulty(def: grpc.ServiceDefinition, how: Fault): grpc.UntypedServiceImplementation {
  const impl: grpc.UntypedServiceImplementation = {};
  for (const name of Object.keys(def)) {
    const err = how === 'refusal' ? new TarcilError('INVALID_ARGUMENT', 'name: must be lower case') : new Error(`a bug in ${name}`);
    impl[name] = ((): unknown => {
      if (how === 'async') return Promise.reject(err);
      throw err;
    }) as never;
  }
  return impl;
}

/** Calls `method` of `def` with an empty request and returns the status it ended with. */
function call(port: number, def: grpc.ServiceDefinition, method: string): Promise<grpc.StatusObject> {
  const Client = grpc.makeGenericClientConstructor(def, 'X');
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as Record<
    string,
    (...a: unknown[]) => grpc.ClientReadableStream<unknown> & grpc.ClientWritableStream<unknown>
  >;
  const m = def[method];
  if (!m) throw new Error(`no method ${method}`);
  const deadline = new Date(Date.now() + 10_000);
  const fn = client[method];
  if (!fn) throw new Error(`no client method ${method}`);
  return new Promise<grpc.StatusObject>((resolve) => {
    const done = (st: Partial<grpc.StatusObject> | null): void => {
      (client as unknown as grpc.Client).close();
      resolve({ code: st?.code ?? grpc.status.OK, details: st?.details ?? '', metadata: new grpc.Metadata() });
    };
    if (!m.responseStream) {
      const cb = (err: grpc.ServiceError | null): void => done(err);
      if (m.requestStream) {
        const s = fn.call(client, { deadline }, cb);
        s.end();
      } else fn.call(client, {}, { deadline }, cb);
      return;
    }
    const s = m.requestStream ? fn.call(client, { deadline }) : fn.call(client, {}, { deadline });
    s.on('data', () => undefined);
    s.on('status', (st: grpc.StatusObject) => done(st));
    s.on('error', () => undefined);
    if (m.requestStream) {
      s.write({});
      s.end();
    }
  });
}

describe('every RPC runs through one guard', () => {
  const rejections: unknown[] = [];
  const onRejection = (r: unknown): void => void rejections.push(r);
  beforeEach(() => {
    rejections.length = 0;
    process.on('unhandledRejection', onRejection);
  });
  afterEach(() => {
    process.off('unhandledRejection', onRejection);
  });

  for (const how of ['sync', 'async', 'refusal'] as const) {
    it(`a handler that fails (${how}) answers a status, in every method of every service`, async () => {
      const server = guardServer(new grpc.Server(), log);
      const all = services();
      for (const s of all) server.addService(s.def, faulty(s.def, how));
      const port = await new Promise<number>((resolve, reject) =>
        server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
      );
      try {
        const names = all.map((s) => s.name);
        expect(names).toEqual(
          expect.arrayContaining(['tarcil.v1.Scheduler', 'tarcil.v1.NodeMonitor', 'grpc.health.v1.Health', 'grpc.reflection.v1.ServerReflection']),
        );
        let methods = 0;
        for (const s of all) {
          for (const method of Object.keys(s.def)) {
            const st = await call(port, s.def, method);
            methods++;
            if (how === 'refusal') {
              expect({ method, code: st.code, details: st.details }).toEqual({
                method,
                code: grpc.status.INVALID_ARGUMENT,
                details: 'name: must be lower case',
              });
            } else {
              expect({ method, code: st.code }).toEqual({ method, code: grpc.status.INTERNAL });
              expect(st.details).toMatch(/incident e-[0-9a-f]{8}/);
              expect(st.details).not.toContain('a bug in');
            }
          }
        }
        // Scheduler (with namespaces and ACLs), NodeMonitor, health and reflection: well over twenty.
        expect(methods).toBeGreaterThan(20);
        await new Promise((r) => setTimeout(r, 50));
        expect(rejections).toEqual([]);
      } finally {
        server.forceShutdown();
      }
    });
  }

  it('a request whose bytes do not parse is refused INVALID_ARGUMENT, in every unary and server-streaming method', async () => {
    const server = guardServer(new grpc.Server(), log);
    const all = services();
    for (const s of all) server.addService(s.def, faulty(s.def, 'sync'));
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    try {
      let methods = 0;
      for (const s of all) {
        for (const [method, m] of Object.entries(s.def)) {
          if (m.requestStream) continue;
          // Field 7 with wire type 7: no message parses it.
          const raw = { ...s.def, [method]: { ...m, requestSerialize: (b: Buffer) => b } } as grpc.ServiceDefinition;
          const Client = grpc.makeGenericClientConstructor(raw, 'Raw');
          const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as Record<
            string,
            (...a: unknown[]) => grpc.ClientReadableStream<unknown>
          >;
          const st = await new Promise<Partial<grpc.StatusObject>>((resolve) => {
            const deadline = new Date(Date.now() + 10_000);
            const fn = client[method] as (...a: unknown[]) => grpc.ClientReadableStream<unknown>;
            if (m.responseStream) {
              const stream = fn.call(client, Buffer.from([0x3f, 0x01]), { deadline });
              stream.on('data', () => undefined);
              stream.on('error', () => undefined);
              stream.on('status', (x: grpc.StatusObject) => resolve(x));
            } else fn.call(client, Buffer.from([0x3f, 0x01]), { deadline }, (err: grpc.ServiceError | null) => resolve(err ?? { code: grpc.status.OK }));
          });
          (client as unknown as grpc.Client).close();
          methods++;
          expect({ method, code: st.code }).toEqual({ method, code: grpc.status.INVALID_ARGUMENT });
          expect(st.details).toMatch(/^request: does not parse as the request message of \//);
        }
      }
      expect(methods).toBeGreaterThan(20);
    } finally {
      server.forceShutdown();
    }
  });

  it('a unary call answered twice gets the first answer; the second is dropped', async () => {
    const server = guardServer(new grpc.Server(), log);
    const health = services().find((s) => s.name === 'grpc.health.v1.Health');
    if (!health) throw new Error('no health service');
    server.addService(health.def, {
      Check: ((_call: unknown, cb: grpc.sendUnaryData<unknown>) => {
        cb(null, { status: 'SERVING' });
        cb({ code: grpc.status.INTERNAL, details: 'second' });
        throw new Error('and then a throw');
      }) as never,
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    try {
      expect((await call(port, health.def, 'Check')).code).toBe(grpc.status.OK);
    } finally {
      server.forceShutdown();
    }
  });
});

describe('a front-end refuses what a hostile client sends and goes on serving', () => {
  let store: MemoryStore;
  let sched: SchedulerProcess;
  let c: SchedulerClient;
  const rejections: unknown[] = [];
  const onRejection = (r: unknown): void => void rejections.push(r);
  beforeAll(async () => {
    process.on('unhandledRejection', onRejection);
    store = new MemoryStore();
    sched = await startScheduler({
      name: 'guard',
      store,
      keys: new Keys('/guard'),
      catalog: loadCatalog(),
      clock: new SystemClock(),
      rng: new SeededRng(3),
      log,
      agents: 1,
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: 3,
    });
    c = schedulerClient(`127.0.0.1:${sched.port}`);
  });
  afterAll(async () => {
    process.off('unhandledRejection', onRejection);
    c.close();
    await sched.close();
    await store.close();
  });

  const unary = <T>(fn: (cb: (err: grpc.ServiceError | null, res?: T) => void) => void): Promise<{ err: grpc.ServiceError | null; res: T | undefined }> =>
    new Promise((resolve) => fn((err, res) => resolve({ err, res })));

  it('ListJobs with a namespace that is not a name answers INVALID_ARGUMENT (it used to end the process)', async () => {
    for (const namespace of ['Default', '\x00', 'a'.repeat(300)]) {
      const { err } = await unary((cb) => c.ListJobs({ namespace }, { deadline: new Date(Date.now() + 5000) }, cb));
      expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err?.details).toMatch(/^namespace/);
    }
    const ok = await unary((cb) => c.ListJobs({}, { deadline: new Date(Date.now() + 5000) }, cb));
    expect(ok.err).toBeNull();
    expect(rejections).toEqual([]);
  });

  it('an error quotes a huge value cut, so the status fits its header', async () => {
    const name = 'p'.repeat(20_000);
    const { err } = await unary((cb) =>
      c.SubmitJob({ specJson: JSON.stringify({ name: 'x', tasks: 1, profile: name }) }, { deadline: new Date(Date.now() + 5000) }, cb),
    );
    expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err?.details).toContain('profile');
    expect(err?.details.length).toBeLessThan(1200);
    expect(err?.details).toMatch(/characters/);
    const got = await unary((cb) => c.GetProfile({ name }, { deadline: new Date(Date.now() + 5000) }, cb));
    expect(got.err?.code).toBe(grpc.status.NOT_FOUND);
    expect(got.err?.details.length).toBeLessThan(1200);
    expect(rejections).toEqual([]);
  });
});
