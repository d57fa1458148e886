import { describe, expect, it } from 'vitest';
import type { ServerSpec } from '../../src/model/types.ts';
import { RuIndex, type Occupant } from '../../src/sampling/ru-index.ts';
import { SeededRng } from '../../src/util/rng.ts';

function spec(i: number, rus = 4, perRack = 3): ServerSpec {
  return { id: `s${i}`, platform: 'p', rack: `r${Math.floor(i / perRack)}`, rus, speed: 1, attributes: {} };
}

function occ(job: string, task: number, state: Occupant['state'] = 'busy'): Occupant {
  return { job, task, caused: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], priority: 10, state };
}

/** The index recomputed from scratch: job → server id / rack → RU count. */
function recount(st: RuIndex): Map<string, { servers: Map<string, number>; racks: Map<string, number>; rus: number }> {
  const out = new Map<string, { servers: Map<string, number>; racks: Map<string, number>; rus: number }>();
  for (const s of st.servers.values()) {
    for (const o of s.occupants) {
      if (!o) continue;
      let j = out.get(o.job);
      if (!j) {
        j = { servers: new Map(), racks: new Map(), rus: 0 };
        out.set(o.job, j);
      }
      j.rus++;
      j.servers.set(s.id, (j.servers.get(s.id) ?? 0) + 1);
      j.racks.set(s.rack, (j.racks.get(s.rack) ?? 0) + 1);
    }
  }
  return out;
}

function expectIndexMatches(st: RuIndex, jobs: readonly string[]): void {
  const ref = recount(st);
  for (const job of jobs) {
    const r = ref.get(job);
    expect(new Map(st.jobGroups(job))).toEqual(r?.servers ?? new Map());
    expect(new Map(st.jobGroups(job, 'rack'))).toEqual(r?.racks ?? new Map());
    expect(st.jobRus(job)).toBe(r?.rus ?? 0);
  }
  // Bounded: only jobs that hold something have an entry.
  expect(st.jobCount).toBe(ref.size);
}

