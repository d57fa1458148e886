import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { SchedulerProcess } from '../../src/frontend/runtime.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { startTestScheduler } from '../support/live.ts';

/**
 * The token and audit RPCs (acl-service.ts) take their numbers as the proto says: 0 is "never
 * expires" / "every record", and a number that is not finite is refused naming the field, not
 * read as 0 (scheduler.proto: "a negative, fractional, NaN or huge value is reported").
 */
const keys = new Keys('/acl-service/');
let store: MemoryStore;
let sched: SchedulerProcess;
let c: SchedulerClient;

beforeAll(async () => {
  store = new MemoryStore();
  sched = await startTestScheduler({
    name: 'acl-service',
    agents: 1,
    seed: 1,
    store,
    keys,
    clock: new SystemClock(),
    log: createLogger('acl-service', 'silent'),
  });
  c = schedulerClient(`127.0.0.1:${sched.port}`);
});
afterAll(async () => {
  c?.close();
  await sched?.close();
  await store?.close();
});

type Answer = { code: number; details: string; res?: Record<string, unknown> };
function call(rpc: 'CreateToken' | 'ListAudit', req: object): Promise<Answer> {
  return new Promise((resolve) => {
    const fn = (
      c as unknown as Record<string, (r: object, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r?: Record<string, unknown>) => void) => void>
    )[rpc];
    fn!.call(c, req, { deadline: new Date(Date.now() + 10_000) }, (e, r) =>
      resolve(e ? { code: e.code, details: e.details } : { code: grpc.status.OK, details: '', ...(r ? { res: r } : {}) }),
    );
  });
}

const tokens = async (): Promise<number> => (await store.range(keys.tokens())).kvs.length;
const policyJson = '{"namespaces":{"default":["read"]}}';

describe('CreateToken ttl_ms', () => {
  it.each([NaN, Infinity, -Infinity, -1])('%s is refused naming ttl_ms, and no token is stored', async (ttlMs) => {
    const before = await tokens();
    const r = await call('CreateToken', { name: 'ttl', policyJson, ttlMs });
    expect(r.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(r.details).toContain('ttl_ms');
    expect(await tokens()).toBe(before);
  });

  it('0 (or -0) makes a token that never expires; a duration one that does', async () => {
    for (const ttlMs of [0, -0]) {
      const r = await call('CreateToken', { name: 'forever', policyJson, ttlMs });
      expect(r.code).toBe(grpc.status.OK);
      expect(Number((r.res?.['token'] as Record<string, unknown>)['expiresAtMs'])).toBe(0);
    }
    const r = await call('CreateToken', { name: 'hour', policyJson, ttlMs: 3_600_000 });
    expect(Number((r.res?.['token'] as Record<string, unknown>)['expiresAtMs'])).toBeGreaterThan(Date.now());
  });
});

describe('ListAudit since_ms', () => {
  it.each([NaN, Infinity, -1])('%s is refused naming since_ms', async (sinceMs) => {
    const r = await call('ListAudit', { sinceMs, namespace: '', limit: 10 });
    expect(r.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(r.details).toContain('since_ms');
  });

  it('0 lists every record kept', async () => {
    const r = await call('ListAudit', { sinceMs: 0, namespace: '', limit: 0 });
    expect(r.code).toBe(grpc.status.OK);
    expect((r.res?.['records'] as unknown[]).length).toBeGreaterThan(0);
  });
});
