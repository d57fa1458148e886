import { describe, expect, it } from 'vitest';
import { DEFAULT_PRIORITY, type ServerSpec } from '../../src/model/types.ts';
import { contention, rankD, scoreRu, type RuScore } from '../../src/quality/index.ts';
import { drawCandidates, selectPlacements, type PlacementRequest } from '../../src/sampling/batch.ts';
import { RuIndex } from '../../src/sampling/ru-index.ts';
import { SeededRng, type Rng } from '../../src/util/rng.ts';
import { TEST_PROFILES } from '../support/jobs.ts';
import { placementRequest } from '../support/placement-request.ts';

function servers(n: number, rus: number, opts: { platforms?: string[]; perRack?: number } = {}): ServerSpec[] {
  const platforms = opts.platforms ?? ['r3.2xlarge'];
  return Array.from({ length: n }, (_, i) => ({
    id: `s${String(i).padStart(4, '0')}`,
    platform: platforms[i % platforms.length] as string,
    rack: `r${Math.floor(i / (opts.perRack ?? 10))}`,
    rus,
    speed: 1,
    attributes: { ssd: i % 2 === 0 ? 'yes' : 'no' },
  }));
}

/** A cluster with a random resident load (each RU busy with probability `load`). */
function loadedCluster(rng: Rng, n: number, rus: number, load: number, specs?: ServerSpec[]): RuIndex {
  const st = new RuIndex();
  st.batch(() => {
    for (const s of specs ?? servers(n, rus)) st.upsertServer(s);
    for (const s of st.servers.values()) {
      for (let i = 0; i < s.ruCount; i++) {
        if (rng.next() < load) {
          const p = TEST_PROFILES[rng.int(TEST_PROFILES.length)]!;
          st.setRu({ server: s.id, index: i }, { job: `res-${s.id}-${i}`, task: 0, caused: p.caused, priority: 10, state: 'busy' }, 1);
        }
      }
    }
  });
  return st;
}

const request = placementRequest;

/** Scores every available RU and returns D (rank in [0,1]) by RU id. */
function ranks(st: RuIndex, req: PlacementRequest, rng: Rng): Map<number, number> {
  const ids = [...st.available.values()];
  const C: number[] = [];
  const scores: RuScore[] = ids.map((id) => {
    const s = st.serverOfRu(id)!;
    contention(s.sum, s.ruCount, null, C);
    return scoreRu(C, req.target, 'monotone');
  });
  const D = rankD(scores, rng);
  return new Map(ids.map((id, i) => [id, D[i]!]));
}

/**
 * Largest gap between the empirical CDF of xs and F, evaluated at each distinct value (the ranks
 * are discrete and repeat, so comparing inside a run of equal values would invent gaps).
 */
function ksDistance(xs: number[], F: (x: number) => number): number {
  const s = [...xs].sort((a, b) => a - b);
  let d = 0;
  for (let i = 0; i < s.length; i++) {
    if (i + 1 < s.length && s[i + 1] === s[i]) continue;
    d = Math.max(d, Math.abs((i + 1) / s.length - F(s[i]!)));
  }
  return d;
}

