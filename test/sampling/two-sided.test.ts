import { describe, expect, it } from 'vitest';
import { DEFAULT_PRIORITY, N_RESOURCES, type ServerSpec } from '../../src/model/types.ts';
import { jobTarget, NEIGHBOUR_WEIGHT, scoreRu, twoSided } from '../../src/quality/index.ts';
import { selectPlacements, type PlacementRequest } from '../../src/sampling/batch.ts';
import { RuIndex } from '../../src/sampling/ru-index.ts';
import { SelectionContext } from '../../src/sampling/selection.ts';
import { SeededRng } from '../../src/util/rng.ts';

/** A vector with `v` on resource `i` and 0 elsewhere. */
const only = (i: number, v: number): number[] => Array.from({ length: N_RESOURCES }, (_, k) => (k === i ? v : 0));

const spec = (id: string): ServerSpec => ({ id, platform: 'p', rack: 'r0', rus: 4, speed: 1, attributes: {} });

/**
 * Two servers of 4 RUs, one resident each. The resident of `a` is sensitive to resource 2 (it causes
 * 80 there, so it tolerates 19); the resident of `b` presses resource 3 instead. The newcomer
 * presses resource 2 (70) and tolerates what both residents cause, so on its own side `a` is the
 * tighter fit; but on `a` it would push its neighbour to 70/3 ≈ 23 on resource 2, past 19.
 */
function cell(): RuIndex {
  return cellWith({ a: [only(2, 80)], b: [only(3, 80)] });
}

/** Servers of 4 RUs, each with residents of these caused vectors on its first RUs (jobs `r<server><i>`). */
function cellWith(residents: Record<string, number[][]>): RuIndex {
  const st = new RuIndex();
  st.batch(() => {
    for (const [server, vectors] of Object.entries(residents)) {
      st.upsertServer(spec(server));
      vectors.forEach((caused, index) =>
        st.setRu({ server, index }, { job: `r${server}${index}`, task: 0, caused, priority: DEFAULT_PRIORITY, state: 'busy' }, 1),
      );
    }
  });
  return st;
}

const NEWCOMER = only(2, 70);

function request(over: Partial<PlacementRequest> = {}): PlacementRequest {
  return {
    jobId: 'new',
    target: jobTarget(NEWCOMER),
    caused: NEWCOMER,
    priority: DEFAULT_PRIORITY,
    platformPerf: { p: 1 },
    locality: { mode: 'any', scope: 'server' },
    constraints: {},
    m: 1,
    R: 16,
    ...over,
  };
}

