/**
 * How platform speed and Q combine in the selection's score: on an acceptable RU the model expects
 * no interference, so the platform's speed decides and the fit (Q above T_W) only breaks ties.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_PRIORITY, N_RESOURCES, type ServerSpec } from '../../src/model/types.ts';
import { jobTarget } from '../../src/quality/index.ts';
import { selectPlacements, type PlacementRequest } from '../../src/sampling/batch.ts';
import { RuIndex } from '../../src/sampling/ru-index.ts';
import { SeededRng } from '../../src/util/rng.ts';

const only = (i: number, v: number): number[] => Array.from({ length: N_RESOURCES }, (_, k) => (k === i ? v : 0));
const spec = (id: string, platform: string): ServerSpec => ({ id, platform, rack: 'r0', rus: 4, speed: 1, attributes: {} });

/** Server `loose` is empty; server `tight` has a resident pressing resource 0 (90 / 3 = 30 on each other RU). */
function cell(loosePlatform: string, tightPlatform: string): RuIndex {
  const st = new RuIndex();
  st.batch(() => {
    st.upsertServer(spec('loose', loosePlatform));
    st.upsertServer(spec('tight', tightPlatform));
    st.setRu({ server: 'tight', index: 0 }, { job: 'res', task: 0, caused: only(0, 90), priority: DEFAULT_PRIORITY, state: 'busy' }, 1);
  });
  return st;
}

/** A newcomer that presses resource 0 (50): it tolerates up to 49 there, so both servers are acceptable to it. */
function request(): PlacementRequest {
  const caused = only(0, 50);
  return {
    jobId: 'new',
    target: jobTarget(caused),
    caused,
    priority: DEFAULT_PRIORITY,
    platformPerf: { fast: 1, slow: 0.81 },
    locality: { mode: 'any', scope: 'server' },
    constraints: {},
    m: 1,
    R: 16,
  };
}

describe('platform speed in the selection score', () => {
  it('takes the faster platform over a tighter fit when both RUs are acceptable', () => {
    const sel = selectPlacements(cell('fast', 'slow'), request(), new SeededRng(1));
    const p = sel.picks[0];
    expect(p?.quality.acceptable).toBe(true);
    expect(p?.server.id).toBe('loose');
    expect(p?.score).toBe(1);
  });

  it('on the same platform, still takes the tighter fit (packing)', () => {
    const sel = selectPlacements(cell('fast', 'fast'), request(), new SeededRng(1));
    const p = sel.picks[0];
    expect(p?.quality.acceptable).toBe(true);
    expect(p?.server.id).toBe('tight');
    expect(p?.quality.Q).toBeGreaterThan(request().target.T);
  });

  it('ranks an unacceptable RU by Q / T_W times the speed, below an acceptable one on the same platform', () => {
    const st = cell('fast', 'fast');
    // A second resident on `tight` brings its contention to 60 on resource 0: past the newcomer's 49.
    st.setRu({ server: 'tight', index: 1 }, { job: 'res2', task: 0, caused: only(0, 90), priority: DEFAULT_PRIORITY, state: 'busy' }, 1);
    const req = { ...request(), m: 2, R: 8 };
    const sel = selectPlacements(st, req, new SeededRng(1));
    const onTight = sel.picks.find((x) => x.server.id === 'tight');
    const onLoose = sel.picks.find((x) => x.server.id === 'loose');
    expect(onLoose?.quality.acceptable).toBe(true);
    expect(onLoose?.score).toBe(1);
    if (onTight) {
      expect(onTight.quality.acceptable).toBe(false);
      expect(onTight.score).toBeCloseTo(onTight.quality.Q / req.target.T, 12);
      expect(onTight.score).toBeLessThan(1);
    }
  });
});