describe('best-of-R quality follows x^R (paper eq. 6) on a simulated cluster', () => {
  const rng = new SeededRng(7);
  const st = loadedCluster(rng, 100, 8, 0.5);
  const req = request();
  const D = ranks(st, req, rng);

  it.each([2, 8, 16])('uniform draws of R = %i', (R) => {
    const best: number[] = [];
    for (let t = 0; t < 3000; t++) {
      const ids = drawCandidates(st, request({ R }), R, rng);
      expect(new Set(ids).size).toBe(R);
      best.push(Math.max(...ids.map((id) => D.get(id)!)));
    }
    // The population is finite (≈400 available RUs, drawn without replacement): the exact law is
    // P[max D ≤ x] = Π_{i<R} (k − i)/(n − i) with k = RUs of rank ≤ x (the paper's discretised
    // eq. 6). KS critical value at 1% for 3,000 draws: 0.030.
    const n = D.size;
    const exact = (x: number): number => {
      const k = Math.floor(x * (n - 1) + 1e-9) + 1;
      let p = 1;
      for (let i = 0; i < R; i++) p *= Math.max(0, k - i) / (n - i);
      return p;
    };
    expect(ksDistance(best, exact)).toBeLessThan(0.03);
    // The continuous law x^R is what the paper plots; at this size it is close.
    expect(ksDistance(best, (x) => x ** R)).toBeLessThan(0.06);
    // And it is not the CDF of a different R: the test can tell R from 2R.
    expect(ksDistance(best, (x) => x ** (2 * R))).toBeGreaterThan(0.08);
  });

  it('the pick of selectPlacements (m = 1) is the best of its R candidates', () => {
    const R = 8;
    const picked: number[] = [];
    for (let t = 0; t < 2000; t++) {
      const res = selectPlacements(st, request({ R }), rng);
      expect(res.candidatesSeen).toBe(R);
      picked.push(D.get(res.picks[0]!.id)!);
    }
    expect(ksDistance(picked, (x) => x ** R)).toBeLessThan(0.04);
  });
});