describe('two-sided quality', () => {
  it("the newcomer's own tolerance decides acceptability; below it, the neighbours' side lowers Q by how far the worst would fall", () => {
    const t = jobTarget(NEWCOMER);
    const good = scoreRu(only(5, 10), t);
    expect(good.acceptable).toBe(true);
    const both = twoSided(good, 0.9, true, 3, t.T);
    expect(both).toMatchObject({ Q: good.Q, acceptable: true, sides: { selfQ: good.Q, neighboursQ: 0.9, neighboursAcceptable: true, neighbours: 3 } });
    // Acceptable for the newcomer, a neighbour pushed past: still acceptable, with its own Q (the
    // selection's score puts it after an equally fast RU that hurts nobody).
    const hurts = twoSided(good, 0.2, false, 3, t.T);
    expect(hurts).toMatchObject({ Q: good.Q, acceptable: true, sides: { neighboursAcceptable: false } });
    const bad = scoreRu(only(2, 60), t);
    expect(bad.acceptable).toBe(false);
    expect(twoSided(bad, 1, true, 0, t.T).Q).toBe(bad.Q);
    const badHurts = twoSided(bad, 0.2, false, 3, t.T);
    expect(badHurts.acceptable).toBe(false);
    expect(badHurts.Q).toBeCloseTo(bad.Q * Math.pow(0.2, NEIGHBOUR_WEIGHT), 12);
    // The worse the neighbour would fare, the lower the RU ranks.
    expect(twoSided(bad, 0.1, false, 3, t.T).Q).toBeLessThan(badHurts.Q);
    // The weight: at 1 the plain product, at 0 the neighbours do not count below T_W.
    expect(twoSided(bad, 0.2, false, 3, t.T, 1).Q).toBeCloseTo(bad.Q * 0.2, 12);
    expect(twoSided(bad, 0.2, false, 3, t.T, 0).Q).toBe(bad.Q);
    expect(twoSided(bad, 0.2, false, 3, t.T, 0.5).Q).toBeCloseTo(bad.Q * Math.sqrt(0.2), 12);
  });

  it('the one-sided Q takes the tighter fit that pushes a neighbour past its tolerance; two-sided avoids it and says why', () => {
    const oneSided = selectPlacements(cell(), request(), new SeededRng(1));
    const twoSidedSel = selectPlacements(cell(), request({ twoSided: true }), new SeededRng(1));
    const p1 = oneSided.picks[0]!;
    const p2 = twoSidedSel.picks[0]!;
    expect(p1.server.id).toBe('a');
    expect(p1.quality.acceptable).toBe(true);
    expect(p1.quality.sides).toBeUndefined();
    expect(p2.server.id).toBe('b');
    expect(p2.quality.acceptable).toBe(true);
    expect(p2.quality.sides).toMatchObject({ selfAcceptable: true, neighboursAcceptable: true, neighbours: 1 });
    // Scored two-sided, the RU on `a` is acceptable for the newcomer but not for its neighbour:
    // acceptable, with the tighter fit, and still behind `b`'s equally fast RU.
    const st = cell();
    const ctx = new SelectionContext(st, request({ twoSided: true }));
    const onA = ctx.score(st.server('a')!, 1);
    const onB = ctx.score(st.server('b')!, 1);
    expect(onA.quality.sides).toMatchObject({ selfAcceptable: true, neighboursAcceptable: false, neighbours: 1 });
    expect(onA.quality.acceptable).toBe(true);
    expect(onA.quality.Q).toBeGreaterThan(onB.quality.Q);
    expect(onA.score).toBeLessThan(onB.score);
    expect(p1.quality.Q).toBeGreaterThan(p2.quality.Q);
  });

  it("a displaced victim's own load leaves with it and it is not judged as a neighbour", () => {
    const st = cell();
    // Only RU a/0 (the sensitive resident, low priority) is a candidate once a is full otherwise.
    st.batch(() => {
      for (let i = 1; i < 4; i++)
        st.setRu({ server: 'a', index: i }, { job: `x${i}`, task: 0, caused: only(7, 1), priority: DEFAULT_PRIORITY + 50, state: 'busy' }, 1);
      for (let i = 1; i < 4; i++)
        st.setRu({ server: 'b', index: i }, { job: `y${i}`, task: 0, caused: only(7, 1), priority: DEFAULT_PRIORITY + 50, state: 'busy' }, 1);
      st.setRu({ server: 'b', index: 0 }, { job: 'rb', task: 0, caused: only(3, 80), priority: DEFAULT_PRIORITY + 50, state: 'busy' }, 1);
      st.setRu({ server: 'a', index: 0 }, { job: 'ra', task: 0, caused: only(2, 80), priority: 1, state: 'busy' }, 1);
    });
    const sel = selectPlacements(st, request({ twoSided: true, priority: DEFAULT_PRIORITY + 10, preempt: true }), new SeededRng(3));
    const p = sel.picks[0];
    expect(p?.victim?.job).toBe('ra');
    // The three residents left on `a` press only resource 7 and the newcomer tolerates them; they
    // tolerate the newcomer's 70/3 on resource 2.
    expect(p?.quality.sides).toMatchObject({ selfAcceptable: true, neighboursAcceptable: true, neighbours: 3 });
    expect(p?.quality.acceptable).toBe(true);
  });
});

/**
 * The neighbours' side of a free RU is kept per server and newcomer vector while the server's
 * occupancy stays: every score must still equal the side computed from scratch, here from the
 * quality functions alone, whatever changed between two scores.
 */
