/**
 * The heat map's colours on every front-end: a placement's quality Q travels in the RU record its
 * commit writes, so a front-end that did not place the task colours its RU too (through the
 * shared view, the same list+watch its agents place from). An RU record without Q (written before
 * it was carried) is busy without a colour.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CellView } from '../../src/frontend/dashboard/cell-view.ts';
import type { Explanation__Output } from '../../src/rpc/gen/tarcil/v1/Explanation.ts';
import { startScheduler } from '../../src/frontend/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import type { RuRecord } from '../../src/model/types.ts';
import { parseJson } from '../../src/state/records.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { startDemoCell, submit } from '../support/live.ts';

let a: Awaited<ReturnType<typeof startDemoCell>>;
let b: Awaited<ReturnType<typeof startScheduler>>;

beforeAll(async () => {
  a = await startDemoCell({ prefix: '/dash-q/', name: 'fe-a', seed: 3, agents: 1 });
  // A second front-end on the same store: it places nothing of the job below.
  b = await startScheduler({
    name: 'fe-b',
    store: a.store,
    keys: a.keys,
    catalog: loadCatalog(),
    clock: new SystemClock(),
    rng: new SeededRng(4),
    log: createLogger('test'),
    agents: 1,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: 3,
  });
  await b.ready;
}, 60_000);
afterAll(async () => {
  await b?.close();
  await a?.close();
});

const until = async (ok: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> => {
  const t0 = Date.now();
  while (!(await ok())) {
    if (Date.now() - t0 > ms) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
};

function explain(jobId: string): Promise<Explanation__Output> {
  return new Promise((resolve, reject) => a.client.ExplainJob({ jobId }, (err, res) => (err || !res ? reject(err ?? new Error('no answer')) : resolve(res))));
}

describe('Q on the heat map of every front-end', () => {
  it("colours the RUs of a placement made by another front-end by the placement's Q", async () => {
    const { jobId } = await submit(a.client, { specJson: JSON.stringify({ name: 'coloured', profile: 'spark-lr', tasks: 4, durationMs: 20_000 }) });
    let e: Explanation__Output | undefined;
    await until(async () => (e = await explain(jobId)).placements.length === 4);
    const placed = e!.placements;
    // Front-end B's view: its agents' shared view, fed by the store's watch.
    const servers = b.manager.view.state.servers;
    await until(() => placed.every((p) => servers.get(p.ru!.server)?.occupants[p.ru!.index]?.job === jobId));
    const view = new CellView(b.manager);
    for (const p of placed) {
      const spec = servers.get(p.ru!.server)!.spec;
      const ru = view.rack(`${spec.platform}/${spec.rack}`).find((s) => s.id === p.ru!.server)?.rus[p.ru!.index];
      expect(ru).toMatchObject({ s: 'b', job: jobId, task: p.task });
      expect(ru?.q).toBeCloseTo(p.q, 4);
      // The rack's mean Q counts it.
      expect(view.racks().racks.find((r) => r.key === `${spec.platform}/${spec.rack}`)?.q).not.toBeNull();
    }
    // What the commit wrote: the RU record carries Q, the task record is unchanged in shape.
    const first = placed[0]!;
    const rec = parseJson<RuRecord>(await a.store.get(a.keys.ru({ server: first.ru!.server, index: first.ru!.index })));
    expect(rec?.q).toBeCloseTo(first.q, 4);
    expect(String(rec?.q).replace(/^-?\d*\.?/, '').length).toBeLessThanOrEqual(4);
  }, 60_000);

  it('shows a busy RU whose record has no Q (an older writer) without a colour', async () => {
    const servers = b.manager.view.state.servers;
    const s = [...servers.values()].find((x) => x.occupants.every((o) => o === null) && !x.down);
    expect(s).toBeDefined();
    const ref = { server: s!.spec.id, index: 0 };
    const key = a.keys.ru(ref);
    const old = await a.store.get(key);
    const legacy: RuRecord = { state: 'busy', job: 'legacy', task: 0, caused: new Array<number>(10).fill(1), priority: 0, agent: 'old', since: Date.now() };
    await a.store.put(key, JSON.stringify(legacy));
    try {
      await until(() => servers.get(ref.server)?.occupants[0]?.job === 'legacy');
      expect(servers.get(ref.server)?.occupants[0]).not.toHaveProperty('q');
      const view = new CellView(b.manager);
      const ru = view.rack(`${s!.spec.platform}/${s!.spec.rack}`).find((x) => x.id === ref.server)?.rus[0];
      expect(ru).toEqual({ s: 'b', job: 'legacy', task: 0 });
    } finally {
      if (old) await a.store.put(key, old.value);
    }
  }, 30_000);
});
