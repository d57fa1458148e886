import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { explainText } from '../../src/frontend/convert.ts';
import type { Explanation__Output } from '../../src/rpc/gen/tarcil/v1/Explanation.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { StoredDecisions } from '../../src/state/live-records.ts';
import { startDemoCell, submit, waitFinal } from '../support/live.ts';

let cell: Awaited<ReturnType<typeof startDemoCell>>;
let c: SchedulerClient;

beforeAll(async () => {
  cell = await startDemoCell({ prefix: '/two-sided/', name: 'ts', seed: 5, agents: 1, agentConfig: { twoSided: true } });
  c = cell.client;
});
afterAll(async () => {
  await cell?.close();
});

function explain(jobId: string): Promise<Explanation__Output> {
  return new Promise((resolve, reject) => c.ExplainJob({ jobId }, (err, res) => (err || !res ? reject(err ?? new Error('no answer')) : resolve(res))));
}

describe('two-sided quality on a live front-end', () => {
  it('records both sides of every placement, and explain shows them', async () => {
    // A long resident job first, so the second job's RUs have neighbours to judge.
    const resident = await submit(c, { specJson: JSON.stringify({ name: 'resident', profile: 'memcached', tasks: 10, durationMs: 3000 }) });
    const job = await submit(c, { specJson: JSON.stringify({ name: 'newcomer', profile: 'spark-lr', tasks: 6, durationMs: 100 }) });
    expect((await waitFinal(c, job.jobId)).state).toBe('succeeded');
    const e = await explain(job.jobId);
    expect(e.placements.length).toBe(6);
    for (const p of e.placements) {
      expect(p.twoSided).toBe(true);
      expect(p.selfQ).toBeGreaterThanOrEqual(0);
      expect(p.neighboursQ).toBeLessThanOrEqual(1);
      // The combined Q never exceeds the newcomer's own.
      expect(p.q).toBeLessThanOrEqual(p.selfQ + 1e-12);
      if (p.acceptable) expect(p.q).toBe(p.selfQ);
    }
    // Ten resident tasks on 24 RUs of 10 servers: some placement had a neighbour.
    expect(e.placements.some((p) => p.neighbours > 0)).toBe(true);
    // The stored record says for every placement whether its neighbours all stayed within their
    // tolerance, and explain flags exactly those that did not; a server without residents never is.
    const stored = JSON.parse((await cell.store.get(cell.keys.decision(job.jobId)))?.value ?? '{}') as StoredDecisions;
    const sides = stored.records.flatMap((r) => r.placements.map((p) => p.sides));
    expect(sides).toHaveLength(6);
    for (const s of sides) expect(typeof s?.neighboursAcceptable).toBe('boolean');
    expect(e.placements.map((p) => p.harmsNeighbours).sort()).toEqual(sides.map((s) => s?.neighboursAcceptable === false).sort());
    for (const p of e.placements) if (p.neighbours === 0) expect(p.harmsNeighbours).toBe(false);
    const text = explainText(e);
    expect(text).toMatch(/Q = [0-9.]+ \(own [0-9.]+, worst of \d+ neighbours [0-9.]+\)/);
    expect((await waitFinal(c, resident.jobId)).state).toBe('succeeded');
  });
});
