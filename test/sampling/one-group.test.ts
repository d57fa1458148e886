import { describe, expect, it } from 'vitest';
import { cellFeasibility } from '../../src/agent/cell.ts';
import { loadCatalog, parseJobSpec } from '../../src/model/catalog.ts';
import { DEFAULT_PRIORITY, type ServerSpec } from '../../src/model/types.ts';
import { selectPlacements, type PlacementRequest } from '../../src/sampling/batch.ts';
import { RuIndex } from '../../src/sampling/ru-index.ts';
import { feasibility, type FeasibilityJob } from '../../src/sampling/feasibility.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { TEST_PROFILES } from '../support/jobs.ts';
import { placementRequest } from '../support/placement-request.ts';

/** Servers s0… of the given sizes, `perRack` to a rack. */
function specs(sizes: number[], perRack = 1): ServerSpec[] {
  return sizes.map((rus, i) => ({ id: `s${i}`, platform: 'r3.2xlarge', rack: `r${Math.floor(i / perRack)}`, rus, speed: 1, attributes: {} }));
}

function cell(sizes: number[], perRack = 1): RuIndex {
  const st = new RuIndex();
  for (const s of specs(sizes, perRack)) st.upsertServer(s);
  return st;
}

/** Makes `n` RUs of server `id` busy with job `job`. */
function occupy(st: RuIndex, id: string, n: number, job = `other-${id}`): void {
  const p = TEST_PROFILES[2]!;
  for (let i = 0; i < n; i++) st.setRu({ server: id, index: i }, { job, task: i, caused: p.caused, priority: DEFAULT_PRIORITY, state: 'busy' }, 1);
}

/** A required pack of m tasks (the r3.2xlarge platform only, R = 4). */
function request(m: number, over: Partial<PlacementRequest> = {}): PlacementRequest {
  return placementRequest({ platformPerf: { 'r3.2xlarge': 1 }, locality: { mode: 'pack', scope: 'server', required: true }, m, R: 4, ...over });
}

const serversOf = (picks: { server: { id: string } }[]): Set<string> => new Set(picks.map((p) => p.server.id));

