import { describe, expect, it } from 'vitest';
import type { ServerSpec } from '../../src/model/types.ts';
import { selectPlacements } from '../../src/sampling/batch.ts';
import { RuIndex } from '../../src/sampling/ru-index.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { TEST_PROFILES } from '../support/jobs.ts';
import { placementRequest as request } from '../support/placement-request.ts';

const spec = (i: number, platform = 'r3.2xlarge'): ServerSpec => ({
  id: `s${String(i).padStart(3, '0')}`,
  platform,
  rack: `r${i % 4}`,
  rus: 4,
  speed: 1,
  attributes: {},
});

/** `n` servers of 4 RUs; RUs whose id `busy(id)` says are held by a low-priority resident. */
function cell(n: number, busy: (id: number) => boolean = () => false, platform?: (i: number) => string): RuIndex {
  const st = new RuIndex();
  st.batch(() => {
    for (let i = 0; i < n; i++) st.upsertServer(spec(i, platform?.(i)));
    for (const s of st.servers.values()) {
      for (let i = 0; i < s.ruCount; i++) {
        if (busy(s.base + i))
          st.setRu({ server: s.id, index: i }, { job: `res-${s.base + i}`, task: 0, caused: TEST_PROFILES[0]!.caused, priority: 10, state: 'busy' }, 1);
      }
    }
  });
  return st;
}

describe('selection restricted to given RUs (only)', () => {
  it('picks only among the given RUs, however many others are free, in every locality mode', () => {
    const st = cell(50);
    const only = new Set([7, 60, 121, 190]);
    const modes = [
      { mode: 'any', scope: 'server' },
      { mode: 'pack', scope: 'server' },
      { mode: 'pack', scope: 'rack' },
      { mode: 'spread', scope: 'server' },
      { mode: 'pack', scope: 'server', required: true },
    ] as const;
    for (const locality of modes) {
      for (let seed = 1; seed <= 20; seed++) {
        const res = selectPlacements(st, request({ m: 3, R: 16, locality, only }), new SeededRng(seed));
        if (!('required' in locality)) expect(res.picks.length).toBeGreaterThan(0);
        expect(res.picks.every((p) => only.has(p.id))).toBe(true);
      }
    }
    // Without it the same draws range over the whole cell.
    const free = selectPlacements(st, request({ m: 3, R: 16 }), new SeededRng(1));
    expect(free.picks.some((p) => !only.has(p.id))).toBe(true);
  });

  it('takes fewer picks than asked rather than leave the given RUs, and skips those busy, excluded or not allowed', () => {
    const st = cell(
      20,
      (id) => id === 5,
      (i) => (i === 3 ? 'c3.large' : 'r3.2xlarge'),
    );
    // 5 is busy, 6 excluded, 12–15 on a c3.large server the job may not use: only 40 is left.
    const only = new Set([5, 6, 12, 40]);
    const res = selectPlacements(st, request({ m: 4, only, exclude: new Set([6]), constraints: { platforms: ['r3.2xlarge'] } }), new SeededRng(3));
    expect(res.picks.map((p) => p.id)).toEqual([40]);
    expect(selectPlacements(st, request({ m: 2, only: new Set() }), new SeededRng(3)).picks).toEqual([]);
  });

  it('keeps the data servers within the given RUs', () => {
    const st = cell(20);
    const only = new Set([9, 10]);
    const res = selectPlacements(st, request({ m: 2, R: 2, only, constraints: { dataServers: ['s000', 's001'] } }), new SeededRng(5));
    expect(res.picks.map((p) => p.id).sort()).toEqual([10, 9].sort());
  });

  it('scores the given RUs as always: the best of them first', () => {
    // Server s001 is half full, s002 empty: the job's best RU among {4, 8} is on the empty server.
    const st = cell(3, (id) => id === 5 || id === 6);
    const res = selectPlacements(st, request({ m: 1, R: 8, only: new Set([4, 8]) }), new SeededRng(9));
    const unrestricted = selectPlacements(st, request({ m: 2, R: 8, exclude: new Set([0, 1, 2, 3, 7, 9, 10, 11]) }), new SeededRng(9));
    expect(res.picks.map((p) => p.id)).toEqual([unrestricted.picks[0]!.id]);
  });

  it('displaces nobody: a job that may preempt takes what the given RUs offer', () => {
    const st = cell(10, (id) => id !== 3);
    const res = selectPlacements(st, request({ m: 3, priority: 500, preempt: true, only: new Set([3, 4, 5]) }), new SeededRng(11));
    expect(res.picks.map((p) => p.id)).toEqual([3]);
    expect(res.picks.every((p) => p.victim === undefined)).toBe(true);
    // Without `only` it would displace lower-priority residents for the rest.
    const free = selectPlacements(st, request({ m: 3, priority: 500, preempt: true }), new SeededRng(11));
    expect(free.picks.filter((p) => p.victim !== undefined).length).toBeGreaterThan(0);
  });
});