describe('batch sampling', () => {
  it('samples R·m distinct candidates and keeps the m best, all distinct', () => {
    const rng = new SeededRng(11);
    const st = loadedCluster(rng, 100, 8, 0.3);
    const res = selectPlacements(st, request({ m: 6, R: 8 }), rng);
    expect(res.candidatesSeen).toBe(48);
    expect(res.picks).toHaveLength(6);
    expect(new Set(res.picks.map((p) => p.id)).size).toBe(6);
    for (const p of res.picks) expect(st.serverOfRu(p.id)!.available(p.index)).toBe(true);
  });

  it('counts the job’s own earlier picks in the neighbourhood of later ones', () => {
    const st = new RuIndex();
    st.upsertServer(servers(1, 8)[0]!);
    const res = selectPlacements(st, request({ m: 8, R: 8 }), new SeededRng(3));
    expect(res.picks).toHaveLength(8);
    const U = res.picks.map((p) => p.quality.U);
    // Each pick adds the job's pressure to the server: the later picks see strictly more.
    for (let i = 1; i < U.length; i++) expect(U[i]!).toBeLessThan(U[i - 1]!);
  });

  it('prefers quiet servers for a sensitive job', () => {
    const rng = new SeededRng(5);
    const st = new RuIndex();
    const specs = servers(20, 8);
    for (const s of specs) st.upsertServer(s);
    // Half the servers carry an LLC/memory-heavy neighbour on most RUs.
    for (const s of specs.slice(0, 10)) {
      for (let i = 0; i < 6; i++)
        st.setRu({ server: s.id, index: i }, { job: 'noisy', task: i, caused: [30, 10, 20, 40, 95, 95, 60, 50, 5, 10], priority: 10, state: 'busy' }, 1);
    }
    const res = selectPlacements(st, request({ m: 4, R: 16 }), rng);
    expect(res.picks.every((p) => Number(p.server.id.slice(1)) >= 10)).toBe(true);
    expect(res.picks.every((p) => p.quality.acceptable)).toBe(true);
  });

  it('honours platform and attribute constraints', () => {
    const rng = new SeededRng(9);
    const specs = servers(40, 4, { platforms: ['r3.2xlarge', 'c3.large'] });
    const st = loadedCluster(rng, 40, 4, 0.2, specs);
    for (let t = 0; t < 50; t++) {
      const res = selectPlacements(st, request({ m: 3, constraints: { platforms: ['c3.large'], attributes: { ssd: 'no' } } }), rng);
      expect(res.picks.length).toBe(3);
      for (const p of res.picks) {
        expect(p.server.spec.platform).toBe('c3.large');
        expect(p.server.spec.attributes.ssd).toBe('no');
      }
    }
    const none = selectPlacements(st, request({ constraints: { platforms: ['nope'] } }), rng);
    expect(none.picks).toEqual([]);
  });

  it('folds platform preference into the score', () => {
    const rng = new SeededRng(13);
    const specs = servers(40, 4, { platforms: ['r3.2xlarge', 'c3.large'] });
    const st = loadedCluster(rng, 40, 4, 0, specs);
    let fast = 0;
    for (let t = 0; t < 100; t++) {
      const res = selectPlacements(st, request({ platformPerf: { 'r3.2xlarge': 1, 'c3.large': 0.5 } }), rng);
      if (res.picks[0]!.server.spec.platform === 'r3.2xlarge') fast++;
    }
    // With 8 candidates from a 50/50 mix, a fast one is almost always among them.
    expect(fast).toBeGreaterThan(95);
  });

  it('spreads across distinct servers, or racks', () => {
    const rng = new SeededRng(17);
    const st = loadedCluster(rng, 60, 8, 0.2);
    const bySrv = selectPlacements(st, request({ m: 10, locality: { mode: 'spread', scope: 'server' } }), rng);
    expect(new Set(bySrv.picks.map((p) => p.server.id)).size).toBe(10);
    const byRack = selectPlacements(st, request({ m: 6, locality: { mode: 'spread', scope: 'rack' } }), rng);
    expect(new Set(byRack.picks.map((p) => p.server.rack)).size).toBe(6);
  });

  it('packs onto one server, or one rack, judged by aggregate quality', () => {
    const rng = new SeededRng(19);
    const st = loadedCluster(rng, 60, 8, 0.1);
    const onServer = selectPlacements(st, request({ m: 5, locality: { mode: 'pack', scope: 'server' } }), rng);
    expect(onServer.picks).toHaveLength(5);
    expect(new Set(onServer.picks.map((p) => p.server.id)).size).toBeLessThanOrEqual(2);
    const onRack = selectPlacements(st, request({ m: 30, locality: { mode: 'pack', scope: 'rack' } }), rng);
    expect(onRack.picks).toHaveLength(30);
    expect(new Set(onRack.picks.map((p) => p.server.rack)).size).toBeLessThanOrEqual(2);
  });

  it('prefers the job’s data servers when packing', () => {
    const rng = new SeededRng(23);
    // An idle cluster: every group is acceptable, so only locality can decide.
    const st = loadedCluster(rng, 60, 8, 0);
    const free42 = [...Array(8).keys()].filter((i) => st.server('s0042')!.available(i)).length;
    const res = selectPlacements(st, request({ m: 4, locality: { mode: 'pack', scope: 'server' }, constraints: { dataServers: ['s0042'] } }), rng);
    expect(res.picks).toHaveLength(4);
    expect(res.picks.filter((p) => p.server.id === 's0042').length).toBe(Math.min(4, free42));
  });

  it('breaks ties between equally good RUs of a packed server at random (concurrent agents spread)', () => {
    // Regression: packed groups were enumerated in RU index order and the sort is stable, so every
    // agent that chose a server took its lowest free RU and all but one of them conflicted.
    const st = loadedCluster(new SeededRng(31), 1, 8, 0);
    const chosen = new Set<number>();
    for (let seed = 1; seed <= 40; seed++) {
      const res = selectPlacements(
        st,
        request({ m: 1, locality: { mode: 'pack', scope: 'server' }, constraints: { dataServers: ['s0000'] } }),
        new SeededRng(seed),
      );
      expect(res.picks).toHaveLength(1);
      chosen.add(res.picks[0]!.index);
    }
    // 40 draws from 8 equal RUs: all 8 appear with probability > 99.5%.
    expect(chosen.size).toBeGreaterThanOrEqual(6);
  });

  it('never samples blocked or down servers', () => {
    const rng = new SeededRng(29);
    const st = loadedCluster(rng, 10, 8, 0);
    for (let i = 0; i < 9; i++) {
      if (i % 2 === 0) st.setBlocked(`s000${i}`, true);
      else st.setServerDown(`s000${i}`, true);
    }
    const res = selectPlacements(st, request({ m: 8, R: 4 }), rng);
    expect(res.picks.every((p) => p.server.id === 's0009')).toBe(true);
    expect(res.picks).toHaveLength(8);
  });

  it('draws from a blocked server only when no other server can take the job, and never from a down one', () => {
    const rng = new SeededRng(31);
    const st = loadedCluster(rng, 4, 8, 0);
    st.setBlocked('s0000', true);
    st.setServerDown('s0001', true);
    // s0002 and s0003 are free: the blocked server is avoided.
    for (let i = 0; i < 20; i++) {
      const res = selectPlacements(st, request({ m: 2, R: 4 }), rng);
      expect(res.picks.map((p) => p.server.id).every((id) => id === 's0002' || id === 's0003')).toBe(true);
    }
    // ssd=yes: s0000 (blocked) and s0002, now full. The blocked server takes the job rather than
    // leave it waiting.
    const busy = (sid: string): void => {
      for (let i = 0; i < 8; i++)
        st.setRu({ server: sid, index: i }, { job: `fill-${sid}`, task: i, caused: TEST_PROFILES[0]!.caused, priority: 1, state: 'busy' }, 9);
    };
    busy('s0002');
    const only = selectPlacements(st, request({ m: 2, R: 4, constraints: { attributes: { ssd: 'yes' } } }), rng);
    expect(only.picks.map((p) => p.server.id)).toEqual(['s0000', 's0000']);
    // ssd=no: s0001 (down) and s0003, now full: nothing, the down server is never a fallback.
    busy('s0003');
    expect(selectPlacements(st, request({ m: 1, R: 4, constraints: { attributes: { ssd: 'no' } } }), rng).picks).toHaveLength(0);
    // Unblocked again: an ordinary candidate, and the last-resort pool is empty.
    st.setBlocked('s0000', false);
    expect(st.blockedFree.size).toBe(0);
  });
});