describe('a required pack: the selection', () => {
  it('puts all m picks on one server with room for them, over many draws', () => {
    // Four servers of 8 RUs with 3, 4, 5 and 2 free: only s3 (6 free) holds 6.
    const st = cell([8, 8, 8, 8]);
    occupy(st, 's0', 5);
    occupy(st, 's1', 4);
    occupy(st, 's2', 3);
    occupy(st, 's3', 2);
    for (let seed = 1; seed <= 40; seed++) {
      const sel = selectPlacements(st, request(6), new SeededRng(seed));
      // Where the sampled anchors miss s3, the view is looked through for a server with room: s3, whole.
      expect([...serversOf(sel.picks)]).toEqual(['s3']);
      expect(sel.picks).toHaveLength(6);
    }
    // With R as large as the free RUs every server is looked at: s3 every time.
    const sel = selectPlacements(st, request(6, { R: 16 }), new SeededRng(3));
    expect(sel.picks).toHaveLength(6);
    expect(new Set(sel.picks.map((p) => p.id)).size).toBe(6);
    // A preference splits the job where no server has room.
    const pref = selectPlacements(st, request(7, { locality: { mode: 'pack', scope: 'server' }, R: 16 }), new SeededRng(3));
    expect(pref.picks.length).toBe(7);
    expect(serversOf(pref.picks).size).toBeGreaterThan(1);
  });

  it('finds the one server with room on a large cell that a sample of R anchors almost never meets', () => {
    // 400 servers of 16 RUs, all but s123 holding 8 tasks (8 free RUs each, 3,200 in all): a
    // job of 16 needs all of s123. Three rounds of 4 anchors meet it about once in 250 draws.
    const st = cell(Array.from({ length: 400 }, () => 16));
    for (let i = 0; i < 400; i++) if (i !== 123) occupy(st, `s${i}`, 8);
    let candidates = 0;
    for (let seed = 1; seed <= 20; seed++) {
      const sel = selectPlacements(st, request(16), new SeededRng(seed));
      expect([...serversOf(sel.picks)]).toEqual(['s123']);
      expect(new Set(sel.picks.map((p) => p.id)).size).toBe(16);
      candidates += sel.candidatesSeen;
    }
    // The sampled anchors, then the one group found with room: not every server's RUs.
    expect(candidates / 20).toBeLessThan(20);
    // Taken, nothing is left with room for 16: nothing, rather than a split.
    occupy(st, 's123', 1);
    expect(selectPlacements(st, request(16), new SeededRng(1)).picks).toHaveLength(0);
  });

  it('takes the tightest of equally good servers that it fills at most half of, leaving the large one whole', () => {
    // Empty servers of 16, 128 and 32 RUs: the same platform and no contention, so any of them
    // scores alike. Each sampled anchor stands for its server; with R = 64 every draw meets all
    // three. A job of 8 goes to the 16 every time, one of 10 (more than half of 16) to the 32.
    const st = cell([16, 128, 32]);
    for (let seed = 1; seed <= 30; seed++) {
      expect([...serversOf(selectPlacements(st, request(8, { R: 64 }), new SeededRng(seed)).picks)]).toEqual(['s0']);
      expect([...serversOf(selectPlacements(st, request(10, { R: 64 }), new SeededRng(seed)).picks)]).toEqual(['s2']);
    }
    // Once the 16 is busy enough that it no longer holds the job, the 32.
    occupy(st, 's0', 9);
    expect([...serversOf(selectPlacements(st, request(8, { R: 64 }), new SeededRng(1)).picks)]).toEqual(['s2']);
  });

  it('gives nothing when no server has room for every task', () => {
    const st = cell([8, 8, 8]);
    occupy(st, 's0', 3);
    occupy(st, 's1', 3);
    occupy(st, 's2', 3);
    for (let seed = 1; seed <= 10; seed++) expect(selectPlacements(st, request(6, { R: 20 }), new SeededRng(seed)).picks).toHaveLength(0);
    expect(selectPlacements(st, request(5, { R: 20 }), new SeededRng(1)).picks).toHaveLength(5);
  });

  it('places the tasks of a job that holds a server there and nowhere else (a task placed again after a loss goes back beside the others)', () => {
    const st = cell([8, 8, 8]);
    // The job runs 5 tasks on s1; s0 and s2 are empty.
    occupy(st, 's1', 5, 'job');
    for (let seed = 1; seed <= 20; seed++) {
      const sel = selectPlacements(st, request(2, { R: 16 }), new SeededRng(seed));
      expect(sel.picks).toHaveLength(2);
      expect([...serversOf(sel.picks)]).toEqual(['s1']);
    }
    // No room left there for 4: none, though s0 and s2 have 8 free each.
    expect(selectPlacements(st, request(4, { R: 16 }), new SeededRng(1)).picks).toHaveLength(0);
    // Its server down: its tasks there are lost, and the next placement takes any server with room.
    st.setServerDown('s1', true);
    const again = selectPlacements(st, request(8, { R: 16 }), new SeededRng(1));
    expect(again.picks).toHaveLength(8);
    expect(serversOf(again.picks).size).toBe(1);
    expect(serversOf(again.picks).has('s1')).toBe(false);
  });

  it('with scope rack, all picks in one rack (several of its servers)', () => {
    // Racks r0 = {s0, s1}, r1 = {s2, s3}, r2 = {s4, s5} of 4 RUs each: r0 has 8 free, r1 7, r2 6.
    const st = cell([4, 4, 4, 4, 4, 4], 2);
    occupy(st, 's2', 1);
    occupy(st, 's4', 2);
    let placed = 0;
    for (let seed = 1; seed <= 30; seed++) {
      const sel = selectPlacements(st, request(8, { R: 2, locality: { mode: 'pack', scope: 'rack', required: true } }), new SeededRng(seed));
      if (sel.picks.length === 0) continue;
      placed++;
      expect(sel.picks).toHaveLength(8);
      expect(new Set(sel.picks.map((p) => p.server.rack))).toEqual(new Set(['r0']));
    }
    expect(placed).toBeGreaterThan(0);
  });
});

