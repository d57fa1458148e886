import * as grpc from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { protoRoot } from '../../src/rpc/proto-root.ts';
import type { SchedulerProcess } from '../../src/frontend/runtime.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { failure, getJob, startDemoCell, startTestScheduler, submit, unary, waitFinal } from '../support/live.ts';

/**
 * Keys a client chooses (attribute names, environment variables, inline profile platforms,
 * namespaces in a policy) that are also the names of Object.prototype's members, over gRPC
 * against a front-end of the demo cell (10 servers, all zone=demo-a and ssd=true) on the embedded
 * store: `__proto__` is refused as a key, `constructor` and `toString` are ordinary names, and no
 * answer ever shows a value inherited from Object.prototype.
 */
const clock = new SystemClock();
const log = createLogger('hostile-keys', 'silent');
const base = { name: 'hk', profile: 'spark-lr', tasks: 1, durationMs: 20 };
/** JSON text with the key `__proto__` as an ordinary key, as a client sends it. */
const withKeys = (fields: string): string => `${JSON.stringify(base).slice(0, -1)},${fields}}`;

/**
 * A SubmitJob request encoded with protobufjs from message objects whose maps have no prototype:
 * the generated client's fromObject would drop a `__proto__` map key before it left the client,
 * a client of another language sends it as any other key.
 */
function rawSubmit(
  addr: string,
  maps: { attributes?: Record<string, string>; env?: Record<string, string>; platformPerf?: Record<string, number> },
): Promise<grpc.ServiceError> {
  const root = protoRoot();
  const Req = root.lookupType('tarcil.v1.SubmitJobRequest');
  const Spec = root.lookupType('tarcil.v1.JobSpec');
  const dict = <V>(o: Record<string, V> | undefined): Record<string, V> => Object.assign(Object.create(null) as Record<string, V>, o);
  const spec = Spec.create({ name: 'hk', tasks: 1, durationMs: 20 }) as unknown as Record<string, unknown>;
  if (maps.platformPerf)
    spec.inlineProfile = root
      .lookupType('tarcil.v1.InlineProfile')
      .create({ caused: [10, 10, 10, 10, 10, 10, 10, 10, 10, 10], platformPerf: dict(maps.platformPerf) });
  else spec.profileName = 'spark-lr';
  if (maps.attributes) spec.constraints = root.lookupType('tarcil.v1.Constraints').create({ attributes: dict(maps.attributes) });
  if (maps.env) spec.command = root.lookupType('tarcil.v1.Command').create({ argv: ['true'], env: dict(maps.env) });
  const msg = Req.create({ spec });
  const client = new grpc.Client(addr, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      '/tarcil.v1.Scheduler/SubmitJob',
      (m: protobuf.Message) => Buffer.from(Req.encode(m).finish()),
      (b: Buffer) => b,
      msg,
      { deadline: Date.now() + 10_000 },
      (err) => {
        client.close();
        if (err) resolve(err);
        else reject(new Error('accepted, expected a refusal'));
      },
    );
  });
}

/** A map whose only key is `__proto__`, as JSON.parse makes it. */
const protoKey = <V>(v: V): Record<string, V> => JSON.parse(`{"__proto__":${JSON.stringify(v)}}`) as Record<string, V>;

