/**
 * A success a node reports after its task was placed again (the node was silent past its lease
 * and grace, and its task ended meanwhile): a success stays a success. While the new copy has not
 * started, the report records the success and gives the new copy's RU back, so it never runs; a
 * copy already running is left alone. On the embedded store.
 */
import { describe, expect, it } from 'vitest';
import { outcomeEntry } from '../../src/monitor/journal.ts';
import { reportOutcome, type NodeStore } from '../../src/monitor/outcomes.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveTaskRecord } from '../../src/state/live-records.ts';
import { FREE_RU_VALUE, parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { MemoryStore } from '../../src/store/memory.ts';

const keys = new Keys('/late/');

function placed(attempt: number, commitId: string): PlacedRuRecord {
  return { state: 'busy', job: 'j1', task: 0, caused: [], priority: 0, agent: 'a', since: 1000 * attempt, attempt, basedOn: 0, commitId };
}

/** Node A ran attempt 0 (commit c0); the owner recorded it lost and placed attempt 1 (c1) on B. */
async function replaced(bState: 'placed' | 'running'): Promise<{ store: MemoryStore; a: NodeStore; entry: ReturnType<typeof outcomeEntry>; bRu: string }> {
  const store = new MemoryStore();
  const lease = await store.grantLease(60);
  await store.put(keys.server('B'), JSON.stringify({ id: 'B' }), { lease: lease.id });
  const recA = placed(0, 'c0');
  const aRev = await store.put(keys.ru({ server: 'A', index: 0 }), JSON.stringify(recA));
  // The owner's "lost": A's RU given back, then the new placement on B.
  await store.put(keys.ru({ server: 'A', index: 0 }), FREE_RU_VALUE);
  const bRu = keys.ru({ server: 'B', index: 2 });
  const rev = await store.put(bRu, JSON.stringify(placed(1, 'c1')));
  const task: LiveTaskRecord = {
    job: 'j1',
    index: 0,
    state: bState,
    ru: { server: 'B', index: 2 },
    attempt: 1,
    placedAt: 1000,
    commitId: 'c1',
    agent: 'a',
    placedRevision: rev,
    previous: [{ attempt: 0, ru: { server: 'A', index: 0 }, state: 'lost', message: 'server A left the cluster' }],
  };
  await store.put(keys.task('j1', 0), JSON.stringify(task));
  const a: NodeStore = { store, keys, server: 'A', leaseId: () => lease.id };
  const entry = outcomeEntry(
    { job: 'j1', task: 0, commitId: 'c0', ruIndex: 0, rec: recA, placedRevision: aRev, startedAt: 5 },
    { state: 'succeeded', endedAt: 900, exitCode: 0 },
  );
  return { store, a, entry, bRu };
}

describe('a late success', () => {
  it('is recorded, and the later placement that has not started is given back', async () => {
    const { store, a, entry, bRu } = await replaced('placed');
    expect(await reportOutcome(a, entry)).toBe('written');
    const tk = parseJson<LiveTaskRecord>(await store.get(keys.task('j1', 0)));
    expect(tk).toMatchObject({ state: 'succeeded', commitId: 'c0', attempt: 0, ru: { server: 'A', index: 0 }, exitCode: 0 });
    expect(tk?.message).toContain('given back before it started');
    expect((await store.get(bRu))?.value).toBe(FREE_RU_VALUE);
    // B's monitor, which would start the copy fenced on the RU record's revision, cannot.
    expect(parseJson<PlacedRuRecord>(await store.get(bRu))?.state).toBe('free');
    await store.close();
  });

  it('leaves a later copy that is already running alone', async () => {
    const { store, a, entry, bRu } = await replaced('running');
    expect(await reportOutcome(a, entry)).toBe('settled');
    expect(parseJson<LiveTaskRecord>(await store.get(keys.task('j1', 0)))).toMatchObject({ state: 'running', commitId: 'c1' });
    expect(parseJson<PlacedRuRecord>(await store.get(bRu))?.state).toBe('busy');
    await store.close();
  });

  it('is not turned into anything for a failure', async () => {
    const { store, a, entry } = await replaced('placed');
    expect(await reportOutcome(a, { ...entry, state: 'failed', exitCode: 3 })).toBe('settled');
    expect(parseJson<LiveTaskRecord>(await store.get(keys.task('j1', 0)))).toMatchObject({ state: 'placed', commitId: 'c1' });
    await store.close();
  });
});