describe('a required pack: whether the cell can ever hold it', () => {
  const fj = (tasks: number, scope: 'server' | 'rack' = 'server'): FeasibilityJob => ({
    tasks,
    mode: 'gang',
    locality: { mode: 'pack', scope, required: true },
    constraints: {},
  });

  it('needs a server (or rack) with as many RUs as tasks', () => {
    const st = cell([8, 8, 4, 4], 2);
    expect(feasibility(st, fj(8)).ok).toBe(true);
    expect(feasibility(st, fj(9))).toMatchObject({ ok: false, field: 'locality' });
    expect(feasibility(st, fj(16, 'rack')).ok).toBe(true);
    expect(feasibility(st, fj(17, 'rack'))).toMatchObject({ ok: false, field: 'locality' });
    // Possible, but not on what is up now.
    st.setServerDown('s0', true);
    st.setServerDown('s1', true);
    expect(feasibility(st, fj(8))).toMatchObject({ ok: true, upOk: false, upField: 'locality' });
    // A preference never makes a job impossible.
    expect(feasibility(st, { ...fj(9), locality: { mode: 'pack', scope: 'server' } }).ok).toBe(true);
  });

  it('the front-end refuses it at submit, naming the field, or makes it wait while its servers are down', () => {
    const servers = specs([8, 8, 4, 4, 4], 1).map((spec) => ({ spec, up: true }));
    const shape = (tasks: number) => ({
      tasks,
      mode: 'gang' as const,
      locality: { mode: 'pack' as const, scope: 'server' as const, required: true },
      constraints: {},
    });
    expect(cellFeasibility(servers, shape(8))).toEqual({ kind: 'ok' });
    const nine = cellFeasibility(servers, shape(9));
    expect(nine).toMatchObject({ kind: 'never', field: 'locality' });
    expect(nine.kind === 'never' && nine.reason).toContain('a required pack puts all 9 tasks on one server; the largest server it may use has 8 RUs');
    const down = servers.map((s) => (s.spec.rus === 8 ? { ...s, up: false } : s));
    expect(cellFeasibility(down, shape(8))).toMatchObject({ kind: 'not-now', field: 'locality' });
  });
});

describe('a required pack: the job spec', () => {
  const catalog = loadCatalog();
  const base = { name: 'pod', profile: 'memcached', tasks: 4, durationMs: 100 };
  const parse = (over: Record<string, unknown>) => parseJobSpec({ ...base, ...over }, catalog, { id: 'j', now: 0 });
  const refusal = (over: Record<string, unknown>): TarcilError => {
    try {
      parse(over);
    } catch (e) {
      if (e instanceof TarcilError) return e;
      throw e;
    }
    throw new Error(`accepted: ${JSON.stringify(over)}`);
  };

  it("needs mode 'gang': refused otherwise, naming the field and the rule", () => {
    for (const over of [{ locality: { mode: 'pack', required: true } }, { mode: 'incremental', locality: { mode: 'pack', scope: 'rack', required: true } }]) {
      const err = refusal(over);
      expect(err.field).toBe('locality.required');
      expect(err.message).toContain("locality.required: true with mode 'pack' puts every task on one server (or rack), all or nothing: it needs mode 'gang'");
    }
  });

  it('is accepted with a gang, for a server or a rack; a preference needs no gang', () => {
    expect(parse({ mode: 'gang', locality: { mode: 'pack', required: true } }).locality).toEqual({ mode: 'pack', scope: 'server', required: true });
    expect(parse({ mode: 'gang', locality: { mode: 'pack', scope: 'rack', required: true } }).locality.scope).toBe('rack');
    expect(parse({ locality: { mode: 'pack', required: false } }).mode).toBe('incremental');
  });
});