describe("two-sided quality: a server's neighbours' side kept between scores", () => {
  /** The two-sided Q of a free RU of `s` from scratch: each resident against its own target. */
  function fromScratch(st: RuIndex, server: string, newcomer: number[], form: 'monotone' | 'paper' = 'monotone'): number {
    const s = st.server(server)!;
    const others = s.ruCount - 1;
    const C = s.sum.map((v) => v / others);
    const self = scoreRu(C, jobTarget(newcomer), form);
    let worst = 1;
    let allOk = true;
    let n = 0;
    for (const occ of s.occupants) {
      if (!occ) continue;
      const Cr = s.sum.map((v, r) => Math.max(0, (v + (newcomer[r] ?? 0) - (occ.caused[r] ?? 0)) / others));
      const q = scoreRu(Cr, jobTarget(occ.caused), form);
      worst = Math.min(worst, q.Q);
      allOk &&= q.acceptable;
      n++;
    }
    return twoSided(self, worst, allOk, n, jobTarget(newcomer).T).Q;
  }
  const scoreOf = (st: RuIndex, server: string, index: number, req: PlacementRequest): number =>
    new SelectionContext(st, req).score(st.server(server)!, index).quality.Q;

  it('follows a task that starts or ends beside the RU', () => {
    const st = cell();
    const req = request({ twoSided: true });
    expect(scoreOf(st, 'a', 1, req)).toBeCloseTo(fromScratch(st, 'a', NEWCOMER), 12);
    // A second resident that the newcomer pushes past its tolerance: the side must change.
    st.setRu({ server: 'a', index: 2 }, { job: 'rc', task: 0, caused: only(2, 90), priority: DEFAULT_PRIORITY, state: 'busy' }, 2);
    const busier = fromScratch(st, 'a', NEWCOMER);
    expect(scoreOf(st, 'a', 1, req)).toBeCloseTo(busier, 12);
    expect(st.server('a')!.occupants.filter(Boolean)).toHaveLength(2);
    // The first resident leaves.
    st.setRu({ server: 'a', index: 0 }, null, 3);
    expect(scoreOf(st, 'a', 3, req)).toBeCloseTo(fromScratch(st, 'a', NEWCOMER), 12);
    expect(fromScratch(st, 'a', NEWCOMER)).not.toBeCloseTo(busier, 6);
  });

  it('is per vector and per form: jobs of equal vectors share it, others get their own', () => {
    const st = cell();
    st.setRu({ server: 'a', index: 1 }, { job: 'rc', task: 0, caused: only(2, 60), priority: DEFAULT_PRIORITY, state: 'busy' }, 2);
    const other = only(2, 20);
    const a = scoreOf(st, 'a', 2, request({ twoSided: true }));
    // The same vector in another array (another job of the workload) reads the same side.
    expect(scoreOf(st, 'a', 2, request({ twoSided: true, caused: [...NEWCOMER], target: jobTarget([...NEWCOMER]) }))).toBe(a);
    // Another vector is scored against its own pressure.
    expect(scoreOf(st, 'a', 2, request({ twoSided: true, caused: other, target: jobTarget(other) }))).toBeCloseTo(fromScratch(st, 'a', other), 12);
    // The paper's form after the monotone one on the same server and vector.
    expect(scoreOf(st, 'a', 2, request({ twoSided: true, form: 'paper' }))).toBeCloseTo(fromScratch(st, 'a', NEWCOMER, 'paper'), 12);
  });

  it("counts the call's own earlier pick on the server, which the kept side does not hold", () => {
    const st = cell();
    const req = request({ twoSided: true });
    const ctx = new SelectionContext(st, req);
    const s = st.server('a')!;
    const before = ctx.score(s, 1).quality;
    ctx.commitLocal(s); // the job took RU 1 in this call: RU 2 now sees it as a neighbour's load
    const after = ctx.score(s, 2).quality;
    expect(after.sides?.neighboursQ).toBeLessThan(before.sides!.neighboursQ);
    // A fresh call, with no pick of its own, reads the side of the server as stored.
    expect(new SelectionContext(st, req).score(s, 2).quality.sides).toEqual(before.sides);
  });
});

describe('two-sided quality below T_W: the neighbours weigh by NEIGHBOUR_WEIGHT', () => {
  /**
   * No RU suits the newcomer (it tolerates 29 on resource 2). On `x` one resident presses 90 there:
   * the newcomer is just past its tolerance (30) and pushes the resident (tolerance 9) to 23.3.
   * On `y` two residents press 47 each: the newcomer is further past (31.3), and both residents
   * stay within theirs (52).
   */
  const belowCell = (): RuIndex => cellWith({ x: [only(2, 90)], y: [only(2, 47), only(2, 47)] });
  const scores = (weight?: number): { x: number; y: number; qx: number } => {
    const st = belowCell();
    const ctx = new SelectionContext(st, request({ twoSided: true, ...(weight === undefined ? {} : { neighbourWeight: weight }) }));
    const x = ctx.score(st.server('x')!, 1);
    const y = ctx.score(st.server('y')!, 2);
    expect(x.quality.acceptable).toBe(false);
    expect(y.quality.acceptable).toBe(false);
    expect(x.quality.sides).toMatchObject({ neighboursAcceptable: false, neighbours: 1 });
    expect(y.quality.sides).toMatchObject({ neighboursAcceptable: true, neighbours: 2 });
    expect(x.quality.sides!.selfQ).toBeGreaterThan(y.quality.sides!.selfQ);
    return { x: x.score, y: y.score, qx: x.quality.Q };
  };

  it("ranks the newcomer's own side first at 0, the resident's fall first at 1, and scores the default at NEIGHBOUR_WEIGHT", () => {
    const none = scores(0);
    const full = scores(1);
    expect(none.x).toBeGreaterThan(none.y);
    expect(full.x).toBeLessThan(full.y);
    // Between the ends the penalty grows with the weight; the default is the constant's.
    const quarter = scores(0.25);
    expect(quarter.qx).toBeLessThan(none.qx);
    expect(quarter.qx).toBeGreaterThan(full.qx);
    expect(scores().qx).toBe(scores(NEIGHBOUR_WEIGHT).qx);
  });
});
