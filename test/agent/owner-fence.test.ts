/**
 * A placement commit's fence: the owner's member key bound to its lease and the job's owner
 * record at the revision the owner knows. A process whose member key lives on but whose job was
 * adopted by another process (its owner record rewritten) places nothing more for it; the same
 * commit places when the record is unchanged. On the embedded store.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SchedulingAgent } from '../../src/agent/agent.ts';
import { Keys } from '../../src/state/keys.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';

const keys = new Keys('/f/');
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function cell(): Promise<{ store: MemoryStore; agent: SchedulingAgent; lease: string; ownerRev: number }> {
  const store = new MemoryStore();
  await seedCluster(store, keys, uniformServers(6, 4));
  const lease = (await store.grantLease(60)).id;
  await store.put(keys.member(lease), '{}', { lease });
  const ownerRev = await store.put(keys.owner('j'), JSON.stringify({ agent: 'a0', process: 'p0', since: 1, lease }));
  const agent = new SchedulingAgent({
    id: 'p0/a0',
    store,
    keys,
    clock: new SystemClock(),
    rng: new SeededRng(3),
    log: createLogger('test'),
    config: { recheckMs: 30 },
  });
  await agent.start();
  closers.push(async () => {
    await agent.close();
    await store.close();
  });
  return { store, agent, lease, ownerRev };
}

async function busy(store: MemoryStore): Promise<number> {
  return (await store.range(keys.rus())).kvs.filter((kv) => parseJson<PlacedRuRecord>(kv)?.state === 'busy').length;
}

describe("a placement's owner fence", () => {
  it('places while the owner record is the one the owner knows', async () => {
    const { store, agent, lease, ownerRev } = await cell();
    agent.setFence('j', { key: keys.member(lease), lease, owner: { key: keys.owner('j'), rev: ownerRev } });
    const rec = await agent.schedule(makeJob('j', TEST_PROFILES[0]!, 3));
    expect(rec.placements).toHaveLength(3);
    expect(await busy(store)).toBe(3);
  });

  it('places nothing once another process rewrote the owner record, though the member key lives on', async () => {
    const { store, agent, lease, ownerRev } = await cell();
    agent.setFence('j', { key: keys.member(lease), lease, owner: { key: keys.owner('j'), rev: ownerRev } });
    // Adopted elsewhere: the record now names another lease.
    await store.put(keys.owner('j'), JSON.stringify({ agent: 'a1', process: 'p1', since: 2, lease: 'other' }));
    const err = await agent.schedule(makeJob('j', TEST_PROFILES[0]!, 3)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TarcilError);
    expect((err as TarcilError).code).toBe('CANCELLED');
    expect(await busy(store)).toBe(0);
  });
});