describe('per-job placement index (jobGroups)', () => {
  it('counts busy, reserved and claimed occupants per server and per rack', () => {
    const st = new RuIndex();
    for (let i = 0; i < 6; i++) st.upsertServer(spec(i));
    st.setRu({ server: 's0', index: 0 }, occ('a', 0), 1);
    st.setRu({ server: 's0', index: 1 }, occ('a', 1, 'reserved'), 1);
    st.claim({ server: 's4', index: 2 }, occ('a', 2));
    expect(new Map(st.jobGroups('a'))).toEqual(
      new Map([
        ['s0', 2],
        ['s4', 1],
      ]),
    );
    expect(new Map(st.jobGroups('a', 'rack'))).toEqual(
      new Map([
        ['r0', 2],
        ['r1', 1],
      ]),
    );
    expect(st.jobRus('a')).toBe(3);
    expect(st.jobGroups('nobody').size).toBe(0);

    st.unclaim({ server: 's4', index: 2 });
    expect(new Map(st.jobGroups('a'))).toEqual(new Map([['s0', 2]]));
    // Another job's claim over our RU moves the count; unclaim restores it.
    st.claim({ server: 's0', index: 0 }, occ('b', 0));
    expect(st.jobGroups('a').get('s0')).toBe(1);
    expect(st.jobGroups('b').get('s0')).toBe(1);
    st.unclaim({ server: 's0', index: 0 });
    expect(st.jobGroups('a').get('s0')).toBe(2);
    expect(st.jobRus('b')).toBe(0);

    // Freeing the last RU drops the job's entry.
    st.setRu({ server: 's0', index: 0 }, null, 2);
    st.setRu({ server: 's0', index: 1 }, null, 2);
    expect(st.jobGroups('a').size).toBe(0);
    expect(st.jobCount).toBe(0);
  });

  it('forgets the occupants of a removed (or re-specified) server', () => {
    const st = new RuIndex();
    for (let i = 0; i < 3; i++) st.upsertServer(spec(i));
    st.setRu({ server: 's1', index: 0 }, occ('a', 0), 1);
    st.setRu({ server: 's2', index: 0 }, occ('a', 1), 1);
    st.claim({ server: 's2', index: 1 }, occ('b', 0));
    st.removeServer('s2');
    expect(new Map(st.jobGroups('a'))).toEqual(new Map([['s1', 1]]));
    expect(st.jobCount).toBe(1);
    // A new spec for s1 (more RUs) replaces the server: its occupants are gone too.
    st.upsertServer(spec(1, 8));
    expect(st.jobCount).toBe(0);
    // Down servers keep their occupants (the tasks are not gone until the store says so).
    st.setRu({ server: 's0', index: 0 }, occ('a', 0), 3);
    st.setServerDown('s0', true);
    expect(st.jobGroups('a').get('s0')).toBe(1);
  });

  it('matches a brute-force recount through random setRu, claim, unclaim, down and removal', () => {
    const rng = new SeededRng(41);
    const st = new RuIndex();
    const jobs = ['a', 'b', 'c', 'd', 'e'];
    const N = 12;
    for (let i = 0; i < N; i++) st.upsertServer(spec(i));
    const rev = new Map<string, number>();
    const claimed: { server: string; index: number }[] = [];
    for (let op = 0; op < 5000; op++) {
      const i = rng.int(N);
      const id = `s${i}`;
      const index = rng.int(4);
      const ref = { server: id, index };
      const key = `${id}/${index}`;
      const x = rng.next();
      if (x < 0.45) {
        const r = (rev.get(key) ?? 0) + (rng.next() < 0.9 ? 1 : 0);
        rev.set(key, r);
        const o = rng.next() < 0.35 ? null : occ(jobs[rng.int(jobs.length)]!, rng.int(3), rng.next() < 0.2 ? 'reserved' : 'busy');
        st.setRu(ref, o, r, rng.next() < 0.05);
      } else if (x < 0.7) {
        if (st.claim(ref, occ(jobs[rng.int(jobs.length)]!, rng.int(3)))) claimed.push(ref);
      } else if (x < 0.88) {
        const k = claimed.length > 0 ? rng.int(claimed.length) : -1;
        if (k >= 0) st.unclaim(claimed.splice(k, 1)[0]!);
      } else if (x < 0.93) {
        st.setServerDown(id, rng.next() < 0.5);
      } else if (x < 0.97) {
        st.removeServer(id);
        for (const k of [...rev.keys()]) if (k.startsWith(`${id}/`)) rev.delete(k);
      } else {
        st.batch(() => st.upsertServer(spec(i, rng.next() < 0.8 ? 4 : 5)));
        if (st.server(id)!.ruCount === 5) st.upsertServer(spec(i)); // back to 4 RUs: replaced again
      }
      if (op % 50 === 0) expectIndexMatches(st, jobs);
    }
    expectIndexMatches(st, jobs);
    // Clear everything: the index empties.
    for (const s of [...st.servers.values()]) st.removeServer(s.id);
    expect(st.jobCount).toBe(0);
  });
});

describe('RuIndex.totalRus', () => {
  it('follows servers registered, replaced with another size and removed, and keeps down ones', () => {
    const st = new RuIndex();
    expect(st.totalRus).toBe(0);
    for (let i = 0; i < 3; i++) st.upsertServer(spec(i));
    expect(st.totalRus).toBe(12);
    st.setServerDown('s0', true);
    expect(st.totalRus).toBe(12);
    st.upsertServer({ ...spec(1), rus: 10 });
    expect(st.totalRus).toBe(4 + 10 + 4);
    st.removeServer('s2');
    expect(st.totalRus).toBe(14);
    st.upsertServer(spec(7, 2));
    expect(st.totalRus).toBe(16);
  });
});