describe('user-chosen keys named like Object.prototype members (demo cell, embedded store)', () => {
  let cell: Awaited<ReturnType<typeof startDemoCell>>;
  let c: SchedulerClient;
  let addr = '';
  beforeAll(async () => {
    cell = await startDemoCell({ prefix: '/hostile-keys/', name: 'hostile-keys', seed: 3, agents: 1 });
    c = cell.client;
    addr = `127.0.0.1:${cell.sched.port}`;
  });
  afterAll(async () => {
    await cell?.close();
  });

  const stored = async (): Promise<number> => (await cell.store.range(cell.keys.jobs())).kvs.length;

  it("spec_json with constraints.attributes {'__proto__': 'nowhere'} is refused, not run anywhere", async () => {
    const before = await stored();
    const e = await failure(submit(c, { specJson: withKeys('"constraints":{"attributes":{"__proto__":"nowhere"}}') }));
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.details).toContain("constraints.attributes: key '__proto__' is not allowed");
    const env = await failure(submit(c, { specJson: withKeys('"command":{"argv":["true"],"env":{"__proto__":"x"}}') }));
    expect(env.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(env.details).toContain("command.env: key '__proto__' is not allowed");
    expect(await stored()).toBe(before);
  });

  it("a structured spec whose maps hold the key '__proto__' is refused", async () => {
    const before = await stored();
    const attrs = await rawSubmit(addr, { attributes: protoKey('nowhere') });
    expect(attrs.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(attrs.details).toContain("constraints.attributes: key '__proto__' is not allowed");
    const env = await rawSubmit(addr, { env: protoKey('x') });
    expect(env.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(env.details).toContain("command.env: key '__proto__' is not allowed");
    const perf = await rawSubmit(addr, { platformPerf: protoKey(2) });
    expect(perf.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(perf.details).toContain("profile.platformPerf: key '__proto__' is not allowed");
    expect(await stored()).toBe(before);
  });

  it('attributes constructor and toString are attributes no server has: refused as unplaceable, naming no function', async () => {
    for (const k of ['constructor', 'toString']) {
      const e = await failure(submit(c, { specJson: JSON.stringify({ ...base, constraints: { attributes: { [k]: 'x' } } }) }));
      expect(e.code).toBe(grpc.status.FAILED_PRECONDITION);
      expect(e.details).toContain(`${k}=x`);
      expect(e.details).toContain(`${k} values in the cell: none`);
      expect(e.details).not.toMatch(/function|native code|\[object/);
    }
    // The same path places a job whose attribute the servers have.
    const ok = await submit(c, { specJson: JSON.stringify({ ...base, constraints: { attributes: { zone: 'demo-a' } } }) });
    expect((await waitFinal(c, ok.jobId)).state).toBe('succeeded');
    expect((await getJob(c, ok.jobId)).taskList.every((t) => t.ru?.server)).toBe(true);
  });
});

describe('namespaces named like Object.prototype members under ACLs (embedded store)', () => {
  let store: MemoryStore;
  let sched: SchedulerProcess;
  const clients: SchedulerClient[] = [];
  let addr = '';
  const as = (token: string): SchedulerClient => {
    const cl = schedulerClient(addr, undefined, token);
    clients.push(cl);
    return cl;
  };
  beforeAll(async () => {
    store = new MemoryStore();
    sched = await startTestScheduler({ name: 'hk-acl', store, keys: new Keys('/hk-acl/'), clock, log, agents: 1, seed: 9 }, { acl: true });
    addr = `127.0.0.1:${sched.port}`;
  });
  afterAll(async () => {
    for (const cl of clients) cl.close();
    await sched?.close();
    await store?.close();
  });

  it("a policy with namespace '__proto__' is refused; a token of another namespace is denied the others, and the server keeps serving", async () => {
    const anon = schedulerClient(addr);
    clients.push(anon);
    const admin = as((await unary<object, { secret: string }>(anon, 'AclBootstrap', { name: 'root' })).secret);
    const bad = await failure(unary(admin, 'CreateToken', { name: 'bad', policyJson: '{"namespaces":{"__proto__":["read","submit"]}}' }));
    expect(bad.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(bad.details).toContain("policy_json.namespaces: key '__proto__' is not allowed");

    // constructor is a valid namespace name: it can be created and used like any other.
    await unary(admin, 'PutNamespace', { name: 'constructor' });
    const team = as(
      (await unary<object, { secret: string }>(admin, 'CreateToken', { name: 'team-a', policyJson: '{"namespaces":{"team-a":["read","submit"]}}' })).secret,
    );
    for (const ns of ['constructor', 'toString', '__proto__', 'valueOf']) {
      const sub = await failure(submit(team, { specJson: JSON.stringify(base), namespace: ns }));
      expect(sub.code).toBe(grpc.status.PERMISSION_DENIED);
      const list = await failure(unary(team, 'ListJobs', { namespace: ns }));
      expect(list.code).toBe(grpc.status.PERMISSION_DENIED);
    }
    const mine = as(
      (await unary<object, { secret: string }>(admin, 'CreateToken', { name: 'ctor', policyJson: '{"namespaces":{"constructor":["read","submit"]}}' })).secret,
    );
    const { jobId } = await submit(mine, { specJson: JSON.stringify(base), namespace: 'constructor' });
    expect(jobId).toMatch(/^constructor\//);
    expect((await failure(submit(mine, { specJson: JSON.stringify(base), namespace: 'toString' }))).code).toBe(grpc.status.PERMISSION_DENIED);
    const names = (await unary<object, { namespaces: Array<{ name: string }> }>(mine, 'ListNamespaces', {})).namespaces.map((n) => n.name);
    expect(names).toEqual(['constructor']);
  });
});