describe('preemption', () => {
  function fullOfLowPriority(): RuIndex {
    const st = new RuIndex();
    for (const s of servers(10, 8)) st.upsertServer(s);
    for (const s of st.servers.values()) {
      for (let i = 0; i < 8; i++)
        st.setRu({ server: s.id, index: i }, { job: `batch-${s.id}`, task: i, caused: TEST_PROFILES[4]!.caused, priority: 10, state: 'busy' }, 1);
    }
    return st;
  }

  it('a higher-priority job displaces lower-priority tasks when nothing is free', () => {
    const st = fullOfLowPriority();
    const res = selectPlacements(st, request({ m: 3, priority: 500, preempt: true }), new SeededRng(31));
    expect(res.picks).toHaveLength(3);
    for (const p of res.picks) expect(p.victim?.priority).toBe(10);
    expect(res.preemptionCandidates).toBeGreaterThan(0);
  });

  it('replaces an unacceptable free pick only with an acceptable victim', () => {
    const st = fullOfLowPriority();
    // One free RU, on a server full of noisy neighbours: unacceptable for the sensitive job.
    st.setRu({ server: 's0000', index: 0 }, null, 2);
    for (let i = 1; i < 8; i++)
      st.setRu({ server: 's0000', index: i }, { job: 'noisy', task: i, caused: [30, 10, 20, 40, 95, 95, 60, 50, 5, 10], priority: 10, state: 'busy' }, 2);
    // Elsewhere the low-priority tasks are idle-ish, so victims there are acceptable.
    for (const s of st.servers.values()) {
      if (s.id === 's0000') continue;
      for (let i = 0; i < 8; i++)
        st.setRu({ server: s.id, index: i }, { job: `idle-${s.id}`, task: i, caused: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], priority: 10, state: 'busy' }, 2);
    }
    const res = selectPlacements(st, request({ m: 1, priority: 500, preempt: true, R: 8 }), new SeededRng(37));
    expect(res.picks).toHaveLength(1);
    expect(res.picks[0]!.quality.acceptable).toBe(true);
    expect(res.picks[0]!.victim).toBeDefined();
    expect(res.picks[0]!.server.id).not.toBe('s0000');
  });

  it('never displaces equal or higher priorities, and not without the flag', () => {
    const st = fullOfLowPriority();
    expect(selectPlacements(st, request({ m: 2, priority: 10, preempt: true }), new SeededRng(1)).picks).toEqual([]);
    expect(selectPlacements(st, request({ m: 2, priority: 500, preempt: false }), new SeededRng(1)).picks).toEqual([]);
  });
});

