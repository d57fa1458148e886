/**
 * An outcome reported twice (the monitor's reporter and a re-registration racing over one
 * journalled entry, or a write whose answer was lost and is tried again) is recorded once: the
 * second report finds the freed RU carrying this attempt's outcome and settles, writing nothing.
 * On the embedded store.
 */
import { describe, expect, it } from 'vitest';
import { outcomeEntry } from '../../src/monitor/journal.ts';
import { reportOutcome, type NodeStore } from '../../src/monitor/outcomes.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveTaskRecord } from '../../src/state/live-records.ts';
import { lastOfFreedRu, type PlacedRuRecord } from '../../src/state/records.ts';
import { MemoryStore } from '../../src/store/memory.ts';

const keys = new Keys('/twice/');
const revisionOf = async (store: MemoryStore): Promise<number> => (await store.range(keys.prefix, { limit: 1 })).revision;

async function running(): Promise<{ store: MemoryStore; n: NodeStore; entry: ReturnType<typeof outcomeEntry> }> {
  const store = new MemoryStore();
  const lease = await store.grantLease(60);
  const rec: PlacedRuRecord = { state: 'busy', job: 'j1', task: 0, caused: [], priority: 0, agent: 'a', since: 1, attempt: 0, basedOn: 0, commitId: 'c0' };
  const ru = { server: 'A', index: 3 };
  const rev = await store.put(keys.ru(ru), JSON.stringify(rec));
  const task: LiveTaskRecord = {
    job: 'j1',
    index: 0,
    state: 'running',
    ru,
    attempt: 0,
    placedAt: 1,
    commitId: 'c0',
    agent: 'a',
    placedRevision: rev,
    startedAt: 5,
  };
  await store.put(keys.task('j1', 0), JSON.stringify(task));
  const n: NodeStore = { store, keys, server: 'A', leaseId: () => lease.id };
  const entry = outcomeEntry(
    { job: 'j1', task: 0, commitId: 'c0', ruIndex: 3, rec, placedRevision: rev, rev, startedAt: 5 },
    { state: 'succeeded', endedAt: 900, exitCode: 0 },
  );
  return { store, n, entry };
}

describe('an outcome reported twice', () => {
  it('is written once; the second report settles without a write', async () => {
    const { store, n, entry } = await running();
    expect(await reportOutcome(n, entry)).toBe('written');
    const after = await revisionOf(store);
    const ruKv = await store.get(keys.ru({ server: 'A', index: 3 }));
    expect(lastOfFreedRu(ruKv!.value)).toMatchObject({ job: 'j1', index: 0, state: 'succeeded', commitId: 'c0' });
    // Without its fast path (the revision it compared is gone): the read-and-retry path.
    expect(await reportOutcome(n, { ...entry, ruRev: undefined })).toBe('settled');
    expect(await reportOutcome(n, entry)).toBe('settled');
    expect(await revisionOf(store)).toBe(after);
    expect((await store.get(keys.task('j1', 0)))?.value).toContain('"state":"running"');
    await store.close();
  });

  it('by two reporters at once is written once', async () => {
    const { store, n, entry } = await running();
    const hows = await Promise.all([reportOutcome(n, entry), reportOutcome(n, { ...entry, ruRev: undefined })]);
    expect(hows.sort()).toEqual(['settled', 'written']);
    expect((await store.get(keys.task('j1', 0)))?.value).toContain('"state":"running"');
    await store.close();
  });
});
