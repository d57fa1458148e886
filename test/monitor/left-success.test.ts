/**
 * A process-executor monitor started again after its task was placed elsewhere (its previous life
 * was frozen or dead past its lease and grace, and the task's own success write did not land)
 * finds the task's exit record beside its logs, though no RU of its names the attempt any more,
 * and reports it: a success stays a success, and the new copy is given back if it has not
 * started. On the embedded store (its supervisors then write nothing themselves).
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServerSpec } from '../../src/model/types.ts';
import { ProcessExecutor } from '../../src/monitor/executor.ts';
import { LocalMonitor } from '../../src/monitor/monitor.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveTaskRecord } from '../../src/state/live-records.ts';
import { FREE_RU_VALUE, parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { until } from '../support/until.ts';

const cleanup: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

const keys = new Keys('/left/');
const server = (id: string): ServerSpec => ({ id, platform: 'r3-xlarge', rack: 'r0', rus: 1, speed: 1, attributes: {} });
const placed = (attempt: number, commitId: string): PlacedRuRecord => ({
  state: 'busy',
  job: 'j1',
  task: 0,
  caused: [],
  priority: 0,
  agent: 'a',
  since: 1000 * attempt,
  attempt,
  basedOn: 0,
  commitId,
});

/**
 * Node A ran attempt 0 (c0) and it exited 0 while A's monitor was away; the owner recorded it
 * lost and placed attempt 1 (c1) on node B (`bState`). A's monitor starts again on its log dir.
 */
async function scenario(bState: 'placed' | 'running'): Promise<{ store: MemoryStore; attemptFile: string; bRu: string }> {
  const store = new MemoryStore();
  cleanup.push(() => store.close());
  const dir = mkdtempSync(join(tmpdir(), 'tarcil-left-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const recA = placed(0, 'c0');
  const aRev = await store.put(keys.ru({ server: 'A', index: 0 }), JSON.stringify(recA));
  // The owner's "lost" deleted A's RU record; the new placement on B.
  await store.delete(keys.ru({ server: 'A', index: 0 }));
  const lease = await store.grantLease(60);
  await store.put(keys.server('B'), JSON.stringify({ id: 'B' }), { lease: lease.id });
  const bRu = keys.ru({ server: 'B', index: 0 });
  const bRev = await store.put(bRu, JSON.stringify(placed(1, 'c1')));
  const task: LiveTaskRecord = {
    job: 'j1',
    index: 0,
    state: bState,
    ru: { server: 'B', index: 0 },
    attempt: 1,
    placedAt: 1000,
    commitId: 'c1',
    agent: 'a',
    placedRevision: bRev,
    previous: [{ attempt: 0, ru: { server: 'A', index: 0 }, state: 'lost', message: 'server A left the cluster' }],
  };
  await store.put(keys.task('j1', 0), JSON.stringify(task));
  // What A's previous life left beside the task's logs: the attempt, and its exit record.
  const logDir = join(dir, 'logs');
  mkdirSync(join(logDir, 'j1'), { recursive: true });
  const base = join(logDir, 'j1', `0-${aRev}`);
  writeFileSync(`${base}.attempt`, JSON.stringify({ job: 'j1', task: 0, commitId: 'c0', ruIndex: 0, rec: recA, placedRevision: aRev, startedAt: 500 }));
  writeFileSync(`${base}.exit`, '0');
  const mon = new LocalMonitor({
    store,
    keys,
    clock: new SystemClock(),
    log: createLogger('left-success'),
    server: server('A'),
    executor: new ProcessExecutor({ clock: new SystemClock(), logDir, pin: false }),
    leaseTtlSeconds: 5,
  });
  await mon.start();
  cleanup.push(() => mon.close());
  return { store, attemptFile: `${base}.attempt`, bRu };
}

describe('a monitor started again after its task was placed elsewhere', () => {
  it('reports the success it finds beside the logs, and the new copy that has not started is given back', async () => {
    const { store, attemptFile, bRu } = await scenario('placed');
    await until('the success recorded', async () => parseJson<LiveTaskRecord>(await store.get(keys.task('j1', 0)))?.state === 'succeeded', 10_000, 25);
    expect(parseJson<LiveTaskRecord>(await store.get(keys.task('j1', 0)))).toMatchObject({
      state: 'succeeded',
      attempt: 0,
      commitId: 'c0',
      ru: { server: 'A', index: 0 },
      exitCode: 0,
    });
    expect((await store.get(bRu))?.value).toBe(FREE_RU_VALUE);
    await until('the attempt forgotten', () => !existsSync(attemptFile), 5000, 25);
  });

  it('leaves a new copy that already runs alone, and forgets the attempt', async () => {
    const { store, attemptFile, bRu } = await scenario('running');
    await until('the attempt forgotten', () => !existsSync(attemptFile), 10_000, 25);
    expect(parseJson<LiveTaskRecord>(await store.get(keys.task('j1', 0)))).toMatchObject({ state: 'running', attempt: 1, commitId: 'c1' });
    expect(parseJson<PlacedRuRecord>(await store.get(bRu))?.state).toBe('busy');
  });
});