describe('spread is a hard constraint unless required is false', () => {
  const spread = (scope: 'server' | 'rack', required?: boolean): PlacementRequest['locality'] =>
    required === undefined ? { mode: 'spread', scope } : { mode: 'spread', scope, required };

  /** Writes the picks into the state as the job's busy RUs, as a commit seen by the watch would. */
  function commit(st: RuIndex, picks: readonly { server: { id: string }; index: number }[], job = 'job', rev = 5): void {
    picks.forEach((p, t) =>
      st.setRu({ server: p.server.id, index: p.index }, { job, task: t, caused: TEST_PROFILES[5]!.caused, priority: DEFAULT_PRIORITY, state: 'busy' }, rev),
    );
  }

  it('11 tasks over 10 servers: at most 10 picks, all on distinct servers', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const rng = new SeededRng(seed);
      const st = loadedCluster(rng, 10, 8, 0.3);
      for (const required of [undefined, true]) {
        const res = selectPlacements(st, request({ m: 11, locality: spread('server', required) }), rng);
        expect(res.picks.length).toBeLessThanOrEqual(10);
        expect(res.picks.length).toBe(10); // every server has a free RU at this load (8 RUs, 30%): almost surely
        expect(new Set(res.picks.map((p) => p.server.id)).size).toBe(res.picks.length);
      }
    }
  });

  it('a later call never uses a server the job holds (committed or claimed)', () => {
    const rng = new SeededRng(43);
    const st = loadedCluster(rng, 10, 8, 0.2);
    const first = selectPlacements(st, request({ m: 4, locality: spread('server') }), rng);
    expect(first.picks).toHaveLength(4);
    commit(st, first.picks);
    const held = new Set(first.picks.map((p) => p.server.id));
    expect(new Set(st.jobGroups('job').keys())).toEqual(held);

    const second = selectPlacements(st, request({ m: 10, locality: spread('server') }), rng);
    expect(second.picks).toHaveLength(6);
    for (const p of second.picks) expect(held.has(p.server.id)).toBe(false);
    expect(new Set(second.picks.map((p) => p.server.id)).size).toBe(6);

    // Claimed picks (a commit in flight) count too.
    second.picks
      .slice(0, 5)
      .forEach((p, t) =>
        st.claim({ server: p.server.id, index: p.index }, { job: 'job', task: 10 + t, caused: [], priority: DEFAULT_PRIORITY, state: 'busy' }),
      );
    const third = selectPlacements(st, request({ m: 3, locality: spread('server') }), rng);
    expect(third.picks).toHaveLength(1);
    expect(third.picks[0]!.server.id).toBe(second.picks[5]!.server.id);

    // Nothing left: no picks, the caller waits.
    commit(st, third.picks, 'job', 6);
    expect(selectPlacements(st, request({ m: 1, locality: spread('server') }), rng).picks).toEqual([]);
    // Another job is not affected.
    expect(selectPlacements(st, request({ jobId: 'other', m: 10, locality: spread('server') }), rng).picks).toHaveLength(10);
  });

  it('holds across many small calls and with a large R (candidates mostly on held servers)', () => {
    const rng = new SeededRng(47);
    const st = loadedCluster(rng, 30, 16, 0);
    const seen = new Set<string>();
    for (let call = 0; call < 40; call++) {
      const res = selectPlacements(st, request({ m: 1 + (call % 3), R: 32, locality: spread('server') }), rng);
      for (const p of res.picks) {
        expect(seen.has(p.server.id)).toBe(false);
        seen.add(p.server.id);
      }
      commit(st, res.picks, 'job', 10 + call);
    }
    expect(seen.size).toBe(30);
    expect(st.jobGroups('job').size).toBe(30);
  });

  it('rack scope: one task per rack, never in a rack the job holds', () => {
    const rng = new SeededRng(53);
    const st = loadedCluster(rng, 30, 8, 0.2); // racks r0, r1, r2
    const first = selectPlacements(st, request({ m: 5, locality: spread('rack') }), rng);
    expect(first.picks).toHaveLength(3);
    expect(new Set(first.picks.map((p) => p.server.rack)).size).toBe(3);

    commit(st, first.picks.slice(0, 2));
    const held = new Set(first.picks.slice(0, 2).map((p) => p.server.rack));
    const second = selectPlacements(st, request({ m: 3, locality: spread('rack') }), rng);
    expect(second.picks).toHaveLength(1);
    expect(held.has(second.picks[0]!.server.rack)).toBe(false);
  });

  it('required: false shares groups when it must, after the ones the job does not hold', () => {
    const rng = new SeededRng(59);
    const st = loadedCluster(rng, 10, 8, 0);
    const pref = spread('server', false);
    const res = selectPlacements(st, request({ m: 11, locality: pref }), rng);
    expect(res.picks).toHaveLength(11);
    expect(new Set(res.picks.map((p) => p.server.id)).size).toBe(10);

    // The job holds 3 servers: 7 tasks go to the other 7.
    const st2 = loadedCluster(rng, 10, 8, 0);
    commit(
      st2,
      [0, 1, 2].map((i) => ({ server: { id: `s000${i}` }, index: 0 })),
    );
    const seven = selectPlacements(st2, request({ m: 7, locality: pref }), rng);
    expect(seven.picks).toHaveLength(7);
    for (const p of seven.picks) expect(['s0000', 's0001', 's0002']).not.toContain(p.server.id);
    expect(new Set(seven.picks.map((p) => p.server.id)).size).toBe(7);
    // 12 tasks: 7 on fresh servers, then one on each held server, then 2 more anywhere.
    const twelve = selectPlacements(st2, request({ m: 12, locality: pref }), rng);
    expect(twelve.picks).toHaveLength(12);
    expect(new Set(twelve.picks.map((p) => p.server.id)).size).toBe(10);
    // Hard spread in the same state: only the 7 servers the job does not hold.
    expect(selectPlacements(st2, request({ m: 12, locality: spread('server') }), rng).picks).toHaveLength(7);
  });

  it('preemption respects a hard spread', () => {
    const st = new RuIndex();
    for (const s of servers(10, 8)) st.upsertServer(s);
    for (const s of st.servers.values()) {
      for (let i = 0; i < 8; i++)
        st.setRu({ server: s.id, index: i }, { job: `batch-${s.id}`, task: i, caused: TEST_PROFILES[4]!.caused, priority: 10, state: 'busy' }, 1);
    }
    // The job already runs on s0000..s0002.
    for (let i = 0; i < 3; i++)
      st.setRu({ server: `s000${i}`, index: 0 }, { job: 'job', task: i, caused: TEST_PROFILES[5]!.caused, priority: 500, state: 'busy' }, 2);
    for (let seed = 1; seed <= 10; seed++) {
      const res = selectPlacements(st, request({ m: 10, R: 8, priority: 500, preempt: true, locality: spread('server') }), new SeededRng(seed));
      expect(res.picks.length).toBeLessThanOrEqual(7);
      expect(res.picks.length).toBeGreaterThan(0);
      const ids = res.picks.map((p) => p.server.id);
      expect(new Set(ids).size).toBe(ids.length);
      for (const id of ids) expect(['s0000', 's0001', 's0002']).not.toContain(id);
      for (const p of res.picks) expect(p.victim?.priority).toBe(10);
    }
    // Rack scope: all ten servers are in rack r0, which the job holds: no victim may be taken.
    const rack = selectPlacements(st, request({ m: 2, priority: 500, preempt: true, locality: spread('rack') }), new SeededRng(3));
    expect(rack.picks).toEqual([]);
  });
});
